"""Streaming reads of Delta tables (`spark.readStream.format("delta")`).

Source tables are written with delta-rs' own writer (`write_deltalake`), one data file per
commit, and every streamed row is compared with delta-rs' scan of the table.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from delta_tables.arrow import read_arrow

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, DataStreamReader, SparkSession

pytestmark = pytest.mark.spark


def append(table: Path, ids: range, day: date = date(2024, 1, 1)) -> None:
    data = pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "day": pa.array([day] * len(ids), pa.date32()),
        }
    )
    write_deltalake(str(table), data, mode="append", partition_by=["day"])


def source_table(tmp_path: Path, commits: int = 5, rows: int = 4) -> Path:
    table = tmp_path / "source"
    for n in range(commits):
        append(table, range(n * rows, (n + 1) * rows), date(2024, 1, 1 + n % 2))
    return table


def run(
    spark: SparkSession,
    table: Path,
    checkpoint: Path,
    options: dict[str, str] | None = None,
    trigger: str = "availableNow",
) -> list[list[int]]:
    """Stream the table once; the ids of each non-empty micro-batch, in batch order.

    Every streamed row must equal the table's row with that id (partition values included).
    """
    batches: list[tuple[int, list[int]]] = []
    expected = {r["id"]: r for r in read_arrow(str(table)).to_pylist()}

    def collect(df: DataFrame, batch_id: int) -> None:
        rows = df.toArrow().to_pylist()
        for row in rows:
            if row["id"] in expected:
                assert row == expected[row["id"]]
        batches.append((batch_id, sorted(r["id"] for r in rows)))

    reader: DataStreamReader = spark.readStream.format("delta")
    for key, value in (options or {}).items():
        reader = reader.option(key, value)
    writer = reader.load(str(table)).writeStream.foreachBatch(collect)
    writer = writer.option("checkpointLocation", str(checkpoint))
    writer = writer.trigger(once=True) if trigger == "once" else writer.trigger(availableNow=True)
    writer.start().awaitTermination()
    return [ids for _, ids in sorted(batches) if ids]


def all_ids(table: Path) -> list[int]:
    return sorted(read_arrow(str(table)).column("id").to_pylist())


def flatten(batches: list[list[int]]) -> list[int]:
    return sorted(i for b in batches for i in b)


def test_max_files_per_trigger_under_available_now_reads_everything_in_several_batches(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = source_table(tmp_path, commits=5)
    batches = run(spark, table, tmp_path / "ckpt", {"maxFilesPerTrigger": "2"})
    assert [len(b) for b in batches] == [8, 8, 4]
    assert flatten(batches) == all_ids(table)
    append(table, range(100, 103))
    later = run(spark, table, tmp_path / "ckpt", {"maxFilesPerTrigger": "2"})
    assert later == [[100, 101, 102]]


def test_max_bytes_per_trigger_and_trigger_once(spark: SparkSession, tmp_path: Path) -> None:
    table = source_table(tmp_path, commits=4)
    one_file = min(
        DeltaTable(str(table)).get_add_actions(flatten=True).column("size_bytes").to_pylist()
    )
    by_bytes = run(spark, table, tmp_path / "c1", {"maxBytesPerTrigger": str(one_file)})
    assert len(by_bytes) == 4
    assert flatten(by_bytes) == all_ids(table)
    # Trigger.Once means ReadAllAvailable: the limits are ignored, one batch.
    once = run(spark, table, tmp_path / "c2", {"maxFilesPerTrigger": "1"}, trigger="once")
    assert once == [all_ids(table)]


def test_starting_version_reads_only_later_commits(spark: SparkSession, tmp_path: Path) -> None:
    table = source_table(tmp_path, commits=3)
    batches = run(spark, table, tmp_path / "ckpt", {"startingVersion": "2"})
    assert flatten(batches) == [8, 9, 10, 11]
    assert run(spark, table, tmp_path / "c2", {"startingVersion": "latest"}) == []


@pytest.mark.parametrize(
    "change",
    [
        lambda t: DeltaTable(str(t)).delete("id = 1"),
        lambda t: write_deltalake(
            str(t),
            pa.table({"id": pa.array([7], pa.int64()), "day": pa.array([date(2024, 1, 9)])}),
            mode="overwrite",
            partition_by=["day"],
        ),
    ],
    ids=["delete", "overwrite"],
)
def test_change_commits_fail_the_stream_unless_skipped(
    spark: SparkSession, tmp_path: Path, change: Callable[[Path], Any]
) -> None:
    table = source_table(tmp_path, commits=2)
    assert flatten(run(spark, table, tmp_path / "ckpt")) == all_ids(table)
    change(table)
    append(table, range(50, 52))
    with pytest.raises(
        Exception, match=r"changed existing data at version 2 .*skipChangeCommits=true"
    ):
        run(spark, table, tmp_path / "ckpt")
    skipped = run(spark, table, tmp_path / "ckpt", {"skipChangeCommits": "true"})
    assert skipped == [[50, 51]]
