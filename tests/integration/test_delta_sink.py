"""Writing Delta tables from Spark: `format("delta")` (batch + streaming) and the fast path.

Results are read back independently with delta-rs (`delta_tables.arrow.read_arrow`, its log and
history) and compared with the rows the test itself wrote.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from deltalake import DeltaTable

from delta_tables import merge_into, write_batch, write_stream
from delta_tables.arrow import read_arrow
from delta_tables.errors import DeltaSchemaMismatchError, DeltaUnsupportedError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

DDL = "id BIGINT, action STRING, score DOUBLE, event_time TIMESTAMP, event_date DATE"
ROWS: list[tuple[Any, ...]] = [
    (1, "Open", 0.5, datetime(2024, 1, 1, 0, 0, 1, 250, tzinfo=UTC), date(2024, 1, 1)),
    (2, "Close", -1.25, datetime(2024, 1, 1, 23, 59, 59, tzinfo=UTC), date(2024, 1, 1)),
    (3, None, None, None, date(2024, 1, 2)),
    (4, "Open", 1e300, datetime(1999, 12, 31, 12, tzinfo=UTC), None),
]
DELTA_TYPES = {
    "id": "long",
    "action": "string",
    "score": "double",
    "event_time": "timestamp",
    "event_date": "date",
}


def frame(spark: SparkSession, rows: list[tuple[Any, ...]] = ROWS) -> DataFrame:
    return spark.createDataFrame(rows, DDL)


def delta_rows(path: Path) -> list[dict[str, Any]]:
    return sorted(read_arrow(str(path)).to_pylist(), key=lambda r: r["id"])


def expected_rows(rows: list[tuple[Any, ...]] = ROWS) -> list[dict[str, Any]]:
    names = [c.split()[0] for c in DDL.split(", ")]
    return sorted((dict(zip(names, r, strict=True)) for r in rows), key=lambda r: r["id"])


def spark_rows(spark: SparkSession, path: Path) -> list[dict[str, Any]]:
    table = spark.read.format("delta").load(str(path)).toArrow()
    return sorted(table.to_pylist(), key=lambda r: r["id"])


def write_with_format(df: DataFrame, path: Path, partition_by: list[str]) -> None:
    writer = df.write.format("delta").mode("append")
    if partition_by:
        writer = writer.option("partitionBy", ",".join(partition_by))
    writer.save(str(path))


def write_with_fast_path(df: DataFrame, path: Path, partition_by: list[str]) -> None:
    write_batch(df, path, partition_by=partition_by or None)


@pytest.mark.parametrize("partition_by", [["event_date"], []], ids=["partitioned", "unpartitioned"])
@pytest.mark.parametrize(
    "write", [write_with_format, write_with_fast_path], ids=["format_delta", "fast_path"]
)
def test_round_trip_of_every_dataset_type(
    spark: SparkSession,
    tmp_path: Path,
    partition_by: list[str],
    write: Callable[[DataFrame, Path, list[str]], None],
) -> None:
    table = tmp_path / "t"
    write(frame(spark), table, partition_by)
    dt = DeltaTable(str(table))
    schema = json.loads(dt.schema().to_json())
    assert {f["name"]: f["type"] for f in schema["fields"]} == DELTA_TYPES
    assert dt.metadata().partition_columns == partition_by
    assert delta_rows(table) == expected_rows()
    assert spark_rows(spark, table) == expected_rows()
    stats = [json.loads(a["add"]["stats"]) for a in _log(table, 0) if "add" in a]
    assert sum(s["numRecords"] for s in stats) == len(ROWS)
    # Statistics bound the data: the smallest min / largest max are the true extremes.
    ids = [r[0] for r in ROWS]
    assert min(s["minValues"]["id"] for s in stats) == min(ids)
    assert max(s["maxValues"]["id"] for s in stats) == max(ids)
    assert sum(s["nullCount"]["action"] for s in stats) == sum(r[1] is None for r in ROWS)


def _log(table: Path, version: int) -> list[dict[str, Any]]:
    text = (table / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line]


def test_batch_txn_options_skip_an_already_committed_version(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = tmp_path / "t"
    for _ in range(2):
        (
            frame(spark)
            .write.format("delta")
            .mode("append")
            .option("txnAppId", "backfill-42")
            .option("txnVersion", "7")
            .option("userMetadata", "backfill 2024-01-01")
            .save(str(table))
        )
    dt = DeltaTable(str(table))
    assert dt.version() == 0
    assert dt.transaction_version("backfill-42") == 7
    assert delta_rows(table) == expected_rows()
    assert dt.history(1)[0].get("userMetadata") == "backfill 2024-01-01"
    result = write_batch(frame(spark), table, app_id="backfill-42", version=7)
    assert result.skipped
    assert write_batch(frame(spark), table, app_id="backfill-42", version=8).version == 1
    assert len(delta_rows(table)) == 2 * len(ROWS)


def test_schema_mismatch_fails_naming_the_column(spark: SparkSession, tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_batch(frame(spark), table)
    wrong = frame(spark).selectExpr("cast(id as string) as id", "action")
    with pytest.raises(
        Exception, match=r"column `id` is string in the data but bigint in the table"
    ):
        wrong.write.format("delta").mode("append").save(str(table))
    with pytest.raises(DeltaSchemaMismatchError, match=r"column `id` is string in the data"):
        write_batch(wrong, table)
    extra = frame(spark).selectExpr("*", "1 as surprise")
    with pytest.raises(Exception, match=r"column `surprise` \(int\) is not in the table schema"):
        extra.write.format("delta").mode("append").save(str(table))
    extra.write.format("delta").mode("append").option("mergeSchema", "true").save(str(table))
    assert DeltaTable(str(table)).schema().fields[-1].name == "surprise"
    assert DeltaTable(str(table)).version() == 2  # add column, then the data
    (
        frame(spark)
        .selectExpr("id", "action")
        .write.format("delta")
        .mode("overwrite")
        .option("overwriteSchema", "true")
        .save(str(table))
    )
    assert [f.name for f in DeltaTable(str(table)).schema().fields] == ["id", "action"]
    assert len(delta_rows(table)) == len(ROWS)


def test_replace_where_overwrites_one_partition(spark: SparkSession, tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_batch(frame(spark), table, partition_by=["event_date"])
    new_day = [(10, "Open", 1.0, datetime(2024, 1, 2, tzinfo=UTC), date(2024, 1, 2))]
    (
        frame(spark, new_day)
        .write.format("delta")
        .mode("overwrite")
        .option("replaceWhere", "event_date = DATE'2024-01-02'")
        .save(str(table))
    )
    expected = [r for r in ROWS if r[4] != date(2024, 1, 2)] + new_day
    assert delta_rows(table) == expected_rows(expected)
    newer = [(11, "Close", 2.0, datetime(2024, 1, 2, tzinfo=UTC), date(2024, 1, 2))]
    result = write_batch(
        frame(spark, newer), table, mode="overwrite", replace_where="event_date = '2024-01-02'"
    )
    assert result.files_removed == 1
    assert delta_rows(table) == expected_rows([r for r in expected if r[0] != 10] + newer)
    outside = [(12, "Open", 0.0, None, date(2024, 1, 3))]
    with pytest.raises(Exception, match="does not match replaceWhere"):
        write_batch(
            frame(spark, outside),
            table,
            mode="overwrite",
            replace_where="event_date = '2024-01-02'",
        )


# -- streaming ---------------------------------------------------------------------------------
def _landing(directory: Path, name: str, ids: range) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps({"time": 1_700_000_000 + i * 60, "action": "Open" if i % 3 else "Close"})
        for i in ids
    ]
    (directory / f"{name}.json").write_text("\n".join(lines) + "\n")


def _events(spark: SparkSession, landing: Path) -> DataFrame:
    return spark.readStream.schema("time BIGINT, action STRING").json(str(landing))


def _drop_last_commit(checkpoint: Path) -> int:
    """Forget that Spark finished the last batch (as if it crashed right after the sink commit)."""
    commits = sorted(
        (p for p in (checkpoint / "commits").iterdir() if p.name.isdigit()),
        key=lambda p: int(p.name),
    )
    last = commits[-1]
    last.unlink()
    crc = last.with_name(f".{last.name}.crc")
    if crc.exists():
        crc.unlink()
    return int(last.name)


@pytest.mark.parametrize("fast_path", [False, True], ids=["format_delta", "foreach_batch"])
def test_stream_replayed_batch_commits_nothing_and_new_checkpoint_gets_new_app_id(
    spark: SparkSession, tmp_path: Path, fast_path: bool
) -> None:
    landing, table, checkpoint = tmp_path / "landing", tmp_path / "t", tmp_path / "ckpt"
    _landing(landing, "a", range(0, 30))

    def run(ckpt: Path) -> None:
        write_stream(
            _events(spark, landing), table, checkpoint_location=ckpt, fast_path=fast_path
        ).awaitTermination()

    run(checkpoint)
    query_id = json.loads((checkpoint / "metadata").read_text())["id"]
    dt = DeltaTable(str(table))
    assert dt.transaction_version(query_id) == 0
    version = dt.version()
    batch_id = _drop_last_commit(checkpoint)
    run(checkpoint)  # Spark replays batch `batch_id`: the sink must skip it
    dt = DeltaTable(str(table))
    assert dt.version() == version
    assert dt.transaction_version(query_id) == batch_id
    assert len(delta_rows_any(table)) == 30
    run(tmp_path / "ckpt-reset")  # a reset checkpoint is a new query: everything again
    assert len(delta_rows_any(table)) == 60
    new_id = json.loads((tmp_path / "ckpt-reset" / "metadata").read_text())["id"]
    assert new_id != query_id and DeltaTable(str(table)).transaction_version(new_id) == 0


def delta_rows_any(path: Path) -> list[dict[str, Any]]:
    return read_arrow(str(path)).to_pylist()


def test_complete_mode_replaces_the_table_and_update_mode_is_refused(
    spark: SparkSession, tmp_path: Path
) -> None:
    landing, table, checkpoint = tmp_path / "landing", tmp_path / "t", tmp_path / "ckpt"
    _landing(landing, "a", range(0, 9))
    counts = _events(spark, landing).groupBy("action").count()

    def run() -> None:
        (
            counts.writeStream.format("delta")
            .outputMode("complete")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start(str(table))
            .awaitTermination()
        )

    run()
    assert {r["action"]: r["count"] for r in delta_rows_any(table)} == {"Close": 3, "Open": 6}
    _landing(landing, "b", range(9, 12))
    run()
    assert {r["action"]: r["count"] for r in delta_rows_any(table)} == {"Close": 4, "Open": 8}
    with pytest.raises(
        DeltaUnsupportedError, match=r"output mode 'update'.*foreachBatch.*merge_into"
    ):
        write_stream(
            counts, tmp_path / "u", checkpoint_location=tmp_path / "c2", output_mode="update"
        )
    with pytest.raises(Exception, match="does not support Update mode"):
        (
            counts.writeStream.format("delta")
            .outputMode("update")
            .option("checkpointLocation", str(tmp_path / "c3"))
            .trigger(availableNow=True)
            .start(str(tmp_path / "u"))
            .awaitTermination()
        )


def test_merge_into_upserts_micro_batches_exactly_once(spark: SparkSession, tmp_path: Path) -> None:
    landing, table, checkpoint = tmp_path / "landing", tmp_path / "t", tmp_path / "ckpt"
    _landing(landing, "a", range(0, 9))
    counts = _events(spark, landing).groupBy("action").count()
    results: list[Any] = []

    def upsert(batch: DataFrame, batch_id: int) -> None:
        query_id = json.loads((checkpoint / "metadata").read_text())["id"]
        results.append(merge_into(batch, table, ["action"], app_id=query_id, version=batch_id))

    def run() -> None:
        (
            counts.writeStream.foreachBatch(upsert)
            .outputMode("update")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
            .awaitTermination()
        )

    run()
    _landing(landing, "b", range(9, 12))
    run()
    assert {r["action"]: r["count"] for r in delta_rows_any(table)} == {"Close": 4, "Open": 8}
    version = DeltaTable(str(table)).version()
    _drop_last_commit(checkpoint)
    run()
    assert results[-1].skipped
    assert DeltaTable(str(table)).version() == version
    assert {r["action"]: r["count"] for r in delta_rows_any(table)} == {"Close": 4, "Open": 8}
