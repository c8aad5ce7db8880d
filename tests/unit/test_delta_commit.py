"""Writing files and committing them with delta-rs, without Spark (the sink's building blocks).

Every expectation is checked with an independent reader: delta-rs' own `DeltaTable` scan
(`delta_tables.arrow.read_arrow`) or the Parquet files themselves via pyarrow.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyspark.sql.types import (
    DateType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from delta_tables.arrow import read_arrow
from delta_tables.commit import CommitResult, commit_write
from delta_tables.errors import DeltaReplaceWhereError, DeltaSchemaMismatchError
from delta_tables.files import AddFile, FileWriter, WriteSpec
from delta_tables.maintenance import last_checkpoint_version, vacuum
from delta_tables.schema import align_write_schema

SCHEMA = StructType(
    [
        StructField("id", LongType()),
        StructField("action", StringType()),
        StructField("score", DoubleType()),
        StructField("event_time", TimestampType()),
        StructField("event_date", DateType()),
    ]
)
REPO_ROOT = Path(__file__).resolve().parents[2]


def batch(ids: range, day: date = date(2024, 1, 1)) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "action": [("Open" if i % 2 else "Close") for i in ids],
            "score": [i * 0.5 for i in ids],
            "event_time": pa.array(
                [datetime(day.year, day.month, day.day, i % 24, tzinfo=UTC) for i in ids],
                pa.timestamp("us", tz="UTC"),
            ),
            "event_date": pa.array([day] * len(ids), pa.date32()),
        }
    )


def write_files(
    path: Path, data: pa.Table, partition_by: tuple[str, ...] = ("event_date",), **spec: Any
) -> list[AddFile]:
    layout = align_write_schema(None, SCHEMA, table_name=str(path))
    writer = FileWriter(
        WriteSpec(str(path), layout.target.json(), layout.sources, partition_by, **spec)
    )
    return writer.write_all([data])


def commit(path: Path, files: list[AddFile], **kwargs: Any) -> CommitResult:
    kwargs.setdefault("partition_by", ("event_date",))
    return commit_write(str(path), files, schema=SCHEMA, **kwargs)


def rows(path: Path) -> list[dict[str, Any]]:
    return sorted(read_arrow(str(path)).to_pylist(), key=lambda r: r["id"])


def test_written_files_carry_exact_statistics(tmp_path: Path) -> None:
    data = batch(range(10))
    files = write_files(tmp_path / "t", data, partition_by=())
    assert len(files) == 1
    stats = json.loads(files[0].stats)
    parquet = pq.read_table(tmp_path / "t" / files[0].path)
    assert stats["numRecords"] == parquet.num_rows == 10
    for column in ("id", "score"):
        low, high = pc.min_max(parquet.column(column)).values()
        assert stats["minValues"][column] == low.as_py()
        assert stats["maxValues"][column] == high.as_py()
    assert stats["minValues"]["event_date"] == "2024-01-01"
    assert stats["minValues"]["event_time"] == "2024-01-01T00:00:00.000Z"
    assert stats["maxValues"]["event_time"] == "2024-01-01T09:00:00.000Z"
    assert stats["nullCount"] == {c: 0 for c in SCHEMA.fieldNames()}


def test_replayed_batch_commits_nothing(tmp_path: Path) -> None:
    table = tmp_path / "t"
    first = commit(table, write_files(table, batch(range(5))), app_id="query-1", txn_version=0)
    assert (first.version, first.skipped) == (0, False)
    replay_files = write_files(table, batch(range(5)))
    replay = commit(table, replay_files, app_id="query-1", txn_version=0)
    assert replay.skipped and replay.version is None
    dt = DeltaTable(str(table))
    assert dt.version() == 0
    assert dt.transaction_version("query-1") == 0
    assert [r["id"] for r in rows(table)] == list(range(5))
    # The replayed batch's files were never committed and are already deleted again.
    assert not any((table / f.path).exists() for f in replay_files)
    second = commit(table, write_files(table, batch(range(5, 8))), app_id="query-1", txn_version=1)
    assert second.version == 1
    assert [r["id"] for r in rows(table)] == list(range(8))


def test_two_writers_with_different_app_ids_both_land(tmp_path: Path) -> None:
    table = tmp_path / "t"
    commit(table, write_files(table, batch(range(1))), app_id="seed", txn_version=0)
    results: dict[str, list[CommitResult]] = {"a": [], "b": []}
    barrier = threading.Barrier(2)

    def writer(app: str, start: int) -> None:
        for n in range(3):
            files = write_files(table, batch(range(start + n * 10, start + n * 10 + 10)))
            barrier.wait()
            results[app].append(commit(table, files, app_id=f"app-{app}", txn_version=n))

    threads = [
        threading.Thread(target=writer, args=(app, start))
        for app, start in (("a", 100), ("b", 200))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    dt = DeltaTable(str(table))
    assert dt.version() == 6
    assert dt.transaction_version("app-a") == 2
    assert dt.transaction_version("app-b") == 2
    ids = [r["id"] for r in rows(table)]
    assert ids == [0, *range(100, 130), *range(200, 230)]


KILLED_WRITER = """
import sys, time
import pyarrow as pa
from delta_tables.spark_source import Options, plan_write, write_task, commit_plan
from pyspark.sql.types import StructType
import json
schema = StructType.fromJson(json.loads(sys.argv[2]))
plan = plan_write(Options({"path": sys.argv[1], "partitionBy": "event_date"}), schema, False)
table = pa.ipc.open_file(sys.argv[3]).read_all()
message = write_task(plan, iter(table.to_batches()))
print("WRITTEN", len(message.files), flush=True)
time.sleep(600)
commit_plan(plan, [message], None, None)
"""


def test_killed_writer_leaves_table_unchanged_and_vacuum_removes_orphans(tmp_path: Path) -> None:
    table = tmp_path / "t"
    commit(table, write_files(table, batch(range(3))))
    before = rows(table)
    data_file = tmp_path / "batch.arrow"
    data = batch(range(100, 150), day=date(2024, 1, 2))
    with pa.ipc.new_file(str(data_file), data.schema) as sink:
        sink.write_table(data)
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(table), SCHEMA.json(), str(data_file)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("WRITTEN"), line
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    orphans = sorted(
        str(p.relative_to(table)) for p in table.rglob("*.parquet") if "2024-01-02" in str(p)
    )
    assert orphans, "the killed writer should have left its data files behind"
    dt = DeltaTable(str(table))
    assert dt.version() == 0
    assert rows(table) == before
    result = vacuum(str(table), retention_hours=0)
    assert sorted(result.files) == orphans
    assert not any((table / o).exists() for o in orphans)
    assert rows(table) == before


def test_schema_mismatch_names_the_column(tmp_path: Path) -> None:
    table = tmp_path / "t"
    commit(table, write_files(table, batch(range(2))))
    wrong = StructType([StructField("id", StringType()), StructField("action", StringType())])
    with pytest.raises(
        DeltaSchemaMismatchError, match=r"column `id` is string in the data but bigint"
    ):
        align_write_schema(SCHEMA, wrong, table_name=str(table))
    extra = StructType([*SCHEMA.fields, StructField("surprise", LongType())])
    with pytest.raises(
        DeltaSchemaMismatchError,
        match=r"column `surprise` \(bigint\) is not in the table schema.*mergeSchema",
    ):
        align_write_schema(SCHEMA, extra, table_name=str(table))
    merged = align_write_schema(SCHEMA, extra, table_name=str(table), merge_schema=True)
    assert merged.target.fieldNames() == [*SCHEMA.fieldNames(), "surprise"]
    subset = align_write_schema(SCHEMA, StructType(SCHEMA.fields[:2]), table_name="t")
    assert subset.sources == ("id", "action", None, None, None)


def test_merge_schema_adds_the_new_column(tmp_path: Path) -> None:
    table = tmp_path / "t"
    commit(table, write_files(table, batch(range(2))))
    extra = StructType([*SCHEMA.fields, StructField("note", StringType())])
    layout = align_write_schema(SCHEMA, extra, table_name=str(table), merge_schema=True)
    data = batch(range(2, 4)).append_column("note", pa.array(["x", "y"]))
    files = FileWriter(
        WriteSpec(str(table), layout.target.json(), layout.sources, ("event_date",))
    ).write_all([data])
    with pytest.raises(DeltaSchemaMismatchError, match="`note`"):
        commit_write(str(table), files, schema=layout.target, partition_by=("event_date",))
    commit_write(
        str(table), files, schema=layout.target, partition_by=("event_date",), merge_schema=True
    )
    got = rows(table)
    assert [r["note"] for r in got] == [None, None, "x", "y"]


def test_replace_where_replaces_exactly_the_matching_rows(tmp_path: Path) -> None:
    table = tmp_path / "t"
    commit(table, write_files(table, batch(range(0, 4), date(2024, 1, 1))))
    commit(table, write_files(table, batch(range(10, 14), date(2024, 1, 2))))
    where = "event_date = '2024-01-02'"
    files = write_files(table, batch(range(20, 22), date(2024, 1, 2)), replace_where=where)
    result = commit(table, files, mode="overwrite", replace_where=where)
    assert result.files_removed == 1
    assert [r["id"] for r in rows(table)] == [0, 1, 2, 3, 20, 21]
    # A data-column predicate rewrites the partly matching file.
    commit(table, [], mode="overwrite", replace_where="id >= 2 AND id < 21")
    assert [r["id"] for r in rows(table)] == [0, 1, 21]
    with pytest.raises(DeltaReplaceWhereError, match="does not match replaceWhere"):
        write_files(table, batch(range(30, 31), date(2024, 1, 3)), replace_where=where)


def test_checkpoint_every_n_commits(tmp_path: Path) -> None:
    table = tmp_path / "t"
    for n in range(12):
        commit(table, write_files(table, batch(range(n, n + 1))), checkpoint_interval=5)
    assert last_checkpoint_version(str(table)) == 10
    assert len(rows(table)) == 12


def test_not_null_columns_are_enforced(tmp_path: Path) -> None:
    strict = StructType(
        [StructField("id", LongType(), nullable=False), StructField("s", StringType())]
    )
    spec = WriteSpec(str(tmp_path / "t"), strict.json(), ("id", "s"))
    with pytest.raises(
        DeltaSchemaMismatchError, match="NOT NULL constraint violated for column `id`"
    ):
        FileWriter(spec).write_all(
            [pa.table({"id": pa.array([1, None], pa.int64()), "s": ["a", "b"]})]
        )


def test_special_characters_in_partition_values_round_trip(tmp_path: Path) -> None:
    schema = StructType([StructField("k", StringType()), StructField("v", LongType())])
    data = pa.table({"k": ["a b", "x%y", "c:d/e", None], "v": pa.array([1, 2, 3, 4], pa.int64())})
    files = FileWriter(WriteSpec(str(tmp_path / "t"), schema.json(), ("k", "v"), ("k",))).write_all(
        [data]
    )
    commit_write(str(tmp_path / "t"), files, schema=schema, partition_by=("k",))
    got = sorted(read_arrow(str(tmp_path / "t")).to_pylist(), key=lambda r: r["v"])
    assert got == sorted(data.to_pylist(), key=lambda r: r["v"])
    assert os.path.isdir(tmp_path / "t" / "k=c%3Ad%2Fe")
