"""`runoff report <dataset>`: one self-contained HTML page with charts of a dataset's runs.

Input: the dataset's spec, its tables (read with delta-rs, no Spark), the run ledger and the
quality results history. Output: `<home>/reports/<dataset>.html`, inline CSS and SVG only.
Charts: per silver table and measure, a line per key combination over the window start
(windowed tables) or the top key combinations as bars (running totals); rows, seconds, late and
quarantined rows per run; the quality pass rate per validation run. A missing table is a note.
"""

from __future__ import annotations

import argparse
import html
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from core.config import RunoffConfig
from core.ledger import RUNS_SCHEMA
from core.specs import SilverSpec
from delta_tables.catalog import Catalog
from delta_tables.ops import read_runs

# Colours: one per layer of the run ledger, one per series of a silver chart.
LAYER_COLOURS = {
    "bronze": "#b07d3a",
    "silver": "#7d8b99",
    "validate": "#3f8f5f",
    "backfill": "#7a5ea8",
    "maintain": "#4f81bd",
}
OTHER_COLOUR = "#999999"
SERIES_COLOURS = (
    "#1f6fb4",
    "#e07b28",
    "#3a9a47",
    "#c0392b",
    "#8e5bb5",
    "#7f6a4f",
    "#d16aa6",
    "#17a2b8",
)
FAILED_COLOUR = "#c0392b"
MAX_LINES = 8  # key combinations drawn per line chart (the largest totals)
TOP_BARS = 20  # key combinations drawn per bar chart
WINDOW_START = "window_start"
LAST_RUNS_SHOWN = 15
MIN_RUN_SLOTS = 6


# -- the data a report is made of ----------------------------------------------------------------
@dataclass(frozen=True)
class TableInfo:
    """One Delta table of the dataset: its version and row count, or None when absent."""

    name: str
    path: Path
    version: int | None
    rows: int | None
    newest_event: datetime | None = None  # freshness, as `runoff status` shows it
    last_commit: datetime | None = None


@dataclass(frozen=True)
class ReportData:
    """Everything the page shows, already read from the home directory."""

    dataset: str
    description: str
    home: Path
    generated_at: datetime
    tables: list[TableInfo]
    silver_specs: tuple[SilverSpec, ...]
    silver: dict[str, pd.DataFrame | None]  # by table: the columns its charts need
    runs: pd.DataFrame
    quality: pd.DataFrame | None
    quality_path: Path


@dataclass(frozen=True)
class Chart:
    """A rendered chart (inline SVG) or the note that replaces it."""

    title: str
    svg: str | None = None
    note: str = ""


# -- pure data shaping ---------------------------------------------------------------------------
def _naive_utc(values: pd.Series) -> pd.Series:
    """Timestamps as naive UTC (matplotlib's date axis wants one clock)."""
    series = pd.to_datetime(values, utc=True)
    return series.dt.tz_convert(None)


def series_by_key(frame: pd.DataFrame, time_col: str, key_col: str, value_col: str) -> pd.DataFrame:
    """One row per time, one column per key (sorted), cells = sum of `value_col`; NaN where the
    key has no value at that time (a gap in its line, not a zero)."""
    if frame.empty:
        return pd.DataFrame()
    data = frame.assign(**{time_col: _naive_utc(frame[time_col])})
    sums = data.groupby([time_col, key_col])[value_col].sum(min_count=1)
    pivot = sums.unstack(key_col).sort_index()
    return pivot[sorted(pivot.columns, key=str)]


def _text(value: object) -> str:
    # NaN and NaT are the only values unequal to themselves.
    return "null" if value is None or value != value else str(value)


def key_labels(frame: pd.DataFrame, keys: Sequence[str], default: str) -> pd.Series:
    """One label per row, "k1=v1, k2=v2" (`default` when there are no keys)."""
    if not keys:
        return pd.Series(default, index=frame.index, dtype="object")
    labels = f"{keys[0]}=" + frame[keys[0]].map(_text)
    for key in keys[1:]:
        labels = labels + f", {key}=" + frame[key].map(_text)
    return labels


def numeric(values: pd.Series) -> pd.Series | None:
    """The values as floats; None when some are not numbers (text, timestamps, arrays)."""
    if not (pd.api.types.is_numeric_dtype(values) or pd.api.types.is_object_dtype(values)):
        return None
    converted = pd.to_numeric(values, errors="coerce")
    if converted.notna().sum() != values.notna().sum():
        return None
    return converted.astype("float64")


def top_keys(labels: pd.Series, values: pd.Series, n: int) -> pd.Series:
    """The `n` labels with the largest total of `values` (ties: by label), largest first."""
    data = pd.DataFrame({"label": labels.to_numpy(), "total": values.to_numpy()})
    totals = data.groupby("label")["total"].sum().reset_index()
    top = totals.sort_values(["total", "label"], ascending=[False, True], kind="stable").head(n)
    return pd.Series(top["total"].to_numpy(), index=top["label"].to_numpy(), name="total")


def runs_frame(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """Ledger rows, oldest first, numbered from 1 (`run`): the x axis of the run charts."""
    frame = pd.DataFrame(list(rows), columns=RUNS_SCHEMA.names)
    frame = frame.sort_values("started_at", kind="stable").reset_index(drop=True)
    for column in ("rows", "late_rows", "quarantined"):
        frame[column] = frame[column].fillna(0).astype("int64")
    frame["seconds"] = frame["seconds"].fillna(0.0).astype("float64")
    frame.insert(0, "run", range(1, len(frame) + 1))
    return frame


_TIME_COLUMNS = ("run_time", "validated_at", "started_at", "ended_at", "checked_at", "timestamp")


def quality_pass_rate(results: pd.DataFrame, dataset: str) -> pd.DataFrame:
    """Share of expectations that succeeded, per validation run, oldest run first.

    `results` is the quality results history: either one row per expectation (`run_id`,
    `success`) or one row per validation (`run_id`, `evaluated_expectations`,
    `successful_expectations`); a `dataset` column, when present, selects the dataset.
    Returns columns run_id, at (first time seen, or None), evaluated, passed, pass_rate (0..1).
    """
    columns = ["run_id", "at", "evaluated", "passed", "pass_rate"]
    if "run_id" not in results.columns:
        raise ValueError("quality results have no run_id column")
    data = results
    if "dataset" in data.columns:
        data = data[data["dataset"] == dataset]
    if "evaluated_expectations" in data.columns and "successful_expectations" in data.columns:
        evaluated = data["evaluated_expectations"].fillna(0).astype("int64")
        passed = data["successful_expectations"].fillna(0).astype("int64")
    elif "success" in data.columns:
        evaluated = pd.Series(1, index=data.index, dtype="int64")
        passed = data["success"].fillna(False).astype(bool).astype("int64")
    else:
        raise ValueError(
            "quality results have neither a success column nor "
            "evaluated_expectations/successful_expectations"
        )
    if data.empty:
        return pd.DataFrame(columns=columns)
    time_col = next((c for c in _TIME_COLUMNS if c in data.columns), None)
    at = _naive_utc(data[time_col]) if time_col else pd.Series(pd.NaT, index=data.index)
    frame = pd.DataFrame(
        {"run_id": data["run_id"], "at": at, "evaluated": evaluated, "passed": passed}
    )
    order = {run_id: i for i, run_id in enumerate(dict.fromkeys(frame["run_id"]))}
    grouped = frame.groupby("run_id", as_index=False, sort=False).agg(
        at=("at", "min"), evaluated=("evaluated", "sum"), passed=("passed", "sum")
    )
    grouped["first"] = grouped["run_id"].map(order)
    grouped = grouped.sort_values(["at", "first"], na_position="last", kind="stable")
    rates = grouped["passed"] / grouped["evaluated"].where(grouped["evaluated"] > 0)
    grouped["pass_rate"] = rates.fillna(0.0)
    return grouped[columns].reset_index(drop=True)


# -- charts (matplotlib, rendered to SVG text) ---------------------------------------------------
def gate_totals(results: pd.DataFrame) -> pd.DataFrame:
    """The quality gate's checks (history rows with a `batch_id`) per table and expectation:
    action, batches, rows evaluated, failed and quarantined, and the last batch that failed it.
    Quarantine rules are the breakdown of the quarantine's reasons. Most failed first."""
    columns = ["table", "expectation", "severity", "batches", "evaluated", "failed"]
    columns += ["quarantined", "last_failed_at"]
    if "batch_id" not in results.columns:
        return pd.DataFrame(columns=columns)
    checks = results[results["batch_id"].notna()].copy()
    if checks.empty:
        return pd.DataFrame(columns=columns)
    for column in ("evaluated", "failed", "quarantined"):
        checks[column] = checks[column].fillna(0).astype("int64")
    checks["failed_at"] = checks["validated_at"].where(checks["failed"] > 0)
    totals = (
        checks.groupby(["table", "expectation", "severity"], as_index=False)
        .agg(
            batches=("batch_id", "size"),
            evaluated=("evaluated", "sum"),
            failed=("failed", "sum"),
            quarantined=("quarantined", "sum"),
            last_failed_at=("failed_at", "max"),
        )
        .sort_values(["failed", "table", "expectation"], ascending=[False, True, True])
    )
    return totals[columns].reset_index(drop=True)


def _new_figure(height: float = 3.4) -> Any:
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10, height), layout="constrained")
    FigureCanvasSVG(figure)
    return figure


_ID = re.compile(r'\bid="([^"]+)"')


# Up to this many points per line every point is drawn; beyond, matplotlib may merge points that
# lie on a straight line to keep the page small.
EXACT_POINTS = 5000


def figure_svg(figure: Any, prefix: str, simplify: bool = False) -> str:
    """The figure as an inline `<svg>` element whose ids are unique on the page (`prefix`)."""
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context(
        {"svg.fonttype": "none", "svg.hashsalt": prefix, "path.simplify": simplify}
    ):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    text = text[text.index("<svg") :]
    # Several charts share one HTML page: make clip-path and marker ids unique per chart.
    for name in sorted(set(_ID.findall(text)), key=len, reverse=True):
        text = text.replace(f'id="{name}"', f'id="{prefix}-{name}"')
        text = text.replace(f"#{name})", f"#{prefix}-{name})")
        text = text.replace(f'#{name}"', f'#{prefix}-{name}"')
    return text.replace("<svg ", f'<svg class="chart" data-chart="{prefix}" ', 1)


def tick_label(value: float) -> str:
    """Axis numbers as people write them: 20,000 and 2.5, never 2e+04."""
    if float(value).is_integer() or abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _style_axes(axes: Any, title: str, ylabel: str) -> None:
    from matplotlib.ticker import FuncFormatter

    axes.set_title(title, loc="left", fontsize=12, fontweight="bold")
    axes.set_ylabel(ylabel)
    axes.grid(axis="y", color="#dddddd", linewidth=0.8)
    axes.set_axisbelow(True)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)
    axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _pos: tick_label(value)))


def _time_axis(axes: Any) -> None:
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter

    locator = AutoDateLocator()
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    axes.set_xlabel("window start (UTC)")


def line_chart(pivot: pd.DataFrame, title: str, ylabel: str, prefix: str) -> str:
    """One line per column of `pivot` (index: time; NaN: a gap); y from 0 unless negative."""
    figure = _new_figure()
    axes = figure.add_subplot()
    marker = "o" if len(pivot.index) <= 48 else None
    for i, column in enumerate(pivot.columns):
        axes.plot(
            pivot.index,
            pivot[column],
            label=str(column),
            color=SERIES_COLOURS[i % len(SERIES_COLOURS)],
            marker=marker,
            markersize=3,
            linewidth=1.6,
        )
    _style_axes(axes, title, ylabel)
    _time_axis(axes)
    if pivot.min().min() >= 0:
        axes.set_ylim(bottom=0)
    if len(pivot.columns) > 0:
        _top_legend(axes)
    return figure_svg(figure, prefix, simplify=len(pivot.index) > EXACT_POINTS)


def top_bar_chart(totals: pd.Series, title: str, xlabel: str, prefix: str) -> str:
    """Horizontal bars (index: labels), the first on top, each labelled with its value."""
    figure = _new_figure(height=max(3.0, 0.28 * len(totals) + 1.2))
    axes = figure.add_subplot()
    labels, values = [str(label) for label in totals.index][::-1], list(totals)[::-1]
    bars = axes.barh(labels, values, color=SERIES_COLOURS[0])
    axes.bar_label(bars, labels=[tick_label(v) for v in values], padding=3)
    axes.set_title(title, loc="left", fontsize=12, fontweight="bold")
    axes.set_xlabel(xlabel)
    axes.grid(axis="x", color="#dddddd", linewidth=0.8)
    axes.set_axisbelow(True)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)
    return figure_svg(figure, prefix)


def runs_bar_chart(runs: pd.DataFrame, column: str, title: str, ylabel: str, prefix: str) -> str:
    """One bar per run (x: run number), coloured by layer; failed runs hatched in red."""
    figure = _new_figure()
    axes = figure.add_subplot()
    colours = [LAYER_COLOURS.get(str(layer), OTHER_COLOUR) for layer in runs["layer"]]
    failed = [str(status) not in ("success", "running") for status in runs["status"]]
    bars = axes.bar(runs["run"], runs[column], color=colours, width=0.8)
    for bar, bad in zip(bars, failed, strict=True):
        if bad:
            bar.set_hatch("///")
            bar.set_edgecolor(FAILED_COLOUR)
    _style_axes(axes, title, ylabel)
    axes.set_xlabel("run (oldest first)")
    _integer_run_axis(axes, len(runs))
    from matplotlib.patches import Patch

    layers = list(dict.fromkeys(str(layer) for layer in runs["layer"]))
    handles = [Patch(color=LAYER_COLOURS.get(layer, OTHER_COLOUR), label=layer) for layer in layers]
    if any(failed):
        handles.append(
            Patch(facecolor="white", edgecolor=FAILED_COLOUR, hatch="///", label="failed")
        )
    _top_legend(axes, handles=handles)
    return figure_svg(figure, prefix)


def late_quarantine_chart(runs: pd.DataFrame, prefix: str) -> str:
    """Per run: rows behind the watermark (late_rows) and quarantined rows, side by side."""
    figure = _new_figure()
    axes = figure.add_subplot()
    x = runs["run"].to_numpy(dtype=float)
    late, quarantined = runs["late_rows"], runs["quarantined"]
    axes.bar(x - 0.2, late, width=0.4, color=SERIES_COLOURS[1], label="behind the watermark")
    axes.bar(x + 0.2, quarantined, width=0.4, color=SERIES_COLOURS[3], label="quarantined")
    _style_axes(axes, "Late and quarantined rows per run", "rows")
    axes.set_xlabel("run (oldest first)")
    _integer_run_axis(axes, len(runs))
    _top_legend(axes)
    return figure_svg(figure, prefix)


def pass_rate_chart(rates: pd.DataFrame, prefix: str) -> str:
    """One bar per validation run: percentage of expectations that succeeded."""
    figure = _new_figure()
    axes = figure.add_subplot()
    x = list(range(1, len(rates) + 1))
    percent = (rates["pass_rate"] * 100).to_numpy()
    colours = [SERIES_COLOURS[2] if p >= 100 else FAILED_COLOUR for p in percent]
    axes.bar(x, percent, color=colours, width=0.7)
    for xi, p in zip(x, percent, strict=True):
        axes.annotate(f"{p:.0f}%", (xi, p), ha="center", va="bottom", fontsize=8)
    _style_axes(axes, "Quality pass rate per validation run", "expectations passed (%)")
    axes.set_ylim(0, 110)
    axes.set_xlabel("validation run (oldest first)")
    _integer_run_axis(axes, len(rates))
    return figure_svg(figure, prefix)


def _top_legend(axes: Any, handles: list[Any] | None = None) -> None:
    """The legend as a column to the right of the plot: titles derived from a spec are long, and
    a legend beside them would overlap them."""
    shown = handles if handles is not None else axes.get_legend_handles_labels()[0]
    axes.legend(handles=shown, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))


def _integer_run_axis(axes: Any, count: int) -> None:
    from matplotlib.ticker import MaxNLocator

    if count <= 30:
        axes.set_xticks(range(1, count + 1))
    else:
        axes.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=20))
    # At least MIN_RUN_SLOTS slots, so that a lone run is a bar, not a wall.
    axes.set_xlim(0.4, max(count, MIN_RUN_SLOTS) + 0.6)


# -- silver charts, derived from the spec -------------------------------------------------------
def _axis_columns(spec: SilverSpec) -> tuple[str, ...]:
    return (WINDOW_START, *spec.keys) if spec.window else spec.keys


def silver_columns(spec: SilverSpec) -> tuple[str, ...]:
    """The columns the charts of a silver table read: window start (if windowed), keys, measures."""
    return (*_axis_columns(spec), *spec.measure_names)


def silver_title(spec: SilverSpec, measure: str) -> str:
    """E.g. "events_action_hourly: count per 1 hour window by action"."""
    by = f" by {', '.join(spec.keys)}" if spec.keys else ""
    if spec.window is None:
        top = f" (top {TOP_BARS})" if spec.keys else ""
        return f"{spec.table}: {measure}{by}{top}"
    slide = f" (sliding by {spec.slide})" if spec.slide else ""
    return f"{spec.table}: {measure} per {spec.window} window{slide}{by}"


def window_series(frame: pd.DataFrame, spec: SilverSpec, measure: str) -> tuple[pd.DataFrame, int]:
    """The lines of a windowed chart (`series_by_key` of the MAX_LINES key combinations with the
    largest total) and how many key combinations were left out."""
    labels = key_labels(frame, spec.keys, measure)
    data = pd.DataFrame({WINDOW_START: frame[WINDOW_START], "key": labels, measure: frame[measure]})
    pivot = series_by_key(data, WINDOW_START, "key", measure)
    shown = set(top_keys(labels, frame[measure], MAX_LINES).index)
    return pivot[[c for c in pivot.columns if c in shown]], labels.nunique() - len(shown)


def total_bars(frame: pd.DataFrame, spec: SilverSpec, measure: str) -> tuple[pd.Series, int]:
    """The bars of a running-total chart (the TOP_BARS key combinations with the largest total of
    the measure, largest first) and how many key combinations were left out."""
    labels = key_labels(frame, spec.keys, measure)
    totals = top_keys(labels, frame[measure], TOP_BARS)
    return totals, labels.nunique() - len(totals)


def _not_charted(frame: pd.DataFrame | None, spec: SilverSpec, measure: str, dataset: str) -> str:
    """Why the chart of `measure` cannot be drawn ("" when it can)."""
    if frame is None:
        return (
            f"No data yet: silver table {spec.table} does not exist (run `runoff run {dataset}`)."
        )
    missing = [c for c in (*_axis_columns(spec), measure) if c not in frame]
    if missing:
        return f"Not charted: {spec.table} has no column {', '.join(missing)}."
    if frame.empty:
        return f"No data yet: {spec.table} has no rows."
    values = numeric(frame[measure])
    if values is None:
        return f"Not charted: {measure} of {spec.table} is not numeric ({frame[measure].dtype})."
    return "" if values.notna().any() else f"No data yet: {spec.table} has no {measure} values."


def silver_chart(frame: pd.DataFrame, spec: SilverSpec, measure: str, prefix: str) -> Chart:
    """The chart of one measure of a silver table that has rows (see `_not_charted`)."""
    title = silver_title(spec, measure)
    frame = frame.assign(**{measure: numeric(frame[measure])})
    if spec.window:
        pivot, left_out = window_series(frame, spec, measure)
        svg, shown = line_chart(pivot, title, measure, prefix), len(pivot.columns)
    else:
        totals, left_out = total_bars(frame, spec, measure)
        svg, shown = top_bar_chart(totals, title, measure, prefix), len(totals)
    note = ""
    if left_out:
        note = (
            f"Shown: the {shown} of {shown + left_out} key combinations with the largest "
            f"total {measure}; {left_out} left out."
        )
    return Chart(title, svg=svg, note=note)


def silver_charts(data: ReportData) -> list[Chart]:
    """One chart per silver table and measure, in the order of the spec."""
    charts = []
    for spec in data.silver_specs:
        frame = data.silver.get(spec.table)
        for measure in spec.measure_names:
            reason = _not_charted(frame, spec, measure, data.dataset)
            if reason or frame is None:
                charts.append(Chart(silver_title(spec, measure), note=reason))
            else:
                charts.append(silver_chart(frame, spec, measure, f"silver{len(charts)}"))
    return charts


def run_charts(data: ReportData) -> list[Chart]:
    titles = (
        "Rows per run",
        "Seconds per run",
        "Late and quarantined rows per run",
    )
    if data.runs.empty:
        note = f"No data yet: the run ledger has no runs of {data.dataset}."
        return [Chart(title, note=note) for title in titles]
    runs = data.runs
    return [
        Chart(titles[0], svg=runs_bar_chart(runs, "rows", titles[0], "rows", "runs-rows")),
        Chart(titles[1], svg=runs_bar_chart(runs, "seconds", titles[1], "seconds", "runs-secs")),
        Chart(titles[2], svg=late_quarantine_chart(runs, "runs-late")),
    ]


def quality_charts(data: ReportData) -> list[Chart]:
    title = "Quality pass rate per validation run"
    if data.quality is None:
        return [
            Chart(
                title,
                note=f"No data yet: no quality results table at {data.quality_path} "
                f"(run `runoff validate {data.dataset}`).",
            )
        ]
    validations = data.quality
    if "batch_id" in validations.columns:  # the gate's rows are `gate_totals`'
        validations = validations[validations["batch_id"].isna()]
    try:
        rates = quality_pass_rate(validations, data.dataset)
    except ValueError as exc:
        return [Chart(title, note=f"Quality results at {data.quality_path} not charted: {exc}.")]
    if rates.empty:
        return [Chart(title, note=f"No data yet: no validation results for {data.dataset}.")]
    return [Chart(title, svg=pass_rate_chart(rates, "quality"))]


# -- HTML ----------------------------------------------------------------------------------------
CSS = """
body { font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #222;
       margin: 0; background: #f6f7f9; }
header { background: #1d3b53; color: #fff; padding: 18px 32px; }
header h1 { margin: 0 0 4px; font-size: 22px; }
header p { margin: 0; opacity: .85; }
main { max-width: 1180px; margin: 0 auto; padding: 8px 32px 40px; }
section { background: #fff; border: 1px solid #e1e4e8; border-radius: 6px; margin: 18px 0;
          padding: 6px 20px 16px; }
h2 { font-size: 17px; border-bottom: 1px solid #eee; padding-bottom: 6px; }
figure { margin: 14px 0; }
figure svg.chart { width: 100%; height: auto; display: block; }
.note { color: #6a737d; background: #fafbfc; border-left: 3px solid #d1d5da; padding: 8px 12px; }
table { border-collapse: collapse; font-size: 13px; }
th, td { padding: 4px 10px; border-bottom: 1px solid #eee; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.failed { color: #c0392b; font-weight: 600; }
"""


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def _chart_html(chart: Chart) -> str:
    if chart.svg is not None:
        note = f'<figcaption class="note">{_esc(chart.note)}</figcaption>' if chart.note else ""
        return f'<figure aria-label="{_esc(chart.title)}">{chart.svg}{note}</figure>'
    return (
        f'<figure aria-label="{_esc(chart.title)}"><h3>{_esc(chart.title)}</h3>'
        f'<p class="note">{_esc(chart.note)}</p></figure>'
    )


def _utc(moment: datetime | None) -> str:
    return "-" if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _tables_html(tables: Sequence[TableInfo]) -> str:
    rows = []
    for table in tables:
        if table.version is None:
            cells = '<td class="num">-</td><td class="num">-</td><td>-</td><td>-</td>'
            cells += "<td>no data yet</td>"
        else:
            cells = (
                f'<td class="num">{table.version}</td>'
                f'<td class="num">{(table.rows or 0):,}</td>'
                f"<td>{_utc(table.newest_event)}</td><td>{_utc(table.last_commit)}</td>"
                f"<td>{_esc(table.path)}</td>"
            )
        rows.append(f"<tr><td>{_esc(table.name)}</td>{cells}</tr>")
    head = (
        "<tr><th>table</th><th>version</th><th>rows</th><th>newest event (UTC)</th>"
        "<th>last commit (UTC)</th><th>location</th></tr>"
    )
    return f"<table>{head}{''.join(rows)}</table>"


def _runs_table_html(runs: pd.DataFrame) -> str:
    if runs.empty:
        return ""
    shown = runs.tail(LAST_RUNS_SHOWN).iloc[::-1]
    head = (
        "<tr><th>run</th><th>started (UTC)</th><th>layer</th><th>status</th><th>rows</th>"
        "<th>seconds</th><th>late rows</th><th>quarantined</th><th>error</th></tr>"
    )
    rows = []
    for run in shown.to_dict("records"):
        started = pd.Timestamp(run["started_at"]).strftime("%Y-%m-%d %H:%M:%S")
        status_class = "" if run["status"] in ("success", "running") else ' class="failed"'
        rows.append(
            f'<tr><td class="num">{run["run"]}</td><td>{started}</td>'
            f"<td>{_esc(run['layer'])}</td>"
            f"<td{status_class}>{_esc(run['status'])}</td>"
            f'<td class="num">{run["rows"]:,}</td><td class="num">{run["seconds"]:,.1f}</td>'
            f'<td class="num">{run["late_rows"]:,}</td>'
            f'<td class="num">{run["quarantined"]:,}</td>'
            f"<td>{_esc(run['error'] or '')}</td></tr>"
        )
    caption = f"<h3>Last {min(len(runs), LAST_RUNS_SHOWN)} of {len(runs)} runs</h3>"
    return f"{caption}<table>{head}{''.join(rows)}</table>"


def _gate_table_html(quality: pd.DataFrame | None) -> str:
    totals = gate_totals(quality) if quality is not None else pd.DataFrame()
    if totals.empty:
        return ""
    head = (
        "<tr><th>table</th><th>expectation</th><th>action</th><th>batches</th>"
        "<th>rows evaluated</th><th>failed</th><th>quarantined</th><th>last failed (UTC)</th></tr>"
    )
    rows = []
    for row in totals.to_dict("records"):
        last = row["last_failed_at"]
        when = "" if pd.isna(last) else pd.Timestamp(last).strftime("%Y-%m-%d %H:%M:%S")
        held = row["failed"] and row["severity"] == "critical"  # it held batches back
        failed = "num failed" if held else "num"
        rows.append(
            f"<tr><td>{_esc(row['table'])}</td><td>{_esc(row['expectation'])}</td>"
            f'<td>{_esc(row["severity"])}</td><td class="num">{row["batches"]:,}</td>'
            f'<td class="num">{row["evaluated"]:,}</td>'
            f'<td class="{failed}">{row["failed"]:,}</td>'
            f'<td class="num">{row["quarantined"]:,}</td><td>{when}</td></tr>'
        )
    caption = (
        '<h3>Checked on every micro-batch before its commit</h3><p class="note">The quality '
        "gate: rows evaluated, failed and quarantined per table and expectation, over every "
        "batch in the results history. <code>quarantine</code> rows are the reasons lines went "
        "to quarantine; a failed <code>critical</code> expectation held its batch back.</p>"
    )
    return f"{caption}<table>{head}{''.join(rows)}</table>"


def render_report(data: ReportData) -> str:
    """The complete HTML page (pure: no file or network access)."""
    sections: list[str] = []
    sections.append(f"<section><h2>Tables</h2>{_tables_html(data.tables)}</section>")
    silver = "".join(_chart_html(c) for c in silver_charts(data))
    sections.append(f"<section><h2>Silver aggregates</h2>{silver}</section>")
    runs = "".join(_chart_html(c) for c in run_charts(data)) + _runs_table_html(data.runs)
    sections.append(f"<section><h2>Runs</h2>{runs}</section>")
    quality = "".join(_chart_html(c) for c in quality_charts(data)) + _gate_table_html(data.quality)
    sections.append(f"<section><h2>Data quality</h2>{quality}</section>")
    generated = data.generated_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>runoff report: {_esc(data.dataset)}</title><style>{CSS}</style></head>"
        f"<body><header><h1>runoff report: {_esc(data.dataset)}</h1>"
        f"<p>{_esc(data.description)}</p>"
        f"<p>home {_esc(data.home)} &middot; generated {generated}</p></header>"
        f"<main>{''.join(sections)}</main></body></html>\n"
    )


# -- reading the home directory ------------------------------------------------------------------
def _is_delta(path: Path) -> bool:
    return (path / "_delta_log").is_dir()


def read_delta(path: Path, columns: Sequence[str] | None = None) -> pd.DataFrame | None:
    """A Delta table (or some of its columns) as pandas; None when there is no table at `path`.

    Reads through delta-rs's DataFusion engine, which honours deletion vectors and column mapping.
    """
    from delta_tables.arrow import read_arrow

    if not _is_delta(path):
        return None
    frame: pd.DataFrame = read_arrow(str(path), columns).to_pandas()
    return frame


def table_info(name: str, path: Path) -> TableInfo:
    from deltalake import DeltaTable

    from delta_tables.arrow import count_rows

    if not _is_delta(path):
        return TableInfo(name, path, None, None)
    table = DeltaTable(str(path))
    return TableInfo(name, path, table.version(), count_rows(table))


def load_report_data(config: RunoffConfig, dataset: str) -> ReportData:
    """Read what the report of `dataset` shows from the home directory (no Spark)."""
    from jobs.status import freshness_facts, spec_key

    catalog = Catalog.load(config)
    spec = catalog.spec(dataset)
    tables = [
        replace(
            table_info(t.name, t.path),
            newest_event=facts["newest_event_time"],
            last_commit=facts["last_commit_at"],
        )
        for t in catalog.tables(dataset)
        for facts in [freshness_facts(t, spec.newest_event_column(spec_key(t)))]
    ]
    silver = {s.table: read_silver(catalog.silver_table(s.table).path, s) for s in spec.silver}
    quality_path = catalog.quality_results.path
    return ReportData(
        dataset=dataset,
        description=spec.description,
        home=config.home,
        generated_at=datetime.now(UTC),
        tables=tables,
        silver_specs=spec.silver,
        silver=silver,
        runs=runs_frame(read_runs(config.runs_path, dataset)),
        quality=read_quality(quality_path, dataset),
        quality_path=quality_path,
    )


def read_silver(path: Path, spec: SilverSpec) -> pd.DataFrame | None:
    """The columns of `silver_columns(spec)` the table has; None when there is no table."""
    from deltalake import DeltaTable

    if not _is_delta(path):
        return None
    names = {f.name for f in DeltaTable(str(path)).schema().fields}
    columns = [c for c in silver_columns(spec) if c in names]
    return read_delta(path, columns) if columns else pd.DataFrame()


def read_quality(path: Path, dataset: str) -> pd.DataFrame | None:
    """The dataset's rows of the quality results history, parked rows included (the columns
    `quality_pass_rate` and `gate_totals` use); None when there is no history."""
    from delta_tables.ops import read_rows
    from quality.history import RESULT_KEY, RESULTS_SCHEMA

    if not path.exists():
        return None
    columns = [
        *("run_id", "dataset", "success", "validated_at", "table", "expectation", "severity"),
        *("batch_id", "evaluated", "failed", "quarantined"),
    ]
    rows = read_rows(path, RESULTS_SCHEMA, RESULT_KEY, columns, {"dataset": dataset})
    frame: pd.DataFrame = rows.to_pandas()
    return frame


def report_path(config: RunoffConfig, dataset: str) -> Path:
    return config.home / "reports" / f"{dataset}.html"


def write_report(config: RunoffConfig, dataset: str) -> Path:
    """Render the report of `dataset` and write it atomically; returns its path."""
    page = render_report(load_report_data(config, dataset))
    path = report_path(config, dataset)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.tmp")
    partial.write_text(page, encoding="utf-8")
    partial.replace(path)
    return path


def cmd_report(config: RunoffConfig, args: argparse.Namespace) -> int:
    print(write_report(config, args.dataset), flush=True)
    return 0


__all__ = [
    "ReportData",
    "cmd_report",
    "gate_totals",
    "load_report_data",
    "quality_pass_rate",
    "render_report",
    "report_path",
    "write_report",
]
