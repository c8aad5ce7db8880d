"""The charts of `runoff report`: matplotlib figures rendered to inline SVG.

Silver: per table and measure, a line per key combination over the window start (windowed
tables; a missing window breaks the line, the windows the watermark has not closed yet get large
hollow markers) or the top key combinations as bars (running totals). Runs: rows,
seconds, late and quarantined rows per run as stems at each run's start time, and the quality
pass rate per validate run at its start time, all four on the same time range. Every chart
carries the data it plots (`Chart.data`), and every plotted artist an SVG id (`gid`).
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from core.specs import SilverSpec
from jobs.report.data import (
    TOP_BARS,
    ReportData,
    axis_columns,
    flagged_batches,
    metric_pivot,
    naive_utc,
    numeric,
    open_windows,
    total_bars,
    validation_runs,
    watermark_time,
    window_length,
    window_series,
)

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
PASSED_COLOUR = "#3a9a47"
LATE_COLOUR = SERIES_COLOURS[1]
QUARANTINED_COLOUR = SERIES_COLOURS[3]
MARKERS_UP_TO = 48  # windows per line chart up to which every point has a marker
LABELS_UP_TO = 30  # validations up to which each pass rate is written next to its point
# Up to this many points per line every point is drawn; beyond, matplotlib may merge points that
# lie on a straight line to keep the page small.
EXACT_POINTS = 5000
OPEN_LABEL = "open window (not closed by the watermark)"
FLAGGED_LABEL = "outside its history"
# The bronze batch metrics charted (`quality.anomalies.BATCH_METRICS`), by chart.
ROW_METRICS = ("rows_in", "rows_written", "rows_quarantined")
NULL_SHARE = "null_share:"
LAG_METRIC = "event_lag_seconds"
METRIC_TITLES = (
    "Rows per bronze batch",
    "Null share of bronze columns per batch (columns with nulls)",
    "Event-time lag at ingestion per batch",
    "Rows merged and late rows per silver batch",
)
SILVER_ROWS = {"rows_written": "merged", "late_rows": "late"}


@dataclass(frozen=True)
class Chart:
    """A rendered chart (inline SVG) or the note that replaces it; `data` is what it plots."""

    title: str
    svg: str | None = None
    notes: tuple[str, ...] = ()
    data: Any = None


def utc_text(moment: Any, seconds: bool = True) -> str:
    """A time as the page writes it (UTC, no zone suffix); "-" for none."""
    if moment is None or pd.isna(moment):
        return "-"
    stamp = pd.Timestamp(moment)
    if stamp.tzinfo is not None:
        stamp = stamp.tz_convert("UTC")
    return stamp.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")


# -- matplotlib plumbing --------------------------------------------------------------------------
def _new_figure(height: float = 3.4, constrained: bool = True) -> Any:
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10, height), layout="constrained" if constrained else None)
    FigureCanvasSVG(figure)
    return figure


_ID = re.compile(r'\bid="([^"]+)"')


def figure_svg(figure: Any, prefix: str, simplify: bool = False) -> str:
    """The figure as an inline `<svg>` element whose ids are unique on the page (`prefix`)."""
    import matplotlib
    from matplotlib.text import Text

    # Labels come from the data (key values, column names): `$...$` is text, not math to parse
    # (a value like `$\\foo$` would otherwise fail the whole report).
    for text in figure.findobj(Text):
        text.set_parse_math(False)
    buffer = io.StringIO()
    with matplotlib.rc_context(
        {"svg.fonttype": "none", "svg.hashsalt": prefix, "path.simplify": simplify}
    ):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    text = text[text.index("<svg") :]
    # Several charts share one HTML page: make clip-path, marker and artist ids unique per chart.
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


def _time_axis(axes: Any, label: str) -> None:
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter

    locator = AutoDateLocator()
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    axes.set_xlabel(label)


def _within_the_calendar(axes: Any) -> None:
    """Matplotlib's dates end with the years 1 and 9999: the margins around data near either
    end (bronze takes event times of 0001-01-02 .. 9999-12-30) must not reach beyond them."""
    from matplotlib.dates import date2num

    left, right = axes.get_xlim()
    first, last = date2num(pd.Timestamp("0001-01-01")), date2num(pd.Timestamp("9999-12-31"))
    axes.set_xlim(max(left, first), min(right, last))


def _side_legend(axes: Any, handles: list[Any] | None = None) -> None:
    """The legend as a column to the right of the plot: titles derived from a spec are long, and
    a legend beside them would overlap them."""
    shown = handles if handles is not None else axes.get_legend_handles_labels()[0]
    axes.legend(handles=shown, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))


# -- silver charts ----------------------------------------------------------------------------
def line_segments(values: pd.Series) -> int:
    """How many separate lines (runs of consecutive non-NaN values) a series is drawn as."""
    present = values.notna().to_numpy()
    starts = present.copy()
    starts[1:] &= ~present[:-1]
    return int(starts.sum())


def line_chart(
    pivot: pd.DataFrame,
    title: str,
    ylabel: str,
    prefix: str,
    open_starts: pd.DatetimeIndex | None = None,
    xlabel: str = "window start (UTC)",
    flagged: Mapping[str, pd.Index] | None = None,
    gaps: bool = True,
) -> str:
    """One line per column of `pivot` (index: window start; a NaN row breaks the line), in
    SERIES_COLOURS order, SVG ids `line-<i>`; the points of the windows in `open_starts` get large
    hollow markers (`open-<i>`), named in the legend, and so do a column's points at the times
    `flagged` gives it, in red (`flagged-<i>`). A point with no neighbour gets a marker
    (`alone-<i>`) even when the others have none. y from 0 unless negative. `gaps=False`: a
    column's NaN rows are another series' times, not gaps: its line joins its own points."""
    from matplotlib.lines import Line2D

    figure = _new_figure()
    axes = figure.add_subplot()
    marker = "o" if len(pivot.index) <= MARKERS_UP_TO else None
    is_open = pivot.index.isin(open_starts if open_starts is not None else [])
    handles: list[Any] = []
    for i, column in enumerate(pivot.columns):
        colour = SERIES_COLOURS[i % len(SERIES_COLOURS)]
        values = pivot[column] if gaps else pivot[column].dropna()
        (line,) = axes.plot(
            values.index,
            values,
            label=str(column),
            color=colour,
            marker=marker,
            markersize=3,
            linewidth=1.6,
            gid=f"line-{i}",
        )
        handles.append(line)
        alone = values.notna() & values.shift(1).isna() & values.shift(-1).isna()
        if marker is None and alone.any():
            axes.plot(
                values.index[alone],
                values[alone],
                color=colour,
                marker="o",
                markersize=3,
                linestyle="none",
                gid=f"alone-{i}",
            )
        opened = values.index.isin(open_starts if open_starts is not None else [])
        if opened.any():
            axes.plot(values.index[opened], values[opened], gid=f"open-{i}", **_hollow(colour))
        red = values.index.isin((flagged or {}).get(str(column), [])) & values.notna()
        if red.any():
            axes.plot(values.index[red], values[red], gid=f"flagged-{i}", **_hollow(FAILED_COLOUR))
    _style_axes(axes, title, ylabel)
    _within_the_calendar(axes)
    _time_axis(axes, xlabel)
    if pivot.min().min() >= 0:
        axes.set_ylim(bottom=0)
    if is_open.any():
        handles.append(Line2D([], [], label=OPEN_LABEL, **_hollow("#555555")))
    if any(len(times) for times in (flagged or {}).values()):
        handles.append(Line2D([], [], label=FLAGGED_LABEL, **_hollow(FAILED_COLOUR)))
    if handles:
        _side_legend(axes, handles)
    return figure_svg(figure, prefix, simplify=len(pivot.index) > EXACT_POINTS)


def _hollow(colour: str) -> dict[str, Any]:
    """The marker of an open window: a large white circle ringed in the line's colour."""
    return {
        "color": colour,
        "linestyle": "none",
        "marker": "o",
        "markersize": 7,
        "markerfacecolor": "white",
        "markeredgewidth": 1.8,
    }


def top_bar_chart(totals: pd.Series, title: str, xlabel: str, prefix: str) -> str:
    """Horizontal bars (index: labels), the first on top, each labelled with its value."""
    figure = _new_figure(height=max(3.0, 0.28 * len(totals) + 1.2))
    axes = figure.add_subplot()
    labels, values = [str(label) for label in totals.index][::-1], list(totals)[::-1]
    bars = axes.barh(labels, values, color=SERIES_COLOURS[0], gid="bars")
    axes.bar_label(bars, labels=[tick_label(v) for v in values], padding=3)
    axes.set_title(title, loc="left", fontsize=12, fontweight="bold")
    axes.set_xlabel(xlabel)
    axes.grid(axis="x", color="#dddddd", linewidth=0.8)
    axes.set_axisbelow(True)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)
    return figure_svg(figure, prefix)


def silver_title(spec: SilverSpec, measure: str) -> str:
    """E.g. "events_action_hourly: count per 1 hour window by action"."""
    by = f" by {', '.join(spec.keys)}" if spec.keys else ""
    if spec.window is None:
        top = f" (top {TOP_BARS})" if spec.keys else ""
        return f"{spec.table}: {measure}{by}{top}"
    slide = f" (sliding by {spec.slide})" if spec.slide else ""
    return f"{spec.table}: {measure} per {spec.window} window{slide}{by}"


def _not_charted(frame: pd.DataFrame | None, spec: SilverSpec, measure: str, dataset: str) -> str:
    """Why the chart of `measure` cannot be drawn ("" when it can)."""
    if frame is None:
        return (
            f"No data yet: silver table {spec.table} does not exist (run `runoff run {dataset}`)."
        )
    missing = [c for c in (*axis_columns(spec), measure) if c not in frame]
    if missing:
        return f"Not charted: {spec.table} has no column {', '.join(missing)}."
    if frame.empty:
        return f"No data yet: {spec.table} has no rows."
    values = numeric(frame[measure])
    if values is None:
        return f"Not charted: {measure} of {spec.table} is not numeric ({frame[measure].dtype})."
    return "" if values.notna().any() else f"No data yet: {spec.table} has no {measure} values."


LISTED_WINDOWS = 3  # open windows a caption names one by one; beyond, their first and last


def _window_span(starts: pd.DatetimeIndex, length: pd.Timedelta) -> str:
    """The open windows as the caption names them: "the open windows 05:00-06:00, ..." (with
    their day), or their number and the first and last start when there are many."""
    if len(starts) > LISTED_WINDOWS:
        first, last = utc_text(starts[0], seconds=False), utc_text(starts[-1], seconds=False)
        return f"the {len(starts)} open windows starting {first} to {last}"
    parts = [f"{utc_text(s, seconds=False)}-{(s + length).strftime('%H:%M')}" for s in starts]
    return f"the open {'window' if len(starts) == 1 else 'windows'} {', '.join(parts)}"


def open_window_note(data: ReportData, spec: SilverSpec, shown: pd.DatetimeIndex) -> str:
    """The caption line naming the open windows of a windowed chart (or why none is known)."""
    mark = watermark_time(data.newest_event, data.watermark)
    if mark is None:
        return (
            f"Open windows not marked: {data.bronze_table} has no newest event time, so the "
            f"watermark is unknown."
        )
    basis = (
        f"newest {data.bronze_table} event {utc_text(naive_utc(data.newest_event))} minus the "
        f"watermark delay {data.watermark} = {utc_text(mark)}"
    )
    if shown.empty:
        return f"Every window shown is closed: each ended by the watermark ({basis})."
    return (
        f"Hollow markers: {_window_span(shown, window_length(spec))} (ending after the "
        f"watermark: {basis}); later rows can still change them."
    )


def silver_chart(
    data: ReportData, frame: pd.DataFrame, spec: SilverSpec, measure: str, prefix: str
) -> Chart:
    """The chart of one measure of a silver table that has rows (see `_not_charted`); its `data`
    is what it plots (windowed: index = window starts on the grid, one column per line)."""
    title = silver_title(spec, measure)
    frame = frame.assign(**{measure: numeric(frame[measure])})
    notes: list[str] = []
    plotted: pd.DataFrame | pd.Series
    if spec.window:
        pivot, left_out = window_series(frame, spec, measure)
        mark = watermark_time(data.newest_event, data.watermark)
        starts = open_windows(pivot.index, window_length(spec), mark)
        svg = line_chart(pivot, title, measure, prefix, starts)
        shown, plotted = len(pivot.columns), pivot
        with_values = pivot.index[pivot.notna().any(axis=1)]
        notes.append(open_window_note(data, spec, starts[starts.isin(with_values)]))
    else:
        totals, left_out = total_bars(frame, spec, measure)
        svg, shown, plotted = top_bar_chart(totals, title, measure, prefix), len(totals), totals
    if left_out:
        notes.insert(
            0,
            f"Shown: the {shown} of {shown + left_out} key combinations with the largest "
            f"total {measure}; {left_out} left out.",
        )
    return Chart(title, svg=svg, notes=tuple(notes), data=plotted)


def silver_charts(data: ReportData) -> list[Chart]:
    """One chart per silver table and measure, in the order of the spec."""
    charts = []
    for spec in data.silver_specs:
        frame = data.silver.get(spec.table)
        for measure in spec.measure_names:
            reason = _not_charted(frame, spec, measure, data.dataset)
            if reason or frame is None:
                charts.append(Chart(silver_title(spec, measure), notes=(reason,)))
            else:
                charts.append(silver_chart(data, frame, spec, measure, f"silver{len(charts)}"))
    return charts


# -- run history ---------------------------------------------------------------------------------
RUN_TITLES = (
    "Rows per run",
    "Seconds per run",
    "Late and quarantined rows per run",
)
PASS_RATE_TITLE = "Quality pass rate per validate run"


def time_range(times: pd.Series) -> tuple[pd.Timestamp, pd.Timestamp]:
    """The x range of the run charts: every run start, padded by 3 % (at least a minute)."""
    low, high = pd.Timestamp(times.min()), pd.Timestamp(times.max())
    pad = max((high - low) * 0.03, pd.Timedelta(minutes=1))
    return low - pad, high + pad


def _failed(status: pd.Series) -> pd.Series:
    return ~status.astype(str).isin(["success", "running"])


# The run charts share one plot area (the legend beside it), so that their time axes line up.
RUN_AXES = {"left": 0.08, "right": 0.8, "bottom": 0.2, "top": 0.9}


def _run_figure() -> Any:
    figure = _new_figure(constrained=False)
    figure.subplots_adjust(**RUN_AXES)
    return figure


def _stems(axes: Any, x: pd.Series, heights: pd.Series, colours: list[str], gid: str) -> None:
    """Vertical lines from 0 to each height at x, the tallest drawn first so that none hides a
    shorter one (runs close in time share a pixel column)."""
    import numpy as np

    values = heights.to_numpy(dtype="float64")
    order = np.argsort(-values, kind="stable")
    times = x.to_numpy()[order]
    axes.vlines(times, 0, values[order], colors=[colours[i] for i in order], linewidth=2, gid=gid)


def runs_stem_chart(
    runs: pd.DataFrame, column: str, title: str, ylabel: str, prefix: str, span: Any
) -> str:
    """One stem per run at its start time (`started_at`, SVG id `stems`), coloured by layer, its
    height the run's `column`, topped by a point (`points-<layer>`); a failed run's point is a
    red cross (`failed`)."""
    from matplotlib.lines import Line2D

    figure = _run_figure()
    axes = figure.add_subplot()
    x, y = runs["started_at"], runs[column]
    layers = runs["layer"].astype(str)
    colours = [LAYER_COLOURS.get(layer, OTHER_COLOUR) for layer in layers]
    _stems(axes, x, y, colours, "stems")
    handles: list[Any] = []
    for layer in dict.fromkeys(layers):
        mine = (layers == layer).to_numpy()
        colour = LAYER_COLOURS.get(layer, OTHER_COLOUR)
        axes.plot(x[mine], y[mine], "o", color=colour, markersize=4, gid=f"points-{layer}")
        handles.append(Line2D([], [], color=colour, marker="o", linewidth=2, label=layer))
    failed = _failed(runs["status"]).to_numpy()
    if failed.any():
        axes.plot(x[failed], y[failed], "X", color=FAILED_COLOUR, markersize=9, gid="failed")
        handles.append(
            Line2D([], [], color=FAILED_COLOUR, marker="X", linestyle="none", label="failed")
        )
    _style_axes(axes, title, ylabel)
    _time_axis(axes, "run start (UTC)")
    axes.set_xlim(*span)
    axes.set_ylim(bottom=0)
    _side_legend(axes, handles)
    return figure_svg(figure, prefix)


LATE_SERIES = (
    ("late_rows", "late", LATE_COLOUR, "o", "late rows"),
    ("quarantined", "quarantined", QUARANTINED_COLOUR, "s", "quarantined rows"),
)


def late_quarantine_chart(runs: pd.DataFrame, prefix: str, span: Any) -> str:
    """Per run, at its start time: rows behind the watermark (late_rows, points with SVG id
    `late`) and quarantined rows (`quarantined`), on stems (`stems`)."""
    from matplotlib.lines import Line2D

    figure = _run_figure()
    axes = figure.add_subplot()
    x = runs["started_at"]
    both = [(column, colour) for column, _, colour, _, _ in LATE_SERIES]
    _stems(
        axes,
        pd.concat([x for _ in both], ignore_index=True),
        pd.concat([runs[column] for column, _ in both], ignore_index=True),
        [colour for _, colour in both for _ in range(len(runs))],
        "stems",
    )
    handles = []
    for column, gid, colour, marker, label in LATE_SERIES:
        axes.plot(x, runs[column], marker, color=colour, markersize=4, gid=gid)
        handles.append(Line2D([], [], color=colour, marker=marker, linewidth=2, label=label))
    _style_axes(axes, RUN_TITLES[2], "rows")
    _time_axis(axes, "run start (UTC)")
    axes.set_xlim(*span)
    axes.set_ylim(bottom=0)
    _side_legend(axes, handles)
    return figure_svg(figure, prefix)


def pass_rate_chart(validations: pd.DataFrame, prefix: str, span: Any) -> str:
    """The percentage of expectations that succeeded per validate run, at its start time: a line
    (SVG id `pass-rate`) through one point per run, green at 100 %, red below (`passed`,
    `below`), each labelled while there are few."""
    from matplotlib.lines import Line2D

    figure = _run_figure()
    axes = figure.add_subplot()
    x = validations["started_at"]
    percent = validations["pass_rate"] * 100
    axes.plot(x, percent, color="#888888", linewidth=1.2, gid="pass-rate")
    full = (percent >= 100).to_numpy()
    axes.plot(x[full], percent[full], "o", color=PASSED_COLOUR, markersize=6, gid="passed")
    axes.plot(x[~full], percent[~full], "o", color=FAILED_COLOUR, markersize=6, gid="below")
    if len(validations) <= LABELS_UP_TO:
        for xi, p in zip(x, percent, strict=True):
            axes.annotate(
                f"{p:.0f}%", (xi, p), xytext=(0, 6), textcoords="offset points", ha="center"
            )
    _style_axes(axes, PASS_RATE_TITLE, "expectations passed (%)")
    _time_axis(axes, "validate run start (UTC)")
    axes.set_xlim(*span)
    axes.set_ylim(0, 112)
    _side_legend(
        axes,
        [
            Line2D([], [], color=PASSED_COLOUR, marker="o", linestyle="none", label="all passed"),
            Line2D([], [], color=FAILED_COLOUR, marker="o", linestyle="none", label="some failed"),
        ],
    )
    return figure_svg(figure, prefix)


def _run_span(data: ReportData, validations: pd.DataFrame | None) -> tuple[Any, Any]:
    times = [data.runs["started_at"]]
    if validations is not None and not validations.empty:
        times.append(validations["started_at"])
    return time_range(pd.concat(times, ignore_index=True).dropna())


def validations(data: ReportData) -> tuple[pd.DataFrame | None, str]:
    """The validate runs of the report (`validation_runs`), or the note saying why there are
    none."""
    if data.quality is None:
        return None, (
            f"No data yet: no quality results table at {data.quality_path} "
            f"(run `runoff validate {data.dataset}`)."
        )
    try:
        runs = validation_runs(data.quality, data.runs, data.dataset)
    except ValueError as exc:
        return None, f"Quality results at {data.quality_path} not charted: {exc}."
    if runs.empty:
        return None, f"No data yet: no validation results for {data.dataset}."
    return runs, ""


def run_charts(data: ReportData) -> list[Chart]:
    """Rows, seconds, late and quarantined rows per run; `data`: the plotted columns, indexed
    by the run start times."""
    if data.runs.empty:
        note = f"No data yet: the run ledger has no runs of {data.dataset}."
        return [Chart(title, notes=(note,)) for title in RUN_TITLES]
    runs = data.runs
    span = _run_span(data, validations(data)[0])
    plotted = runs.set_index("started_at")
    return [
        Chart(
            RUN_TITLES[0],
            svg=runs_stem_chart(runs, "rows", RUN_TITLES[0], "rows", "runs-rows", span),
            data=plotted[["layer", "status", "rows"]],
        ),
        Chart(
            RUN_TITLES[1],
            svg=runs_stem_chart(runs, "seconds", RUN_TITLES[1], "seconds", "runs-secs", span),
            data=plotted[["layer", "status", "seconds"]],
        ),
        Chart(
            RUN_TITLES[2],
            svg=late_quarantine_chart(runs, "runs-late", span),
            data=plotted[["late_rows", "quarantined"]],
        ),
    ]


def quality_charts(data: ReportData) -> list[Chart]:
    runs, note = validations(data)
    if runs is None:
        return [Chart(PASS_RATE_TITLE, notes=(note,))]
    svg = pass_rate_chart(runs, "quality", _run_span(data, runs))
    return [Chart(PASS_RATE_TITLE, svg=svg, data=runs.set_index("started_at")["pass_rate"])]


def metric_charts(data: ReportData) -> list[Chart]:
    """Each committed bronze batch's rows, null shares and event-time lag over its time, the
    values a history expectation found outside their history marked; `data`: the plotted
    columns, indexed by batch time."""
    metrics = data.metrics
    if metrics is None:
        note = (
            f"No data yet: no batch metrics of {data.dataset} at {data.metrics_path} "
            f"(every committed bronze batch records them: `runoff bronze {data.dataset}`)."
        )
        return [Chart(title, notes=(note,)) for title in METRIC_TITLES]
    silver = metrics[metrics["table"] != data.bronze_table]
    metrics = metrics[metrics["table"] == data.bronze_table]
    flagged = flagged_batches(data.quality, metrics)
    nulls = sorted(m for m in metrics["metric"].unique() if m.startswith(NULL_SHARE))
    shares = metric_pivot(metrics, nulls)
    shares = shares.loc[:, (shares.fillna(0) > 0).any()]
    charts = []
    none = f"No bronze batch of {data.dataset} has been measured yet."
    for title, pivot, ylabel, prefix, empty in (
        (METRIC_TITLES[0], metric_pivot(metrics, ROW_METRICS), "rows", "metric-rows", none),
        (
            METRIC_TITLES[1],
            shares,
            "share of rows",
            "metric-nulls",
            f"No bronze column of {data.dataset} had a null in any batch.",
        ),
        (
            METRIC_TITLES[2],
            metric_pivot(metrics, [LAG_METRIC]),
            "seconds",
            "metric-lag",
            f"No batch of {data.dataset} had rows for bronze.",
        ),
    ):
        if pivot.empty or pivot.columns.empty:
            charts.append(Chart(title, notes=(empty,)))
            continue
        times = {
            str(column): pd.Index(flagged.loc[flagged["metric"] == column, "batch_time"])
            for column in pivot.columns
        }
        labelled = pivot.rename(columns=lambda c: str(c).removeprefix(NULL_SHARE))
        marks = {str(c).removeprefix(NULL_SHARE): t for c, t in times.items()}
        svg = line_chart(labelled, title, ylabel, prefix, xlabel="batch time (UTC)", flagged=marks)
        charts.append(Chart(title, svg=svg, data=pivot))
    charts.append(silver_batch_chart(data.dataset, silver))
    return charts


def silver_batch_chart(dataset: str, metrics: pd.DataFrame) -> Chart:
    """Rows merged and late rows of every committed silver batch, a line each per table, at the
    batch's last window start."""
    title = METRIC_TITLES[3]
    wanted = metrics[metrics["metric"].isin(SILVER_ROWS)]
    if wanted.empty:
        return Chart(title, notes=(f"No silver batch of {dataset} has been measured yet.",))
    named = wanted.assign(
        metric=wanted["table"] + " " + wanted["metric"].map(SILVER_ROWS),
        batch_id=wanted["table"] + " " + wanted["batch_id"].astype(str),
    )
    pivot = metric_pivot(named, sorted(named["metric"].unique()))
    svg = line_chart(
        pivot, title, "rows", "metric-silver", xlabel="last window start (UTC)", gaps=False
    )
    return Chart(title, svg=svg, data=pivot)
