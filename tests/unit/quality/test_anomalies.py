"""`expect_batch_metric_within_history`: a batch's metric against its own history (median and
MAD per season). The expected ranges are computed again here with numpy, from the seasons'
values picked by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from core.errors import ConfigError
from core.specs import HISTORY, Expectation
from quality.anomalies import HistoryRule, MetricHistory, MetricPoint

START = datetime(2024, 1, 1, tzinfo=UTC)  # a Monday
HOURS = 24 * 7 * 6  # six weeks of hourly batches


def rule(**kwargs: object) -> HistoryRule:
    item = Expectation("bronze", HISTORY, {"metric": "rows_written", **kwargs}, "warning")
    return HistoryRule.of(item)


def hourly_feed(seed: int) -> list[MetricPoint]:
    """Rows per hourly batch: a daily shape (busy by day), weekends at half, 3% noise."""
    random = np.random.default_rng(seed)
    points = []
    for hour in range(HOURS):
        at = START + timedelta(hours=hour)
        level = 1000 + 800 * np.sin(np.pi * at.hour / 24) * (0.5 if at.weekday() >= 5 else 1)
        points.append(MetricPoint(at, float(round(level * random.normal(1, 0.03)))))
    return points


def judged(r: HistoryRule, points: list[MetricPoint], last: int) -> list[bool]:
    """The last `last` batches judged as the bronze job does: each against all before it."""
    history = MetricHistory()
    outcomes = []
    for i, point in enumerate(points):
        if i >= len(points) - last:
            outcomes.append(r.judge(point.value, point.at, history.of("rows_written")).success)
        history.add(point.at, {"rows_written": point.value})
    return outcomes


def test_no_alarm_on_100_normal_batches_and_the_planted_one_is_found() -> None:
    seasonal = rule(lookback="35 days", seasonality="hour_of_week")
    points = hourly_feed(seed=7)
    assert judged(seasonal, points, 100) == [True] * 100
    # One batch of the last 100 at a third of its usual rows: the one alarm.
    planted = len(points) - 40
    points[planted] = MetricPoint(points[planted].at, points[planted].value / 3)
    outcomes = judged(seasonal, points, 100)
    assert [i for i, ok in enumerate(outcomes) if not ok] == [100 - 40]
    # Without seasons the range spans the whole day's swing: the planted batch is missed.
    assert judged(rule(lookback="35 days"), points, 100) == [True] * 100


def test_the_range_is_the_seasons_median_and_the_pooled_leave_one_out_mad() -> None:
    points = hourly_feed(seed=11)
    at = points[-1].at  # a Sunday 23:00
    r = rule(lookback="21 days", seasonality="hour_of_week", threshold=3.0, min_history=3)
    # By hand: every hour of the week in the 21 days before (21 days included), each value
    # against the median of the others of its hour, relative to it.
    window = [p for p in points[:-1] if timedelta(0) < at - p.at <= timedelta(days=21)]
    seasons: dict[tuple[int, int], list[float]] = {}
    for p in window:
        seasons.setdefault((p.at.weekday(), p.at.hour), []).append(p.value)
    deviations = [
        abs(v / np.median(values[:i] + values[i + 1 :]) - 1)
        for values in seasons.values()
        for i, v in enumerate(values)
        if len(values) > 1
    ]
    past = np.array(seasons[(6, 23)])
    assert len(past) == 3
    median = np.median(past)
    spread = 3.0 * 1.4826 * np.median(deviations) * median
    result = r.judge(points[-1].value, at, points[:-1])
    assert (result.low, result.high, result.history) == pytest.approx(
        (median - spread, median + spread, 3)
    )
    assert result.observed.endswith(f"(median {median:g} of 3 earlier batches, Sun 23:00 UTC)")


def test_too_little_history_passes_and_says_so() -> None:
    r = rule(min_history=5, seasonality="hour_of_day")
    at = START + timedelta(days=3)
    points = [MetricPoint(at - timedelta(days=d), 100.0) for d in (1, 2)]
    result = r.judge(5.0, at, points)
    assert result.success and result.low is None
    assert result.observed == "rows_written 5: 2 of 5 earlier batches, 00:00 UTC, too few to judge"


def test_an_outlier_in_the_history_does_not_widen_the_range() -> None:
    """By hand: each value's deviation from the median of the five others, relative to it:
    .0297, .0198, .0099, .01, .02 and 49 (5000); their median .0199 x 100.5 x 1.4826 x 3.5."""
    at = START + timedelta(days=10)
    values = [100.0, 102.0, 98.0, 101.0, 99.0, 5000.0]
    points = [MetricPoint(at - timedelta(days=i + 1), v) for i, v in enumerate(values)]
    result = rule().judge(150.0, at, points)
    assert not result.success
    assert result.observed == (
        "rows_written 150 outside [90.12, 110.9] (median 100.5 of 6 earlier batches)"
    )


@pytest.mark.parametrize(
    ("kwargs", "severity", "problem"),
    [
        ({"metric": None}, "warning", "needs `metric`"),
        ({"seasonality": "monthly"}, "warning", "seasonality 'monthly' is not one of"),
        ({"lookback": "a month"}, "warning", "interval 'a month' is not of the form"),
        ({"min_history": 0}, "warning", "min_history 0 is not a whole number"),
        ({"threshold": -1}, "warning", "threshold -1 is not a positive number"),
        ({"window": "1 hour"}, "warning", "not window"),
        ({}, "quarantine", "is warning or critical, not quarantine"),
    ],
)
def test_bad_arguments_are_one_clear_error(
    kwargs: dict[str, object], severity: str, problem: str
) -> None:
    item = Expectation("bronze", HISTORY, {"metric": "rows_written", **kwargs}, severity)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=problem.replace("(", r"\(").replace("`", "`")):
        HistoryRule.of(item)
