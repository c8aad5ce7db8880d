"""Data Docs show data values as text: a landing value that is HTML never becomes markup.

Values like `<script>...</script>` or `"><img src=x onerror=...>` reach the pages as unexpected
values, observed values, table cells and graph data. Every page is parsed (html.parser): no start
tag, attribute, script body or comment carries the payloads' marker, and the payloads are still
readable, verbatim, in the page text. `quality/docs.py` (`EscapingView`) does the escaping.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest

from core.config import RunoffConfig
from quality import project
from quality.docs import CachedPageView, script_json
from quality.runner import validate_dataset
from tests.quality_tables import action_counts, append, hourly

MARKER = "runoff-xss"
HOSTILE = (
    f"<script>alert('{MARKER}-script')</script>",
    f"\"><img src=x onerror=alert('{MARKER}-img')>",
    f"'><svg onload=alert('{MARKER}-svg')>",
)


class Markup(HTMLParser):
    """What a page is made of: start tags with their attributes, raw script/style bodies,
    comments, and the rest of its text (character references decoded)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.raw: list[str] = []
        self.comments: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_data(self, data: str) -> None:
        # html.parser hands the body of <script> and <style> over as one raw data chunk.
        inside_raw = self.cdata_elem is not None  # type: ignore[attr-defined]
        (self.raw if inside_raw else self.text).append(data)

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)

    def data_markup(self) -> list[str]:
        """Elements, attributes, scripts or comments that came from a payload."""
        found = [
            f"<{tag} {attrs}>"
            for tag, attrs in self.tags
            if MARKER in tag or any(MARKER in f"{name}={value}" for name, value in attrs)
        ]
        found += [f"script/style: {body[:80]}" for body in self.raw if MARKER in body]
        found += [f"comment: {body[:80]}" for body in self.comments if MARKER in body]
        return found

    def visible(self) -> str:
        return "".join(self.text)


def parse(page: str) -> Markup:
    markup = Markup()
    markup.feed(page)
    markup.close()
    return markup


def test_the_check_finds_markup_from_the_data() -> None:
    for payload in HOSTILE:
        assert parse(f"<td><span>{payload}</span></td>").data_markup(), payload


def test_hostile_unexpected_values_are_text_in_validate_data_docs(config: RunoffConfig) -> None:
    """A real `validate`: duplicated keys whose values are HTML fail uniqueness, and the
    validation page lists them as unexpected values."""
    # Each value twice (one duplicated key each): the sample of 5 unexpected rows holds all.
    payloads = HOSTILE[:2]
    rows = [hourly(hour, value, 1) for hour, value in enumerate(payloads) for _ in range(2)]
    append(config.silver_path("events_action_hourly"), action_counts(rows))

    report = validate_dataset(config, "events", layers=("silver",))

    assert not report.passed
    assert report.data_docs_path == project.data_docs_index(config.quality_dir)
    site = report.data_docs_path.parent
    pages = sorted(p for p in site.rglob("*.html") if "static" not in p.relative_to(site).parts)
    validation_pages = [p for p in pages if p.relative_to(site).parts[0] == "validations"]
    # + the index and the table's two suite pages (validate's and the gate's)
    assert len(validation_pages) == 1 and len(pages) == 4, pages
    for page in pages:
        assert parse(page.read_text()).data_markup() == [], page
    shown = parse(validation_pages[0].read_text()).visible()
    for payload in payloads:
        assert payload in shown


@pytest.fixture(scope="module")
def hostile_page_html() -> str:
    """GX's validation page (runoff's view) of a pandas validation whose every failure shows the
    payloads: value/count tables, value lists, pairs, compound rows and observed values."""
    import great_expectations as gx
    import great_expectations.expectations as gxe
    import pandas as pd
    from great_expectations.data_context.types.base import ProgressBarsConfig
    from great_expectations.render.renderer import ValidationResultsPageRenderer

    frame = pd.DataFrame({"value": [*HOSTILE, "ok"], "other": ["ok", *HOSTILE]})
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    asset = context.data_sources.add_pandas("frames").add_dataframe_asset("hostile")
    suite = context.suites.add(
        gx.ExpectationSuite(
            name="hostile",
            expectations=[
                gxe.ExpectColumnValuesToBeInSet(column="value", value_set=["ok"]),
                gxe.ExpectColumnValuesToNotMatchRegex(column="value", regex="<"),
                gxe.ExpectColumnValueLengthsToEqual(column="value", value=2),
                gxe.ExpectColumnMostCommonValueToBeInSet(column="value", value_set=["ok"]),
                gxe.ExpectColumnPairValuesToBeEqual(column_A="value", column_B="other"),
                gxe.ExpectCompoundColumnsToBeUnique(column_list=["value", "other"]),
            ],
        )
    )
    definition = gx.ValidationDefinition(
        name="hostile", data=asset.add_batch_definition_whole_dataframe("frame"), suite=suite
    )
    result = context.validation_definitions.add(definition).run(
        batch_parameters={"dataframe": frame},
        result_format={"result_format": "SUMMARY", "partial_unexpected_count": 20},
    )
    assert not result.success
    document = ValidationResultsPageRenderer().render(result)
    page: str = CachedPageView().render(document)
    return page


def test_hostile_values_are_text_in_every_gx_validation_cell(hostile_page_html: str) -> None:
    markup = parse(hostile_page_html)
    assert markup.data_markup() == []
    shown = markup.visible()
    for payload in HOSTILE:
        assert payload in shown, payload
    # Rendering did not fail on any expectation (GX writes its traceback into the page).
    assert "Rendering failed" not in shown and "Traceback" not in hostile_page_html


def test_graph_data_cannot_close_its_script() -> None:
    from great_expectations.render.components import (
        RenderedDocumentContent,
        RenderedGraphContent,
        RenderedSectionContent,
    )

    payload = f"</script><script>alert('{MARKER}-graph')</script><!--"
    spec = {"data": {"values": [{"value": payload, "n": 1}]}, "mark": "bar"}
    assert json.loads(script_json(spec)) == spec and "<" not in script_json(spec)
    document = RenderedDocumentContent(
        sections=[
            RenderedSectionContent(
                section_name="Overview", content_blocks=[RenderedGraphContent(graph=spec)]
            )
        ],
        renderer_type="ValidationResultsPageRenderer",
        expectation_suite_name="hostile",
        page_title="hostile",
    )
    page = CachedPageView().render(document)

    markup = parse(page)
    assert not [t for t in markup.tags if MARKER in str(t)] and not markup.comments
    specs = re.findall(r"vlSpec = (.*);", page)
    assert [json.loads(s) for s in specs] == [spec]
