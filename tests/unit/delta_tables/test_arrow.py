"""`delta_tables.arrow`: Spark-free whole-snapshot reads through delta-rs' DataFusion engine."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from delta_tables.arrow import count_rows, equals, read_arrow

ROWS = [{"id": i, "name": f"n{i}", "blob": bytes([i])} for i in range(5)]


def make_table(path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("blob", pa.binary())])
    write_deltalake(str(path), pa.Table.from_pylist(ROWS[:3], schema=schema))
    write_deltalake(str(path), pa.Table.from_pylist(ROWS[3:], schema=schema), mode="append")


def test_reads_every_row_with_plain_types(tmp_path: Path) -> None:
    make_table(tmp_path / "t")
    data = read_arrow(str(tmp_path / "t"))
    assert data.schema.field("name").type == pa.string()
    assert data.schema.field("blob").type == pa.binary()
    assert sorted(data.to_pylist(), key=lambda r: r["id"]) == ROWS
    assert count_rows(str(tmp_path / "t")) == 5


def test_columns_and_an_older_snapshot(tmp_path: Path) -> None:
    make_table(tmp_path / "t")
    old = DeltaTable(str(tmp_path / "t"), version=0)
    assert sorted(read_arrow(old, ["name"]).column("name").to_pylist()) == ["n0", "n1", "n2"]
    assert count_rows(old) == 3


def test_deleted_rows_are_not_counted(tmp_path: Path) -> None:
    make_table(tmp_path / "t")
    DeltaTable(str(tmp_path / "t")).delete("id >= 3")
    assert count_rows(str(tmp_path / "t")) == 3
    assert sorted(read_arrow(str(tmp_path / "t"), ["id"]).column("id").to_pylist()) == [0, 1, 2]


def test_where_conditions_select_rows_and_quote_values(tmp_path: Path) -> None:
    schema = pa.schema([("name", pa.string()), ("ok", pa.bool_()), ("n", pa.int64())])
    rows = [
        {"name": "it's", "ok": True, "n": 1},
        {"name": "it's", "ok": False, "n": 2},
        {"name": "other", "ok": True, "n": 3},
    ]
    write_deltalake(str(tmp_path / "t"), pa.Table.from_pylist(rows, schema=schema))
    assert equals("name", "it's") == "\"name\" = 'it''s'"
    assert equals("ok", True) == '"ok" = true'
    picked = read_arrow(str(tmp_path / "t"), ["n"], [equals("name", "it's"), equals("ok", True)])
    assert picked.to_pylist() == [{"n": 1}]
    assert read_arrow(str(tmp_path / "t"), where=[equals("name", "none")]).num_rows == 0
