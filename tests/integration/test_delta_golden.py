"""Every shared golden Delta table reads through `spark.read.format("delta")` exactly as expected.

Expectations come from `shared/golden-delta/expected.json` (made independently with delta-rs'
DataFusion reader and cross-checked by a log replay): row counts of every version, the Delta
and Arrow type of every column, per-column fingerprints (latest and version 0) and numeric sums.
Whole rows are also compared with delta-rs' `QueryBuilder` for every version.
"""

from __future__ import annotations

import hashlib
import json
import math
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

GOLDEN = Path(__file__).resolve().parents[2] / ".." / "shared" / "golden-delta"
EXPECTED: dict[str, Any] = (
    json.loads((GOLDEN / "expected.json").read_text())
    if (GOLDEN / "expected.json").exists()
    else {}
)
TABLES = sorted(EXPECTED.get("tables", {}))

pytestmark = pytest.mark.spark


def test_golden_tables_are_beside_the_repository() -> None:
    # CI clones the repository with ../shared beside it; without it nothing below would run.
    assert TABLES, (
        f"golden tables not found at {GOLDEN.resolve()} (expected ../shared beside the repo)"
    )


# -- the fingerprint definition of expected.json ---------------------------------------------
def canonical(value: Any, arrow_type: pa.DataType) -> str:
    if pa.types.is_decimal(arrow_type):
        return f"{Decimal(value):.{arrow_type.scale}f}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, datetime):
        stamp = value.astimezone(UTC) if value.tzinfo else value
        return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def json_value(value: Any, arrow_type: pa.DataType) -> Any:
    if (
        isinstance(value, int)
        and not isinstance(value, bool)
        and not pa.types.is_decimal(arrow_type)
    ):
        return value
    if isinstance(value, float):
        return value
    return canonical(value, arrow_type)


def fingerprint(column: pa.ChunkedArray) -> dict[str, Any]:
    arrow_type = column.type
    values = [v for v in column.to_pylist() if v is not None]
    result: dict[str, Any] = {
        "arrow_type": str(arrow_type),
        "null_count": column.null_count,
        "non_null_count": len(values),
    }
    if pa.types.is_integer(arrow_type):
        result["sum"] = sum(values)
    elif pa.types.is_floating(arrow_type):
        result["sum"] = math.fsum(values)
    elif pa.types.is_decimal(arrow_type):
        total = sum(values, Decimal(0))
        result["sum"] = f"{total:.{arrow_type.scale}f}"
        result["sum_unscaled"] = int(total.scaleb(arrow_type.scale))
    ordered = sorted(values)
    if ordered:
        result["min"] = json_value(ordered[0], arrow_type)
        result["max"] = json_value(ordered[-1], arrow_type)
    texts = [canonical(v, arrow_type) for v in ordered]
    result["sorted_sha256"] = hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()
    if len(texts) <= 64:
        result["sorted_values"] = [json_value(v, arrow_type) for v in ordered]
    return result


def assert_fingerprint(table: pa.Table, expected: dict[str, Any], where: str) -> None:
    got = fingerprint(table.column(expected["column"]))
    for key, value in expected.items():
        if key == "column":
            continue
        assert got.get(key) == value, f"{where}: column {expected['column']}: {key}"


def delta_type_name(data_type: Any) -> str:
    value = data_type.jsonValue()
    return value if isinstance(value, str) else str(value["type"])


def read(spark: SparkSession, name: str, version: int | None = None) -> DataFrame:
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", str(version))
    return reader.load(str(GOLDEN / name))


def sort_key(row: dict[str, Any]) -> str:
    return json.dumps(row, sort_keys=True, default=str)


def normalized_rows(table: pa.Table) -> list[dict[str, Any]]:
    rows = table.to_pylist()
    return sorted(
        (json.loads(json.dumps(row, sort_keys=True, default=str)) for row in rows), key=sort_key
    )


# -- tests --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", TABLES)
def test_golden_latest_schema_types_and_fingerprints(spark: SparkSession, name: str) -> None:
    expected = EXPECTED["tables"][name]
    df = read(spark, name)
    table = df.toArrow()
    got = [
        {
            "name": f.name,
            "delta_type": delta_type_name(f.dataType),
            "nullable": f.nullable,
            "arrow_type": str(table.schema.field(f.name).type),
        }
        for f in df.schema.fields
    ]
    want = [
        {k: c[k] for k in ("name", "delta_type", "nullable", "arrow_type")}
        for c in expected["columns"]
    ]
    assert got == want
    assert table.num_rows == expected["rows_latest"]
    for fp in [expected["fingerprint"], *expected["extra_fingerprints"]]:
        assert_fingerprint(table, fp, f"{name} latest")
    for column, total in expected["numeric_column_sums"].items():
        assert fingerprint(table.column(column)).get("sum") == total, f"{name}: sum of {column}"


@pytest.mark.parametrize("name", TABLES)
def test_golden_every_version_rows_and_counts(spark: SparkSession, name: str) -> None:
    """Time travel: row count of every version, the v0 fingerprint, and the rows themselves
    equal to delta-rs' own DataFusion reader (`QueryBuilder`) at that version."""
    from deltalake import DeltaTable, QueryBuilder

    expected = EXPECTED["tables"][name]
    counts = {}
    for version in expected["rows_by_version"]:
        got = read(spark, name, int(version)).toArrow()
        counts[version] = got.num_rows
        dt = DeltaTable(str(GOLDEN / name), version=int(version))
        reference = pa.table(QueryBuilder().register("t", dt).execute("select * from t").read_all())
        assert got.column_names == reference.column_names
        assert normalized_rows(got) == normalized_rows(reference), f"{name} v{version}"
        if int(version) == 0:
            assert got.num_rows == expected["rows_version_0"]
            if "fingerprint_version_0" in expected:
                assert_fingerprint(got, expected["fingerprint_version_0"], f"{name} v0")
    assert counts == expected["rows_by_version"]


def test_golden_partition_filter_prunes_files_but_not_rows(spark: SparkSession) -> None:
    """A filter on a partition column returns exactly the rows of that partition."""
    df = read(spark, "cdf-table")
    everything = df.toArrow().to_pylist()
    wanted = [r for r in everything if r["birthday"] == date(2023, 12, 22)]
    got = df.where("birthday = DATE'2023-12-22'").toArrow().to_pylist()
    assert sorted(got, key=sort_key) == sorted(wanted, key=sort_key)
    by_id = df.where("id >= 5 AND id < 8").toArrow().to_pylist()
    assert sorted(by_id, key=sort_key) == sorted(
        (r for r in everything if 5 <= r["id"] < 8), key=sort_key
    )
