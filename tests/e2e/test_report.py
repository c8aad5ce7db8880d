"""`runoff report`: the HTML page, its charts in a real browser, and the numbers behind them.

The home is built with delta-rs directly (silver table, bronze, run ledger, quality results), so
the expected chart contents are computed here in plain Python from the same rows.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from deltalake import write_deltalake

from core.config import RunoffConfig
from core.ledger import RunRecord
from delta_tables.ops import append_run
from jobs.cli import main
from jobs.report import (
    LAYER_COLOURS,
    SERIES_COLOURS,
    load_report_data,
    quality_pass_rate,
    render_report,
    report_path,
    series_by_key,
    top_words,
    write_report,
)
from quality.history import ResultRow, append_results
from tests.browser import assert_not_blank, dump_dom, screenshot

START = datetime(2024, 1, 1, tzinfo=UTC)
CHART_TITLES = (
    "Open and Close events per hour",
    "Rows per run",
    "Seconds per run",
    "Late and quarantined rows per run",
    "Quality pass rate per validation run",
)


@dataclass(frozen=True)
class EventsHome:
    config: RunoffConfig
    events: list[tuple[datetime, str]]
    runs: list[RunRecord]
    quality_rows: list[dict[str, object]]


def hour_of(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def build_events_home(config: RunoffConfig, hours: int = 7, n_events: int = 600) -> EventsHome:
    """A home as a few runs of the events pipeline leave it, written with delta-rs."""
    rng = random.Random(11)
    events = [
        (START + timedelta(seconds=rng.randrange(hours * 3600)), rng.choice(["Open", "Close"]))
        for _ in range(n_events)
    ]
    counts = Counter((hour_of(t), action) for t, action in events)
    hourly = [
        {"window_start": w, "window_end": w + timedelta(hours=1), "action": a, "count": n}
        for (w, a), n in sorted(counts.items())
    ]
    write_deltalake(str(config.silver_path("events_action_hourly")), pa.Table.from_pylist(hourly))
    bronze = [{"time": int(t.timestamp()), "action": a} for t, a in events]
    write_deltalake(str(config.bronze_path("events")), pa.Table.from_pylist(bronze))

    runs = []
    for i, layer in enumerate(["bronze", "silver", "validate", "bronze", "silver", "validate"]):
        record = RunRecord(dataset="events", layer=layer, started_at=START + timedelta(minutes=i))
        record.rows, record.late_rows, record.quarantined = 100 * (i + 1), i, 2 * i
        record.finish("failed" if i == 4 else "success", "boom" if i == 4 else None)
        record.ended_at = record.started_at + timedelta(seconds=2 + i)
        append_run(config.runs_path, record)
        runs.append(record)
    other = RunRecord(dataset="sensors", layer="bronze", started_at=START).finish()
    append_run(config.runs_path, other)

    # Three validate runs of events (the second fails 2 of 5 expectations), one of sensors.
    results = [
        ResultRow(
            run_id=run_id,
            dataset=dataset,
            table=f"bronze_{dataset}",
            table_id="t1",
            layer="bronze",
            suite=f"bronze_{dataset}",
            expectation=f"expect_{j}",
            severity="critical" if j == 0 else "warning",
            success=not (run_id == "v1" and j < 2),
            observed="",
            from_version=None,
            to_version=k,
            full=True,
            rows=100,
            table_passed=run_id != "v1",
            validated_at=START + timedelta(hours=k),
        )
        for k, (run_id, dataset) in enumerate(
            [("v0", "events"), ("v1", "events"), ("s0", "sensors"), ("v2", "events")]
        )
        for j in range(5)
    ]
    append_results(config.quality_dir / "results", results)
    quality_rows: list[dict[str, object]] = [asdict(r) for r in results]
    return EventsHome(config, events, runs, quality_rows)


def chart_svgs(dom: str) -> dict[str, str]:
    """Each inline chart of the page by its `data-chart` name."""
    pattern = r'<svg class="chart" data-chart="([^"]+)".*?</svg>'
    return {m.group(1): m.group(0) for m in re.finditer(pattern, dom, re.S)}


def data_lines(svg: str) -> dict[str, int]:
    """Plotted lines (clipped to the axes, 1.6 wide) -> number of points, by stroke colour."""
    found = re.findall(
        r'<path d="([^"]+)" clip-path="[^"]+" style="fill: none; stroke: (#[0-9a-f]{6}); '
        r"stroke-width: 1.6",
        svg,
    )
    return {colour: len(re.findall(r"[ML] ", d)) for d, colour in found}


def bars(svg: str, colours: list[str]) -> int:
    """Bars (clipped filled paths) drawn in any of `colours`; "hatched" counts hatched bars."""
    pattern = r'<path d="[^"]+" clip-path="[^"]+" style="fill: (#[0-9a-f]{6}|url\(#[^)]+\))'
    fills = ["hatched" if f.startswith("url(") else f for f in re.findall(pattern, svg)]
    return sum(1 for fill in fills if fill in colours)


# -- pure shaping, checked against independent computations -------------------------------------
def test_series_by_key_sums_per_time_and_key() -> None:
    rows = [
        {"window_start": START, "action": "Open", "count": 3},
        {"window_start": START, "action": "Open", "count": 2},
        {"window_start": START + timedelta(hours=1), "action": "Close", "count": 4},
    ]
    pivot = series_by_key(pd.DataFrame(rows), "window_start", "action", "count")

    assert list(pivot.columns) == ["Close", "Open"]
    assert pivot.to_dict("list") == {"Close": [0, 4], "Open": [5, 0]}
    assert [t.hour for t in pivot.index] == [0, 1]


def test_top_words_orders_by_count_then_word() -> None:
    rng = random.Random(3)
    words = [rng.choice("abcdefghijklmnopqrstuvwxyz") * rng.randint(1, 3) for _ in range(400)]
    counts = Counter(words)
    frame = pd.DataFrame({"word": list(counts), "count": list(counts.values())})

    got = top_words(frame, 20)

    expected = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:20]
    assert list(zip(got["word"], got["count"], strict=True)) == expected


def test_quality_pass_rate_per_run_from_expectation_rows(config: RunoffConfig) -> None:
    home = build_events_home(config)
    frame = pd.DataFrame(home.quality_rows)

    rates = quality_pass_rate(frame, "events")

    mine = [r for r in home.quality_rows if r["dataset"] == "events"]
    expected = {
        run: sum(1 for r in mine if r["run_id"] == run and r["success"])
        / sum(1 for r in mine if r["run_id"] == run)
        for run in dict.fromkeys(str(r["run_id"]) for r in mine)
    }
    assert list(rates["run_id"]) == ["v0", "v1", "v2"]
    assert dict(zip(rates["run_id"], rates["pass_rate"], strict=True)) == expected


def test_quality_pass_rate_from_validation_statistics() -> None:
    frame = pd.DataFrame(
        {
            "run_id": ["b", "a", "b"],
            "evaluated_expectations": [4, 5, 6],
            "successful_expectations": [4, 5, 3],
        }
    )

    rates = quality_pass_rate(frame, "events")

    assert list(rates["run_id"]) == ["b", "a"]
    assert list(rates["pass_rate"]) == [7 / 10, 1.0]


def test_quality_pass_rate_names_missing_columns() -> None:
    with pytest.raises(ValueError, match="quality results have no run_id column"):
        quality_pass_rate(pd.DataFrame({"success": [True]}), "events")


# -- the page -----------------------------------------------------------------------------------
def test_report_reads_the_home(config: RunoffConfig) -> None:
    home = build_events_home(config)

    data = load_report_data(config, "events")

    tables = {t.name: (t.version, t.rows) for t in data.tables}
    distinct = len(Counter((hour_of(t), a) for t, a in home.events))
    assert tables == {
        "bronze_events": (0, len(home.events)),
        "quarantine_events": (None, None),
        "events_action_hourly": (0, distinct),
        "events_action_sliding": (None, None),
    }
    assert list(data.runs["layer"]) == [r.layer for r in home.runs]
    assert list(data.runs["rows"]) == [r.rows for r in home.runs]
    assert list(data.runs["run"]) == list(range(1, len(home.runs) + 1))


def test_report_page_is_self_contained(config: RunoffConfig) -> None:
    build_events_home(config)

    page = render_report(load_report_data(config, "events"))

    assert page.startswith("<!DOCTYPE html>")
    assert page.count('<svg class="chart"') == len(CHART_TITLES)
    for forbidden in ("<script", "<link", "<img", "<iframe", "@import", "url(http", 'src="'):
        assert forbidden not in page
    # The only absolute URLs are XML namespace names inside the SVGs, never fetched.
    namespaces = ("http://www.w3.org/", "http://purl.org/", "http://creativecommons.org/")
    urls = set(re.findall(r'"(https?://[^"]+)"', page))
    assert urls and all(u.startswith(namespaces) for u in urls), urls


def test_cmd_report_writes_the_file_and_prints_its_path(
    config: RunoffConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    build_events_home(config)

    code = main(["--home", str(config.home), "report", "events"])

    out = capsys.readouterr().out.strip()
    assert code == 0
    assert out == str(config.home / "reports" / "events.html")
    assert Path(out).read_text(encoding="utf-8").count('<svg class="chart"') == len(CHART_TITLES)


@pytest.mark.browser
@pytest.mark.e2e
def test_report_charts_render_in_chromium(config: RunoffConfig, tmp_path: Path) -> None:
    home = build_events_home(config)
    path = write_report(config, "events")
    assert path == report_path(config, "events") == config.home / "reports" / "events.html"

    dom = dump_dom(path)
    png = screenshot(path, tmp_path / "report-events.png")

    charts = chart_svgs(dom)
    assert sorted(charts) == ["quality", "runs-late", "runs-rows", "runs-secs", "silver0"]
    for title in CHART_TITLES:
        assert f">{title}</text>" in dom, title
    # One line per action with one point per hour (hours without an action plotted as 0).
    hours = len({hour_of(t) for t, _ in home.events})
    assert data_lines(charts["silver0"]) == {SERIES_COLOURS[0]: hours, SERIES_COLOURS[1]: hours}
    assert ">Close</text>" in charts["silver0"] and ">Open</text>" in charts["silver0"]
    # One bar per run of this dataset (the sensors run is not shown).
    layer_colours = list(LAYER_COLOURS.values())
    failed = sum(1 for r in home.runs if r.status == "failed")
    for name in ("runs-rows", "runs-secs"):
        assert bars(charts[name], layer_colours) == len(home.runs) - failed
        assert bars(charts[name], ["hatched"]) == failed == 1
    assert bars(charts["runs-late"], [SERIES_COLOURS[1]]) == len(home.runs)
    assert bars(charts["runs-late"], [SERIES_COLOURS[3]]) == len(home.runs)
    # One bar per validation run, labelled with its pass rate.
    events_rows = [r for r in home.quality_rows if r["dataset"] == "events"]
    labels = []
    for run in dict.fromkeys(r["run_id"] for r in events_rows):
        mine = [r for r in events_rows if r["run_id"] == run]
        labels.append(f"{100 * sum(bool(r['success']) for r in mine) / len(mine):.0f}%")
    assert re.findall(r">(\d+%)</text>", charts["quality"]) == labels
    assert "boom" in dom  # the failed run's error is listed

    stats = assert_not_blank(png)
    assert (stats.width, stats.height) == (1280, 2000)
    assert stats.colours >= 50  # header, bars and lines in several colours


@pytest.mark.browser
@pytest.mark.e2e
def test_report_of_an_empty_home_is_a_page_of_notes(config: RunoffConfig, tmp_path: Path) -> None:
    path = write_report(config, "sensors")

    dom = dump_dom(path)
    png = screenshot(path, tmp_path / "report-empty.png")

    assert "<svg" not in dom
    assert re.findall(r"<h2>([^<]+)</h2>", dom) == [
        "Tables",
        "Silver aggregates",
        "Runs",
        "Data quality",
    ]
    titles = re.findall(r"<h3>([^<]+)</h3>", dom)
    assert titles == [
        "Signals per device type per minute",
        "Lost-signal device windows per minute",
        "Rows per run",
        "Seconds per run",
        "Late and quarantined rows per run",
        "Quality pass rate per validation run",
    ]
    assert dom.count("No data yet") == len(titles)
    assert dom.count("no data yet") == 5  # bronze, quarantine and three silver tables
    assert_not_blank(png, min_colours=4, min_ink=0.01)
