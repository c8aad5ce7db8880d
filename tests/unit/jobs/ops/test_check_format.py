"""`runoff check --no-spark`: the specs' format and outline without a JVM (this tier refuses
one), exit 2 for a refused spec, and SQL left unresolved, as its last line says."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.cli.main import main
from tests.conftest import REPO_ROOT
from tests.user_specs import write_bad_specs

SPEC = """\
name: shop
source: {format: json, path: landing/shop}
schema: "id STRING, ts TIMESTAMP, store STRING, amount DOUBLE"
event_time: ts
watermark: "2 hours"
silver:
  - table: shop_store_hourly
    window: "1 hour"
    keys: [store]
    where: "amount > 0"
    measures: {orders: "count(*)", revenue: "sum(amout)"}
expectations:
  bronze:
    - {expect: expect_column_values_to_be_between, column: amount, min_value: 0}
schedule: "@daily"
"""


def check(home: Path, datasets: Path, *names: str) -> int:
    return main(["--home", str(home), "--datasets", str(datasets), "check", "--no-spark", *names])


def test_the_outline_of_a_spec_without_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    datasets = tmp_path / "specs"
    datasets.mkdir()
    (datasets / "shop.yaml").write_text(SPEC)
    home = tmp_path / "home"
    # `sum(amout)` names no column: only Spark's analyzer sees that, which --no-spark skips.
    assert check(home, datasets, "shop") == 0
    out, err = capsys.readouterr()
    assert err == ""
    delta = home / "delta"
    assert out.splitlines() == [
        f"shop  {datasets / 'shop.yaml'}",
        "  DAG runoff_shop, schedule @daily; watermark 2 hours",
        f"  bronze bronze_shop  ({delta / 'bronze' / 'shop'})",
        "    partitioned by event_date",
        "    expect expect_column_values_to_be_between(column='amount', min_value=0) [warning]",
        f"  quarantine quarantine_shop  ({delta / 'quarantine' / 'shop'})",
        "    partitioned by ingest_date",
        f"  silver shop_store_hourly  ({delta / 'silver' / 'shop_store_hourly'})",
        "    keys window_start, window_end, store",
        "    output update",
        "    window 1 hour",
        "    where amount > 0",
        "    orders = count(*)",
        "    revenue = sum(amout)",
        f"check: 1 datasets ok, 0 refused (folders: {REPO_ROOT / 'jobs' / 'datasets'}, "
        f"{datasets}); format only: their SQL was not resolved (`runoff check` without "
        "--no-spark resolves it)",
    ]
    assert not home.exists()  # check creates nothing


def test_a_spec_the_format_refuses_exits_2_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    datasets = tmp_path / "specs"
    bad = write_bad_specs(datasets)
    assert check(tmp_path / "home", datasets) == 2
    out, err = capsys.readouterr()
    last = out.splitlines()[-1]
    assert last.startswith(f"check: 4 datasets ok, {len(bad)} refused"), last
    for path, problem in bad.items():
        assert problem in err, (path, err)
