"""`delta_tables.writes`: appends and merges through delta-spark, each at most once per
(app id, version).

Every table is small and lives in `tmp_path`. The expected rows of each step are computed here,
in plain Python, from the rows the test itself wrote; tables are read back both by
`spark.read.format("delta")` and by delta-rs (`read_arrow`), and versions by delta-rs
(`table_version`, `committed_version`) and by `DeltaTable.history()`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from delta_tables.arrow import read_arrow
from delta_tables.writes import (
    TXN_APP_ID,
    TXN_VERSION,
    MergeMetrics,
    app_transaction,
    append,
    committed_version,
    is_delta_table,
    merge,
    session_conf,
    table_version,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

Row = tuple[Any, ...]
SCHEMA = "id BIGINT, name STRING"
COLUMNS = ["id", "name"]


@pytest.fixture(autouse=True)
def no_leaked_app_transaction(spark: SparkSession) -> Iterator[None]:
    """Tests assert that the app transaction confs are unset; should one fail, the confs must
    not make every later Delta write of the shared session a silently skipped one."""
    yield
    spark.conf.unset(TXN_APP_ID)
    spark.conf.unset(TXN_VERSION)


# -- helpers --------------------------------------------------------------------------------------
def frame(spark: SparkSession, rows: list[Row], schema: str = SCHEMA) -> DataFrame:
    return spark.createDataFrame(rows, schema)


def spark_rows(spark: SparkSession, path: Path, columns: list[str] = COLUMNS) -> list[Row]:
    data = spark.read.format("delta").load(str(path)).select(*columns)
    return sorted(tuple(row) for row in data.collect())


def arrow_rows(path: Path, columns: list[str] = COLUMNS) -> list[Row]:
    return sorted(tuple(r[c] for c in columns) for r in read_arrow(str(path), columns).to_pylist())


def assert_rows(
    spark: SparkSession, path: Path, want: list[Row], columns: list[str] = COLUMNS
) -> None:
    """Both readers see exactly `want` (as a multiset)."""
    assert spark_rows(spark, path, columns) == sorted(want)
    assert arrow_rows(path, columns) == sorted(want)


def history(spark: SparkSession, path: Path) -> list[tuple[int, str, str]]:
    """(version, operation, engineInfo) of every commit, oldest first."""
    from delta.tables import DeltaTable

    data = DeltaTable.forPath(spark, str(path)).history()
    rows = data.select("version", "operation", "engineInfo").collect()
    return sorted((int(r[0]), str(r[1]), str(r[2])) for r in rows)


def assert_history(spark: SparkSession, path: Path, operations: list[str]) -> None:
    """The table's commits are exactly `operations` (versions 0..n-1), all by delta-spark 4.4."""
    commits = history(spark, path)
    assert [(v, op) for v, op, _ in commits] == list(enumerate(operations))
    for version, _, engine in commits:
        assert "Delta-Lake/4.4" in engine, (version, engine)


def txn_confs(spark: SparkSession) -> tuple[str | None, str | None]:
    return spark.conf.get(TXN_APP_ID, None), spark.conf.get(TXN_VERSION, None)


# -- append ---------------------------------------------------------------------------------------
def test_append_commits_once_per_app_id_and_version(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "t"
    assert not is_delta_table(path)
    assert table_version(path) == -1
    assert committed_version(path, "app-a") is None

    first = [(1, "a"), (2, "b")]
    append(frame(spark, first), path, app_id="app-a", version=3)
    assert is_delta_table(path)
    assert table_version(path) == 0
    assert committed_version(path, "app-a") == 3
    assert committed_version(path, "app-b") is None
    assert_rows(spark, path, first)

    # the same (app id, version) again, even with other rows: nothing is committed
    append(frame(spark, first), path, app_id="app-a", version=3)
    append(frame(spark, [(9, "replayed")]), path, app_id="app-a", version=3)
    # a lower version of the same app id: skipped too
    append(frame(spark, [(8, "older")]), path, app_id="app-a", version=2)
    assert table_version(path) == 0
    assert committed_version(path, "app-a") == 3
    assert_rows(spark, path, first)

    # another app id lands, whatever its version; the first app's version is kept
    other = [(3, "c")]
    append(frame(spark, other), path, app_id="app-b", version=0)
    assert table_version(path) == 1
    assert (committed_version(path, "app-a"), committed_version(path, "app-b")) == (3, 0)
    assert arrow_rows(path) == sorted(first + other)

    # the next version of the first app lands
    later = [(4, "d"), (1, "a")]
    append(frame(spark, later), path, app_id="app-a", version=4)
    assert table_version(path) == 2
    assert (committed_version(path, "app-a"), committed_version(path, "app-b")) == (4, 0)
    assert_rows(spark, path, first + other + later)

    assert_history(spark, path, ["WRITE", "WRITE", "WRITE"])


def test_append_partitions_by_the_given_columns(spark: SparkSession, tmp_path: Path) -> None:
    from delta.tables import DeltaTable

    path = tmp_path / "t"
    schema = "id BIGINT, name STRING, day STRING"
    rows = [(1, "a", "2024-01-01"), (2, "b", "2024-01-02"), (3, "c", "2024-01-01")]
    append(frame(spark, rows, schema), path, partition_by=["day"], app_id="p", version=0)

    detail = DeltaTable.forPath(spark, str(path)).detail().first()
    assert detail is not None
    assert list(detail["partitionColumns"]) == ["day"]
    folders = sorted(p.name for p in path.iterdir() if p.is_dir() and p.name != "_delta_log")
    assert folders == ["day=2024-01-01", "day=2024-01-02"]
    for folder in folders:
        assert list((path / folder).glob("*.parquet")), folder
    assert not list(path.glob("*.parquet"))  # no data file outside the partition folders
    # the partition column is not stored in the files, yet both readers return it
    columns = ["id", "name", "day"]
    assert_rows(spark, path, rows, columns)

    # an append without partition_by leaves the table partitioned as created
    more = [(4, "d", "2024-01-03")]
    append(frame(spark, more, schema), path, app_id="p", version=1)
    assert (path / "day=2024-01-03").is_dir()
    assert table_version(path) == 1
    assert_rows(spark, path, rows + more, columns)
    assert_history(spark, path, ["WRITE", "WRITE"])


# -- merge ----------------------------------------------------------------------------------------
MERGE_SCHEMA = "id BIGINT, name STRING, n BIGINT"
MERGE_COLUMNS = ["id", "name", "n"]


def test_merge_upserts_each_batch_once(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = {1: ("a", 10), 2: ("b", 20)}

    def want() -> list[Row]:
        return [(k, name, n) for k, (name, n) in table.items()]

    append(frame(spark, want(), MERGE_SCHEMA), path, app_id="seed", version=0)

    # batch 0: id 2 updated, id 3 inserted
    batch0 = [(2, "B", 21), (3, "c", 30)]
    metrics = merge(
        frame(spark, batch0, MERGE_SCHEMA),
        path,
        condition="t.id = s.id",
        update=True,
        app_id="silver",
        version=0,
    )
    table.update({k: (name, n) for k, name, n in batch0})
    assert metrics == MergeMetrics(inserted=1, updated=1)
    assert table_version(path) == 1
    assert committed_version(path, "silver") == 0
    assert_rows(spark, path, want(), MERGE_COLUMNS)
    assert txn_confs(spark) == (None, None)

    # batch 0 replayed (the same rows, then other rows): nothing changes
    for replay in (batch0, [(2, "X", 99), (5, "x", 99)]):
        metrics = merge(
            frame(spark, replay, MERGE_SCHEMA),
            path,
            condition="t.id = s.id",
            update=True,
            app_id="silver",
            version=0,
        )
        assert metrics == MergeMetrics(inserted=0, updated=0)
        assert table_version(path) == 1
        assert_rows(spark, path, want(), MERGE_COLUMNS)

    # batch 1, insert only: id 1 is matched and left as is, id 4 is inserted
    metrics = merge(
        frame(spark, [(1, "changed", 11), (4, "d", 40)], MERGE_SCHEMA),
        path,
        condition="t.id = s.id",
        update=False,
        app_id="silver",
        version=1,
    )
    table[4] = ("d", 40)
    assert metrics == MergeMetrics(inserted=1, updated=0)
    assert table_version(path) == 2
    assert committed_version(path, "silver") == 1
    assert_rows(spark, path, want(), MERGE_COLUMNS)
    assert txn_confs(spark) == (None, None)

    # the session carries no app transaction any more: a plain write is not skipped
    spark.createDataFrame([(6, "f", 60)], MERGE_SCHEMA).write.format("delta").mode("append").save(
        str(path)
    )
    table[6] = ("f", 60)
    assert table_version(path) == 3
    assert_rows(spark, path, want(), MERGE_COLUMNS)
    assert_history(spark, path, ["WRITE", "MERGE", "MERGE", "WRITE"])


def test_merge_that_fails_unsets_the_app_transaction(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "t"
    rows = [(1, "a", 10)]
    append(frame(spark, rows, MERGE_SCHEMA), path, app_id="seed", version=0)

    # two source rows match one target row: delta-spark fails while executing the MERGE
    duplicated = frame(spark, [(1, "x", 1), (1, "y", 2)], MERGE_SCHEMA)
    with pytest.raises(Exception, match="DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"):
        merge(duplicated, path, condition="t.id = s.id", update=True, app_id="silver", version=7)
    assert txn_confs(spark) == (None, None)
    assert table_version(path) == 0
    assert committed_version(path, "silver") is None
    assert_rows(spark, path, rows, MERGE_COLUMNS)

    # the failed batch recorded nothing: retried with valid rows, the same version commits
    metrics = merge(
        frame(spark, [(1, "x", 1)], MERGE_SCHEMA),
        path,
        condition="t.id = s.id",
        update=True,
        app_id="silver",
        version=7,
    )
    assert metrics == MergeMetrics(inserted=0, updated=1)
    assert committed_version(path, "silver") == 7
    assert_rows(spark, path, [(1, "x", 1)], MERGE_COLUMNS)
    assert txn_confs(spark) == (None, None)
    assert_history(spark, path, ["WRITE", "MERGE"])


def test_app_transaction_sets_the_session_confs_inside_the_block_only(
    spark: SparkSession,
) -> None:
    assert txn_confs(spark) == (None, None)
    with app_transaction(spark, "query-1", 12):
        assert txn_confs(spark) == ("query-1", "12")
    assert txn_confs(spark) == (None, None)
    with pytest.raises(RuntimeError, match=r"^inside$"), app_transaction(spark, "query-1", 13):
        raise RuntimeError("inside")
    assert txn_confs(spark) == (None, None)


# -- streaming ------------------------------------------------------------------------------------
def test_foreach_batch_append_survives_a_replayed_batch(
    spark: SparkSession, tmp_path: Path
) -> None:
    landing, checkpoint, path = tmp_path / "landing", tmp_path / "checkpoint", tmp_path / "t"
    landing.mkdir()
    files = {
        "a.json": [(1, "a"), (2, "b")],
        "b.json": [(3, "c")],
        "c.json": [(4, "d"), (5, "e"), (6, "f")],
    }
    for name, rows in files.items():
        lines = [json.dumps({"id": i, "name": n}) for i, n in rows]
        (landing / name).write_text("\n".join(lines) + "\n")
    everything = [row for rows in files.values() for row in rows]

    seen: list[tuple[str, int]] = []

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        query_id = json.loads((checkpoint / "metadata").read_text())["id"]
        seen.append((query_id, batch_id))
        append(batch, path, app_id=query_id, version=batch_id)

    stream = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(landing))
    query = (
        stream.writeStream.foreachBatch(write_batch)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    query_id = str(query.id)
    assert query.exception() is None
    assert seen == [(query_id, 0), (query_id, 1), (query_id, 2)]
    assert table_version(path) == 2
    assert committed_version(path, query_id) == 2
    assert_rows(spark, path, everything)

    # a crash after the commit of batch 2 but before the checkpoint recorded it: the batch runs
    # again with the same id (here by hand, on the same file)
    replay = spark.read.schema(SCHEMA).json(str(landing / "c.json"))
    assert replay.count() == 3
    write_batch(replay, 2)
    assert seen[-1] == (query_id, 2)
    assert table_version(path) == 2
    assert committed_version(path, query_id) == 2
    assert_rows(spark, path, everything)
    assert_history(spark, path, ["WRITE"] * 3)


def test_session_conf_restores_what_was_set_and_unsets_what_was_not(spark: SparkSession) -> None:
    aqe, other = "spark.sql.adaptive.enabled", "spark.runoff.test.unset"
    spark.conf.set(aqe, "true")
    assert spark.conf.get(other, None) is None
    with (
        pytest.raises(RuntimeError, match=r"^inside$"),
        session_conf(spark, {aqe: "false", other: "x"}),
    ):
        assert (spark.conf.get(aqe), spark.conf.get(other)) == ("false", "x")
        raise RuntimeError("inside")
    assert (spark.conf.get(aqe), spark.conf.get(other, None)) == ("true", None)
    spark.conf.unset(aqe)
