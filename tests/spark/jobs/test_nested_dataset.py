"""A dataset of nested records: struct, array and map fields, keys and measures on their paths.

`shipments` declares a struct within a struct, an array of structs, an array of strings and a
map. Its silver table is keyed by two fields within structs (one column name derived, one
given), its where reads a struct's field, its measures reach into the array and the map; a
rule and a quarantine expectation test nested fields; records carry fields the schema does not
declare at every depth, and a later delivery brings a new one. Every table is compared with a
plain-Python computation over the landed lines, `_rescued_data` included.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
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
name: shipments
source: {format: json, path: landing/shipments}
schema: >-
  id STRING, ts STRING,
  customer STRUCT<country: STRING, tier: STRING, address: STRUCT<city: STRING>>,
  items ARRAY<STRUCT<sku: STRING, qty: INT>>, tags ARRAY<STRING>, prices MAP<STRING, DOUBLE>
event_time: "to_timestamp(ts)"
watermark: "1 hour"
required: [id, customer.country]
rules:
  - {name: positive_qty, expr: "forall(items, i -> i.qty > 0)"}
silver:
  - table: shipments_place_hourly
    window: "1 hour"
    keys: [customer.country, {city: customer.address.city}]
    where: "customer.address.city IS NOT NULL"
    measures:
      shipments: "count(*)"
      units: "sum(aggregate(items, 0, (total, i) -> total + i.qty))"
      tags: "sum(size(tags))"
      eur: "sum(prices['EUR'])"
expectations:
  bronze:
    - {expect: expect_column_values_to_be_in_set, column: customer.tier,
       value_set: [gold, silver], severity: quarantine}
    - {expect: expect_column_values_to_not_be_null, column: customer.address.city}
  shipments_place_hourly:
    - {expect: expect_column_values_to_be_between, column: shipments, min_value: 1,
       severity: critical}
"""
# The declared schema, as the oracle walks it: a struct is a dict, an array of structs a list.
SCHEMA: dict[str, Any] = {
    "id": None,
    "ts": None,
    "customer": {"country": None, "tier": None, "address": {"city": None}},
    "items": [{"sku": None, "qty": None}],
    "tags": None,
    "prices": None,
}
COUNTRIES = ("DE", "PT")
CITIES = ("Berlin", "Porto", None)  # None: no address (a null key)
START = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def shipments_config(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RunoffConfig:
    return declared(tmp_path / "my-datasets", home, monkeypatch, {"shipments": SPEC})


def records(first: int, count: int, start: datetime, new_field: bool = False) -> list[str]:
    """Valid shipments every 11 minutes; undeclared fields at the top, within the customer
    struct, within its address and within items (and `customer.vip` when `new_field`)."""
    lines = []
    for i in range(first, first + count):
        customer: dict[str, Any] = {
            "country": COUNTRIES[i % 2],
            "tier": ("gold", "silver")[i % 3 % 2],
        }
        city = CITIES[i % 3]
        if city is not None:
            customer["address"] = {"city": city, **({"zip": f"{i:05d}"} if i % 4 == 0 else {})}
        if i % 5 == 0:
            customer["segment"] = "b2b"
        if new_field and i % 2:
            customer["vip"] = i % 4 == 1
        items = [{"sku": f"s{j}", "qty": 1 + (i + j) % 3} for j in range(1 + i % 3)]
        if i % 6 == 0:
            items[-1]["color"] = "red"
        record: dict[str, Any] = {
            "id": f"x-{i:04d}",
            "ts": (start + timedelta(minutes=11 * (i - first))).isoformat().replace("+00:00", "Z"),
            "customer": customer,
            "items": items,
            "tags": [f"t{j}" for j in range(i % 4)],
            "prices": {"EUR": (i % 7) * 1.25, **({"USD": 2.5} if i % 2 else {})},
        }
        if i % 7 == 0:
            record["source"] = "app"
        if i % 10 == 0:  # a field named like the path of another
            record["customer.segment"] = "top-level"
        lines.append(json.dumps(record))
    return lines


def line(**fields: Any) -> str:
    base: dict[str, Any] = {
        "id": "bad",
        "ts": "2024-05-01T10:00:00Z",
        "customer": {"country": "DE", "tier": "gold"},
        "items": [{"sku": "s", "qty": 1}],
        "tags": [],
        "prices": {},
    }
    return json.dumps({**base, **fields})


BAD = {
    line(customer={"country": 49, "tier": "gold"}): "wrong type: customer.country (string)",
    line(items=[{"sku": "s", "qty": "two"}]): (
        "wrong type: items (array<struct<sku:string,qty:int>>)"
    ),
    line(customer={"tier": "gold", "address": {"city": "Porto"}}): (
        "missing required field: customer.country"
    ),
    line(customer={"country": "DE", "tier": "bronze"}): (
        "rule failed: expect_column_values_to_be_in_set(customer.tier)"
    ),
    line(items=[{"sku": "s", "qty": 0}]): "rule failed: positive_qty",
}


def land(home: Path, name: str, lines: Iterable[str]) -> None:
    path = home / "landing" / "shipments" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


# -- the independent computation --------------------------------------------------------------
def undeclared(value: Any, schema: Any, path: str = "") -> dict[str, str]:
    """The fields of `value` that `schema` does not declare, by path, as JSON text (strings as
    they are)."""
    found: dict[str, str] = {}
    if isinstance(schema, dict) and isinstance(value, dict):
        for name, item in value.items():
            where = f"{path}.{name}" if path else name
            if re.search(r'[.\[\]"]', name):  # named in brackets
                where = path + json.dumps([name], ensure_ascii=False)
            if name not in schema:
                found[where] = item if isinstance(item, str) else json.dumps(item)
            else:
                found.update(undeclared(item, schema[name], where))
    elif isinstance(schema, list) and isinstance(value, list):
        for i, item in enumerate(value):
            found.update(undeclared(item, schema[0], f"{path}[{i}]"))
    return found


def expected_bronze(lines: Iterable[str]) -> list[dict[str, Any]]:
    rows = []
    for text in lines:
        value = json.loads(text)
        moment = datetime.fromisoformat(value["ts"].replace("Z", "+00:00"))
        customer = value["customer"]
        address = customer.get("address")
        rescued = undeclared(value, SCHEMA)
        rows.append(
            {
                "id": value["id"],
                "customer": {
                    "country": customer["country"],
                    "tier": customer["tier"],
                    "address": None if address is None else {"city": address["city"]},
                },
                "items": [{"sku": i["sku"], "qty": i["qty"]} for i in value["items"]],
                "tags": value["tags"],
                "prices": list(value["prices"].items()),
                "event_time": moment.replace(tzinfo=None),
                "_rescued_data": rescued or None,
            }
        )
    return sorted(rows, key=lambda r: r["id"])


def expected_silver(bronze: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[datetime, str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in bronze:
        start = row["event_time"].replace(minute=0, second=0, microsecond=0)
        address = row["customer"]["address"]
        if address is None:  # the table's where: keys are never null
            continue
        city = address["city"]
        groups[(start, row["customer"]["country"], city)].append(row)
    out = []
    for (start, country, city), rows in sorted(groups.items()):
        euros = [dict(r["prices"])["EUR"] for r in rows if "EUR" in dict(r["prices"])]
        out.append(
            {
                "window_start": start,
                "window_end": start + timedelta(hours=1),
                "customer_country": country,
                "city": city,
                "shipments": len(rows),
                "units": sum(i["qty"] for r in rows for i in r["items"]),
                "tags": sum(len(r["tags"]) for r in rows),
                "eur": sum(euros) if euros else None,
            }
        )
    return out


def table(path: Path, columns: list[str]) -> list[dict[str, Any]]:
    return read_arrow(str(path), columns).to_pylist()


def naive(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(tzinfo=None)


def assert_tables(home: Path, valid: list[str]) -> None:
    columns = ["id", "customer", "items", "tags", "prices", "event_time", "_rescued_data"]
    bronze = table(home / "delta/bronze/shipments", columns)
    for row in bronze:
        row["event_time"] = naive(row["event_time"])
        row["_rescued_data"] = row["_rescued_data"] and json.loads(row["_rescued_data"])
    assert sorted(bronze, key=lambda r: r["id"]) == expected_bronze(valid)
    quarantine = table(home / "delta/quarantine/shipments", ["_raw", "_error"])
    assert sorted((r["_raw"], r["_error"]) for r in quarantine) == sorted(BAD.items())
    silver_columns = [
        "window_start",
        "window_end",
        "customer_country",
        "city",
        "shipments",
        "units",
        "tags",
        "eur",
    ]
    silver = table(home / "delta/silver/shipments_place_hourly", silver_columns)
    for row in silver:
        row["window_start"], row["window_end"] = (
            naive(row["window_start"]),
            naive(row["window_end"]),
        )
    ordered = sorted(
        silver, key=lambda r: (r["window_start"], r["customer_country"], str(r["city"]))
    )
    assert ordered == expected_silver(expected_bronze(valid))


def test_nested_records_from_landing_to_silver(
    spark: SparkSession,
    shipments_config: RunoffConfig,
    home: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["check", "shipments"]) == 0
    plan = capsys.readouterr().out.splitlines()
    # the keys' columns, named from their paths (one derived, one given)
    for column in ("customer_country", "city"):
        assert any(line.split()[:1] == [column] and line.split()[-1] == "key" for line in plan)

    first = records(0, 24, START)
    land(home, "part-0001.json", [*first[:10], *BAD, *first[10:]])
    assert cli.main(["run", "shipments"]) == 0
    assert_tables(home, first)
    out = capsys.readouterr().out
    rescued_first = {
        name: sum(1 for text in first if any(p == name for p in paths(text)))
        for name in sorted({p for text in first for p in paths(text)})
    }
    assert set(rescued_first) == {
        '["customer.segment"]',
        "customer.address.zip",
        "customer.segment",
        "items[].color",
        "source",
    }
    counted = ", ".join(
        f"{n} ({c} record{'' if c == 1 else 's'})" for n, c in rescued_first.items()
    )
    assert f"kept in _rescued_data: {counted} " in out

    # A later delivery brings a field never seen before, within the customer struct.
    second = records(24, 12, START + timedelta(minutes=11 * 24), new_field=True)
    land(home, "part-0002.json", second)
    assert cli.main(["run", "shipments"]) == 0
    assert_tables(home, first + second)
    out = capsys.readouterr().out
    assert "customer.vip (6 records)" in out
    bronze_run = [r for r in read_runs(shipments_config.runs_path) if r["layer"] == "bronze"][-1]
    details = json.loads(bronze_run["details"])
    assert details["rescued_fields"] == {
        name: sum(1 for text in second if name in paths(text))
        for name in sorted({p for text in second for p in paths(text)})
    }
    assert cli.main(["status", "shipments", "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]  # newest first
    assert (
        next(r for r in runs if r["layer"] == "bronze")["rescued_fields"]
        == details["rescued_fields"]
    )


def paths(text: str) -> set[str]:
    """The undeclared fields of a landed line, named as a run reports them (no indexes)."""
    return {re.sub(r"(?<=\w)\[\d+\]", "[]", p) for p in undeclared(json.loads(text), SCHEMA)}
