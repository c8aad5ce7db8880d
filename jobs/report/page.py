"""The page of `runoff report`: `ReportData` and its charts rendered with Jinja2 (autoescaped).

The template is `jobs/report/templates/report.html.j2`; this module turns the data into the rows
of the page's tables (runs, validate runs with their Data Docs pages, the quality gate, the
quarantine's reasons) and links Data Docs pages relative to the report's folder, so that the home
can move.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pandas as pd
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from jobs.report.charts import (
    Chart,
    metric_charts,
    quality_charts,
    run_charts,
    silver_charts,
    utc_text,
    validations,
)
from jobs.report.data import LAST_RUNS_SHOWN, DocsPage, ReportData, gate_totals

TEMPLATES = Path(__file__).resolve().parent / "templates"
TEMPLATE = "report.html.j2"
REASONS_SHOWN = 20  # quarantine reasons listed; the rest are summed in one row


@dataclass(frozen=True)
class Link:
    text: str
    href: str
    failed: bool = False


def href(target: Path, page: Path | None) -> str:
    """A link from the page at `page` to `target`: relative when both are on one drive (the home
    can move), a file:// URL otherwise."""
    if page is not None:
        try:
            relative = os.path.relpath(target, page.parent)
        except ValueError:  # another drive
            pass
        else:
            return quote(Path(relative).as_posix())
    return target.resolve().as_uri()


def _links(pages: list[DocsPage], page: Path | None) -> list[Link]:
    return [Link(p.suite, href(p.path, page), p.failed) for p in pages]


def _failed(status: object) -> bool:
    return str(status) not in ("success", "running", "")


def runs_rows(data: ReportData) -> list[dict[Any, Any]]:
    """The last LAST_RUNS_SHOWN runs, newest first; validate runs with their Data Docs pages."""
    shown = data.runs.tail(LAST_RUNS_SHOWN).iloc[::-1]
    rows = []
    for run in shown.to_dict("records"):
        run_id = str(run["run_id"])
        rows.append(
            {
                **run,
                "short_id": run_id[:8],
                "failed": _failed(run["status"]),
                "error": run["error"] or "",
                "pages": _links(list(data.docs_pages.get(run_id, [])), data.report_path),
            }
        )
    return rows


def validation_rows(data: ReportData) -> list[dict[Any, Any]]:
    """The last LAST_RUNS_SHOWN validate runs, newest first, each with its Data Docs pages."""
    runs, _note = validations(data)
    if runs is None:
        return []
    rows = []
    for run in runs.tail(LAST_RUNS_SHOWN).iloc[::-1].to_dict("records"):
        run_id = str(run["run_id"])
        rows.append(
            {
                **run,
                "short_id": run_id[:8],
                "failed": _failed(run["status"]),
                "below": run["passed"] < run["evaluated"],
                "pages": _links(list(data.docs_pages.get(run_id, [])), data.report_path),
            }
        )
    return rows


def gate_rows(data: ReportData) -> list[dict[Any, Any]]:
    totals = gate_totals(data.quality) if data.quality is not None else pd.DataFrame()
    rows = []
    for row in totals.to_dict("records"):
        # A failed critical expectation held its batch back.
        rows.append({**row, "held": bool(row["failed"]) and row["severity"] == "critical"})
    return rows


def reason_rows(data: ReportData) -> tuple[list[dict[Any, Any]], int]:
    """The REASONS_SHOWN most frequent quarantine reasons (with their share as a bar width in
    percent of the largest) and the total of quarantined rows."""
    if data.quarantine is None or data.quarantine.empty:
        return [], 0
    reasons = data.quarantine
    total = int(reasons["rows"].sum())
    shown = reasons.head(REASONS_SHOWN).to_dict("records")
    rest = reasons.iloc[REASONS_SHOWN:]
    if len(rest):
        count = len(rest)
        rows = int(rest["rows"].sum())
        shown.append({"reason": f"{count} other reasons", "rows": rows, "share": rows / total})
    largest = max(r["rows"] for r in shown)
    for row in shown:
        row["bar"] = round(100 * row["rows"] / largest, 1)
    return shown, total


def _count(value: Any) -> str:
    return f"{int(value):,}"


def _percent(value: Any) -> str:
    return f"{100 * float(value):.1f} %"


def _svg(chart: Chart) -> Markup:
    # matplotlib's SVG: its texts are XML-escaped by matplotlib.
    return Markup(chart.svg or "")


@cache
def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(utc=utc_text, count=_count, percent=_percent, svg=_svg)
    return env


def render_report(data: ReportData) -> str:
    """The complete HTML page (pure: no file or network access)."""
    reasons, quarantined = reason_rows(data)
    index = href(data.docs_index, data.report_path) if data.docs_index else None
    return (
        environment()
        .get_template(TEMPLATE)
        .render(
            data=data,
            generated=utc_text(data.generated_at),
            silver_charts=silver_charts(data),
            run_charts=run_charts(data),
            metric_charts=metric_charts(data),
            runs=runs_rows(data),
            quality_charts=quality_charts(data),
            validations=validation_rows(data),
            gate=gate_rows(data),
            reasons=reasons,
            quarantined=quarantined,
            docs_index=index,
        )
    )
