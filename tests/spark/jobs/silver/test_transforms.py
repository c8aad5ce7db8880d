"""The silver transforms on small batch DataFrames, checked against plain-Python aggregates.

Every transform is pure (bronze DataFrame, watermark) -> DataFrame, built from the silver spec
(`SilverAggregate.transform`: select, where, window and keys, measures, having); on a batch
DataFrame the watermark is a no-op, so the result must equal the aggregate of all rows. The
expected values are computed here from the same Python rows, with integer arithmetic on epoch
microseconds. The seed datasets come from their YAML specs (tests/seeds.py).
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest

from core.errors import ConfigError
from core.specs import SilverSpec
from jobs.streaming.dataset import Dataset, SilverAggregate, compile_dataset
from tests.seeds import SEED_NAMES, seed, seed_spec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
START = datetime(2024, 3, 9, 22, 0, tzinfo=UTC)
SECOND = 1_000_000  # microseconds


def micros(moment: datetime) -> int:
    delta = moment - EPOCH
    return (delta.days * 86_400 + delta.seconds) * SECOND + delta.microseconds


def at(us: int) -> datetime:
    return EPOCH + timedelta(microseconds=us)


def tumbling(us: int, size: int) -> tuple[datetime, datetime]:
    start = us - us % size
    return at(start), at(start + size)


def sliding(us: int, size: int, slide: int) -> list[tuple[datetime, datetime]]:
    last = us - us % slide
    return [(at(s), at(s + size)) for s in range(last - size + slide, last + 1, slide)]


def bronze(spark: SparkSession, dataset: str, rows: Sequence[dict[str, Any]]) -> DataFrame:
    """Bronze rows as the bronze job writes them: dataset columns, then the metadata columns
    (and `_rescued_data`, null: no undeclared fields)."""
    from pyspark.sql import functions as F

    ds = seed(dataset)
    source = f"landing/{dataset}/date=2024-03-09/part-0.json"
    df = spark.createDataFrame([dict(r) for r in rows], ds.bronze_schema).withColumn(
        "_source_file", F.lit(source)
    )
    df = df.withColumn("event_time", ds.event_time())
    df = (
        df.withColumn("event_date", F.to_date("event_time"))
        .withColumn("_ingested_at", F.current_timestamp())
        .withColumn("_batch_id", F.lit(0).cast("long"))
        .withColumn("_rescued_data", F.lit(None).cast("string"))
    )
    return df.select(*ds.full_bronze_schema.fieldNames())


def collect(df: DataFrame) -> list[dict[str, Any]]:
    return [row.asDict() for row in df.collect()]


def by_key(rows: Iterable[dict[str, Any]], keys: Sequence[str]) -> dict[tuple[Any, ...], dict]:
    result: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        key = tuple(row[k] for k in keys)
        assert key not in result, f"two rows for key {key}"
        result[key] = row
    return result


def as_utc(value: datetime) -> datetime:
    """Spark returns naive datetimes in the session zone (UTC)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def normalized(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: as_utc(v) if isinstance(v, datetime) else v for k, v in r.items()} for r in rows]


def run(spark: SparkSession, dataset: str, table: str, rows: Sequence[dict]) -> list[dict]:
    ds = seed(dataset)
    aggregate = ds.aggregate(table)
    return normalized(collect(aggregate.transform(bronze(spark, dataset, rows), ds.watermark)))


# -- events ------------------------------------------------------------------------------------
def events_rows(seed: int = 7, n: int = 120) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    base = micros(START) // SECOND
    times = [base + rng.randrange(5 * 3600) for _ in range(n)]
    # window edges: the first and last second of an hour, a 5-minute boundary
    times += [base, base + 3600 - 1, base + 3600, base + 2 * 3600 + 300]
    return [{"time": t, "action": rng.choice(("Open", "Close"))} for t in times]


def test_events_action_hourly_counts_each_action_per_hour(spark: SparkSession) -> None:
    rows = events_rows()
    expected = Counter((*tumbling(r["time"] * SECOND, 3600 * SECOND), r["action"]) for r in rows)

    got = run(spark, "events", "events_action_hourly", rows)

    assert {(r["window_start"], r["window_end"], r["action"]): r["count"] for r in got} == expected
    assert len(got) == len(expected)
    assert list(got[0]) == ["window_start", "window_end", "action", "count"]


def test_events_action_sliding_counts_every_row_in_two_windows(spark: SparkSession) -> None:
    rows = events_rows(seed=8)
    expected: Counter[tuple[datetime, datetime, str]] = Counter()
    for r in rows:
        for start, end in sliding(r["time"] * SECOND, 600 * SECOND, 300 * SECOND):
            expected[(start, end, r["action"])] += 1

    got = run(spark, "events", "events_action_sliding", rows)

    assert {(r["window_start"], r["window_end"], r["action"]): r["count"] for r in got} == expected
    assert len(got) == len(expected)
    assert sum(r["count"] for r in got) == 2 * len(rows)


# -- sensors -----------------------------------------------------------------------------------
DEVICES = {"cam-1": "camera", "cam-2": "camera", "temp-1": "thermostat"}


def sensors_rows(seed: int = 3, n: int = 150) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    base = micros(START)
    rows = []
    for _ in range(n):
        device = rng.choice(sorted(DEVICES))
        # millisecond precision, as in the landing files; 4 minutes of data
        us = base + rng.randrange(240_000) * 1000
        rows.append(
            {
                "timestamp": at(us),
                "deviceId": device,
                "deviceType": DEVICES[device],
                "signalStrength": round(rng.uniform(-90, -20), 1),
            }
        )
    # a quiet device: two signals in one minute (a lost-signal window), one on a window edge
    rows.append(
        {
            "timestamp": at(base + 300 * SECOND),
            "deviceId": "temp-2",
            "deviceType": "thermostat",
            "signalStrength": -88.5,
        }
    )
    rows.append(
        {
            "timestamp": at(base + 359 * SECOND + 999_000),
            "deviceId": "temp-2",
            "deviceType": "thermostat",
            "signalStrength": -87.0,
        }
    )
    return rows


def test_sensors_device_counts_per_five_seconds(spark: SparkSession) -> None:
    rows = sensors_rows()
    expected = Counter((*tumbling(micros(r["timestamp"]), 5 * SECOND), r["deviceId"]) for r in rows)

    got = run(spark, "sensors", "sensors_device_counts", rows)

    assert {
        (r["window_start"], r["window_end"], r["deviceId"]): r["count"] for r in got
    } == expected
    assert len(got) == len(expected)


def test_sensors_type_signal_min_max_avg_per_minute(spark: SparkSession) -> None:
    rows = sensors_rows(seed=4)
    signals: dict[tuple[datetime, datetime, str], list[float]] = defaultdict(list)
    for r in rows:
        signals[(*tumbling(micros(r["timestamp"]), 60 * SECOND), r["deviceType"])].append(
            r["signalStrength"]
        )

    got = by_key(
        run(spark, "sensors", "sensors_type_signal", rows),
        ("window_start", "window_end", "deviceType"),
    )

    assert set(got) == set(signals)
    for key, values in signals.items():
        row = got[key]
        assert row["count"] == len(values)
        assert row["min_signal"] == min(values)
        assert row["max_signal"] == max(values)
        assert row["avg_signal"] == pytest.approx(sum(values) / len(values), rel=1e-12)


def test_sensors_lost_signal_lists_device_minutes_below_five(spark: SparkSession) -> None:
    rows = sensors_rows(seed=5, n=60)
    counts = Counter(
        (*tumbling(micros(r["timestamp"]), 60 * SECOND), r["deviceId"], r["deviceType"])
        for r in rows
    )
    expected = {key: n for key, n in counts.items() if n < 5}
    assert expected and len(expected) < len(counts)  # the sample holds both kinds

    got = run(spark, "sensors", "sensors_lost_signal", rows)

    keyed = {
        (r["window_start"], r["window_end"], r["deviceId"], r["deviceType"]): r["count"]
        for r in got
    }
    assert keyed == expected
    assert len(got) == len(expected)


# -- activity ----------------------------------------------------------------------------------
def activity_rows(seed: int = 11, n: int = 150) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    base_ns = micros(START) * 1000
    rows = []
    for i in range(n):
        creation = base_ns + rng.randrange(180 * 10**9)
        rows.append(
            {
                "Arrival_Time": creation // 10**6 + 5,
                "Creation_Time": creation,
                "Device": "nexus4_1",
                "User_ID": i,
                "Model": "nexus4",
                "User": rng.choice("abc"),
                "gt": rng.choice(("sit", "walk", "stand")),
                "x": rng.uniform(-1, 1),
                "y": rng.uniform(-1, 1),
                "z": rng.uniform(9, 10),
            }
        )
    # nanoseconds just below a minute boundary stay in the earlier minute
    rows[0]["Creation_Time"] = base_ns + 60 * 10**9 - 1
    return rows


def test_activity_user_minute_counts_and_means(spark: SparkSession) -> None:
    rows = activity_rows()
    groups: dict[tuple[datetime, datetime, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        window = tumbling(r["Creation_Time"] // 1000, 60 * SECOND)
        groups[(*window, r["User"], r["gt"])].append(r)

    got = by_key(
        run(spark, "activity", "activity_user_minute", rows),
        ("window_start", "window_end", "User", "gt"),
    )

    assert set(got) == set(groups)
    for key, members in groups.items():
        row = got[key]
        assert row["count"] == len(members)
        for axis in "xyz":
            mean = sum(m[axis] for m in members) / len(members)
            assert row[f"mean_{axis}"] == pytest.approx(mean, rel=1e-12, abs=1e-12)


# -- lines -------------------------------------------------------------------------------------
LINES = [
    "The quick brown fox jumps over the lazy dog.",
    "  the DOG didn't care -- 42 times!  ",
    "Über café: naïve résumé, the end",
    "",
    "x_y x-y",
]


def python_words(line: str) -> list[str]:
    """Maximal runs of letters and apostrophes, lower-cased (digits, `_` and `-` split)."""
    return re.findall(r"(?:[^\W\d_]|')+", line.lower())


def test_lines_word_counts_counts_every_word(spark: SparkSession) -> None:
    rows = [{"line": line} for line in LINES]
    expected = Counter(word for line in LINES for word in python_words(line))

    got = run(spark, "lines", "lines_word_counts", rows)

    assert {r["word"]: r["count"] for r in got} == expected
    assert len(got) == len(expected)
    assert expected["the"] == 4 and expected["didn't"] == 1 and expected["über"] == 1


# -- every aggregate ---------------------------------------------------------------------------
SAMPLES: dict[str, Callable[[], list[dict[str, Any]]]] = {
    "events": events_rows,
    "sensors": sensors_rows,
    "activity": activity_rows,
    "lines": lambda: [{"line": line} for line in LINES],
}


@pytest.mark.parametrize(
    "dataset,table",
    [(name, table) for name in SEED_NAMES for table in seed_spec(name).silver_tables],
)
def test_keys_identify_one_row_and_lead_the_columns(
    spark: SparkSession, dataset: str, table: str
) -> None:
    aggregate = seed(dataset).aggregate(table)
    got = run(spark, dataset, table, SAMPLES[dataset]())

    assert got, "the sample produces rows"
    by_key(got, aggregate.keys)  # raises on a duplicate key
    columns = list(got[0])
    assert columns[: len(aggregate.keys)] == list(aggregate.keys)
    if aggregate.window:
        assert columns[:2] == ["window_start", "window_end"]
        assert aggregate.keys[:2] == ("window_start", "window_end")
    assert all(r["count"] >= 1 for r in got)
    for column in aggregate.partition_by:
        assert column == "window_date" and columns[-1] == column
        assert all(r["window_date"] == r["window_start"].date() for r in got)
    # the table's columns are what the spec says: keys, measures (in order), window_date
    assert columns == list(aggregate.spec.columns)


def test_every_declared_silver_table_has_an_aggregate() -> None:
    for name in SEED_NAMES:
        dataset = seed(name)
        assert [a.table for a in dataset.aggregates] == list(seed_spec(name).silver_tables)
        assert {a.dataset for a in dataset.aggregates} == {name}


def test_an_unknown_silver_table_names_the_tables() -> None:
    with pytest.raises(
        ConfigError,
        match=r"^dataset 'events' has no silver table 'nosuch' \(has: events_action_hourly, "
        r"events_action_sliding\)$",
    ):
        seed("events").aggregate("nosuch")


# -- spec features the seeds do not all use --------------------------------------------------
def events_with(*silver: SilverSpec) -> tuple[Dataset, list[SilverAggregate]]:
    dataset = compile_dataset(dataclasses.replace(seed_spec("events"), silver=silver))
    return dataset, list(dataset.aggregates)


def test_select_where_having_and_window_date(spark: SparkSession) -> None:
    """select (the event time is carried along), where on a selected column, a sliding window,
    two measures, having on a measure, window_date last."""
    spec = SilverSpec(
        table="events_open_minutes",
        window="10 minutes",
        slide="5 minutes",
        select=("upper(action) AS act", "time % 60 AS second"),
        where="act = 'OPEN'",
        measures=(("opens", "count(*)"), ("max_second", "max(second)")),
        having="opens >= 2",
        partition_by=("window_date",),
    )
    dataset, (aggregate,) = events_with(spec)
    rows = events_rows(seed=12, n=200)
    per_window: dict[tuple[datetime, datetime], list[int]] = defaultdict(list)
    for r in rows:
        if r["action"] == "Open":
            for window in sliding(r["time"] * SECOND, 600 * SECOND, 300 * SECOND):
                per_window[window].append(r["time"] % 60)
    expected = {
        (start, end): (len(seconds), max(seconds), start.date())
        for (start, end), seconds in per_window.items()
        if len(seconds) >= 2
    }
    assert expected and len(expected) < len(per_window)  # having drops some windows

    frame = aggregate.transform(bronze(spark, "events", rows), dataset.watermark)
    got = normalized(collect(frame))

    assert frame.columns == ["window_start", "window_end", "opens", "max_second", "window_date"]
    assert frame.columns == list(spec.columns)
    assert aggregate.keys == ("window_start", "window_end")
    assert {
        (r["window_start"], r["window_end"]): (r["opens"], r["max_second"], r["window_date"])
        for r in got
    } == expected
    assert len(got) == len(expected)


def test_a_select_with_star_keeps_the_event_time_once(spark: SparkSession) -> None:
    spec = SilverSpec(
        table="events_star",
        window="1 hour",
        keys=("act",),
        select=("*", "lower(action) AS act"),
        measures=(("n", "count(*)"),),
    )
    dataset, (aggregate,) = events_with(spec)
    rows = events_rows(seed=14, n=100)
    counts: Counter[tuple[datetime, str]] = Counter(
        (tumbling(r["time"] * SECOND, 3600 * SECOND)[0], r["action"].lower()) for r in rows
    )

    got = normalized(collect(aggregate.transform(bronze(spark, "events", rows), dataset.watermark)))

    assert list(got[0]) == ["window_start", "window_end", "act", "n"]
    assert {(r["window_start"], r["act"]): r["n"] for r in got} == dict(counts)


def test_a_table_without_a_window_is_keyed_by_its_keys_alone(spark: SparkSession) -> None:
    spec = SilverSpec(
        table="events_per_action",
        keys=("action",),
        measures=(("n", "count(*)"), ("first", "min(time)"), ("last", "max(time)")),
    )
    dataset, (aggregate,) = events_with(spec)
    rows = events_rows(seed=13)
    times: dict[str, list[int]] = defaultdict(list)
    for r in rows:
        times[r["action"]].append(r["time"])

    got = collect(aggregate.transform(bronze(spark, "events", rows), dataset.watermark))

    assert aggregate.keys == ("action",)
    assert aggregate.window is None and aggregate.output_mode == "update"
    assert {r["action"]: (r["n"], r["first"], r["last"]) for r in got} == {
        action: (len(ts), min(ts), max(ts)) for action, ts in times.items()
    }
    assert list(got[0]) == ["action", "n", "first", "last"]


def swapped_counts(bronze: DataFrame, watermark: str) -> DataFrame:
    """A `transform:` escape hatch: counts per action, the action name reversed."""
    from pyspark.sql import functions as F

    return (
        bronze.groupBy(F.reverse("action").alias("action"))
        .agg(F.count("*").alias("count"))
        .withColumn("watermark", F.lit(watermark))
    )


def test_a_transform_replaces_the_declared_chain(spark: SparkSession) -> None:
    spec = SilverSpec(
        table="events_swapped",
        keys=("action",),
        transform=f"{__name__}:swapped_counts",
    )
    _, (aggregate,) = events_with(spec)
    rows = events_rows(seed=14)

    got = collect(aggregate.transform(bronze(spark, "events", rows), "3 minutes"))

    expected = Counter(r["action"][::-1] for r in rows)
    assert {r["action"]: r["count"] for r in got} == expected
    assert {r["watermark"] for r in got} == {"3 minutes"}


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("no_such_module_xyz:f", r"transform 'no_such_module_xyz:f' cannot be imported"),
        (f"{__name__}:nothing_here", rf"transform '{__name__}:nothing_here' cannot be imported"),
        (f"{__name__}:LINES", rf"transform '{__name__}:LINES' is not a function"),
    ],
)
def test_a_transform_that_cannot_be_loaded_is_a_config_error(
    spark: SparkSession, reference: str, message: str
) -> None:
    spec = SilverSpec(table="events_broken", keys=("action",), transform=reference)
    dataset, (aggregate,) = events_with(spec)
    with pytest.raises(ConfigError, match=f"^{message}"):
        aggregate.transform(bronze(spark, "events", events_rows(n=3)), dataset.watermark)
