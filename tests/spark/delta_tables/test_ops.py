"""`delta_tables.ops`: append-only operations tables, recordable with and without Spark.

Without Spark (`park`, or `append_rows` in a child process that never starts Spark) rows are
parked as Arrow IPC files under `<table>/_pending/`; with the shared SparkSession, `append_rows`
commits the parked rows with its own in one commit and removes the parked files. Expected rows
are the rows the test wrote, compared as sorted tuples; the table is read both by `read_rows`
(delta-rs plus the parked files) and by `spark.read.format("delta")`. Inside
`one_commit_per_table()` rows are parked, and committed once per table as the block ends.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from delta_tables.ops import PENDING, append_rows, one_commit_per_table, park, read_rows
from delta_tables.writes import is_delta_table, table_version

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string()),
        pa.field("dataset", pa.string()),
        pa.field("ok", pa.bool_()),
        pa.field("rows", pa.int64()),
        pa.field("at", pa.timestamp("us", tz="UTC")),
    ]
)
KEY = ["run_id"]
Row = tuple[Any, ...]


def record(run_id: str, dataset: str = "events", ok: bool = True, rows: int = 1) -> Row:
    return (run_id, dataset, ok, rows, datetime(2024, 1, 1, 0, rows, tzinfo=UTC))


def table(*records: Row) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in records], SCHEMA)


def tuples(data: pa.Table) -> list[Row]:
    return sorted(tuple(row.values()) for row in data.to_pylist())


def parked(path: Path) -> list[Path]:
    """Every file in the parking folder (temp files included; not the flush lock)."""
    folder = path / PENDING
    return sorted(p for p in folder.iterdir() if p.name != ".lock") if folder.is_dir() else []


def spark_rows(spark: SparkSession, path: Path) -> list[Row]:
    """The committed rows as delta-spark reads them (timestamps made UTC-aware)."""
    out = []
    for row in spark.read.format("delta").load(str(path)).select(*SCHEMA.names).collect():
        values = row.asDict()
        values["at"] = values["at"].replace(tzinfo=UTC)  # the session time zone is UTC
        out.append(tuple(values.values()))
    return sorted(out)


# -- without Spark --------------------------------------------------------------------------------
def test_park_and_read_rows_without_a_table(tmp_path: Path) -> None:
    path = tmp_path / "runs"
    empty = read_rows(path, SCHEMA, KEY)
    assert empty.schema == SCHEMA
    assert empty.num_rows == 0

    first = [record("r1"), record("r2", "sensors", ok=False, rows=2)]
    second = [record("r3", "it's", rows=3)]
    one, two = park(path, table(*first)), park(path, table(*second))
    assert one != two
    assert parked(path) == sorted([one, two])  # no temporary file left behind
    assert all(f.suffix == ".arrow" for f in parked(path))
    with ipc.open_file(one) as reader:
        assert tuples(reader.read_all()) == sorted(first)
    assert not is_delta_table(path)

    everything = read_rows(path, SCHEMA, KEY)
    assert everything.schema == SCHEMA
    assert tuples(everything) == sorted(first + second)
    assert tuples(read_rows(path, SCHEMA, KEY, equal={"dataset": "events"})) == [record("r1")]
    assert tuples(read_rows(path, SCHEMA, KEY, equal={"dataset": "it's"})) == second
    assert tuples(read_rows(path, SCHEMA, KEY, equal={"ok": False})) == [first[1]]
    assert read_rows(path, SCHEMA, KEY, equal={"dataset": "lines"}).num_rows == 0
    ids = read_rows(path, SCHEMA, KEY, columns=["run_id"], equal={"ok": True})
    assert ids.schema.names == ["run_id"]
    assert sorted(ids.column("run_id").to_pylist()) == ["r1", "r3"]


CHILD = """
import sys
from pathlib import Path

import pyarrow.ipc as ipc
from pyspark import SparkContext
from pyspark.sql import SparkSession

from delta_tables.ops import append_rows

with ipc.open_file(sys.argv[2]) as reader:
    rows = reader.read_all()
append_rows(Path(sys.argv[1]), rows, ["run_id"])
assert SparkSession.getActiveSession() is None and SparkContext._active_spark_context is None
print("parked")
"""


# -- with Spark -----------------------------------------------------------------------------------
@pytest.mark.spark
def test_append_rows_commits_parked_and_new_rows_in_one_commit(
    spark: SparkSession, tmp_path: Path
) -> None:
    from pyspark.sql import SparkSession

    assert SparkSession.getActiveSession() is not None  # append_rows goes through Spark
    path = tmp_path / "runs"
    early = [record("r1"), record("r2", "sensors", ok=False, rows=2)]
    park(path, table(*early))
    now = [record("r3", rows=3)]

    append_rows(path, table(*now), KEY)
    assert table_version(path) == 0  # one commit for the parked and the new rows
    assert parked(path) == []
    assert spark_rows(spark, path) == sorted(early + now)
    assert tuples(read_rows(path, SCHEMA, KEY)) == sorted(early + now)

    later = [record("r4", "lines", rows=4)]
    park(path, table(*later))
    # before the next Spark append, readers see the committed and the parked rows
    assert tuples(read_rows(path, SCHEMA, KEY)) == sorted(early + now + later)
    last = [record("r5", "it's", rows=5), record("r6", "lines", ok=False, rows=6)]
    append_rows(path, table(*last), KEY)
    assert table_version(path) == 1
    assert parked(path) == []
    everything = sorted(early + now + later + last)
    assert spark_rows(spark, path) == everything
    assert tuples(read_rows(path, SCHEMA, KEY)) == everything

    # equal= filters the table's rows and the parked ones, columns= selects
    parked_too = [record("r7", "lines", rows=7), record("r8", "events", ok=False, rows=8)]
    park(path, table(*parked_too))
    everything = sorted(everything + parked_too)
    filters = [("dataset", "lines"), ("dataset", "events"), ("dataset", "it's"), ("ok", False)]
    for column, value in filters:
        want = [r for r in everything if r[SCHEMA.names.index(column)] == value]
        got = read_rows(path, SCHEMA, KEY, equal={column: value})
        assert got.schema == SCHEMA
        assert tuples(got) == want, (column, value)
    got = read_rows(path, SCHEMA, KEY, columns=["rows", "run_id"], equal={"dataset": "lines"})
    assert got.schema.names == ["rows", "run_id"]
    assert tuples(got) == [(4, "r4"), (6, "r6"), (7, "r7")]
    assert read_rows(path, SCHEMA, KEY, equal={"dataset": "nope"}).num_rows == 0


@pytest.mark.spark
def test_parked_rows_the_table_already_holds_are_not_committed_again(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = tmp_path / "runs"
    first = [record("r1")]
    append_rows(path, table(*first), KEY)  # nothing parked: a plain append creates the table
    assert table_version(path) == 0

    early = [record("r2", rows=2), record("r3", "sensors", rows=3)]
    parked_file = park(path, table(*early))
    content = parked_file.read_bytes()
    second = [record("r4", rows=4)]
    append_rows(path, table(*second), KEY)
    assert table_version(path) == 1
    assert not parked_file.exists()

    # a crash between that commit and the removal: the parked file is still there, and a
    # Spark-less process parked one more row since
    parked_file.write_bytes(content)
    late = [record("r5", "lines", rows=5)]
    park(path, table(*late))
    # readers meanwhile see every run once: the committed rows still parked are left out
    assert tuples(read_rows(path, SCHEMA, KEY)) == sorted(first + early + second + late)
    third = [record("r6", rows=6)]
    append_rows(path, table(*third), KEY)

    assert table_version(path) == 2
    assert parked(path) == []
    everything = sorted(first + early + second + late + third)
    assert spark_rows(spark, path) == everything  # every run once
    assert tuples(read_rows(path, SCHEMA, KEY)) == everything
    added = spark.read.format("delta").option("versionAsOf", 2).load(str(path)).count() - (
        spark.read.format("delta").option("versionAsOf", 1).load(str(path)).count()
    )
    assert added == len(late + third)


@pytest.mark.spark
def test_one_commit_per_table_commits_each_tables_rows_once_as_the_block_ends(
    spark: SparkSession, tmp_path: Path
) -> None:
    runs, results = tmp_path / "runs", tmp_path / "results"
    append_rows(runs, table(record("r0")), KEY)  # the table exists: version 0
    steps = [[record("r1")], [record("r2", "sensors", rows=2)], [record("r3", ok=False, rows=3)]]
    every_run = sorted([record("r0"), *(row for step in steps for row in step)])
    checks = [record("c1", rows=4)]

    with pytest.raises(RuntimeError, match="step 3 failed"), one_commit_per_table():
        for step in steps:
            append_rows(runs, table(*step), KEY)
            # parked: nothing committed yet, readers see the rows already
            assert table_version(runs) == 0
            assert not is_delta_table(results)
        append_rows(results, table(*checks), KEY)
        assert tuples(read_rows(runs, SCHEMA, KEY)) == every_run
        raise RuntimeError("step 3 failed")  # a failed step's rows are committed too

    assert table_version(runs) == 1  # one commit for the three steps' rows
    assert table_version(results) == 0
    assert parked(runs) == [] and parked(results) == []
    assert spark_rows(spark, runs) == every_run
    assert spark_rows(spark, results) == sorted(checks)

    # outside a block, an append commits at once again
    append_rows(runs, table(record("r4", rows=4)), KEY)
    assert table_version(runs) == 2
