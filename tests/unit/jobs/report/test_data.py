"""The pure parts of `runoff report`: shaping (`jobs.report.data`), checked against independent
computations, and the page's links (`jobs.report.page.href`)."""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

from core.specs import SilverSpec
from jobs.report.charts import line_chart, line_segments
from jobs.report.data import (
    NO_REASON,
    break_at_gaps,
    docs_run_name,
    key_labels,
    numeric,
    open_windows,
    quality_pass_rate,
    quarantine_reasons,
    runs_frame,
    series_by_key,
    suites_by_run,
    top_keys,
    validation_pages,
    validation_runs,
    watermark_time,
    window_length,
    window_series,
    window_step,
)
from jobs.report.page import href

T0 = pd.Timestamp("2024-01-01 00:00")
MINUTE = pd.Timedelta(minutes=1)


def test_series_by_key_sums_per_time_and_key() -> None:
    rows = [
        {"window_start": T0, "action": "Open", "count": 3},
        {"window_start": T0, "action": "Open", "count": 2},
        {"window_start": T0 + pd.Timedelta(hours=1), "action": "Close", "count": 4},
        {"window_start": T0 + pd.Timedelta(hours=2), "action": "Open", "count": None},
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


# -- the window grid ------------------------------------------------------------------------------
def test_a_missing_window_is_a_nan_row_that_breaks_every_line() -> None:
    """Random series on a 1-minute grid with random holes: each line is drawn as one segment
    per run of consecutive present minutes, counted here from the minutes themselves."""
    rng = random.Random(8)
    present = {key: sorted(rng.sample(range(60), 35)) for key in "abc"}
    rows = [
        {"window_start": T0 + m * MINUTE, "window_end": T0 + (m + 1) * MINUTE, "k": key, "n": m}
        for key, minutes in present.items()
        for m in minutes
    ]
    spec = SilverSpec(table="t", window="1 minute", keys=("k",), measures=(("n", "count(*)"),))

    pivot, left_out = window_series(pd.DataFrame(rows), spec, "n")

    assert left_out == 0 and window_step(spec) == MINUTE
    every = sorted({m for minutes in present.values() for m in minutes})
    for key, minutes in present.items():
        series = pivot[f"k={key}"]
        assert list(series.dropna().index) == [T0 + m * MINUTE for m in minutes]
        assert list(series.dropna()) == [float(m) for m in minutes]
        runs = sum(1 for i, m in enumerate(minutes) if i == 0 or minutes[i - 1] != m - 1)
        assert line_segments(series) == runs
        # Every minute missing inside the range, for this key, is NaN where it is in the index.
        for m in range(minutes[0], minutes[-1] + 1):
            if m not in minutes and T0 + m * MINUTE in series.index:
                assert math.isnan(series[T0 + m * MINUTE])
    # The index: the present minutes and the first missing minute of every gap between them.
    firsts = [m + 1 for i, m in enumerate(every[:-1]) if every[i + 1] != m + 1]
    assert list(pivot.index) == [T0 + m * MINUTE for m in sorted({*every, *firsts})]


def test_break_at_gaps_uses_the_slide() -> None:
    five = pd.Timedelta(minutes=5)
    pivot = pd.DataFrame({"a": [1.0, 2.0, 3.0]}, index=[T0, T0 + five, T0 + 3 * five])

    spaced = break_at_gaps(pivot, five)

    assert list(spaced.index) == [T0, T0 + five, T0 + 2 * five, T0 + 3 * five]
    assert spaced["a"].isna().tolist() == [False, False, True, False]
    assert line_segments(spaced["a"]) == 2
    # The window as step (10 minutes) sees no gap: a 10-minute tumbling table.
    assert list(break_at_gaps(pivot, 2 * five).index) == [T0, T0 + five, T0 + 3 * five]


def test_open_windows_end_after_the_watermark() -> None:
    """10-minute windows sliding by 5: open are those whose end is after newest - delay."""
    starts = [T0 + k * pd.Timedelta(minutes=5) for k in range(30)]
    newest = datetime(2024, 1, 1, 2, 3, 7, tzinfo=UTC)

    mark = watermark_time(newest, "20 minutes")
    found = open_windows(starts, pd.Timedelta(minutes=10), mark)

    assert mark == pd.Timestamp("2024-01-01 01:43:07")
    expected = [s for s in starts if s + pd.Timedelta(minutes=10) > pd.Timestamp(mark)]
    assert list(found) == expected
    assert found[0] == pd.Timestamp("2024-01-01 01:35")  # ends 01:45, after 01:43:07
    assert list(open_windows(starts, MINUTE, None)) == []
    assert watermark_time(None, "1 hour") is None


def test_windows_at_the_end_of_the_calendar_are_charted() -> None:
    """Bronze takes event times up to 9999-12-30: their windows stay in microseconds (the unit
    of the tables; nanosecond times end in 2262) and the chart's margins within matplotlib's
    years 1-9999."""
    import pyarrow as pa

    edge = datetime(9999, 12, 30, 22, tzinfo=UTC)
    starts = [datetime(2024, 1, 1, tzinfo=UTC), edge, edge + timedelta(minutes=20)]
    frame = pa.table(
        {
            "window_start": pa.array(starts, pa.timestamp("us", tz="UTC")),
            "k": ["a", "a", "b"],
            "n": [1, 2, 3],
        }
    ).to_pandas()  # as delta-rs gives a table
    spec = SilverSpec(
        table="t", window="1 hour", slide="20 minutes", keys=("k",), measures=(("n", "count(*)"),)
    )

    pivot, _ = window_series(frame, spec, "n")
    mark = watermark_time(datetime(9999, 12, 30, 22, 59, 59, tzinfo=UTC), "1 hour")
    found = open_windows(pivot.index, window_length(spec), mark)
    svg = line_chart(pivot, "t", "n", "edge", found)

    step = pd.Timedelta(minutes=20)
    naive = [pd.Timestamp(s.replace(tzinfo=None)) for s in starts]
    assert list(pivot.index) == [naive[0], naive[0] + step, naive[1], naive[2]]
    assert list(found) == naive[1:]  # both end after 9999-12-30 21:59:59
    assert 'id="edge-line-0"' in svg and 'id="edge-line-1"' in svg


# -- runs and validations ----------------------------------------------------------------------
def ledger_row(run_id: str, layer: str, minute: int, status: str = "success") -> dict[str, object]:
    return {
        "run_id": run_id,
        "dataset": "events",
        "layer": layer,
        "started_at": datetime(2024, 1, 1, tzinfo=UTC) + timedelta(minutes=minute),
        "status": status,
        "rows": 1,
    }


def test_validation_runs_are_placed_at_the_runs_start() -> None:
    runs = runs_frame(
        [
            ledger_row("r2", "validate", 30, "failed"),
            ledger_row("r1", "validate", 10),
            ledger_row("b1", "bronze", 5),
        ]
    )
    at = datetime(2024, 1, 2, tzinfo=UTC)
    quality = pd.DataFrame(
        {
            "run_id": ["r1", "r1", "r2", "r2", "r3", "g1"],
            "dataset": ["events"] * 6,
            "success": [True, True, True, False, True, False],
            "validated_at": [at] * 6,
            "batch_id": [None, None, None, None, None, 4],  # g1: a gate row, not a validation
        }
    )

    found = validation_runs(quality, runs, "events")

    assert list(found["run_id"]) == ["r1", "r2", "r3"]
    starts = [pd.Timestamp("2024-01-01 00:10"), pd.Timestamp("2024-01-01 00:30")]
    assert list(found["started_at"]) == [*starts, pd.Timestamp("2024-01-02")]
    assert list(found["status"]) == ["success", "failed", ""]
    assert list(found["pass_rate"]) == [1.0, 0.5, 1.0]
    assert list(runs["run_id"]) == ["b1", "r1", "r2"]  # oldest first


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


# -- quarantine and Data Docs ----------------------------------------------------------------------
def test_quarantine_reasons_count_every_error_text() -> None:
    rng = random.Random(4)
    errors = [
        rng.choice(["unparseable JSON", "wrong type: x (int)", "rule failed: a", None])
        for _ in range(500)
    ]

    found = quarantine_reasons(pd.Series(errors, dtype="object"))

    counts = Counter(NO_REASON if e is None else e for e in errors)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    assert list(zip(found["reason"], found["rows"], strict=True)) == ranked
    assert list(found["share"]) == [n / len(errors) for _, n in ranked]
    assert quarantine_reasons(pd.Series([], dtype="object")).empty


def test_validation_pages_are_the_runs_own(tmp_path: Path) -> None:
    """GX's layout `validations/<suite, split at dots>/<run name>/<run time>/<batch>.html`: each
    run gets the pages of its suites in its own run-name folder, missing (pruned) ones left out."""
    quality = pd.DataFrame(
        {
            "run_id": ["aaaaaaaa11", "aaaaaaaa11", "aaaaaaaa11", "bbbbbbbb22", "cccccccc33"],
            "suite": ["bronze_events", "silver.hourly", "silver.hourly", "bronze_events", "x"],
            "success": [True, True, False, True, True],
            "batch_id": [None] * 5,
        }
    )
    suites = suites_by_run(quality)
    assert suites == {
        "aaaaaaaa11": {"bronze_events": False, "silver.hourly": True},
        "bbbbbbbb22": {"bronze_events": False},
        "cccccccc33": {"x": False},
    }
    pages = {
        ("aaaaaaaa11", "bronze_events"): ("bronze_events",),
        ("aaaaaaaa11", "silver.hourly"): ("silver", "hourly"),
        ("bbbbbbbb22", "bronze_events"): ("bronze_events",),
    }
    written = {}
    for (run_id, suite), folders in pages.items():
        page = tmp_path.joinpath(
            "validations", *folders, docs_run_name("events", run_id), "20240101T000000Z", "b.html"
        )
        page.parent.mkdir(parents=True)
        page.write_text("<html></html>")
        written[run_id, suite] = page
    # Another dataset's run with the same id prefix is not this run.
    other = tmp_path / "validations" / "bronze_events" / "sensors-bbbbbbbb" / "t" / "b.html"
    other.parent.mkdir(parents=True)
    other.write_text("")

    found = validation_pages(tmp_path, "events", suites)

    assert {run: [(p.suite, p.path, p.failed) for p in ps] for run, ps in found.items()} == {
        "aaaaaaaa11": [
            ("bronze_events", written["aaaaaaaa11", "bronze_events"], False),
            ("silver.hourly", written["aaaaaaaa11", "silver.hourly"], True),
        ],
        "bbbbbbbb22": [("bronze_events", written["bbbbbbbb22", "bronze_events"], False)],
    }


def test_links_are_relative_to_the_report(tmp_path: Path) -> None:
    report = tmp_path / "home" / "reports" / "events.html"
    page = tmp_path / "home" / "quality" / "gx" / "a b" / "x#1.html"

    link = href(page, report)

    assert link == "../quality/gx/a%20b/x%231.html"
    assert href(page, None) == page.resolve().as_uri()


def test_suites_by_run_keeps_the_newest_runs() -> None:
    at = [datetime(2024, 1, d, tzinfo=UTC) for d in (3, 1, 2, 2, 5)]
    quality = pd.DataFrame(
        {
            "run_id": ["c", "a", "b", "b", "g"],
            "suite": ["s", "s", "s", "t", "s"],
            "success": [True, False, True, False, False],
            "validated_at": at,
            "batch_id": [None, None, None, None, 7],  # g: the gate's, not a validate run
        }
    )

    assert suites_by_run(quality, newest=2) == {"b": {"s": False, "t": True}, "c": {"s": False}}
    assert set(suites_by_run(quality)) == {"a", "b", "c"}


def test_labels_from_the_data_are_text_not_math() -> None:
    """A key value such as `$\\foo$` is drawn as those characters; matplotlib's math parser
    would fail the whole report on it."""
    from jobs.report.charts import _new_figure, figure_svg

    figure = _new_figure()
    axes = figure.add_subplot()
    axes.plot([0, 1], [1, 2], label="$\\foo$")
    axes.set_title("count by $x$")
    axes.legend()
    svg = figure_svg(figure, "t")
    assert "$\\foo$" in svg and "count by $x$" in svg
