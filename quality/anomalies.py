"""Bronze batches judged against their own history: `expect_batch_metric_within_history`.

Every bronze batch that commits records its metrics in the metrics history
(`quality.history.append_metrics`): rows in, written, quarantined (in all and by reason),
rescued, the null share of each bronze column, the event-time lag at ingestion
(`jobs.bronze.job.batch_metrics` names them). A spec may expect one of them to stay within what
its own history predicts:

    expectations:
      bronze:
        - {expect: expect_batch_metric_within_history, metric: rows_written,
           lookback: 28 days, seasonality: hour_of_week, severity: warning}

The history of a batch is the metric's values of the table's earlier batches whose time lies in
`lookback` before the batch's own, in the same season (`none`, `hour_of_day`, `day_of_week` or
`hour_of_week`, in UTC); a batch's time is its newest event time. The expected range is the
season's median +- threshold x 1.4826 x MAD (the median absolute deviation, scaled to a standard
deviation for normal data: Iglewicz and Hoaglin's modified z-score, whose usual cutoff 3.5 is
the default threshold), robust to the anomalies the history itself holds. One season holds few
values (four in 28 days of `hour_of_week`), enough for a median, too few for a spread: the MAD
is pooled over the seasons, as relative deviations (`_scale`). A batch with fewer than
`min_history` values in its season passes, saying so. Severity `warning` records and reports an
anomaly; `critical` stops the batch before anything of it is written, as the gate does.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from core.errors import ConfigError
from core.specs import HISTORY, parse_duration

if TYPE_CHECKING:
    from core.specs import Expectation

# The season a batch's time falls in, as shown in a result.
SEASONS: dict[str, Callable[[datetime], str]] = {
    "none": lambda at: "",
    "hour_of_day": lambda at: f"{at:%H}:00 UTC",
    "day_of_week": lambda at: f"{at:%a} UTC",
    "hour_of_week": lambda at: f"{at:%a %H}:00 UTC",
}
# MAD x 1.4826 estimates the standard deviation of normally distributed values.
MAD_SCALE = 1.4826
# Every bronze batch's counts (`jobs.bronze.job.batch_metrics`); besides them, per row rule
# `quarantined:<rule>` and per bronze column `null_share:<column>`.
BATCH_METRICS = (
    "rows_in",  # non-blank lines read
    "rows_written",  # rows bronze received
    "rows_quarantined",  # lines quarantine received
    "rows_malformed",  # lines that are not a valid record (their parse error)
    "rows_rescued",  # bronze rows with fields the schema does not declare
    "event_lag_seconds",  # from the batch's newest event time to its ingestion
)
# Every committed silver batch's counts (`jobs.silver.TableRun.batch_metrics`): recorded, shown
# in the report; a history expectation watches bronze batches only.
SILVER_METRICS = ("rows_in", "rows_written", "rows_inserted", "rows_updated", "late_rows")
DEFAULTS = {"lookback": "28 days", "seasonality": "none", "min_history": 4, "threshold": 3.5}
ARGUMENTS = ("metric", *DEFAULTS, "notes")


@dataclass(frozen=True)
class MetricPoint:
    """One earlier batch's value of a metric, at the batch's time."""

    at: datetime
    value: float


@dataclass
class MetricHistory:
    """A table's metric values by metric, oldest first (`quality.history.read_metrics`), to
    which a run adds its own batches as they commit."""

    points: dict[str, list[MetricPoint]] = field(default_factory=dict)

    def add(self, at: datetime, metrics: Mapping[str, float]) -> None:
        for name, value in metrics.items():
            self.points.setdefault(name, []).append(MetricPoint(at, value))

    def of(self, metric: str) -> list[MetricPoint]:
        return self.points.get(metric, [])


@dataclass(frozen=True)
class Judgement:
    """One batch's metric judged: its value, the range its history predicts (None: too little
    history to say) and how many earlier values that range came from."""

    success: bool
    value: float
    low: float | None
    high: float | None
    history: int
    observed: str


@dataclass(frozen=True)
class HistoryRule:
    """A spec's `expect_batch_metric_within_history`, checked."""

    metric: str
    lookback: timedelta
    lookback_text: str
    seasonality: str
    min_history: int
    threshold: float
    severity: str

    @classmethod
    def of(cls, item: Expectation) -> HistoryRule:
        """The rule of a declared expectation, or `ConfigError` naming what is wrong."""
        kwargs = {**DEFAULTS, **item.kwargs}
        unknown = sorted(set(kwargs) - set(ARGUMENTS))
        if unknown:
            raise ConfigError(f"{HISTORY} takes {', '.join(ARGUMENTS)}, not {', '.join(unknown)}")
        metric = kwargs.get("metric")
        if not isinstance(metric, str) or not metric:
            raise ConfigError(f"{HISTORY} needs `metric`: the batch metric to watch")
        seasonality = str(kwargs["seasonality"])
        if seasonality not in SEASONS:
            raise ConfigError(f"seasonality {seasonality!r} is not one of {', '.join(SEASONS)}")
        min_history, threshold = kwargs["min_history"], kwargs["threshold"]
        if isinstance(min_history, bool) or not isinstance(min_history, int) or min_history < 1:
            raise ConfigError(f"min_history {min_history!r} is not a whole number of batches >= 1")
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) or threshold <= 0:
            raise ConfigError(f"threshold {threshold!r} is not a positive number")
        if item.severity not in ("warning", "critical"):
            raise ConfigError(f"{HISTORY} is warning or critical, not {item.severity}")
        lookback = str(kwargs["lookback"])
        return cls(
            metric=metric,
            lookback=parse_duration(lookback),
            lookback_text=lookback,
            seasonality=seasonality,
            min_history=min_history,
            threshold=float(threshold),
            severity=item.severity,
        )

    @property
    def arguments(self) -> dict[str, object]:
        return {
            "metric": self.metric,
            "lookback": self.lookback_text,
            "seasonality": self.seasonality,
            "min_history": self.min_history,
            "threshold": self.threshold,
        }

    def season(self, at: datetime) -> str:
        return SEASONS[self.seasonality](at)

    def seasons(self, at: datetime, points: Iterable[MetricPoint]) -> dict[str, list[float]]:
        """The values of `points` in `lookback` before `at` (its own time excluded), by
        season."""
        groups: dict[str, list[float]] = {}
        for p in points:
            if at - self.lookback <= p.at < at:
                groups.setdefault(self.season(p.at), []).append(p.value)
        return groups

    def judge(self, value: float, at: datetime, points: Sequence[MetricPoint]) -> Judgement:
        groups = self.seasons(at, points)
        past = groups.get(self.season(at), [])
        where = f"{self.metric} {_number(value)}"
        season = f", {self.season(at)}" if self.seasonality != "none" else ""
        if len(past) < self.min_history:
            return Judgement(
                True,
                value,
                None,
                None,
                len(past),
                f"{where}: {len(past)} of {self.min_history} earlier batches{season}, "
                "too few to judge",
            )
        median = statistics.median(past)
        spread = self.threshold * MAD_SCALE * _scale(median, past, groups.values())
        low, high = median - spread, median + spread
        inside = low <= value <= high
        return Judgement(
            inside,
            value,
            low,
            high,
            len(past),
            f"{where} {'within' if inside else 'outside'} [{_number(low)}, {_number(high)}] "
            f"(median {_number(median)} of {len(past)} earlier batches{season})",
        )


def _scale(median: float, past: Sequence[float], seasons: Iterable[Sequence[float]]) -> float:
    """The spread of a season's values, as a MAD: the median of every earlier value's deviation
    from the median of the other values of its season (a few values of one season estimate
    their median well, their spread poorly: the seasons share one), relative to that median,
    times this season's median; the season's own MAD when its median is 0."""
    if median == 0:
        return statistics.median(abs(v) for v in past)
    relative = [
        abs(value / center - 1)
        for values in seasons
        for value, center in _others_medians(values)
        if center != 0
    ]
    return statistics.median(relative) * abs(median) if relative else 0.0


def _others_medians(values: Sequence[float]) -> Iterator[tuple[float, float]]:
    """Each value with the median of the others (leave one out), in O(n log n)."""
    ordered = sorted(values)
    n = len(ordered) - 1  # the others
    if n < 1:
        return

    def other(k: int, left_out: int) -> float:  # the k-th of the others, in order
        return ordered[k] if k < left_out else ordered[k + 1]

    for j, value in enumerate(ordered):
        middle = n // 2
        if n % 2:
            yield value, other(middle, j)
        else:
            yield value, (other(middle - 1, j) + other(middle, j)) / 2


def metric_names(rules: Iterable[str], columns: Iterable[str]) -> list[str]:
    """The metrics of a dataset's bronze batches: its row rules' names, its bronze columns."""
    return [
        *BATCH_METRICS,
        *(f"quarantined:{rule}" for rule in rules),
        *(f"null_share:{column}" for column in columns),
    ]


def _number(value: float) -> str:
    """A metric's value as a person reads it: whole numbers without decimals."""
    return str(int(value)) if float(value).is_integer() else f"{value:.4g}"
