"""Tables written by delta-spark in this session read back exactly by delta-rs and by Spark.

Every table is written here (small, in `tmp_path`) with delta-spark's `format("delta")`, SQL or
`io.delta.tables.DeltaTable`; the expectation of every version is computed in plain Python from
the rows the test itself wrote. Every version is read by delta-rs (`read_arrow`, i.e. its
DataFusion engine, over `deltalake.DeltaTable(path, version=n)`), and the latest version (every
version of the partitioned table, some earlier ones elsewhere) by `spark.read.format("delta")`;
each read must equal the expectation exactly: the same column names, the same rows (sorted
tuples; floats by `repr`, decimals by `str` with their scale, datetimes by `isoformat`) and the
same counts. Spark's rows are collected as Rows (cheaper than `toArrow`), except for the table of
every type, read through Arrow so that UTC timestamps and the Arrow types are compared too.

Covered: partitions and time travel over appends and a `replaceWhere`, a checkpoint (also with the
commits before it deleted), deletion vectors, column mapping (rename and drop), RESTORE, the
change data feed, the values of every primitive type, and the `engineInfo` of every commit.
delta-rs 1.6 reads all of these; nothing here expects it to fail.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from delta_tables.arrow import count_rows, equals, read_arrow

if TYPE_CHECKING:
    from delta.tables import DeltaTable as SparkDeltaTable
    from pyspark.sql import DataFrame, SparkSession

pytestmark = [pytest.mark.spark]

Row = tuple[Any, ...]


# -- helpers --------------------------------------------------------------------------------------
def canonical(value: Any) -> Any:
    """A value compared exactly: -0.0 and NaN by repr, decimals with their scale, tz kept."""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    return value


def ordered(rows: Sequence[Row]) -> list[Row]:
    """Rows as canonical tuples in one deterministic order (None-safe)."""
    return sorted((tuple(canonical(v) for v in row) for row in rows), key=repr)


def arrow_rows(table: pa.Table) -> list[Row]:
    return ordered([tuple(row.values()) for row in table.to_pylist()])


def spark_read(spark: SparkSession, path: Path, version: int | None = None) -> DataFrame:
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", str(version))
    return reader.load(str(path))


def spark_rows(df: DataFrame) -> list[Row]:
    return ordered([tuple(row) for row in df.collect()])


def delta_rs(path: Path, version: int | None = None) -> DeltaTable:
    return DeltaTable(str(path), version=version)


def fields(schema_fields: list[dict[str, Any]]) -> list[tuple[str, str, bool]]:
    """Name, Delta type and nullability of each field of a schema's JSON."""
    return [(f["name"], f["type"], f["nullable"]) for f in schema_fields]


def label(path: Path, version: int | None) -> str:
    return f"{path.name} v{'latest' if version is None else version}"


def assert_delta_rs_reads(
    path: Path, columns: Sequence[str], rows: Sequence[Row], version: int | None = None
) -> None:
    """delta-rs (DataFusion) reads exactly `rows`, with these column names, at `version`."""
    snapshot = delta_rs(path, version)
    by_delta_rs = read_arrow(snapshot)
    assert by_delta_rs.column_names == list(columns), label(path, version)
    assert arrow_rows(by_delta_rs) == ordered(rows), label(path, version)
    assert count_rows(snapshot) == len(rows), label(path, version)


def assert_both_read(
    spark: SparkSession,
    path: Path,
    columns: Sequence[str],
    rows: Sequence[Row],
    version: int | None = None,
) -> None:
    """Spark and delta-rs both read exactly `rows` at `version`, with these column names and
    the same Delta types in both schemas; at the latest version Spark's `count()` (which
    delta-spark may answer from the log's statistics) must agree too."""
    assert_delta_rs_reads(path, columns, rows, version)
    by_spark = spark_read(spark, path, version)
    assert by_spark.columns == list(columns), label(path, version)
    spark_fields = by_spark.schema.jsonValue()["fields"]
    delta_rs_fields = json.loads(delta_rs(path, version).schema().to_json())["fields"]
    assert fields(spark_fields) == fields(delta_rs_fields), label(path, version)
    assert spark_rows(by_spark) == ordered(rows), label(path, version)
    if version is None:
        assert by_spark.count() == len(rows), label(path, version)


def frame(spark: SparkSession, rows: Sequence[Row], ddl: str) -> DataFrame:
    """The rows as one partition: one data file per write (per table partition)."""
    return spark.createDataFrame(list(rows), ddl).coalesce(1)


def spark_delta(spark: SparkSession, path: Path) -> SparkDeltaTable:
    from delta.tables import DeltaTable as SparkDeltaTable

    return SparkDeltaTable.forPath(spark, str(path))


def log_actions(path: Path, version: int) -> list[dict[str, Any]]:
    text = (path / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line]


def assert_written_by_delta_spark(spark: SparkSession, path: Path, versions: int) -> None:
    """Every commit (0 .. versions-1) names delta-spark 4.4 in its engineInfo, in Spark's history
    and in delta-rs' reading of the same commitInfo actions."""
    history = spark_delta(spark, path).history().select("version", "engineInfo").collect()
    assert sorted(r["version"] for r in history) == list(range(versions))
    for row in history:
        assert row["engineInfo"].startswith("Apache-Spark/"), row
        assert "Delta-Lake/4.4" in row["engineInfo"], row
    by_delta_rs = {c["version"]: c.get("engineInfo") for c in delta_rs(path).history()}
    assert by_delta_rs == {r["version"]: r["engineInfo"] for r in history}


# -- partitions and time travel -------------------------------------------------------------------
PART_COLUMNS = ["id", "region", "day", "value"]
PART_DDL = "id BIGINT, region STRING, day DATE, value DOUBLE"
REGIONS = ["north", "south"]


def part_rows(ids: range, regions: Sequence[str | None]) -> list[Row]:
    return [
        (i, regions[i % len(regions)], date(2024, 1, 1) + timedelta(days=i % 3), i * 1.5)
        for i in ids
    ]


def test_partitioned_appends_read_at_every_version(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "partitioned"
    batches = [
        part_rows(range(0, 10), REGIONS),
        [*part_rows(range(10, 16), ["east", None]), (16, "east", None, None)],
        part_rows(range(17, 23), REGIONS),
    ]
    expected: list[list[Row]] = []
    for n, batch in enumerate(batches):
        writer = frame(spark, batch, PART_DDL).write.format("delta").mode("append")
        if n == 0:
            writer = writer.partitionBy("region", "day")
        writer.save(str(path))
        expected.append((expected[-1] if expected else []) + batch)
    north = part_rows(range(100, 104), ["north"])
    (
        frame(spark, north, PART_DDL)
        .write.format("delta")
        .mode("overwrite")
        .option("replaceWhere", "region = 'north'")
        .save(str(path))
    )
    expected.append([r for r in expected[-1] if r[1] != "north"] + north)

    assert delta_rs(path).metadata().partition_columns == ["region", "day"]
    assert delta_rs(path).version() == len(expected) - 1
    folders = {p.name for p in path.iterdir() if p.is_dir() and p.name != "_delta_log"}
    assert folders == {f"region={r}" for r in [*REGIONS, "east", "__HIVE_DEFAULT_PARTITION__"]}
    for version, rows in enumerate(expected[:-1]):
        assert_both_read(spark, path, PART_COLUMNS, rows, version)
    assert_both_read(spark, path, PART_COLUMNS, expected[-1])  # the latest, version 3

    # Filters on partition columns (file pruning) return exactly the rows of those partitions.
    latest = expected[-1]
    south = read_arrow(str(path), where=[equals("region", "south")])
    assert arrow_rows(south) == ordered([r for r in latest if r[1] == "south"])
    nulls = read_arrow(str(path), columns=["id", "day"], where=['"region" IS NULL'])
    assert arrow_rows(nulls) == ordered([(r[0], r[2]) for r in latest if r[1] is None])
    day = spark_read(spark, path).where("day = DATE'2024-01-02'")
    assert spark_rows(day) == ordered([r for r in latest if r[2] == date(2024, 1, 2)])
    assert_written_by_delta_spark(spark, path, len(expected))


# -- checkpoints ----------------------------------------------------------------------------------
CP_COLUMNS = ["id", "name"]
CP_DDL = "id BIGINT, name STRING"


def test_table_past_a_checkpoint_reads_with_and_without_older_commits(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = tmp_path / "checkpointed"
    first = [(i, f"n{i}") for i in range(8)]
    (
        frame(spark, first, CP_DDL)
        .write.format("delta")
        .option("delta.checkpointInterval", "2")
        .save(str(path))
    )
    second = [(8, "n8"), (9, None)]
    frame(spark, second, CP_DDL).write.format("delta").mode("append").save(str(path))  # v1
    spark_delta(spark, path).delete("id % 2 = 0")  # v2, checkpointed: its remove is a tombstone
    last = [(20, "n20"), (21, None)]
    frame(spark, last, CP_DDL).write.format("delta").mode("append").save(str(path))  # v3
    expected: list[list[Row]] = [first, first + second]
    expected.append([r for r in expected[1] if r[0] % 2 != 0])
    expected.append(expected[2] + last)

    log = path / "_delta_log"
    assert sorted(p.name for p in log.glob("0*.checkpoint*")) == [f"{2:020d}.checkpoint.parquet"]
    assert json.loads((log / "_last_checkpoint").read_text())["version"] == 2
    assert delta_rs(path).metadata().configuration["delta.checkpointInterval"] == "2"
    for version, rows in enumerate(expected):
        assert_delta_rs_reads(path, CP_COLUMNS, rows, version)
    assert_both_read(spark, path, CP_COLUMNS, expected[3])  # checkpoint 2 plus commit 3

    # Without the commits the checkpoint replaces, both readers must start from the checkpoint.
    pruned = tmp_path / "pruned"
    shutil.copytree(path, pruned)
    for version in range(2):
        (pruned / "_delta_log" / f"{version:020d}.json").unlink()
    assert delta_rs(pruned).version() == 3
    assert_delta_rs_reads(pruned, CP_COLUMNS, expected[2], version=2)
    assert_both_read(spark, pruned, CP_COLUMNS, expected[3])
    assert_written_by_delta_spark(spark, path, len(expected))


# -- deletion vectors -----------------------------------------------------------------------------
def test_deletion_vectors_are_honoured_by_both_readers(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "dv"
    rows = [(i, f"n{i}") for i in range(20)]
    (  # one data file (see `frame`): each DELETE below marks rows of it in a deletion vector
        frame(spark, rows, CP_DDL)
        .write.format("delta")
        .option("delta.enableDeletionVectors", "true")
        .save(str(path))
    )
    spark_delta(spark, path).delete("id % 3 = 0")
    after_first = [r for r in rows if r[0] % 3 != 0]
    spark_delta(spark, path).delete("id IN (1, 2, 19)")
    after_second = [r for r in after_first if r[0] not in (1, 2, 19)]
    expected = [rows, after_first, after_second]

    assert "deletionVectors" in (delta_rs(path).protocol().reader_features or [])
    (data_file,) = [a["add"]["path"] for a in log_actions(path, 0) if "add" in a]
    for version, deleted in ((1, 7), (2, 10)):
        adds = [a["add"] for a in log_actions(path, version) if "add" in a]
        assert [a["path"] for a in adds] == [data_file]  # the file is kept, not rewritten
        assert adds[0]["deletionVector"]["cardinality"] == deleted
    assert pq.read_metadata(path / data_file).num_rows == len(rows)
    for version, version_rows in enumerate(expected):
        assert_delta_rs_reads(path, CP_COLUMNS, version_rows, version)
    assert_both_read(spark, path, CP_COLUMNS, after_first, version=1)
    assert_both_read(spark, path, CP_COLUMNS, after_second)  # the latest, version 2
    picked = read_arrow(str(path), columns=["name"], where=['"id" < 6'])
    assert arrow_rows(picked) == ordered([(n,) for i, n in after_second if i < 6])
    assert_written_by_delta_spark(spark, path, len(expected))


# -- column mapping -------------------------------------------------------------------------------
def test_column_mapping_rename_and_drop_read_by_logical_names(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = tmp_path / "mapped"
    rows = [(i, f"n{i}", i / 4) for i in range(6)]
    (
        frame(spark, rows, "id BIGINT, name STRING, score DOUBLE")
        .write.format("delta")
        .option("delta.columnMapping.mode", "name")
        .save(str(path))
    )
    spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN name TO label")  # v1
    spark.sql(f"ALTER TABLE delta.`{path}` DROP COLUMN score")  # v2
    more = [(10, "ten"), (11, None)]
    frame(spark, more, "id BIGINT, label STRING").write.format("delta").mode("append").save(
        str(path)
    )  # v3
    versions: list[tuple[list[str], list[Row]]] = [
        (["id", "name", "score"], rows),
        (["id", "label", "score"], rows),
        (["id", "label"], [r[:2] for r in rows]),
        (["id", "label"], [r[:2] for r in rows] + more),
    ]

    assert delta_rs(path).metadata().configuration["delta.columnMapping.mode"] == "name"
    physical = {
        f.name: f.metadata["delta.columnMapping.physicalName"]
        for f in delta_rs(path).schema().fields
    }
    assert set(physical) == {"id", "label"}
    (first_file,) = [a["add"]["path"] for a in log_actions(path, 0) if "add" in a]
    file_columns = pq.read_schema(path / first_file).names
    assert file_columns[:2] == [physical["id"], physical["label"]]  # no logical name on disk
    assert not {"id", "name", "label", "score"} & set(file_columns)
    for version, (columns, version_rows) in enumerate(versions):
        assert_delta_rs_reads(path, columns, version_rows, version)
    assert_both_read(spark, path, *versions[0], version=0)  # the names before the rename
    assert_both_read(spark, path, *versions[-1])
    labelled = read_arrow(str(path), columns=["label"], where=[equals("label", "n3")])
    assert arrow_rows(labelled) == [("n3",)]
    assert_written_by_delta_spark(spark, path, len(versions))


# -- RESTORE --------------------------------------------------------------------------------------
def test_restore_to_an_earlier_version_is_read_by_both(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "restored"
    first = [(i, f"n{i}") for i in range(6)]
    frame(spark, first, CP_DDL).write.format("delta").save(str(path))
    second = [(i, f"n{i}") for i in range(6, 9)]
    frame(spark, second, CP_DDL).write.format("delta").mode("append").save(str(path))
    spark_delta(spark, path).delete("id < 3 OR id = 7")  # v2
    expected: list[list[Row]] = [first, first + second]
    expected.append([r for r in expected[1] if r[0] >= 3 and r[0] != 7])

    spark_delta(spark, path).restoreToVersion(1)  # v3
    expected.append(expected[1])

    assert delta_rs(path).version() == 3
    assert delta_rs(path).history(1)[0]["operation"] == "RESTORE"
    assert_both_read(spark, path, CP_COLUMNS, expected[1])
    for version, rows in enumerate(expected):  # the history before the restore stays readable
        assert_delta_rs_reads(path, CP_COLUMNS, rows, version)
    assert_written_by_delta_spark(spark, path, len(expected))


# -- change data feed -----------------------------------------------------------------------------
def test_change_data_feed_returns_exactly_the_changed_rows(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = tmp_path / "cdf"
    rows = [(i, f"n{i}") for i in range(8)]
    (
        frame(spark, rows, CP_DDL)
        .write.format("delta")
        .option("delta.enableChangeDataFeed", "true")
        .save(str(path))
    )
    spark_delta(spark, path).update("id IN (1, 5)", {"name": "concat(name, '!')"})  # v1
    spark_delta(spark, path).delete("id = 2")  # v2
    inserted = [(20, "n20"), (21, None)]
    frame(spark, inserted, CP_DDL).write.format("delta").mode("append").save(str(path))  # v3
    latest = [(i, f"{n}!" if i in (1, 5) else n) for i, n in rows if i != 2] + inserted

    changes: list[Row] = [
        *((i, n, "update_preimage", 1) for i, n in rows if i in (1, 5)),
        *((i, f"{n}!", "update_postimage", 1) for i, n in rows if i in (1, 5)),
        *((i, n, "delete", 2) for i, n in rows if i == 2),
        *((i, n, "insert", 3) for i, n in inserted),
    ]
    feed_columns = [*CP_COLUMNS, "_change_type", "_commit_version"]
    feed = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", 1)
        .load(str(path))
    )
    assert feed.columns == [*feed_columns, "_commit_timestamp"]
    assert spark_rows(feed.select(*feed_columns)) == ordered(changes)
    # delta-rs reads the same feed (its _change_data files and the inserts of add actions).
    by_delta_rs = pa.table(delta_rs(path).load_cdf(starting_version=1).read_all())
    assert arrow_rows(by_delta_rs.select(feed_columns)) == ordered(changes)
    from_start = pa.table(delta_rs(path).load_cdf(starting_version=0).read_all())
    first_inserts = [(*r, "insert", 0) for r in rows]
    assert arrow_rows(from_start.select(feed_columns)) == ordered(first_inserts + changes)
    assert (path / "_change_data").is_dir()
    assert_both_read(spark, path, CP_COLUMNS, latest)
    assert_written_by_delta_spark(spark, path, 4)


# -- values of every type -------------------------------------------------------------------------
TYPES_DDL = (
    "id BIGINT, small DECIMAL(9,2), amount DECIMAL(18,4), big DECIMAL(38,10), ratio DOUBLE, "
    "label STRING, flag BOOLEAN, ts TIMESTAMP, local_ts TIMESTAMP_NTZ, day DATE, n INT"
)
TYPES_COLUMNS = [c.split()[0] for c in TYPES_DDL.split(", ")]
DELTA_TYPES = [
    "long",
    "decimal(9,2)",
    "decimal(18,4)",
    "decimal(38,10)",
    "double",
    "string",
    "boolean",
    "timestamp",
    "timestamp_ntz",
    "date",
    "integer",
]
ARROW_TYPES = [
    pa.int64(),
    pa.decimal128(9, 2),
    pa.decimal128(18, 4),
    pa.decimal128(38, 10),
    pa.float64(),
    pa.string(),
    pa.bool_(),
    pa.timestamp("us", tz="UTC"),
    pa.timestamp("us"),
    pa.date32(),
    pa.int32(),
]
TYPED_ROWS: list[Row] = [
    (
        1,
        Decimal("1234567.89"),
        Decimal("-12345678901234.5678"),
        Decimal("1234567890123456789012345678.0123456789"),
        5e-324,
        "héllo ✓ 🚀",
        True,
        datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(2024, 2, 29, 23, 59, 59, 999999),
        date(2024, 2, 29),
        2147483647,
    ),
    (
        2,
        Decimal("-0.01"),
        Decimal("0.0000"),
        Decimal("-0.0000000001"),
        -0.0,
        "",
        False,
        datetime(1969, 12, 31, 23, 59, 59, 1, tzinfo=UTC),
        datetime(1900, 1, 1),
        date(1900, 1, 1),
        -2147483648,
    ),
    (3, None, None, None, None, None, None, None, None, None, None),
    (
        -(2**63),
        Decimal("0.00"),
        Decimal("99999999999999.9999"),
        Decimal("-9999999999999999999999999999.9999999999"),
        float("inf"),
        "quote ' and \" and \n newline",
        True,
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(1, 1, 1),
        date(1, 1, 1),
        0,
    ),
    (
        2**63 - 1,
        None,
        Decimal("1.0001"),
        None,
        float("nan"),
        "x",
        None,
        datetime(1, 1, 1, tzinfo=UTC),
        None,
        date(9999, 12, 31),
        None,
    ),
    (
        6,
        Decimal("0.10"),
        Decimal("-1.5000"),
        Decimal("0.5000000000"),
        1.7976931348623157e308,
        "tab\there",
        False,
        datetime(2000, 1, 1, tzinfo=UTC),
        datetime(2000, 1, 1, 12, 30),
        date(1970, 1, 1),
        -1,
    ),
]


def test_every_type_round_trips_exactly(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "types"
    frame(spark, TYPED_ROWS, TYPES_DDL).write.format("delta").save(str(path))

    schema = json.loads(delta_rs(path).schema().to_json())
    assert [(f["name"], f["type"]) for f in schema["fields"]] == list(
        zip(TYPES_COLUMNS, DELTA_TYPES, strict=True)
    )
    spark_schema = spark_read(spark, path).schema.jsonValue()
    assert [(f["name"], f["type"]) for f in spark_schema["fields"]] == list(
        zip(TYPES_COLUMNS, DELTA_TYPES, strict=True)
    )
    expected_schema = pa.schema(list(zip(TYPES_COLUMNS, ARROW_TYPES, strict=True)))
    assert read_arrow(str(path)).schema == expected_schema
    by_spark = spark_read(spark, path).toArrow()
    assert by_spark.schema == expected_schema
    assert arrow_rows(by_spark) == ordered(TYPED_ROWS)
    assert spark_read(spark, path).count() == len(TYPED_ROWS)
    assert_delta_rs_reads(path, TYPES_COLUMNS, TYPED_ROWS)

    # Per column, too: the null count and the values, each exactly as written.
    table = read_arrow(str(path))
    for index, column in enumerate(TYPES_COLUMNS):
        written = [r[index] for r in TYPED_ROWS]
        assert table.column(column).null_count == written.count(None), column
        got = ordered([(v,) for v in table.column(column).to_pylist()])
        assert got == ordered([(v,) for v in written]), column
    before_epoch = read_arrow(str(path), columns=["id"], where=["\"day\" < DATE '1970-01-01'"])
    assert arrow_rows(before_epoch) == ordered(
        [(r[0],) for r in TYPED_ROWS if r[9] is not None and r[9] < date(1970, 1, 1)]
    )
    assert_written_by_delta_spark(spark, path, 1)
