"""A dataset declared by a user: one YAML file outside the repo, found through RUNOFF_DATASETS.

`orders` is none of the seed datasets: an ISO-string event time, a tumbling and a sliding
aggregate with several measures, a row rule, extra fields (rescued), malformed lines and a bad
event time. It goes through the CLI (`check`, `bronze`, `silver`, `validate`, `run`, `status`,
`report`) and every table is compared with a plain-Python computation over the landed lines.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from core.config import RunoffConfig
from core.spec_checks import failed_checks
from delta_tables.arrow import read_arrow
from delta_tables.catalog import Catalog
from delta_tables.ledger import read_runs
from jobs.cli import main as cli

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SPEC = """\
name: orders
description: Web shop orders
source: {format: json, path: landing/orders}
schema: "order_id STRING, ts STRING, store STRING, amount DOUBLE, items INT"
event_time: "to_timestamp(ts)"
watermark: "2 hours"
required: [order_id, ts, store]
rules:
  - {name: known_store, expr: "store IN ('berlin', 'lisbon', 'porto')", action: quarantine}
silver:
  - table: orders_store_hourly
    window: "1 hour"
    keys: [store]
    measures: {orders: "count(*)", revenue: "sum(amount)", max_items: "max(items)"}
  - table: orders_store_sliding
    window: "30 minutes"
    slide: "10 minutes"
    keys: [store]
    where: "amount > 0"
    measures: {orders: "count(*)", mean_items: "avg(items)", revenue: "round(sum(amount), 2)"}
expectations:
  bronze:
    - {expect: expect_column_values_to_be_between, column: amount, min_value: 0,
       severity: critical}
  orders_store_hourly:
    - {expect: expect_column_values_to_be_between, column: orders, min_value: 1,
       severity: critical}
schedule: "@daily"
"""
FIELDS = ("order_id", "ts", "store", "amount", "items")
STORES = ("berlin", "lisbon", "porto")
START = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# -- the user's files -------------------------------------------------------------------------
@pytest.fixture
def specs(tmp_path: Path) -> Path:
    folder = tmp_path / "my-datasets"
    folder.mkdir()
    (folder / "orders.yaml").write_text(SPEC)
    return folder


@pytest.fixture
def orders_config(home: Path, specs: Path, monkeypatch: pytest.MonkeyPatch) -> RunoffConfig:
    monkeypatch.setenv("RUNOFF_HOME", str(home))
    monkeypatch.setenv("RUNOFF_DATASETS", str(specs))
    return RunoffConfig.from_sources(home=home, env=os.environ)


def order_lines(first: int, count: int, start: datetime) -> list[str]:
    """Valid orders every 7 minutes over the stores; amounts are quarter units (exact sums)."""
    lines = []
    for i in range(first, first + count):
        record: dict[str, Any] = {
            "order_id": f"o-{i:04d}",
            "ts": (start + timedelta(minutes=7 * (i - first))).isoformat().replace("+00:00", "Z"),
            "store": STORES[i % 3],
            "amount": (i % 11) * 2.25,  # 0.0 now and then: the sliding table's where drops it
            "items": 1 + i % 4,
        }
        if i % 5 == 0:
            record["coupon"] = f"C{i}"  # extra fields: rescued, never dropped
            record["channel"] = i % 3
        lines.append(json.dumps(record))
    return lines


BAD_LINES = [
    '{"order_id": "bad-1", "ts": "2024-05-01T10:00:00Z", "store": "berlin"',  # truncated
    '{"order_id": "bad-2", "ts": "2024-05-01T10:00:00Z", "store": "porto", "amount": "abc"}',
    '{"order_id": "bad-3", "ts": "2024-05-01T10:00:00Z", "amount": 3.0}',  # no store
    '{"order_id": "bad-4", "ts": "yesterday", "store": "lisbon", "amount": 1.0}',  # no time
    '{"order_id": "bad-5", "ts": "2024-05-01T10:00:00Z", "store": "paris", "amount": 1.0}',
    "[1, 2, 3]",
]
BAD_REASONS = [
    "unparseable JSON",
    "wrong type: amount (double)",
    "missing required field: store",
    "missing event time",
    "rule failed: known_store",
    "not a JSON object",
]


def land(home: Path, name: str, lines: Iterable[str]) -> Path:
    path = home / "landing" / "orders" / "date=2024-05-01" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{name}")
    temp.write_text("\n".join(lines) + "\n")
    temp.replace(path)
    return path


# -- the independent computation --------------------------------------------------------------
def expected_bronze(lines: Iterable[str]) -> list[dict[str, Any]]:
    rows = []
    for line in lines:
        value = json.loads(line)
        moment = datetime.fromisoformat(value["ts"].replace("Z", "+00:00"))
        extra = {k: v if isinstance(v, str) else json.dumps(v) for k, v in value.items()}
        rescued = {k: v for k, v in extra.items() if k not in FIELDS}
        rows.append(
            {
                **{f: value.get(f) for f in FIELDS},
                "event_time": moment.replace(tzinfo=None),
                "event_date": moment.date(),
                "_rescued_data": json.dumps(rescued, separators=(",", ":")) if rescued else None,
            }
        )
    return sorted(rows, key=lambda r: r["order_id"])


def windows(moment: datetime, size: timedelta, slide: timedelta) -> list[datetime]:
    seconds = int((moment - EPOCH).total_seconds())
    last = seconds - seconds % int(slide.total_seconds())
    first = last - int(size.total_seconds()) + int(slide.total_seconds())
    step = int(slide.total_seconds())
    return [EPOCH + timedelta(seconds=s) for s in range(first, last + 1, step)]


def expected_silver(
    bronze: list[dict[str, Any]], size: timedelta, slide: timedelta, sliding: bool
) -> list[dict[str, Any]]:
    groups: dict[tuple[datetime, str], list[dict[str, Any]]] = defaultdict(list)
    for row in bronze:
        if sliding and not row["amount"] > 0:
            continue
        moment = row["event_time"].replace(tzinfo=UTC)
        for start in windows(moment, size, slide):
            groups[(start, row["store"])].append(row)
    out = []
    for (start, store), rows in sorted(groups.items()):
        total = sum(r["amount"] for r in rows)
        measures: dict[str, Any] = (
            {
                "orders": len(rows),
                "mean_items": sum(r["items"] for r in rows) / len(rows),
                "revenue": round(total, 2),
            }
            if sliding
            else {
                "orders": len(rows),
                "revenue": total,
                "max_items": max(r["items"] for r in rows),
            }
        )
        out.append(
            {
                "window_start": start.replace(tzinfo=None),
                "window_end": (start + size).replace(tzinfo=None),
                "store": store,
                **measures,
            }
        )
    return out


def table(path: Path, columns: list[str], order: list[str]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = read_arrow(str(path), columns).to_pylist()
    for row in rows:
        for key, value in row.items():
            if isinstance(value, datetime):
                row[key] = value.astimezone(UTC).replace(tzinfo=None)
    return sorted(rows, key=lambda r: tuple(r[c] for c in order))


def assert_tables(home: Path, valid: list[str], bad: list[str], reasons: list[str]) -> None:
    bronze = expected_bronze(valid)
    columns = [*FIELDS, "event_time", "event_date", "_rescued_data"]
    assert table(home / "delta/bronze/orders", columns, ["order_id"]) == bronze
    quarantine = table(home / "delta/quarantine/orders", ["_raw", "_error"], ["_raw"])
    assert quarantine == sorted(
        ({"_raw": raw, "_error": reason} for raw, reason in zip(bad, reasons, strict=True)),
        key=lambda r: r["_raw"],
    )
    hour, ten = timedelta(hours=1), timedelta(minutes=10)
    silver_order = ["window_start", "store"]
    hourly = ["window_start", "window_end", "store", "orders", "revenue", "max_items"]
    assert table(home / "delta/silver/orders_store_hourly", hourly, silver_order) == (
        expected_silver(bronze, hour, hour, sliding=False)
    )
    sliding = ["window_start", "window_end", "store", "orders", "mean_items", "revenue"]
    assert table(home / "delta/silver/orders_store_sliding", sliding, silver_order) == (
        expected_silver(bronze, timedelta(minutes=30), ten, sliding=True)
    )


def runoff(*argv: str) -> int:
    return cli.main(list(argv))


# -- the tests --------------------------------------------------------------------------------
def test_a_declared_dataset_runs_end_to_end(
    spark: SparkSession,
    orders_config: RunoffConfig,
    home: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert runoff("check") == 0
    plan = capsys.readouterr().out
    assert "orders_store_sliding" in plan and "check: 5 datasets ok, 0 refused" in plan

    first = order_lines(0, 30, START)
    land(home, "part-0001.json", [*first[:15], "", *BAD_LINES, *first[15:]])
    assert runoff("bronze", "orders") == 0
    assert runoff("silver", "orders") == 0
    assert runoff("validate", "orders") == 0
    assert_tables(home, first, BAD_LINES, BAD_REASONS)
    out = capsys.readouterr().out
    assert "bronze orders: success" in out

    # A second delivery: later orders, a field never seen before; `run` does all three steps.
    second = order_lines(30, 20, START + timedelta(minutes=7 * 30 - 3))
    second[3] = second[3][:-1] + ', "gift": true}'
    land(home, "part-0002.json", second)
    assert runoff("run", "orders") == 0
    assert_tables(home, first + second, BAD_LINES, BAD_REASONS)
    assert "validate passed" in capsys.readouterr().out

    assert runoff("status", "orders", "--json") == 0
    status = json.loads(capsys.readouterr().out)
    rows = {t["table"]: t["rows"] for t in status["tables"]}
    hour, ten = timedelta(hours=1), timedelta(minutes=10)
    bronze = expected_bronze(first + second)
    assert rows == {
        "bronze_orders": 50,
        "quarantine_orders": len(BAD_LINES),
        "orders_store_hourly": len(expected_silver(bronze, hour, hour, sliding=False)),
        "orders_store_sliding": len(
            expected_silver(bronze, timedelta(minutes=30), ten, sliding=True)
        ),
    }
    assert status["landing"]["path"] == str(home / "landing" / "orders")

    assert runoff("report", "orders") == 0
    report = Path(capsys.readouterr().out.strip().splitlines()[-1])
    page = report.read_text()
    assert report == home / "reports" / "orders.html"
    assert "orders_store_hourly" in page and "orders_store_sliding" in page

    # A backfill of the day re-reads its files (landing and archive): the same tables again.
    assert runoff("backfill", "orders", "--start", "2024-05-01", "--end", "2024-05-02") == 0
    assert_tables(home, first + second, BAD_LINES, BAD_REASONS)
    assert runoff("maintain", "orders") == 0
    assert_tables(home, first + second, BAD_LINES, BAD_REASONS)


@pytest.mark.parametrize(
    ("change", "key", "problem"),
    [
        (
            ('revenue: "sum(amount)"', 'revenue: "sum(amout)"'),
            "silver[0].measures.revenue",
            "unknown column 'amout' (columns: order_id, ts, store, amount, items, "
            "event_time, event_date, _source_file, _ingested_at, _batch_id, _rescued_data)",
        ),
        (
            ('event_time: "to_timestamp(ts)"', 'event_time: "to_timestamp(tss)"'),
            "event_time",
            "unknown column 'tss' (columns: order_id, ts, store, amount, items, _source_file)",
        ),
        (
            ("keys: [store]\n    where", "keys: [shop]\n    where"),
            "silver[1].keys",
            "unknown column 'shop' (columns: order_id, ts, store, amount, items, event_time, "
            "event_date, _source_file, _ingested_at, _batch_id, _rescued_data)",
        ),
        (
            ('event_time: "to_timestamp(ts)"', 'event_time: "length(ts)"'),
            "event_time",
            "is int, not a timestamp: cast it",
        ),
        (('window: "1 hour"', 'window: "an hour"'), "silver[0].window", None),
        (("schedule:", "shedule:"), "shedule", "unknown key"),
    ],
)
def test_check_refuses_a_bad_spec_naming_file_key_and_problem(
    spark: SparkSession,
    orders_config: RunoffConfig,
    specs: Path,
    capsys: pytest.CaptureFixture[str],
    change: tuple[str, str],
    key: str,
    problem: str | None,
) -> None:
    path = specs / "orders.yaml"
    assert change[0] in SPEC
    path.write_text(SPEC.replace(change[0], change[1], 1))
    assert runoff("check") == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{path}: {key}: ")
    if problem is not None:
        assert lines[0].startswith(f"{path}: {key}: {problem}")
    # The seed datasets are still fine, and the plan shows them.
    assert "check: 4 datasets ok, 1 refused" in captured.out
    # Named datasets only: the refused one alone, or a good one beside it; a name of none.
    assert runoff("check", "orders") == 2
    named = capsys.readouterr()
    assert named.err.strip().splitlines() == lines
    assert "check: 0 datasets ok, 1 refused" in named.out
    assert runoff("check", "events") == 0
    named = capsys.readouterr()
    assert (named.err, "check: 1 datasets ok, 0 refused" in named.out) == ("", True)
    assert "bronze_events" in named.out and "bronze_sensors" not in named.out
    assert runoff("check", "nope") == 2
    assert "unknown dataset 'nope': choose one of activity, events, lines, orders, sensors" in (
        capsys.readouterr().err
    )
    # Any other command naming the refused dataset gets the same line, exit 2, and nothing runs.
    home = orders_config.home
    land(home, "part-0001.json", order_lines(0, 3, START))
    assert runoff("bronze", "orders") == 2
    assert not (home / "delta" / "bronze" / "orders").exists()
    assert lines[0] in capsys.readouterr().err
    # A SQL finding is kept for Airflow's DAG processor (core.spec_checks); a format problem is
    # the catalog's own, found wherever the spec is read.
    catalog = Catalog.load(orders_config)
    sql_problem = "orders" in [spec.name for spec in catalog.specs]
    assert failed_checks(home, catalog.specs) == ({"orders": lines} if sql_problem else {})
    if sql_problem:  # fixed: the next check clears it
        path.write_text(SPEC)
        assert runoff("check", "orders") == 0
        assert failed_checks(home, Catalog.load(orders_config).specs) == {}


def test_add_columns_widens_bronze_and_silver_keeps_running(
    spark: SparkSession,
    orders_config: RunoffConfig,
    specs: Path,
    home: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (specs / "orders.yaml").write_text(
        SPEC.replace(
            "required: [order_id, ts, store]",
            "required: [order_id, ts, store]\nschema_evolution: add_columns",
        )
    )
    first = order_lines(0, 10, START)  # orders 0 and 5 carry coupon and channel
    land(home, "part-0001.json", first)
    assert runoff("bronze", "orders") == 0
    assert runoff("silver", "orders") == 0
    out = capsys.readouterr().out
    assert (
        "bronze orders: bronze gained columns channel, coupon (schema_evolution: add_columns" in out
    )

    second = order_lines(10, 10, START + timedelta(minutes=70))
    second[0] = second[0][:-1] + ', "gift": true}'
    land(home, "part-0002.json", second)
    assert runoff("run", "orders") == 0
    assert "bronze gained columns gift " in capsys.readouterr().out

    columns = [*FIELDS, "event_time", "event_date", "channel", "coupon", "gift"]
    got = table(home / "delta/bronze/orders", columns, ["order_id"])
    want = []
    for line in first + second:
        value = json.loads(line)
        moment = datetime.fromisoformat(value["ts"].replace("Z", "+00:00"))
        want.append(
            {
                **{f: value.get(f) for f in FIELDS},
                "event_time": moment.replace(tzinfo=None),
                "event_date": moment.date(),
                # unknown fields arrive as text: strings as they are, other values as JSON
                **{
                    k: None
                    if k not in value
                    else value[k]
                    if isinstance(value[k], str)
                    else json.dumps(value[k])
                    for k in ("channel", "coupon", "gift")
                },
            }
        )
    assert got == sorted(want, key=lambda r: r["order_id"])
    assert "_rescued_data" not in read_arrow(str(home / "delta/bronze/orders")).column_names
    bronze = expected_bronze(first + second)
    hour = timedelta(hours=1)
    hourly = ["window_start", "window_end", "store", "orders", "revenue", "max_items"]
    assert table(home / "delta/silver/orders_store_hourly", hourly, ["window_start", "store"]) == (
        expected_silver(bronze, hour, hour, sliding=False)
    )


def test_fail_stops_the_run_naming_the_new_fields_and_keeps_the_checkpoint(
    spark: SparkSession,
    orders_config: RunoffConfig,
    specs: Path,
    home: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    strict = SPEC.replace(
        "required: [order_id, ts, store]", "required: [order_id, ts, store]\nschema_evolution: fail"
    )
    (specs / "orders.yaml").write_text(strict)
    lines = order_lines(0, 10, START)
    land(home, "part-0001.json", lines)
    assert runoff("bronze", "orders") == 1
    err = capsys.readouterr().err
    assert "orders: records carry fields the schema does not declare: channel, coupon" in err
    assert read_arrow(str(home / "delta/bronze/orders")).num_rows == 0

    # Declared, the same file goes in on the next run: the failed batch was never committed.
    declared = strict.replace("items INT", "items INT, coupon STRING, channel INT")
    (specs / "orders.yaml").write_text(declared)
    assert runoff("bronze", "orders") == 0
    got = table(home / "delta/bronze/orders", ["order_id", "coupon", "channel"], ["order_id"])
    assert got == [
        {
            "order_id": json.loads(line)["order_id"],
            "coupon": json.loads(line).get("coupon"),
            "channel": json.loads(line).get("channel"),
        }
        for line in lines
    ]


def test_demo_skips_a_declared_dataset_with_nothing_landed(
    spark: SparkSession, orders_config: RunoffConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    from jobs.samples.demo import demo_sizes, run_demo

    assert demo_sizes("orders") is None  # no generator: users bring their own files
    assert run_demo(spark, orders_config, datasets=("orders",)) == []
    assert "demo orders: no landing files and no generator: skipped" in capsys.readouterr().out


def test_a_quarantine_expectation_moves_exactly_the_failing_rows(
    spark: SparkSession, orders_config: RunoffConfig, specs: Path, home: Path
) -> None:
    (specs / "orders.yaml").write_text(
        SPEC.replace(
            "column: amount, min_value: 0,\n       severity: critical}",
            "column: amount, min_value: 0,\n       severity: quarantine}\n"
            "    - {expect: expect_column_values_to_be_in_set, column: items,"
            " value_set: [1, 2, 3, 4], severity: quarantine}",
        )
    )
    lines = order_lines(0, 40, START)
    for i in (2, 3):
        lines[i] = lines[i].replace('"amount": ', '"amount": -')
    for i in (3, 7, 11):
        lines[i] = lines[i].replace('"items": ', '"items": 9')  # 91..94: not in the set
    land(home, "part-0001.json", lines)
    assert runoff("run", "orders") == 0  # the bad rows are gone before validate looks

    def broken(value: dict[str, Any]) -> list[str]:
        names = []
        if value["amount"] < 0:
            names.append("expect_column_values_to_be_between(amount)")
        if value["items"] not in (1, 2, 3, 4):
            names.append("expect_column_values_to_be_in_set(items)")
        return names

    good = [line for line in lines if not broken(json.loads(line))]
    bad = [line for line in lines if broken(json.loads(line))]
    assert len(good) == 36 and len(bad) == 4  # 10 %: the quarantine share only warns
    reasons = [f"rule failed: {', '.join(broken(json.loads(line)))}" for line in bad]
    assert_tables(home, good, bad, reasons)
    # Per rule and batch, in the run ledger and the results history (the quality gate's records).
    bronze = [r for r in read_runs(orders_config.runs_path, "orders") if r["layer"] == "bronze"]
    counts = json.loads(bronze[-1]["details"])["expectations"]
    for name in ("known_store", *{n for line in bad for n in broken(json.loads(line))}):
        quarantined = sum(name in broken(json.loads(line)) for line in bad)
        assert counts[f"bronze_orders: {name}"] == {
            "severity": "quarantine",
            "kind": "",  # a row rule, not a GX expectation
            "column": None,
            "batches": 1,
            "evaluated": len(lines),
            "failed": quarantined,
            "quarantined": quarantined,
        }
