"""Every committed bronze batch records its metrics; `expect_batch_metric_within_history` judges
a batch against them. The metrics are computed again here from the landed lines; a critical
anomaly writes nothing of its batch, and once its severity is lowered to warning the same batch
is published once, its anomaly recorded."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from core.config import RunoffConfig
from delta_tables.arrow import read_arrow
from delta_tables.catalog import Catalog
from jobs.cli.main import main
from quality.history import MetricRow, append_metrics, read_metrics, read_results
from tests.spark.jobs.test_declared_dataset import SPEC

pytestmark = pytest.mark.spark

HISTORY = """\
    - {expect: expect_batch_metric_within_history, metric: rows_written, lookback: 10 days,
       seasonality: hour_of_day, min_history: 3, severity: critical}
    - {expect: expect_batch_metric_within_history, metric: "null_share:items", min_history: 3}
"""
DAY = datetime(2024, 5, 1, 9, tzinfo=UTC)
COLUMNS = ("order_id", "ts", "store", "amount", "items")


def order(i: int, at: datetime, store: str = "berlin", **extra: Any) -> str:
    record = {"order_id": f"o{i}", "ts": at.isoformat(), "store": store, "amount": 10.0 + i}
    return json.dumps({**record, "items": i % 3 or None, **extra})


def spec(severity: str) -> str:
    text = SPEC.replace("expectations:\n  bronze:\n", f"expectations:\n  bronze:\n{HISTORY}", 1)
    assert HISTORY in text
    return text.replace(
        "min_history: 3, severity: critical}", f"min_history: 3, severity: {severity}}}"
    )


@pytest.fixture
def orders(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RunoffConfig:
    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "orders.yaml").write_text(spec("critical"))
    monkeypatch.setenv("RUNOFF_DATASETS", str(folder))
    return RunoffConfig.from_sources(home=home, env=os.environ)


def land(config: RunoffConfig, name: str, lines: list[str]) -> None:
    folder = config.home / "landing" / "orders"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("\n".join(lines) + "\n")


def metrics_of(config: RunoffConfig, batch_id: int) -> dict[str, float]:
    rows = read_metrics(config.quality_metrics_path, "orders")
    return {
        r["metric"]: r["value"] for r in rows if r["batch_id"] == batch_id and r["run_id"] != "seed"
    }


def test_batch_metrics_and_an_anomaly_stopped_then_published_once(
    spark: Any, orders: RunoffConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    home = ["--home", str(orders.home)]
    good = [order(i, DAY + timedelta(minutes=5 * i)) for i in range(6)]
    rescued = order(6, DAY + timedelta(minutes=40), coupon="SPRING")
    lines = [*good, rescued, order(7, DAY, store="paris"), "{not json"]
    land(orders, "a.json", lines)
    assert main([*home, "bronze", "orders"]) == 0

    # By hand: 9 lines; 7 valid records (one with an undeclared field); one broke the rule,
    # one is not JSON; items is null for i = 0, 3 and 6 (i % 3 == 0) of the 7.
    written = [json.loads(line) for line in [*good, rescued]]
    newest = max(datetime.fromisoformat(r["ts"]) for r in written)
    bronze = read_arrow(orders.bronze_path("orders")).to_pylist()
    ingested = bronze[0]["_ingested_at"]
    expected = {
        "rows_in": 9,
        "rows_written": 7,
        "rows_quarantined": 2,
        "rows_malformed": 1,
        "rows_rescued": 1,
        "quarantined:known_store": 1,
        **{
            f"null_share:{c}": sum(r.get(c) is None for r in written) / len(written)
            for c in COLUMNS
        },
        "event_lag_seconds": (ingested - newest).total_seconds(),
    }
    assert expected["null_share:items"] == 3 / 7
    assert metrics_of(orders, 0) == pytest.approx(expected)
    (row,) = [
        r
        for r in read_metrics(orders.quality_metrics_path, "orders")
        if r["metric"] == "rows_written"
    ]
    assert row["batch_time"] == newest

    # Three earlier days at 09:00 wrote 7 rows each (the first of them the batch above).
    table = Catalog.load(orders).tables("orders").bronze.name
    seeded = [
        MetricRow("seed", "orders", table, -d, metric, value, DAY - timedelta(days=d), DAY)
        for d in (1, 2)
        for metric, value in (("rows_written", 7.0), ("null_share:items", 3 / 7))
    ]
    append_metrics(orders.quality_metrics_path, seeded)
    # Day four at 09:00: two rows. Critical: nothing of the batch is written.
    capsys.readouterr()
    land(orders, "b.json", [order(i, DAY + timedelta(days=3, minutes=i)) for i in (10, 11)])
    assert main([*home, "bronze", "orders"]) == 1
    error = capsys.readouterr().err
    assert (
        "batch_metric_within_history(metric=rows_written, lookback=10 days, "
        "seasonality=hour_of_day, min_history=3, threshold=3.5): observed rows_written 2 "
        "outside [7, 7] (median 7 of 3 earlier batches, 09:00 UTC)"
    ) in error, error
    assert len(read_arrow(orders.bronze_path("orders"))) == 7
    assert metrics_of(orders, 1) == {}

    # Lowered to warning: the same batch is published once, its anomaly recorded.
    folder = Path(os.environ["RUNOFF_DATASETS"])
    (folder / "orders.yaml").write_text(spec("warning"))
    assert main([*home, "bronze", "orders"]) == 0
    assert len(read_arrow(orders.bronze_path("orders"))) == 9
    assert metrics_of(orders, 1)["rows_written"] == 2
    # Each run's check of it: the stopped run's (critical), the publishing run's (warning).
    checks = [
        (r["batch_id"], r["severity"], r["success"], r["observed"])
        for r in read_results(orders.quality_results_path, "orders", table)
        if r["expectation"].startswith("batch_metric_within_history(metric=rows_written")
    ]
    too_few = "rows_written 7: 0 of 3 earlier batches, 09:00 UTC, too few to judge"
    outside = "rows_written 2 outside [7, 7] (median 7 of 3 earlier batches, 09:00 UTC)"
    assert checks == [
        (0, "critical", True, too_few),
        (1, "critical", False, outside),
        (1, "warning", False, outside),
    ]


def test_check_refuses_an_unknown_metric_naming_the_datasets_metrics(
    spark: Any, orders: RunoffConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = Path(os.environ["RUNOFF_DATASETS"])
    (folder / "orders.yaml").write_text(
        spec("critical").replace("metric: rows_written", "metric: rows_writen")
    )
    assert main(["--home", str(orders.home), "check", "orders"]) == 2
    metrics = [
        "rows_in", "rows_written", "rows_quarantined", "rows_malformed", "rows_rescued",
        "event_lag_seconds", "quarantined:known_store",
        *(f"null_share:{c}" for c in COLUMNS),
    ]  # fmt: skip
    line = (
        f"expectations.bronze[0].metric: unknown batch metric 'rows_writen' "
        f"(metrics: {', '.join(metrics)})"
    )
    assert line in capsys.readouterr().err


def test_silver_batches_record_rows_in_merged_and_late(spark: Any, orders: RunoffConfig) -> None:
    """Each silver table's committed batches: every bronze row read once, as many rows
    inserted as the table holds (a first run updates nothing), none late."""
    land(orders, "a.json", [order(i, DAY + timedelta(minutes=7 * i)) for i in range(12)])
    home = ["--home", str(orders.home)]
    assert main([*home, "bronze", "orders"]) == 0
    assert main([*home, "silver", "orders"]) == 0
    rows = [
        r
        for r in read_metrics(orders.quality_metrics_path, "orders")
        if r["table"] != "bronze_orders"
    ]
    for table in ("orders_store_hourly", "orders_store_sliding"):
        silver = read_arrow(orders.silver_path(table)).to_pylist()
        batches: dict[int, dict[str, float]] = {}
        times: dict[int, datetime] = {}
        for r in rows:
            if r["table"] == table:
                batches.setdefault(r["batch_id"], {})[r["metric"]] = r["value"]
                times[r["batch_id"]] = r["batch_time"]
        assert batches, table
        assert sum(b["rows_in"] for b in batches.values()) == 12
        assert sum(b["rows_inserted"] for b in batches.values()) == len(silver)
        assert all(
            b["rows_written"] == b["rows_inserted"] + b["rows_updated"] for b in batches.values()
        )
        assert [b["late_rows"] for b in batches.values()] == [0] * len(batches)
        assert max(times.values()) == max(r["window_start"] for r in silver)
