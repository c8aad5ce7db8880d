"""jobs/silver.py: the MERGE condition, exactly-once MERGEs through delta-spark, progress lines."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql.types import (
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from core.errors import RunoffError
from delta_tables.arrow import read_arrow
from delta_tables.catalog import Table, ensure_table
from delta_tables.writes import merge
from jobs.silver import (
    BatchWriter,
    MergeOutcome,
    SilverOptions,
    TableRun,
    batch_profile,
    late_rows_of,
    merge_batch,
    merge_predicate,
)
from tests.seeds import seed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

T0 = datetime(2024, 1, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)
EVENTS_SCHEMA = StructType(
    [
        StructField("window_start", TimestampType()),
        StructField("window_end", TimestampType()),
        StructField("action", StringType()),
        StructField("count", LongType(), nullable=False),
    ]
)
HOURLY = seed("events").aggregate("events_action_hourly")
LOST = seed("sensors").aggregate("sensors_lost_signal")


def create(spark: SparkSession, path: Path, schema: StructType, interval: int = 10) -> None:
    table = Table(
        name=path.name,
        layer="silver",
        path=path,
        properties={"delta.checkpointInterval": str(interval)},
    )
    assert ensure_table(spark, table, schema)
    assert not ensure_table(spark, table, schema)  # it exists now: nothing to do


def hourly(spark: SparkSession, rows: list[tuple[int, str, int]]) -> DataFrame:
    """(hour, action, count) -> silver rows."""
    data = [(T0 + h * HOUR, T0 + (h + 1) * HOUR, action, count) for h, action, count in rows]
    return spark.createDataFrame(data, EVENTS_SCHEMA)


def table_rows(path: Path) -> list[tuple[Any, ...]]:
    rows = read_arrow(str(path)).to_pylist()
    return sorted((r["window_start"], r["action"], r["count"]) for r in rows)


def last_metrics(spark: SparkSession, path: Path) -> dict[str, str]:
    from delta.tables import DeltaTable as SparkDeltaTable

    row = SparkDeltaTable.forPath(spark, str(path)).history(1).first()
    assert row is not None
    return dict(row["operationMetrics"])


# -- the MERGE condition ----------------------------------------------------------------------
def test_merge_predicate_quotes_keys_and_bounds_the_target_window() -> None:
    low, high = T0, T0 + 2 * HOUR
    assert merge_predicate(("window_start", "window_end", "deviceId"), (low, high)) == (
        "t.`window_start` = s.`window_start` AND t.`window_end` = s.`window_end` AND "
        "t.`deviceId` = s.`deviceId` AND "
        "t.`window_start` >= TIMESTAMP '2024-01-01 00:00:00.000000+00:00' AND "
        "t.`window_start` <= TIMESTAMP '2024-01-01 02:00:00.000000+00:00'"
    )


def test_merge_predicate_without_window_matches_on_keys_only() -> None:
    assert merge_predicate(("word",)) == "t.`word` = s.`word`"


def test_merge_predicate_needs_a_key() -> None:
    with pytest.raises(ValueError, match="a MERGE needs at least one key column"):
        merge_predicate(())


@pytest.mark.spark
def test_batch_profile_is_rows_and_min_and_max_window_start(spark: SparkSession) -> None:
    data = hourly(spark, [(3, "Open", 1), (1, "Close", 2), (2, "Open", 5)])
    assert batch_profile(data) == (
        3,
        ((T0 + HOUR).replace(tzinfo=None), (T0 + 3 * HOUR).replace(tzinfo=None)),
    )
    assert batch_profile(data.limit(0)) == (0, None)
    words = spark.createDataFrame([("a", 1), ("b", 2)], "word string, count long")
    assert batch_profile(words) == (2, None)


# -- the exactly-once MERGE -------------------------------------------------------------------
@pytest.mark.spark
def test_merge_updates_windows_inserts_new_ones_and_skips_a_replayed_batch(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = tmp_path / "events_action_hourly"
    create(spark, path, EVENTS_SCHEMA)

    first = merge_batch(path, hourly(spark, [(0, "Open", 2), (0, "Close", 1)]), HOURLY, "app", 0)
    second = merge_batch(path, hourly(spark, [(0, "Open", 3), (1, "Open", 1)]), HOURLY, "app", 1)

    assert (first.committed, first.inserted, first.updated) == (True, 2, 0)
    assert (second.committed, second.inserted, second.updated) == (True, 1, 1)
    expected = [(T0, "Close", 1), (T0, "Open", 3), (T0 + HOUR, "Open", 1)]
    assert table_rows(path) == expected
    version = DeltaTable(str(path)).version()
    assert DeltaTable(str(path)).transaction_version("app") == 1

    # batch 1 again (a restart replays it): nothing changes, not even the version
    replay = merge_batch(path, hourly(spark, [(0, "Open", 99)]), HOURLY, "app", 1)

    assert not replay.committed
    assert DeltaTable(str(path)).version() == version
    assert table_rows(path) == expected


@pytest.mark.spark
def test_merge_refuses_a_table_with_other_columns(spark: SparkSession, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    path = tmp_path / "events_action_hourly"
    create(spark, path, EVENTS_SCHEMA)
    data = hourly(spark, [(0, "Open", 1)]).withColumn("window_date", F.to_date("window_start"))

    with pytest.raises(
        RunoffError,
        match=r"silver table .*events_action_hourly has columns \[window_start, window_end, "
        r"action, count\] but events_action_hourly now produces \[window_start, window_end, "
        r"action, count, window_date\]: rebuild it with `runoff reset events --layer silver --yes`",
    ):
        merge_batch(path, data, HOURLY, "app", 0)


@pytest.mark.spark
def test_merge_of_an_empty_batch_commits_nothing(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "events_action_hourly"
    create(spark, path, EVENTS_SCHEMA)

    outcome = merge_batch(path, hourly(spark, []), HOURLY, "app", 0)

    assert outcome == MergeOutcome(0, 0, 0, outcome.seconds, False, 0)
    assert DeltaTable(str(path)).version() == 0


@pytest.mark.spark
def test_append_mode_inserts_a_window_once(spark: SparkSession, tmp_path: Path) -> None:
    schema = StructType(
        [
            StructField("window_start", TimestampType()),
            StructField("window_end", TimestampType()),
            StructField("deviceId", StringType()),
            StructField("deviceType", StringType()),
            StructField("count", LongType(), nullable=False),
        ]
    )
    path = tmp_path / "sensors_lost_signal"
    create(spark, path, schema)
    minute = timedelta(minutes=1)
    row = (T0, T0 + minute, "cam-1", "cam")

    merge_batch(path, spark.createDataFrame([(*row, 2)], schema), LOST, "app", 0)
    # the same window again under a new batch id must neither duplicate nor change it
    again = merge_batch(path, spark.createDataFrame([(*row, 4)], schema), LOST, "app", 1)

    rows = read_arrow(str(path)).to_pylist()
    assert [(r["deviceId"], r["count"]) for r in rows] == [("cam-1", 2)]
    assert (again.inserted, again.updated) == (0, 0)


@pytest.mark.spark
def test_merge_never_opens_files_of_older_windows(spark: SparkSession, tmp_path: Path) -> None:
    """The window_start range lets delta-spark skip every file written by earlier batches: a
    file it would open is deleted from disk first, so reading it would fail the MERGE."""
    path = tmp_path / "events_action_hourly"
    create(spark, path, EVENTS_SCHEMA)
    for batch in range(3):
        merge_batch(path, hourly(spark, [(batch, "Open", 1)]), HOURLY, "app", batch)
    actions = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True)).to_pylist()
    oldest = next(a["path"] for a in actions if a["min.window_start"] == T0)
    (path / oldest).unlink()

    merge_batch(path, hourly(spark, [(5, "Open", 1)]), HOURLY, "app", 3)
    # an update of hour 2 rewrites the one file that holds it, copying no other row
    merge_batch(path, hourly(spark, [(2, "Open", 7)]), HOURLY, "app", 4)

    metrics = last_metrics(spark, path)
    assert (metrics["numTargetFilesRemoved"], metrics["numTargetRowsCopied"]) == ("1", "0")
    # Spark skips the deleted file here too (data skipping on window_start).
    rows = (
        spark.read.format("delta")
        .load(str(path))
        .where("window_start >= TIMESTAMP'2024-01-01 00:30:00'")
        .selectExpr("date_format(window_start, 'HH:mm') AS hour", "action", "count")
        .collect()
    )
    assert sorted(tuple(r) for r in rows) == [
        ("01:00", "Open", 1),
        ("02:00", "Open", 7),
        ("05:00", "Open", 1),
    ]

    # Without the range the same MERGE reads every file, the deleted one too.
    keys_only = merge_predicate(HOURLY.keys)
    with pytest.raises(Exception, match=r"FileNotFound|does not exist"):
        merge(
            hourly(spark, [(6, "Open", 1)]),
            path,
            condition=keys_only,
            update=True,
            app_id="app",
            version=5,
        )


@pytest.mark.spark
def test_tables_are_checkpointed_every_interval_commits(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = tmp_path / "events_action_hourly"
    create(spark, path, EVENTS_SCHEMA, interval=3)
    outcomes = [
        merge_batch(path, hourly(spark, [(b, "Open", 1)]), HOURLY, "app", b) for b in range(7)
    ]

    assert [o.version for o in outcomes] == [1, 2, 3, 4, 5, 6, 7]
    checkpoints = sorted(p.name for p in (path / "_delta_log").glob("*.checkpoint.parquet"))
    assert checkpoints == [f"{v:020d}.checkpoint.parquet" for v in (3, 6)]


# -- progress ---------------------------------------------------------------------------------
def progress(batch_id: int, rows: int, dropped: list[int], millis: int = 1500) -> dict[str, Any]:
    return {
        "batchId": batch_id,
        "numInputRows": rows,
        "durationMs": {"triggerExecution": millis},
        "eventTime": {"watermark": "2024-01-01T02:00:00.000Z"},
        "stateOperators": [{"numRowsDroppedByWatermark": n} for n in dropped],
    }


def test_late_rows_of_sums_the_state_operators() -> None:
    assert late_rows_of(progress(0, 10, [2, 3])) == 5
    assert late_rows_of({"batchId": 0}) == 0


def test_table_run_reports_each_batch_once(tmp_path: Path) -> None:
    writer = BatchWriter(HOURLY, tmp_path / "t", tmp_path / "ckpt")
    writer.outcomes[0] = MergeOutcome(4, 3, 1, 0.25, True, 1)
    writer.outcomes[1] = MergeOutcome(4, 0, 0, 0.01, False, 1)
    run = TableRun(HOURLY, tmp_path / "t", tmp_path / "ckpt", writer)

    lines = [run.observe(progress(0, 120, [0])), run.observe(progress(0, 120, [0]))]
    lines += [run.observe(progress(1, 30, [2])), run.observe(progress(2, 0, []))]

    assert lines == [
        "silver events_action_hourly batch 0: 120 rows in, 4 rows merged (3 new, 1 updated) "
        "in 0.25 s, 1.5 s",
        None,
        "silver events_action_hourly batch 1: 30 rows in, 2 late, 4 rows already committed "
        "before a restart, skipped, 1.5 s",
        "silver events_action_hourly batch 2: 0 rows in, no window changed, 1.5 s",
    ]
    assert (run.batches, run.input_rows, run.late_rows) == (3, 150, 2)
    assert run.merged_rows == 4
    assert run.merge_seconds == [0.25]
    assert run.watermark == "2024-01-01T02:00:00.000Z"


def test_options_come_from_the_command_line() -> None:
    args = argparse.Namespace(dataset="events", watermark="2 hours", max_files_per_trigger=1)
    assert SilverOptions.from_args(args) == SilverOptions("2 hours", 1)
