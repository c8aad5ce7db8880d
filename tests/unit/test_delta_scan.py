"""Read planning without Spark: file pruning, deletion vectors, column mapping, file packing."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder

from delta_tables.errors import DeltaOptionError, DeltaTableNotFoundError
from delta_tables.predicate import parse_predicate
from delta_tables.scan import (
    FileReader,
    FileTask,
    layout_of,
    open_table,
    pack_files,
    snapshot_files,
)

GOLDEN = Path(__file__).resolve().parents[2] / ".." / "shared" / "golden-delta"


def test_golden_tables_exist() -> None:
    assert GOLDEN.exists(), (
        f"no golden tables at {GOLDEN.resolve()} (expected ../shared beside the repo)"
    )


def read_all(dt: DeltaTable, files: list[FileTask]) -> pa.Table:
    reader = FileReader(layout_of(dt))
    batches = [b for task in files for b in reader.read(task)]
    return pa.Table.from_batches(batches, schema=reader.target)


def reference(dt: DeltaTable) -> pa.Table:
    return pa.table(QueryBuilder().register("t", dt).execute("select * from t").read_all())


def rows(table: pa.Table) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in table.to_pylist())


def test_partition_and_statistics_pruning_keeps_exactly_the_needed_files() -> None:
    dt = open_table(str(GOLDEN / "cdf-table"))
    everything = snapshot_files(dt)
    day = snapshot_files(dt, parse_predicate("birthday = DATE'2023-12-22'"))
    assert 0 < len(day) < len(everything)
    assert {t.partition_values["birthday"] for t in day} == {date(2023, 12, 22)}
    by_stats = snapshot_files(dt, parse_predicate("id > 9"))
    table = read_all(dt, by_stats)
    assert len(by_stats) < len(everything)
    assert sorted(i for i in table.column("id").to_pylist() if i > 9) == [10]


@pytest.mark.parametrize(
    "name", ["table-with-dv-small", "table-with-columnmapping-mode-name", "cdf-table"]
)
def test_file_reader_matches_delta_rs(name: str) -> None:
    dt = open_table(str(GOLDEN / name))
    ours = read_all(dt, snapshot_files(dt))
    assert rows(ours) == rows(reference(dt))
    assert ours.schema.names == reference(dt).schema.names


def test_open_table_errors_name_the_path_and_option(tmp_path: Path) -> None:
    with pytest.raises(DeltaTableNotFoundError, match=rf"{tmp_path} is not a Delta table"):
        open_table(str(tmp_path))
    with pytest.raises(DeltaOptionError, match=r"option versionAsOf=99 is not available .*0\.\.4"):
        open_table(str(GOLDEN / "simple_table"), version=99)
    with pytest.raises(
        DeltaOptionError, match=r"option timestampAsOf='yesterday' is not a timestamp"
    ):
        open_table(str(GOLDEN / "simple_table"), timestamp="yesterday")


def test_pack_files_groups_small_files_and_splits_big_ones() -> None:
    small = [FileTask(f"/f{i}", 1_000, {}) for i in range(10)]
    assert len(pack_files(small, parallelism=2)) == 2
    big = [FileTask(f"/b{i}", 200 * 1024 * 1024, {}) for i in range(3)]
    assert len(pack_files(big, parallelism=2)) == 3
    assert pack_files([], parallelism=2) == []


@pytest.mark.parametrize("name", ["table-with-dv-small", "table-with-columnmapping-mode-name"])
def test_query_builder_fallback_reads_the_same_rows(name: str) -> None:
    """Tables with reader features the file reader does not know are read by QueryBuilder."""
    from delta_tables.scan import ScanPartition, read_partition

    dt = open_table(str(GOLDEN / name))
    batches = list(read_partition(ScanPartition(layout_of(dt), query_builder=True)))
    fallback = pa.Table.from_batches(batches)
    assert fallback.schema == FileReader(layout_of(dt)).target
    assert rows(fallback) == rows(read_all(dt, snapshot_files(dt)))
