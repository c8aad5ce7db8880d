"""`runoff check` accepts `freshness` (not a GX name): `_check_expectations` without Spark.

The check of declared expectations only needs the table's resolved schema, so it is called here
with the columns `runoff check` would resolve; the rest of `check` is covered with Spark in
tests/spark/jobs/test_declared_dataset.py.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql.types import StringType, StructField, StructType

from core.specs import load_spec
from jobs.streaming.resolve import TablePlan, _check_expectations, _Resolver

SPEC = """\
name: shop
source: {format: json}
schema: "id STRING, ts STRING"
event_time: "to_timestamp(ts)"
silver:
  - table: shop_hourly
    window: "1 hour"
    keys: [id]
    measures: {n: "count(*)"}
expectations:
  bronze:
    - {expect: freshness, max_age: "2 hours", severity: critical, notes: "hourly feed"}
  shop_hourly:
    - {expect: freshness, max_age: "1 day"}
"""
BRONZE_COLUMNS = ["id", "ts", "event_time", "event_date", "_source_file", "_ingested_at"]


def columns(*names: str) -> StructType:
    """A table of these columns (their types do not matter to the check)."""
    return StructType([StructField(name, StringType()) for name in names])


def test_check_accepts_and_prints_freshness(tmp_path: Path) -> None:
    path = tmp_path / "shop.yaml"
    path.write_text(SPEC)
    check = _Resolver(load_spec(path))
    bronze = TablePlan("bronze_shop", "bronze", "", [(c, "string") for c in BRONZE_COLUMNS])
    hourly = TablePlan("shop_hourly", "silver", "", [])
    _check_expectations(check, "bronze", columns(*BRONZE_COLUMNS), bronze)
    _check_expectations(
        check, "shop_hourly", columns("window_start", "window_end", "id", "n"), hourly
    )
    assert check.problems == []
    assert bronze.expectations == ["freshness(max_age='2 hours', notes='hourly feed') [critical]"]
    assert hourly.expectations == ["freshness(max_age='1 day') [warning]"]


def test_check_names_a_missing_event_time_column(tmp_path: Path) -> None:
    path = tmp_path / "shop.yaml"
    path.write_text(SPEC)
    check = _Resolver(load_spec(path))
    hourly = TablePlan("shop_hourly", "silver", "", [])
    # e.g. a transform without it
    _check_expectations(check, "shop_hourly", columns("id", "n"), hourly)
    assert check.problems == [
        f"{path}: expectations.shop_hourly[0].expect: unknown column 'window_end' (columns: id, n)"
    ]
