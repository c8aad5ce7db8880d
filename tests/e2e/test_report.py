"""`runoff report`: the HTML page, its charts in a real browser, and the numbers behind them.

The home is built with delta-rs directly (silver table, bronze, quarantine, run ledger, quality
results), so the expected chart contents are computed here in plain Python from the same rows.
Plotted points are read back from the SVG: one affine map must take every (time, value) to its
point. The Data Docs links are checked against a home validated by `runoff validate`.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from html import unescape
from pathlib import Path
from urllib.parse import unquote

import pandas as pd
import pyarrow as pa
import pytest
from deltalake import write_deltalake

from core.config import RunoffConfig
from core.specs import interval_seconds
from delta_tables.catalog import Catalog
from delta_tables.ledger import RunRecord, append_run
from jobs.cli.main import main
from jobs.report.build import write_report
from jobs.report.charts import (
    FLAGGED_LABEL,
    LAYER_COLOURS,
    METRIC_TITLES,
    OPEN_LABEL,
    PASS_RATE_TITLE,
    RUN_TITLES,
    SERIES_COLOURS,
    metric_charts,
    quality_charts,
    run_charts,
    silver_charts,
)
from jobs.report.data import (
    DATA_DOCS_SITE,
    gate_totals,
    load_report_data,
    quality_pass_rate,
    report_path,
)
from jobs.report.page import render_report
from quality.history import MetricRow, ResultRow, append_metrics, append_results
from tests.browser import assert_not_blank, dump_dom, screenshot
from tests.quality_tables import (
    action_counts,
    append,
    append_bronze,
    bronze_events,
    hourly,
    open_close_events,
    quarantine_rows,
)

START = datetime(2024, 1, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)
HOURLY_TITLE = "events_action_hourly: count per 1 hour window by action"
SLIDING_TITLE = (
    "events_action_sliding: count per 10 minutes window (sliding by 5 minutes) by action"
)
ALL_RUN_TITLES = (*RUN_TITLES, PASS_RATE_TITLE)
# The silver chart titles of the seed datasets: one per silver table and measure.
SILVER_TITLES = {
    "events": [HOURLY_TITLE, SLIDING_TITLE],
    "sensors": [
        "sensors_device_counts: count per 5 seconds window by deviceId",
        "sensors_type_signal: count per 1 minute window by deviceType",
        "sensors_type_signal: min_signal per 1 minute window by deviceType",
        "sensors_type_signal: max_signal per 1 minute window by deviceType",
        "sensors_type_signal: avg_signal per 1 minute window by deviceType",
        "sensors_lost_signal: count per 1 minute window by deviceId, deviceType",
    ],
    "activity": [
        f"activity_user_minute: {m} per 1 minute window by User, gt"
        for m in ("count", "mean_x", "mean_y", "mean_z")
    ],
    "lines": ["lines_word_counts: count by word (top 20)"],
}
# Run start offsets from START: minutes apart, then hours, then days (a real time axis).
RUN_OFFSETS = (
    timedelta(0),
    timedelta(minutes=1),
    timedelta(minutes=2),
    timedelta(hours=5),
    timedelta(hours=5, minutes=1),
    timedelta(days=2),
)
RUN_LAYERS = ("bronze", "silver", "validate", "bronze", "silver", "validate")
# Quarantine reasons of the events home, with their row counts.
REASONS = {
    "unparseable JSON": 7,
    "wrong type: time (bigint)": 4,
    "rule failed: known_action": 4,
    "<b>missing</b> event time & more": 1,  # escaped on the page
}


@dataclass(frozen=True)
class EventsHome:
    config: RunoffConfig
    events: list[tuple[datetime, str]]
    runs: list[RunRecord]
    quality_rows: list[dict[str, object]]
    errors: list[str]


def hour_of(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def naive(moment: datetime) -> pd.Timestamp:
    return pd.Timestamp(moment).tz_convert(UTC).tz_localize(None)


def watermark(config: RunoffConfig, dataset: str) -> timedelta:
    """The dataset's watermark delay, from its spec."""
    return timedelta(seconds=interval_seconds(Catalog.load(config).spec(dataset).watermark))


def make_events(n_events: int = 600) -> list[tuple[datetime, str]]:
    """Events in hours 0-2 and 4-5 (none in hour 3), no Close in hour 5, and the newest event at
    06:05:00: the watermark (06:05 - 1 hour) has closed neither hour 5 nor hour 6."""
    rng = random.Random(11)
    events = []
    for _ in range(n_events):
        hour = rng.choice([0, 1, 2, 4, 5])
        action = "Open" if hour == 5 else rng.choice(["Open", "Close"])
        events.append((START + timedelta(hours=hour, seconds=rng.randrange(3600)), action))
    events += [(START + timedelta(hours=6, minutes=m), "Close") for m in (0, 2, 5)]
    return events


def build_events_home(config: RunoffConfig) -> EventsHome:
    """A home as a few runs of the events pipeline leave it, written with delta-rs."""
    events = make_events()
    counts = Counter((hour_of(t), action) for t, action in events)
    rows = [hourly_row(w, a, n) for (w, a), n in sorted(counts.items())]
    append(config.silver_path("events_action_hourly"), action_counts(rows))
    times = [int(t.timestamp()) for t, _ in events]
    append_bronze(config.bronze_path("events"), bronze_events(times, [a for _, a in events]))
    errors = [reason for reason, n in REASONS.items() for _ in range(n)]
    quarantine = quarantine_rows(len(errors)).set_column(1, "_error", pa.array(errors))
    append(config.quarantine_path("events"), quarantine)

    runs = []
    for i, (layer, offset) in enumerate(zip(RUN_LAYERS, RUN_OFFSETS, strict=True)):
        record = RunRecord(dataset="events", layer=layer, started_at=START + offset)
        record.rows, record.late_rows, record.quarantined = 100 * (i + 1), i, 2 * i
        record.finish("failed" if i == 4 else "success", "boom" if i == 4 else None)
        record.ended_at = record.started_at + timedelta(seconds=2 + i)
        append_run(config.runs_path, record)
        runs.append(record)
    other = RunRecord(dataset="sensors", layer="bronze", started_at=START).finish()
    append_run(config.runs_path, other)

    # The two validate runs of the ledger (the first fails 2 of 5 expectations), one more that
    # the ledger does not have, and one of sensors.
    validate = [r.run_id for r in runs if r.layer == "validate"]
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
            success=not (run_id == validate[0] and j < 2),
            observed="",
            from_version=None,
            to_version=k,
            full=True,
            rows=100,
            table_passed=run_id != validate[0],
            validated_at=START + timedelta(days=3, hours=k),
        )
        for k, (run_id, dataset) in enumerate(
            [(validate[0], "events"), (validate[1], "events"), ("s0", "sensors"), ("v9", "events")]
        )
        for j in range(5)
    ]
    append_results(config.quality_dir / "results", results)
    quality_rows: list[dict[str, object]] = [asdict(r) for r in results]
    return EventsHome(config, events, runs, quality_rows, errors)


def hourly_row(start: datetime, action: str, n: int) -> tuple[datetime, datetime, str, int]:
    return (start, start + HOUR, action, n)


# -- reading the SVG ------------------------------------------------------------------------------
def chart_svgs(dom: str) -> dict[str, str]:
    """Each inline chart of the page by its `data-chart` name."""
    pattern = r'<svg class="chart" data-chart="([^"]+)".*?</svg>'
    return {m.group(1): m.group(0) for m in re.finditer(pattern, dom, re.S)}


def group(svg: str, gid: str) -> str:
    """The SVG group of artist `gid` (its id on the page is `<chart>-<gid>`), nested groups
    included; "" when there is none."""
    (chart,) = re.findall(r'data-chart="([^"]+)"', svg)[:1]
    start = svg.find(f'<g id="{chart}-{gid}">')
    if start < 0:
        return ""
    depth, position = 0, start
    for tag in re.finditer(r"<g\b|</g>", svg[start:]):
        depth += 1 if tag.group(0) == "<g" else -1
        if depth == 0:
            position = start + tag.end()
            break
    return svg[start:position]


def path_segments(svg: str, gid: str) -> list[list[tuple[float, float]]]:
    """The first path of group `gid` as its segments (a move starts one), in drawing order."""
    (d,) = re.findall(r'<path d="([^"]+)"', group(svg, gid))[:1]
    segments: list[list[tuple[float, float]]] = []
    for command, x, y in re.findall(r"([ML]) (\S+) (\S+)", d):
        if command == "M":
            segments.append([])
        segments[-1].append((float(x), float(y)))
    return segments


def markers(svg: str, gid: str) -> list[tuple[float, float, str]]:
    """The markers of group `gid`: x, y and fill colour."""
    found = re.findall(
        r'<use xlink:href="[^"]+" x="(\S+)" y="(\S+)" style="fill: (#\w+)', group(svg, gid)
    )
    return [(float(x), float(y), fill) for x, y, fill in found]


def stems(svg: str, gid: str) -> list[tuple[float, float, float, str]]:
    """The vertical lines of group `gid`: x, y of the base, y of the top, colour."""
    found = re.findall(
        r'<path d="M (\S+) (\S+) \nL (\S+) (\S+) \n" clip-path="[^"]+" style="fill: none; '
        r"stroke: (#\w+)",
        group(svg, gid),
    )
    assert all(x0 == x1 for x0, _, x1, _, _ in found)
    return [(float(x0), float(y0), float(y1), colour) for x0, y0, _, y1, colour in found]


def texts(svg: str) -> list[str]:
    """The chart's texts in drawing order (ticks, axis labels, title, legend, labels)."""
    return [unescape(t) for t in re.findall(r">([^<]+)</text>", svg)]


def plot_area(svg: str) -> tuple[float, float, float, float]:
    """The axes' clip rectangle: left, top, width, height."""
    (rect,) = re.findall(
        r'<clipPath id="[^"]+">\s*<rect x="([^"]+)" y="([^"]+)" width="([^"]+)" '
        r'height="([^"]+)"',
        svg,
    )
    left, top, width, height = map(float, rect)
    return left, top, width, height


def affine_map(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    """Asserts one affine map takes every value to its coordinate ((value, coordinate) pairs);
    returns it: (slope, coordinate of value 0)."""
    low, high = min(pairs), max(pairs)
    assert high[0] > low[0], "need two distinct values to fix the map"
    slope = (high[1] - low[1]) / (high[0] - low[0])
    for value, coordinate in pairs:
        assert coordinate == pytest.approx(low[1] + slope * (value - low[0]), abs=2e-3)
    return slope, low[1] - slope * low[0]


def affine_slope(pairs: list[tuple[float, float]]) -> float:
    return affine_map(pairs)[0]


def time_span(svg: str, xs: list[tuple[float, float]]) -> tuple[float, float]:
    """The times (epoch seconds) at the left and right edges of the plot, from the affine map
    that `xs` ((time, x) pairs) must follow."""
    slope, offset = affine_map(xs)
    assert slope > 0  # later to the right
    left, _, width, _ = plot_area(svg)
    return (left - offset) / slope, (left + width - offset) / slope


def runs_of_hours(hours: list[int]) -> list[list[int]]:
    """Consecutive hours grouped: [0, 1, 2, 4] -> [[0, 1, 2], [4]]."""
    out: list[list[int]] = []
    for hour in sorted(hours):
        if out and out[-1][-1] == hour - 1:
            out[-1].append(hour)
        else:
            out.append([hour])
    return out


def assert_lines(svg: str, expected: dict[str, list[tuple[datetime, float]]]) -> None:
    """The chart draws exactly `expected` (label -> (window start, value) oldest first) and no
    window is open: one line per label in label order, coloured in turn and named so in the
    legend, every point where the axes' one time and value scale put it, inside the plot."""
    labels = sorted(expected)
    assert texts(svg)[-len(labels) :] == labels
    xs: list[tuple[float, float]] = []
    ys: list[tuple[float, float]] = []
    for i, label in enumerate(labels):
        assert f'style="fill: none; stroke: {SERIES_COLOURS[i]}' in group(svg, f"line-{i}")
        points = [p for segment in path_segments(svg, f"line-{i}") for p in segment]
        assert len(points) == len(expected[label]), label
        for (start, value), (x, y) in zip(expected[label], points, strict=True):
            xs.append((start.timestamp(), x))
            ys.append((value, y))
    assert affine_slope(xs) > 0  # later windows to the right
    assert affine_slope(ys) < 0  # larger values higher up
    left, top, width, height = plot_area(svg)
    assert all(left - 1e-3 <= x <= left + width + 1e-3 for _, x in xs)
    assert all(top - 1e-3 <= y <= top + height + 1e-3 for _, y in ys)
    assert "open-0" not in svg


def link_targets(page: str, report: Path) -> list[tuple[str, Path]]:
    """Every link of the page: its text and the file it points at."""
    found = re.findall(r'<a href="([^"]+)"[^>]*>([^<]+)</a>', page)
    return [(unescape(text), (report.parent / unquote(href)).resolve()) for href, text in found]


# -- the page -----------------------------------------------------------------------------------
def test_report_reads_the_home(config: RunoffConfig) -> None:
    home = build_events_home(config)

    data = load_report_data(config, "events")

    tables = {t.name: (t.version, t.rows) for t in data.tables}
    distinct = len(Counter((hour_of(t), a) for t, a in home.events))
    assert tables == {
        "bronze_events": (0, len(home.events)),
        "quarantine_events": (0, len(home.errors)),
        "events_action_hourly": (0, distinct),
        "events_action_sliding": (None, None),
    }
    # Freshness: bronze's newest event (the watermark's base), a windowed silver table's last
    # window end.
    newest = {t.name: t.newest_event for t in data.tables}
    assert newest["bronze_events"] == data.newest_event == max(t for t, _ in home.events)
    assert newest["events_action_hourly"] == max(hour_of(t) for t, _ in home.events) + HOUR
    assert all(t.last_commit is not None for t in data.tables if t.version is not None)
    assert list(data.runs["layer"]) == [r.layer for r in home.runs]
    assert list(data.runs["rows"]) == [r.rows for r in home.runs]
    assert list(data.runs["started_at"]) == [naive(r.started_at) for r in home.runs]
    # Only the columns the charts need (the table also has window_end).
    hourly_frame = data.silver["events_action_hourly"]
    assert hourly_frame is not None
    assert list(hourly_frame.columns) == ["window_start", "action", "count"]
    assert data.silver["events_action_sliding"] is None
    # The quarantine's reasons, counted from its rows.
    assert data.quarantine is not None
    counts = Counter(home.errors)
    assert dict(zip(data.quarantine["reason"], data.quarantine["rows"], strict=True)) == counts
    assert list(data.quarantine["reason"]) == sorted(counts, key=lambda r: (-counts[r], r))
    assert data.docs_index is None and data.docs_pages == {}  # never validated by GX
    page = render_report(data)
    for t in data.tables:  # freshness is on the page
        if t.newest_event is not None:
            assert f'<td class="time">{t.newest_event:%Y-%m-%d %H:%M:%S}</td>' in page


def test_silver_charts_follow_the_spec(config: RunoffConfig) -> None:
    """An empty home: one chart (a note for now) per silver table and measure, titled from the
    spec, besides the run and quality charts."""
    catalog = Catalog.load(config)
    for dataset, titles in SILVER_TITLES.items():
        data = load_report_data(config, dataset)

        charts = silver_charts(data)

        assert [c.title for c in charts] == titles
        assert len(charts) == sum(len(s.measures) for s in catalog.spec(dataset).silver)
        assert [c.notes for c in charts] == [
            (
                f"No data yet: silver table {t.split(':')[0]} does not exist "
                f"(run `runoff run {dataset}`).",
            )
            for t in titles
        ]
        figures = len(titles) + len(ALL_RUN_TITLES) + len(METRIC_TITLES)
        assert render_report(data).count("<figure ") == figures


def test_windowed_chart_breaks_at_gaps_and_marks_open_windows(config: RunoffConfig) -> None:
    home = build_events_home(config)
    data = load_report_data(config, "events")

    chart = silver_charts(data)[0]
    page = render_report(data)

    counts = Counter((hour_of(t), a) for t, a in home.events)
    hours = {a: sorted((w - START) // HOUR for w, b in counts if b == a) for a in ("Close", "Open")}
    assert hours == {"Close": [0, 1, 2, 4, 6], "Open": [0, 1, 2, 4, 5]}
    # Open: the windows whose end is after the newest event minus the watermark, exactly.
    mark = max(t for t, _ in home.events) - watermark(config, "events")
    present = sorted({w for w, _ in counts})
    open_hours = [(w - START) // HOUR for w in present if w + HOUR > mark]
    assert open_hours == [5, 6]
    # The plotted data: the missing hour 3 is a NaN row (the window grid), and so is Close's 5.
    plotted = chart.data
    assert list(plotted.columns) == ["action=Close", "action=Open"]
    assert list(plotted.index) == [naive(START + h * HOUR) for h in range(7)]
    assert plotted.isna().to_dict("list") == {
        "action=Close": [h not in hours["Close"] for h in range(7)],
        "action=Open": [h not in hours["Open"] for h in range(7)],
    }
    svg = chart_svgs(page)["silver0"]
    xs: list[tuple[float, float]] = []
    ys: list[tuple[float, float]] = []
    for i, action in enumerate(("Close", "Open")):
        # One line per run of consecutive windows: hour 3 breaks both lines, hour 5 Close's.
        segments = path_segments(svg, f"line-{i}")
        assert [len(s) for s in segments] == [len(r) for r in runs_of_hours(hours[action])]
        points = [p for s in segments for p in s]
        xs += [
            ((START + h * HOUR).timestamp(), x)
            for h, (x, _) in zip(hours[action], points, strict=True)
        ]
        ys += [
            (counts[START + h * HOUR, action], y)
            for h, (_, y) in zip(hours[action], points, strict=True)
        ]
        # The open windows: large hollow markers on the line's points.
        hollow = markers(svg, f"open-{i}")
        shown_open = [h for h in hours[action] if h in open_hours]
        assert [fill for _, _, fill in hollow] == ["#ffffff"] * len(shown_open)
        assert [(x, y) for x, y, _ in hollow] == [
            points[hours[action].index(h)] for h in shown_open
        ]
    assert affine_slope(xs) > 0 and affine_slope(ys) < 0  # one time and one value scale
    # Open is named in the legend and the caption.
    assert texts(svg)[-3:] == ["action=Close", "action=Open", OPEN_LABEL]
    assert chart.notes == (
        "Hollow markers: the open windows 2024-01-01 05:00-06:00, 2024-01-01 06:00-07:00 "
        "(ending after the watermark: newest bronze_events event 2024-01-01 06:05:00 minus the "
        "watermark delay 1 hour = 2024-01-01 05:05:00); later rows can still change them.",
    )
    assert chart.notes[0] in page
    # The sliding table was never written: a note takes the place of its chart.
    note = (
        "No data yet: silver table events_action_sliding does not exist (run `runoff run events`)."
    )
    assert f'<h3>{SLIDING_TITLE}</h3>\n<p class="note">{note}</p>' in page


def test_sliding_windows_open_by_the_watermark(config: RunoffConfig) -> None:
    """10-minute windows sliding by 5 minutes: every window ending after the watermark is open
    (more than the last one), and a missing slide slot breaks the line."""
    ten, five = timedelta(minutes=10), timedelta(minutes=5)
    starts = [START + k * five for k in range(20) if k != 3]  # slot 3 missing
    rows = [(s, s + ten, "Open", 1 + k) for k, s in enumerate(starts)]
    append(config.silver_path("events_action_sliding"), action_counts(rows))
    newest = START + timedelta(minutes=97, seconds=30)
    append_bronze(config.bronze_path("events"), bronze_events([int(newest.timestamp())], ["Open"]))

    data = load_report_data(config, "events")
    chart = silver_charts(data)[1]

    open_starts = [s for s in starts if s + ten > newest - watermark(config, "events")]
    assert len(open_starts) == 14
    svg = chart.svg or ""
    assert [len(s) for s in path_segments(svg, "line-0")] == [3, len(starts) - 3]
    assert len(markers(svg, "open-0")) == len(open_starts)
    assert chart.data.loc[naive(START + 3 * five)].isna().all()
    first, last = f"{open_starts[0]:%Y-%m-%d %H:%M}", f"{open_starts[-1]:%Y-%m-%d %H:%M}"
    assert chart.notes[0].startswith(
        f"Hollow markers: the 14 open windows starting {first} to {last} ("
    )


def write_activity_minutes(config: RunoffConfig) -> list[dict[str, object]]:
    """activity_user_minute rows: 4 users x 4 activities, each present in about 60% of 10
    minutes, means of both signs."""
    rng = random.Random(5)
    rows: list[dict[str, object]] = []
    for minute in range(10):
        start = START + timedelta(minutes=minute)
        for user in "abcd":
            for gt in ("bike", "sit", "stand", "walk"):
                if rng.random() < 0.6:
                    means = {f"mean_{c}": round(rng.uniform(-5, 5), 3) for c in "xyz"}
                    rows.append(
                        {
                            "window_start": start,
                            "window_end": start + timedelta(minutes=1),
                            "User": user,
                            "gt": gt,
                            "count": rng.randint(1, 200),
                            **means,
                            "window_date": start.date(),
                        }
                    )
    write_deltalake(str(config.silver_path("activity_user_minute")), pa.Table.from_pylist(rows))
    return rows


def test_many_key_combinations_draw_the_largest_eight(config: RunoffConfig) -> None:
    """Without bronze there is no watermark: no window is marked open."""
    rows = write_activity_minutes(config)

    data = load_report_data(config, "activity")
    charts = silver_charts(data)
    page = render_report(data)

    assert [c.title for c in charts] == SILVER_TITLES["activity"]
    svgs = chart_svgs(page)
    for i, measure in enumerate(("count", "mean_x", "mean_y", "mean_z")):
        points: dict[str, list[tuple[datetime, float]]] = defaultdict(list)
        for row in rows:
            label = f"User={row['User']}, gt={row['gt']}"
            points[label].append((row["window_start"], row[measure]))  # type: ignore[arg-type]
        ranked = sorted(points, key=lambda k: (-math.fsum(v for _, v in points[k]), k))
        assert_lines(svgs[f"silver{i}"], {label: points[label] for label in ranked[:8]})
        note = (
            f"Shown: the 8 of {len(points)} key combinations with the largest total {measure}; "
            f"{len(points) - 8} left out."
        )
        unknown = (
            "Open windows not marked: bronze_activity has no newest event time, so the "
            "watermark is unknown."
        )
        assert charts[i].notes == (note, unknown)
        assert f'<figcaption class="note"><span>{note}</span><span>{unknown}</span>' in page
    assert len(points) == 16


def test_running_totals_draw_the_top_twenty(config: RunoffConfig) -> None:
    rng = random.Random(7)
    words = {"".join(rng.choice("abcdefgh") for _ in range(rng.randint(2, 5))) for _ in range(40)}
    counts = {word: rng.randint(1, 50) for word in sorted(words)}
    rows = [{"word": word, "count": n} for word, n in counts.items()]
    write_deltalake(str(config.silver_path("lines_word_counts")), pa.Table.from_pylist(rows))

    (chart,) = silver_charts(load_report_data(config, "lines"))

    ranked = sorted(((f"word={w}", n) for w, n in counts.items()), key=lambda r: (-r[1], r[0]))
    top = ranked[:20]
    shown = texts(chart.svg or "")
    assert shown[-1] == chart.title == "lines_word_counts: count by word (top 20)"
    assert shown[-41:-21] == [label for label, _ in reversed(top)]  # the y axis, bottom up
    assert shown[-21:-1] == [str(n) for _, n in reversed(top)]  # the bar labels, bottom up
    bars_drawn = re.findall(
        r'<path d="M (\S+) \S+ \nL (\S+) \S+ [^"]+" clip-path="[^"]+" style="fill: #1f6fb4"',
        chart.svg or "",
    )
    assert len(bars_drawn) == 20
    ends = [(0.0, float(x0)) for x0, _ in bars_drawn]
    ends += [
        (float(n), float(x1)) for (_, n), (_, x1) in zip(reversed(top), bars_drawn, strict=True)
    ]
    assert affine_slope(ends) > 0  # bar lengths proportional to the counts, from 0
    assert chart.notes == (
        f"Shown: the 20 of {len(rows)} key combinations with the largest total count; "
        f"{len(rows) - 20} left out.",
    )


def test_run_history_is_plotted_against_start_times(config: RunoffConfig) -> None:
    home = build_events_home(config)
    data = load_report_data(config, "events")

    charts = run_charts(data)
    (quality,) = quality_charts(data)

    starts = [naive(r.started_at) for r in home.runs]
    assert [c.title for c in charts] == list(RUN_TITLES)
    for chart in charts:
        assert list(chart.data.index) == starts
    assert list(charts[0].data["rows"]) == [r.rows for r in home.runs]
    assert list(charts[1].data["seconds"]) == [r.seconds for r in home.runs]
    # The SVG: one point per run, x = its start time on one time scale per chart (runs minutes
    # apart are close, days apart far apart), y = its value, on a stem from 0 (taller stems
    # first: none hides a shorter one); the same time range on all four charts.
    spans = []
    for chart, series in (
        (charts[0], [(f"points-{r.layer}", r, r.rows) for r in home.runs]),
        (charts[1], [(f"points-{r.layer}", r, r.seconds) for r in home.runs]),
        (
            charts[2],
            [("late", r, r.late_rows) for r in home.runs]
            + [("quarantined", r, r.quarantined) for r in home.runs],
        ),
    ):
        svg = chart.svg or ""
        by_gid: dict[str, list[tuple[RunRecord, float]]] = defaultdict(list)
        for gid, run, value in series:
            by_gid[gid].append((run, value))
        xs, ys, tops = [], [], []
        for gid, expected in by_gid.items():
            drawn = markers(svg, gid)
            assert len(drawn) == len(expected), gid
            for (run, value), (x, y, _) in zip(expected, drawn, strict=True):
                xs.append((run.started_at.timestamp(), x))
                ys.append((value, y))
                tops.append((round(x, 3), round(y, 3)))
        spans.append(time_span(svg, xs))
        drawn_stems = stems(svg, "stems")
        assert Counter((round(x, 3), round(y1, 3)) for x, _, y1, _ in drawn_stems) == Counter(tops)
        assert affine_map([*ys, *((0, y0) for _, y0, _, _ in drawn_stems)])[0] < 0
        heights = [y0 - y1 for _, y0, y1, _ in drawn_stems]
        assert heights == sorted(heights, reverse=True)
    colours = [c for *_, c in stems(charts[0].svg or "", "stems")]
    assert Counter(colours) == Counter(LAYER_COLOURS[r.layer] for r in home.runs)
    failed = markers(charts[0].svg or "", "failed")
    assert len(failed) == sum(r.status == "failed" for r in home.runs) == 1
    # The pass rate per validate run, at the run's start (the ledger's; the history's time for
    # a run the ledger does not have).
    validate = [r for r in home.runs if r.layer == "validate"]
    mine = [r for r in home.quality_rows if r["dataset"] == "events"]
    run_ids = [r.run_id for r in validate] + ["v9"]
    expected = [
        sum(bool(r["success"]) for r in mine if r["run_id"] == run)
        / sum(1 for r in mine if r["run_id"] == run)
        for run in run_ids
    ]
    v9_at = min(r["validated_at"] for r in mine if r["run_id"] == "v9")
    times = [r.started_at for r in validate] + [v9_at]
    assert list(quality.data.index) == [naive(t) for t in times]  # type: ignore[arg-type]
    assert list(quality.data) == expected == [0.6, 1.0, 1.0]
    svg = quality.svg or ""
    points = [p for s in path_segments(svg, "pass-rate") for p in s]
    xs = [(t.timestamp(), x) for t, (x, _) in zip(times, points, strict=True)]  # type: ignore[attr-defined]
    spans.append(time_span(svg, xs))
    ys = [(100 * rate, y) for rate, (_, y) in zip(expected, points, strict=True)]
    assert affine_map(ys)[0] < 0
    assert re.findall(r">(\d+%)</text>", svg) == ["60%", "100%", "100%"]
    assert len(markers(svg, "below")) == 1 and len(markers(svg, "passed")) == 2
    # Every run (and the history-only validation v9) inside one range shared by the charts.
    low, high = spans[0]
    assert all(s == (pytest.approx(low, abs=1), pytest.approx(high, abs=1)) for s in spans)
    assert low < START.timestamp() and high > max(t.timestamp() for t in times)  # type: ignore[attr-defined]


def test_quality_pass_rate_per_validation(config: RunoffConfig) -> None:
    home = build_events_home(config)
    frame = pd.DataFrame(home.quality_rows)

    rates = quality_pass_rate(frame, "events")

    mine = [r for r in home.quality_rows if r["dataset"] == "events"]
    expected = {
        run: sum(1 for r in mine if r["run_id"] == run and r["success"])
        / sum(1 for r in mine if r["run_id"] == run)
        for run in dict.fromkeys(str(r["run_id"]) for r in mine)
    }
    assert list(rates["run_id"]) == list(expected)
    assert dict(zip(rates["run_id"], rates["pass_rate"], strict=True)) == expected


def test_quarantine_reasons_are_counted_and_escaped(config: RunoffConfig) -> None:
    home = build_events_home(config)

    page = render_report(load_report_data(config, "events"))

    table = page[page.index('<table class="reasons">') :]
    table = table[: table.index("</table>")]
    found = re.findall(
        r'<tr><td>([^<]*)</td><td class="num">([\d,]+)</td><td class="num">([\d.]+) %</td>',
        table,
    )
    counts = Counter(home.errors)
    ranked = sorted(counts, key=lambda r: (-counts[r], r))
    total = len(home.errors)
    assert [(unescape(r), int(n), float(s)) for r, n, s in found] == [
        (r, counts[r], round(100 * counts[r] / total, 1)) for r in ranked
    ]
    assert "&lt;b&gt;missing&lt;/b&gt; event time &amp; more" in table  # autoescaped
    assert "<b>" not in page
    assert f'<th class="num">{total}</th>' in table


def validated_home(config: RunoffConfig) -> tuple[list[str], list[dict[str, object]]]:
    """A home validated twice by `runoff validate` (the second run fails its quarantine share):
    the run ids and the history rows."""
    from quality.history import read_results
    from quality.runner import validate_dataset

    start = 1_709_251_200  # 2024-03-01T00:00:00Z
    append_bronze(config.bronze_path("events"), open_close_events(start, 3))
    append(
        config.silver_path("events_action_hourly"),
        action_counts([hourly(0, "Open", 3), hourly(0, "Close", 3)]),
    )
    first = validate_dataset(config, "events")
    append_bronze(config.bronze_path("events"), open_close_events(start + 3600, 1, batch_id=1))
    append(config.quarantine_path("events"), quarantine_rows(5, batch_id=1))
    second = validate_dataset(config, "events")
    assert first.passed and not second.passed
    history = read_results(config.quality_dir / "results", "events")
    return [first.run_id, second.run_id], history


def test_each_validate_run_links_its_data_docs_pages(config: RunoffConfig) -> None:
    from quality.project import data_docs_index

    run_ids, history = validated_home(config)
    report = write_report(config, "events")
    page = report.read_text(encoding="utf-8")

    index = data_docs_index(config.quality_dir)
    assert index == config.quality_dir / DATA_DOCS_SITE / "index.html"
    site = index.parent
    links = link_targets(page, report)
    assert ("index of every validation", index.resolve()) in links
    for table in ('<table class="runs">', '<table class="validations">'):
        rows = page[page.index(table) :]
        rows = rows[: rows.index("</table>")]
        for run_id in run_ids:
            (row,) = [r for r in rows.split("<tr>") if f"<code>{run_id[:8]}</code>" in r]
            targets = link_targets(row, report)
            suites = {str(r["suite"]) for r in history if r["run_id"] == run_id and r["suite"]}
            failed = {
                str(r["suite"]) for r in history if r["run_id"] == run_id and not r["success"]
            }
            # One page per suite the run validated, the run's own (its GX run name), existing.
            assert sorted(text for text, _ in targets) == sorted(suites)
            for suite, target in targets:
                assert target.is_file()
                relative = target.relative_to(site.resolve()).parts
                assert relative[:3] == ("validations", suite, f"events-{run_id[:8]}")
                assert target.suffix == ".html"
            assert {s for s in suites if f'class="failed">{s}</a>' in row} == failed
    assert failed  # the second run failed a suite
    hrefs = re.findall(r'<a href="([^"]+)"', page)
    assert hrefs and all(h.startswith("../quality/") for h in hrefs)  # relative links


def test_report_page_is_self_contained(config: RunoffConfig) -> None:
    build_events_home(config)

    page = render_report(load_report_data(config, "events"))

    assert page.startswith("<!DOCTYPE html>")
    assert page.count('<svg class="chart"') == 1 + len(ALL_RUN_TITLES)
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
    page = Path(out).read_text(encoding="utf-8")
    assert page.count('<svg class="chart"') == 1 + len(ALL_RUN_TITLES)


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
    for title in (HOURLY_TITLE, *ALL_RUN_TITLES):
        assert f">{title}</text>" in dom, title
    # Both lines broken at hour 3 (Close also at hour 5), both with their open windows.
    assert len(path_segments(charts["silver0"], "line-0")) == 3
    assert len(markers(charts["silver0"], "open-1")) == 1
    assert f"<h3>{SLIDING_TITLE}</h3>" in dom
    for name in ("runs-rows", "runs-secs"):
        assert len(stems(charts[name], "stems")) == len(home.runs)
    assert "boom" in dom  # the failed run's error is listed
    assert re.findall(r"<h2>([^<]+)</h2>", dom) == [
        "Tables",
        "Silver aggregates",
        "Runs",
        "Bronze batches",
        "Data quality",
    ]

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
        "Bronze batches",
        "Data quality",
    ]
    titles = re.findall(r"<h3>([^<]+)</h3>", dom)
    assert titles == [
        *SILVER_TITLES["sensors"],
        *RUN_TITLES,
        *METRIC_TITLES,
        PASS_RATE_TITLE,
        "Quarantine: rows by reason",
    ]
    assert dom.count("No data yet") == len(titles)
    assert dom.count("no data yet") == 5  # bronze, quarantine and three silver tables
    assert "<a " not in dom
    assert_not_blank(png, min_colours=4, min_ink=0.01)


def gate_row(
    batch: int, expectation: str, severity: str, counts: tuple[int, int], hour: int
) -> ResultRow:
    evaluated, failed = counts
    return ResultRow(
        run_id=f"b{batch}",
        dataset="events",
        table="bronze_events",
        table_id="t1",
        layer="bronze",
        suite=f"bronze_events_batch {batch}",
        expectation=expectation,
        severity=severity,
        success=failed == 0,
        observed="",
        from_version=0,
        to_version=1,
        full=False,
        rows=evaluated,
        table_passed=not (failed and severity == "critical"),
        validated_at=START + timedelta(hours=hour),
        batch_id=batch,
        evaluated=evaluated,
        failed=failed,
        quarantined=failed if severity == "quarantine" else 0,
    )


def test_the_gate_table_adds_up_every_batch_per_expectation(config: RunoffConfig) -> None:
    """The quality gate's per-batch rows, totalled per expectation (most failed first); the pass
    rate chart stays per validate run."""
    build_events_home(config)
    gate = [
        gate_row(0, "known_store", "quarantine", (10, 2), 1),
        gate_row(1, "known_store", "quarantine", (5, 1), 2),
        gate_row(2, "known_store", "quarantine", (7, 0), 3),
        gate_row(2, "column_values_to_be_between(amount)", "critical", (7, 1), 3),
    ]
    append_results(config.quality_dir / "results", gate)

    data = load_report_data(config, "events")
    assert data.quality is not None
    totals = gate_totals(data.quality).to_dict("records")
    assert totals == [
        {
            "table": "bronze_events",
            "expectation": "known_store",
            "severity": "quarantine",
            "batches": 3,
            "evaluated": 22,
            "failed": 3,
            "quarantined": 3,
            "last_failed_at": pd.Timestamp(START + timedelta(hours=2)),
        },
        {
            "table": "bronze_events",
            "expectation": "column_values_to_be_between(amount)",
            "severity": "critical",
            "batches": 1,
            "evaluated": 7,
            "failed": 1,
            "quarantined": 0,
            "last_failed_at": pd.Timestamp(START + timedelta(hours=3)),
        },
    ]
    page = render_report(data)
    assert "Checked on every micro-batch before its commit" in page
    assert (
        "<tr><td>bronze_events</td><td>known_store</td><td>quarantine</td>"
        '<td class="num">3</td><td class="num">22</td><td class="num">3</td>'
        '<td class="num">3</td><td class="time">2024-01-01 02:00:00</td></tr>'
    ) in page
    assert '<td class="num failed">1</td>' in page  # the critical failure held a batch back
    # The gate's rows are not validate runs: the pass rate has the 3 validations of events.
    (chart,) = quality_charts(data)
    assert len(chart.data) == 3


def test_bronze_batch_metrics_are_charted_with_their_anomalies(config: RunoffConfig) -> None:
    """Six batches of two runs: rows, the null share of the one column with nulls, and the
    lag, each point where its time and value put it; the batch a history expectation found
    outside its history ringed in red on its metric's line, and only there."""
    runs = ("a" * 32, "b" * 32)
    batches = [(runs[i // 3], i, START + i * HOUR) for i in range(6)]
    values = {
        "rows_in": [100, 110, 105, 98, 30, 104],
        "rows_written": [95, 108, 100, 96, 12, 101],
        "rows_quarantined": [5, 2, 5, 2, 18, 3],
        "null_share:action": [0.0, 0.25, 0.0, 0.5, 0.0, 0.0],
        "null_share:time": [0.0] * 6,
        "event_lag_seconds": [60, 75, 58, 64, 900, 61],
    }
    append_metrics(
        config.quality_metrics_path,
        [
            MetricRow(run, "events", "bronze_events", b, metric, float(v[b]), at, at)
            for run, b, at in batches
            for metric, v in values.items()
        ],
    )
    # Three batches of a silver table, at their last window start, and one with no late rows
    # reported (its progress was not seen): merged and late are lines of their own points.
    silver = [(runs[1], b, START + b * HOUR, 10 * b, b % 2) for b in range(3)]
    append_metrics(
        config.quality_metrics_path,
        [
            MetricRow(run, "events", "events_action_hourly", b, metric, float(v), at, at)
            for run, b, at, merged, late in silver
            for metric, v in (("rows_written", merged), ("late_rows", late))
            if not (metric == "late_rows" and b == 1)
        ],
    )
    check = "batch_metric_within_history(metric=rows_written, lookback=28 days, ...)"
    append_results(
        config.quality_results_path,
        [
            ResultRow(
                run_id=runs[1],
                dataset="events",
                table="bronze_events",
                table_id="t1",
                layer="bronze",
                suite=f"bronze_events_batch {b}",
                expectation=check,
                severity="warning",
                success=b != 4,
                observed="",
                from_version=0,
                to_version=1,
                full=False,
                rows=1,
                table_passed=True,
                validated_at=START,
                batch_id=b,
                evaluated=1,
                failed=int(b == 4),
                quarantined=0,
            )
            for b in (3, 4, 5)
        ],
    )

    data = load_report_data(config, "events")
    charts = metric_charts(data)
    page = render_report(data)

    assert [c.title for c in charts] == list(METRIC_TITLES)
    svgs = chart_svgs(page)
    times = [at for _, _, at in batches]

    def series(*metrics: str) -> dict[str, list[tuple[datetime, float]]]:
        return {
            m.removeprefix("null_share:"): list(zip(times, values[m], strict=True)) for m in metrics
        }

    assert_lines(svgs["metric-nulls"], series("null_share:action"))  # time never null
    assert_lines(svgs["metric-lag"], series("event_lag_seconds"))
    rows = svgs["metric-rows"]
    labels = ["rows_in", "rows_quarantined", "rows_written"]
    assert texts(rows)[-4:] == [*labels, FLAGGED_LABEL]
    lines = {
        label: [p for s in path_segments(rows, f"line-{i}") for p in s]
        for i, label in enumerate(labels)
    }
    assert {label: len(points) for label, points in lines.items()} == dict.fromkeys(labels, 6)
    ((x, y, _),) = markers(rows, "flagged-2")  # rows_written's fifth batch, and nothing else
    assert (x, y) == pytest.approx(lines["rows_written"][4], abs=1e-3)
    assert "flagged-0" not in rows and "flagged-1" not in rows
    assert "flagged" not in svgs["metric-nulls"] + svgs["metric-lag"]
    assert_lines(
        svgs["metric-silver"],
        {
            "events_action_hourly late": [(at, late) for _, b, at, _, late in silver if b != 1],
            "events_action_hourly merged": [(at, merged) for _, _, at, merged, _ in silver],
        },
    )
