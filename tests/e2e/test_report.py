"""`runoff report`: the HTML page, its charts in a real browser, and the numbers behind them.

The home is built with delta-rs directly (silver table, bronze, run ledger, quality results), so
the expected chart contents are computed here in plain Python from the same rows. Plotted points
are read back from the SVG: one affine map must take every (window start, value) to its point.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from deltalake import write_deltalake

from core.config import RunoffConfig
from core.ledger import RunRecord
from delta_tables.catalog import Catalog
from delta_tables.ops import append_run
from jobs.cli import main
from jobs.report import (
    LAYER_COLOURS,
    SERIES_COLOURS,
    gate_totals,
    key_labels,
    load_report_data,
    numeric,
    quality_pass_rate,
    render_report,
    report_path,
    series_by_key,
    silver_charts,
    top_keys,
    write_report,
)
from quality.history import ResultRow, append_results
from tests.browser import assert_not_blank, dump_dom, screenshot

START = datetime(2024, 1, 1, tzinfo=UTC)
HOURLY_TITLE = "events_action_hourly: count per 1 hour window by action"
SLIDING_TITLE = (
    "events_action_sliding: count per 10 minutes window (sliding by 5 minutes) by action"
)
RUN_TITLES = (
    "Rows per run",
    "Seconds per run",
    "Late and quarantined rows per run",
    "Quality pass rate per validation run",
)
CHART_TITLES = (HOURLY_TITLE, *RUN_TITLES)  # the charts drawn for the events home
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


def line_points(svg: str) -> dict[str, list[tuple[float, float]]]:
    """Plotted lines (clipped to the axes, 1.6 wide) -> their points (SVG units), by stroke
    colour, in drawing order."""
    found = re.findall(
        r'<path d="([^"]+)" clip-path="[^"]+" style="fill: none; stroke: (#[0-9a-f]{6}); '
        r"stroke-width: 1.6",
        svg,
    )
    return {
        colour: [(float(x), float(y)) for x, y in re.findall(r"[ML] (\S+) (\S+)", d)]
        for d, colour in found
    }


def data_lines(svg: str) -> dict[str, int]:
    """Plotted lines -> number of points, by stroke colour."""
    return {colour: len(points) for colour, points in line_points(svg).items()}


def texts(svg: str) -> list[str]:
    """The chart's texts in drawing order (ticks, axis labels, title, legend, bar labels)."""
    return re.findall(r">([^<]+)</text>", svg)


def plot_area(svg: str) -> tuple[float, float, float, float]:
    """The axes' clip rectangle: left, top, width, height."""
    (rect,) = re.findall(
        r'<clipPath id="[^"]+">\s*<rect x="([^"]+)" y="([^"]+)" width="([^"]+)" '
        r'height="([^"]+)"',
        svg,
    )
    left, top, width, height = map(float, rect)
    return left, top, width, height


def affine_slope(pairs: list[tuple[float, float]]) -> float:
    """Asserts one affine map takes every value to its coordinate ((value, coordinate) pairs);
    returns its slope."""
    low, high = min(pairs), max(pairs)
    assert high[0] > low[0], "need two distinct values to fix the map"
    slope = (high[1] - low[1]) / (high[0] - low[0])
    for value, coordinate in pairs:
        assert coordinate == pytest.approx(low[1] + slope * (value - low[0]), abs=1e-3)
    return slope


def assert_lines(svg: str, expected: dict[str, list[tuple[datetime, float]]]) -> None:
    """The chart draws exactly `expected` (label -> (window start, value) oldest first): one line
    per label in label order, coloured in turn and named so in the legend, every point where the
    axes' one time and value scale put it, inside the plot area."""
    labels = sorted(expected)
    assert texts(svg)[-len(labels) :] == labels
    lines = line_points(svg)
    assert list(lines) == list(SERIES_COLOURS[: len(labels)])
    xs: list[tuple[float, float]] = []
    ys: list[tuple[float, float]] = []
    for label, colour in zip(labels, SERIES_COLOURS, strict=False):
        assert len(lines[colour]) == len(expected[label]), label
        for (start, value), (x, y) in zip(expected[label], lines[colour], strict=True):
            xs.append((start.timestamp(), x))
            ys.append((value, y))
    assert affine_slope(xs) > 0  # later windows to the right
    assert affine_slope(ys) < 0  # larger values higher up
    left, top, width, height = plot_area(svg)
    assert all(left - 1e-3 <= x <= left + width + 1e-3 for _, x in xs)
    assert all(top - 1e-3 <= y <= top + height + 1e-3 for _, y in ys)


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
        {"window_start": START + timedelta(hours=2), "action": "Open", "count": None},
    ]
    pivot = series_by_key(pd.DataFrame(rows), "window_start", "action", "count")

    assert list(pivot.columns) == ["Close", "Open"]
    # A key without a row, or with a null value, at some time is a gap in its line, not a zero.
    gaps = {"Close": [True, False, True], "Open": [False, True, True]}
    assert pivot.isna().to_dict("list") == gaps
    assert pivot.fillna(-1).to_dict("list") == {"Close": [-1, 4, -1], "Open": [5, -1, -1]}
    assert [t.hour for t in pivot.index] == [0, 1, 2]


def test_key_labels_name_every_key() -> None:
    frame = pd.DataFrame({"User": ["a", None, "b"], "gt": ["walk", "sit", None]})

    assert list(key_labels(frame, ["User", "gt"], "count")) == [
        "User=a, gt=walk",
        "User=null, gt=sit",
        "User=b, gt=null",
    ]
    assert list(key_labels(frame, [], "count")) == ["count"] * 3


def test_top_keys_orders_by_total_then_label() -> None:
    rng = random.Random(3)
    rows = [
        (rng.choice("abcdefghijklmnopqrstuvwxyz") * rng.randint(1, 3), rng.randint(0, 9))
        for _ in range(400)
    ]
    totals: dict[str, int] = defaultdict(int)
    for label, value in rows:
        totals[label] += value

    got = top_keys(pd.Series([r[0] for r in rows]), pd.Series([r[1] for r in rows]), 20)

    expected = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:20]
    assert list(zip(got.index, got, strict=True)) == expected


def test_numeric_takes_numbers_only() -> None:
    decimals = numeric(pd.Series([Decimal("1.5"), None], dtype=object))

    ints = numeric(pd.Series([3, 4]))

    assert decimals is not None and decimals[0] == 1.5 and math.isnan(decimals[1])
    assert ints is not None and ints.dtype == "float64" and list(ints) == [3.0, 4.0]
    assert numeric(pd.Series(["3", "x"])) is None
    assert numeric(pd.Series(pd.to_datetime(["2024-01-01"]))) is None


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
    # Freshness: a windowed silver table's newest event is its last window's end; the bronze
    # table written here has no event_time column, so it has none.
    newest = {t.name: t.newest_event for t in data.tables}
    assert newest["events_action_hourly"] == max(hour_of(t) for t, _ in home.events) + timedelta(
        hours=1
    )
    assert newest["bronze_events"] is None
    assert all(t.last_commit is not None for t in data.tables if t.version is not None)
    assert list(data.runs["layer"]) == [r.layer for r in home.runs]
    assert list(data.runs["rows"]) == [r.rows for r in home.runs]
    assert list(data.runs["run"]) == list(range(1, len(home.runs) + 1))
    # Only the columns the charts need (the table also has window_end).
    hourly = data.silver["events_action_hourly"]
    assert hourly is not None and list(hourly.columns) == ["window_start", "action", "count"]
    assert data.silver["events_action_sliding"] is None


def test_silver_charts_follow_the_spec(config: RunoffConfig) -> None:
    """An empty home: one chart (a note for now) per silver table and measure, titled from the
    spec, besides the run and quality charts."""
    catalog = Catalog.load(config)
    for dataset, titles in SILVER_TITLES.items():
        data = load_report_data(config, dataset)

        charts = silver_charts(data)

        assert [c.title for c in charts] == titles
        assert len(charts) == sum(len(s.measures) for s in catalog.spec(dataset).silver)
        assert [c.note for c in charts] == [
            f"No data yet: silver table {t.split(':')[0]} does not exist "
            f"(run `runoff run {dataset}`)."
            for t in titles
        ]
        assert render_report(data).count("<figure ") == len(titles) + len(RUN_TITLES)


def test_windowed_chart_plots_the_rows(config: RunoffConfig) -> None:
    home = build_events_home(config)

    page = render_report(load_report_data(config, "events"))

    svg = chart_svgs(page)["silver0"]
    expected: dict[str, list[tuple[datetime, float]]] = defaultdict(list)
    for (hour, action), n in sorted(Counter((hour_of(t), a) for t, a in home.events).items()):
        expected[f"action={action}"].append((hour, n))
    assert texts(svg)[-3] == HOURLY_TITLE
    assert_lines(svg, expected)
    # The sliding table was never written: a note takes the place of its chart.
    note = (
        "No data yet: silver table events_action_sliding does not exist (run `runoff run events`)."
    )
    assert f'<h3>{SLIDING_TITLE}</h3><p class="note">{note}</p>' in page


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
        assert charts[i].note == note
        assert f'<figcaption class="note">{note}</figcaption>' in page
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
    assert chart.note == (
        f"Shown: the 20 of {len(rows)} key combinations with the largest total count; "
        f"{len(rows) - 20} left out."
    )


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
    assert texts(charts["silver0"])[-2:] == ["action=Close", "action=Open"]
    assert f"<h3>{SLIDING_TITLE}</h3>" in dom
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
    assert titles == [*SILVER_TITLES["sensors"], *RUN_TITLES]
    assert dom.count("No data yet") == len(titles)
    assert dom.count("no data yet") == 5  # bronze, quarantine and three silver tables
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
        '<td class="num">3</td><td>2024-01-01 02:00:00</td></tr>'
    ) in page
    # The gate's rows are not validate runs: the pass rate has the 3 validations of events.
    assert page.count('<svg class="chart"') == len(CHART_TITLES)
    validations = data.quality[data.quality["batch_id"].isna()]
    assert len(quality_pass_rate(validations, "events")) == 3
