"""quality.increments: which rows a validation looks at, read with delta-rs only."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
from deltalake import DeltaTable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

from quality.increments import (
    Watermark,
    plan_increment,
    read_rows,
    rows_sharing_keys,
    table_id,
)
from tests.quality_tables import (
    action_counts,
    append,
    append_bronze,
    hourly,
    open_close_events,
)

KEYS = ("window_start", "window_end", "action")


def _rows(data: pa.Table, columns: list[str]) -> list[tuple[object, ...]]:
    return sorted(zip(*(data.column(c).to_pylist() for c in columns), strict=True))


def _mark(path: Path, version: int) -> Watermark:
    return Watermark(version=version, table_id=table_id(DeltaTable(str(path))))


def test_first_validation_reads_the_whole_table(tmp_path: Path) -> None:
    path = tmp_path / "bronze"
    batches = [open_close_events(1_709_251_200 + 100 * i, 2, batch_id=i) for i in range(3)]
    for batch in batches:
        append_bronze(path, batch)
    table = DeltaTable(str(path))

    increment = plan_increment(path, table, None)

    assert increment is not None
    assert (increment.full, increment.start_version, increment.end_version) == (True, None, 2)
    assert increment.reason == "first validation"
    expected = _rows(pa.concat_tables(batches), ["time", "action", "_batch_id"])
    assert _rows(read_rows(table, increment), ["time", "action", "_batch_id"]) == expected


def test_increment_holds_exactly_the_rows_of_later_versions(tmp_path: Path) -> None:
    path = tmp_path / "bronze"
    batches = [open_close_events(1_709_251_200 + 86_400 * i, 3, batch_id=i) for i in range(4)]
    for batch in batches:
        append_bronze(path, batch)
    table = DeltaTable(str(path))

    increment = plan_increment(path, table, _mark(path, 1))

    assert increment is not None
    assert (increment.full, increment.version_range) == (False, "(1, 3]")
    assert increment.new_files is not None and len(increment.new_files) == 2
    changed = read_rows(table, increment)
    columns = ["time", "action", "event_date", "_batch_id"]
    # The partition column comes back from the file's partition values.
    assert _rows(changed, columns) == _rows(pa.concat_tables(batches[2:]), columns)


def test_no_new_version_means_no_increment(tmp_path: Path) -> None:
    path = tmp_path / "bronze"
    append_bronze(path, open_close_events(1_709_251_200, 1))
    assert plan_increment(path, DeltaTable(str(path)), _mark(path, 0)) is None


def test_full_flag_and_recreated_table_read_everything(tmp_path: Path) -> None:
    path = tmp_path / "bronze"
    append_bronze(path, open_close_events(1_709_251_200, 1))
    append_bronze(path, open_close_events(1_709_251_300, 1))
    table = DeltaTable(str(path))

    forced = plan_increment(path, table, _mark(path, 0), full=True)
    foreign = plan_increment(path, table, Watermark(version=0, table_id="another-table"))

    assert forced is not None and forced.full and forced.reason == "--full"
    assert foreign is not None and foreign.full
    assert foreign.reason == "table was recreated since the last validation"
    assert read_rows(table, foreign).num_rows == 4


def test_compaction_alone_is_no_data_change(tmp_path: Path) -> None:
    path = tmp_path / "bronze"
    for i in range(3):
        append(path, open_close_events(1_709_251_200 + 10 * i, 1))
    DeltaTable(str(path)).optimize.compact()
    table = DeltaTable(str(path))

    increment = plan_increment(path, table, _mark(path, 2))

    assert increment is not None
    assert increment.data_changed is False
    assert increment.operations == ("OPTIMIZE",)
    assert read_rows(table, increment).num_rows == 0


def test_merge_rewrite_is_a_change(tmp_path: Path) -> None:
    path = tmp_path / "silver"
    append(path, action_counts([hourly(0, "Open", 5), hourly(0, "Close", 4)]))
    append(path, action_counts([hourly(1, "Open", 1)]))
    update = action_counts([hourly(1, "Open", 7)])
    (
        DeltaTable(str(path))
        .merge(
            update,
            predicate=" AND ".join(f"t.{k} = s.{k}" for k in KEYS),
            source_alias="s",
            target_alias="t",
        )
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    table = DeltaTable(str(path))

    increment = plan_increment(path, table, _mark(path, 1))

    assert increment is not None and not increment.full
    columns = [*KEYS, "count"]
    assert _rows(read_rows(table, increment), columns) == _rows(update, columns)


def test_rows_sharing_keys_finds_the_old_copy_of_a_duplicated_window(tmp_path: Path) -> None:
    path = tmp_path / "silver"
    old = [hourly(0, "Open", 5), hourly(0, "Close", 4), hourly(1, "Open", 2)]
    append(path, action_counts(old))
    new = [hourly(1, "Open", 3), hourly(2, "Close", 1)]
    append(path, action_counts(new))
    table = DeltaTable(str(path))
    increment = plan_increment(path, table, _mark(path, 0))
    assert increment is not None
    changed = read_rows(table, increment)

    sharing = rows_sharing_keys(table, increment, changed, KEYS)

    new_keys = {r[:3] for r in new}
    expected = [r for r in old if r[:3] in new_keys]
    assert _rows(sharing, [*KEYS, "count"]) == sorted(expected)
    assert sharing.schema == changed.schema


def test_rows_sharing_keys_is_empty_for_a_whole_table(tmp_path: Path) -> None:
    path = tmp_path / "silver"
    append(path, action_counts([hourly(0, "Open", 5)]))
    table = DeltaTable(str(path))
    increment = plan_increment(path, table, None)
    assert increment is not None
    changed = read_rows(table, increment)
    assert rows_sharing_keys(table, increment, changed, KEYS).num_rows == 0


def _sql_table(spark: SparkSession, path: Path, properties: str) -> str:
    """A Delta table `(id LONG, value STRING)` created by delta-spark with 20 rows in one file."""
    name = f"delta.`{path}`"
    spark.sql(
        f"CREATE TABLE {name} (id LONG, value STRING) USING delta TBLPROPERTIES ({properties})"
    )
    spark.range(20).selectExpr("id", "CAST(id AS STRING) AS value").coalesce(1).write.format(
        "delta"
    ).mode("append").save(str(path))
    return name


def test_a_watermark_ahead_of_the_table_reads_everything(tmp_path: Path) -> None:
    path = tmp_path / "bronze"
    append_bronze(path, open_close_events(1_709_251_200, 1))
    table = DeltaTable(str(path))
    increment = plan_increment(path, table, Watermark(5, table_id(table)))
    assert increment is not None and increment.full
    assert increment.reason == "table is at version 0, behind the validated version 5"


def test_rows_sharing_text_keys_are_found_without_statistics(tmp_path: Path) -> None:
    path = tmp_path / "words"
    old = {"a" * 40 + "x": 3, "beta": 1, "gamma": 2}  # a long word: its statistics may be cut
    append(path, pa.table({"word": list(old), "count": pa.array(list(old.values()), pa.int64())}))
    new = {"a" * 40 + "x": 1, "delta": 4}
    append(path, pa.table({"word": list(new), "count": pa.array(list(new.values()), pa.int64())}))
    table = DeltaTable(str(path))
    increment = plan_increment(path, table, _mark(path, 0))
    assert increment is not None

    sharing = rows_sharing_keys(table, increment, read_rows(table, increment), ("word",))

    assert _rows(sharing, ["word", "count"]) == sorted((w, c) for w, c in old.items() if w in new)


def test_a_table_created_empty_had_no_writes_until_a_run_commits(tmp_path: Path) -> None:
    path = tmp_path / "bronze"
    batch = open_close_events(1_709_251_200, 1)
    path.mkdir()
    DeltaTable.create(str(path), schema=batch.schema, partition_by=["event_date"])

    created = plan_increment(path, DeltaTable(str(path)), None)
    append_bronze(path, batch.schema.empty_table())  # a run that committed no rows
    written = plan_increment(path, DeltaTable(str(path)), _mark(path, 0))

    assert created is not None and created.operations == ("CREATE TABLE",)
    assert not created.had_writes
    assert written is not None and written.operations == ("WRITE",)
    assert written.had_writes and written.new_files == frozenset()


def test_rows_a_delete_rewrote_from_validated_files_are_not_new(tmp_path: Path) -> None:
    """A DELETE (what `runoff quarantine replay` does to quarantine) rewrites the other rows of
    each file it touches. When every file it touched had been validated, the rewritten rows are
    not in the increment; when one had not (its rows may be rewritten into the same new file),
    the new file is, whole (a superset, as for a MERGE)."""
    path = tmp_path / "quarantine"
    first = open_close_events(1_709_251_200, 3, batch_id=0)
    append(path, first)  # v0: validated
    gone = first.column("time")[0].as_py()
    DeltaTable(str(path)).delete(f"time = {gone}")  # v1: rewrites v0's file
    later = open_close_events(1_709_254_800, 2, batch_id=1)
    append(path, later)  # v2
    columns = ["time", "action", "_batch_id"]

    increment = plan_increment(path, DeltaTable(str(path)), _mark(path, 0))

    assert increment is not None and increment.version_range == "(0, 2]"
    assert _rows(read_rows(DeltaTable(str(path)), increment), columns) == _rows(later, columns)

    # A delete touching a validated file and a file added since: both rewritten rows are read.
    second = later.column("time")[0].as_py()
    DeltaTable(str(path)).delete(f"time IN ({gone + 1}, {second})")  # v3
    table = DeltaTable(str(path))
    increment = plan_increment(path, table, _mark(path, 1))
    assert increment is not None
    kept = [row for row in _rows(later, columns) if row[0] != second]
    assert set(kept) <= set(_rows(read_rows(table, increment), columns))
