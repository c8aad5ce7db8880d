"""Bronze remembers the definition that built it: a changed spec is refused or applied.

A change of what bronze's rows mean (event time, a column's type, a column removed, the
projection, schema evolution) is refused before anything is written, tables and checkpoint
untouched; `runoff rebuild bronze_<dataset>` then gives exactly the tables a fresh start with the
new spec gives. A change a run can apply to what it ingests (a column added, a new rule) is
applied and said.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from core.config import RunoffConfig
from delta_tables.arrow import read_arrow
from delta_tables.ledger import read_runs
from jobs.cli import main as cli
from tests.user_specs import declared

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SPEC = """\
name: shop
source: {format: json, path: landing/shop}
schema: "id STRING, ts STRING, store STRING, amount DOUBLE, note STRING"
event_time: "to_timestamp(ts)"
required: [id, store]
silver:
  - table: shop_store_hourly
    window: "1 hour"
    keys: [store]
    measures: {orders: "count(*)", revenue: "sum(amount)"}
"""
# (old text, new text, the change the refusal names)
REFUSED = [
    ("amount DOUBLE", "amount DECIMAL(10, 2)", "column amount DOUBLE -> DECIMAL(10,2)"),
    (", note STRING", "", "column note removed: STRING"),
    (
        "required:",
        "bronze: {rename: {note: remark}}\nrequired:",
        'rename none -> [["note", "remark"]]',
    ),
    ("required:", "schema_evolution: add_columns\nrequired:", 'schema_evolution "rescue" -> '),
    (
        'event_time: "to_timestamp(ts)"',
        'event_time: "to_timestamp(ts) + INTERVAL 30 MINUTES"',
        'event_time "to_timestamp(ts)" -> "to_timestamp(ts) + INTERVAL 30 MINUTES"',
    ),
]


@pytest.fixture
def specs(tmp_path: Path) -> Path:
    return tmp_path / "my-datasets"


@pytest.fixture
def shop_config(home: Path, specs: Path, monkeypatch: pytest.MonkeyPatch) -> RunoffConfig:
    return declared(specs, home, monkeypatch, {"shop": SPEC})


def orders(first: int, count: int, extra: dict[str, Any] | None = None) -> list[str]:
    return [
        json.dumps(
            {
                "id": f"o-{i:03d}",
                "ts": f"2024-05-01T{9 + i // 6:02d}:{i % 6 * 10:02d}:00Z",
                "store": ("berlin", "porto")[i % 2],
                "amount": i * 0.25,
                **(extra or {}),
            }
        )
        for i in range(first, first + count)
    ]


def land(home: Path, name: str, lines: list[str]) -> None:
    path = home / "landing" / "shop" / "date=2024-05-01" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def tree(path: Path) -> dict[str, bytes]:
    """Every file below `path` and its content (but the lock files, which each command takes):
    what a refused run must leave as it was."""
    return {
        str(p.relative_to(path)): p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file() and p.suffix != ".lock"
    }


def tables(home: Path) -> dict[str, list[dict[str, Any]]]:
    """Every table's rows, sorted, without what differs between two homes or two runs."""
    columns = {
        "bronze/shop": ["id", "ts", "store", "amount", "event_time", "event_date", "_rescued_data"],
        "quarantine/shop": ["_raw", "_error"],
        "silver/shop_store_hourly": ["window_start", "window_end", "store", "orders", "revenue"],
    }
    return {
        name: sorted(
            read_arrow(str(home / "delta" / name), wanted).to_pylist(),
            key=lambda r: json.dumps(r, default=str, sort_keys=True),
        )
        for name, wanted in columns.items()
    }


def test_a_changed_bronze_definition_is_refused_then_rebuilt_as_new(
    spark: SparkSession,
    shop_config: RunoffConfig,
    specs: Path,
    home: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lines = [*orders(0, 20), '{"id": "bad", "ts": "2024-05-01T09:00:00Z"}']
    land(home, "part-0001.json", lines)
    assert cli.main(["run", "shop"]) == 0
    capsys.readouterr()
    spec = specs / "shop.yaml"
    before = {folder: tree(home / folder) for folder in ("delta", "checkpoints")}
    land(home, "part-0002.json", orders(20, 6))
    for old, new, change in REFUSED:
        assert old in SPEC
        spec.write_text(SPEC.replace(old, new, 1))
        assert cli.main(["bronze", "shop"]) == 2
        err = capsys.readouterr().err
        assert f"{spec} changed the definition of bronze_shop (" in err
        assert change in err and "`runoff rebuild bronze_shop`" in err
        assert cli.main(["check", "shop"]) == 0
        assert f"built by another definition ({change}" in capsys.readouterr().out
    # `runoff run` refuses it too, and a backfill; nothing of any of them was written
    assert cli.main(["run", "shop"]) == 2
    assert cli.main(["backfill", "shop", "--start", "2024-05-01", "--end", "2024-05-02"]) == 2
    capsys.readouterr()
    ledger = {folder: tree(home / folder) for folder in ("delta", "checkpoints")}
    ledger["delta"] = {k: v for k, v in ledger["delta"].items() if not k.startswith("ops/")}
    before["delta"] = {k: v for k, v in before["delta"].items() if not k.startswith("ops/")}
    assert ledger == before

    # The last change (the event time) rebuilt: exactly what a fresh start with the spec gives.
    assert cli.main(["rebuild", "bronze_shop"]) == 0
    out = capsys.readouterr().out
    assert "rebuilding bronze rebuilds silver too" in out
    fresh_home = tmp_path / "fresh"
    fresh_home.mkdir()
    land(fresh_home, "part-0001.json", lines)
    land(fresh_home, "part-0002.json", orders(20, 6))
    assert cli.main(["--home", str(fresh_home), "run", "shop"]) == 0
    rebuilt = tables(home)
    assert rebuilt == tables(fresh_home)
    assert len(rebuilt["bronze/shop"]) == 26 and len(rebuilt["quarantine/shop"]) == 1
    assert [r["layer"] for r in read_runs(shop_config.runs_path, "shop")][-3:] == [
        "rebuild",
        "bronze",
        "silver",
    ]
    assert cli.main(["bronze", "shop"]) == 0  # built by the spec as it is now


def test_a_column_or_rule_added_is_applied_to_what_a_run_ingests(
    spark: SparkSession,
    shop_config: RunoffConfig,
    specs: Path,
    home: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    land(home, "part-0001.json", orders(0, 6, {"channel": "web"}))
    assert cli.main(["run", "shop"]) == 0
    spec = specs / "shop.yaml"
    changed = SPEC.replace('note STRING"', 'note STRING, channel STRING"').replace(
        "silver:", 'rules:\n  - {name: positive, expr: "amount > 0"}\nsilver:'
    )
    spec.write_text(changed)
    capsys.readouterr()
    assert cli.main(["check", "shop"]) == 0
    out = capsys.readouterr().out
    assert "built by another definition (column channel added: STRING; rules none -> " in out
    assert "the next bronze run applies it to the records it ingests" in out

    zero = json.dumps({"id": "zero", "ts": "2024-05-01T10:00:00Z", "store": "porto", "amount": 0})
    land(home, "part-0002.json", [*orders(6, 6, {"channel": "app"}), zero])
    assert cli.main(["run", "shop"]) == 0
    out = capsys.readouterr().out
    assert f"bronze shop: {spec} changed bronze_shop (column channel added: STRING; rules" in out
    bronze = sorted(
        read_arrow(str(home / "delta/bronze/shop"), ["id", "channel", "_rescued_data"]).to_pylist(),
        key=lambda r: r["id"],
    )
    # Rows ingested before keep the field rescued; the rule reached only the new delivery.
    assert bronze == [
        *(
            {"id": f"o-{i:03d}", "channel": None, "_rescued_data": '{"channel":"web"}'}
            for i in range(6)
        ),
        *({"id": f"o-{i:03d}", "channel": "app", "_rescued_data": None} for i in range(6, 12)),
    ]
    quarantine = read_arrow(str(home / "delta/quarantine/shop"), ["_raw", "_error"]).to_pylist()
    assert quarantine == [{"_raw": zero, "_error": "rule failed: positive"}]
    runs = read_runs(shop_config.runs_path, "shop")
    applied = json.loads(next(r for r in reversed(runs) if r["layer"] == "bronze")["details"])
    assert applied["applied"] == [
        "column channel added: STRING",
        'rules none -> [["positive", "amount > 0"]]',
    ]
    assert cli.main(["check", "shop"]) == 0
    assert "built by another definition" not in capsys.readouterr().out
