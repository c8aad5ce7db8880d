"""What a silver table's definition is, and how a change of it is named."""

from __future__ import annotations

import json
from dataclasses import replace

from core.specs import SilverSpec
from delta_tables.definitions import (
    bronze_changes,
    bronze_compatible,
    changes,
    compatible,
    definition,
    encoded,
    schema_columns,
)

HOURLY = SilverSpec(
    table="t",
    description="one row per action per hour",
    window="1 hour",
    keys=("action",),
    measures=(("count", "count(*)"), ("last", "max(time)")),
)


def test_the_definition_is_what_decides_the_rows() -> None:
    assert json.loads(encoded(HOURLY)) == {
        "window": "1 hour",
        "slide": None,
        "keys": ["action"],
        "select": [],
        "where": None,
        "measures": [["count", "count(*)"], ["last", "max(time)"]],
        "having": None,
        "output": "update",
        "transform": None,
        "partition_by": [],
    }
    # The description is not part of it.
    assert encoded(replace(HOURLY, description="other words")) == encoded(HOURLY)


def test_a_key_within_a_struct_is_defined_by_its_path() -> None:
    nested = replace(HOURLY, keys=("user_country",), key_paths=("user.country",))
    flat = replace(HOURLY, keys=("user_country",))
    assert changes(definition(flat), definition(nested)) == [
        'keys ["user_country"] -> ["user_country=user.country"]'
    ]


def test_each_change_is_named_old_to_new() -> None:
    changed = replace(
        HOURLY,
        slide="30 minutes",
        keys=("action", "user"),
        measures=(("count", "count(1)"), ("first", "min(time)")),
        partition_by=("window_date",),
    )
    assert changes(definition(HOURLY), definition(changed)) == [
        'keys ["action"] -> ["action", "user"]',
        'partition_by none -> ["window_date"]',
        'slide none -> "30 minutes"',
        'measure count "count(*)" -> "count(1)"',
        'measure first added: "min(time)"',
        'measure last removed: "max(time)"',
    ]
    assert changes(definition(HOURLY), definition(HOURLY)) == []


def test_only_measures_added_is_a_change_a_run_applies() -> None:
    def with_measures(*measures: tuple[str, str], **other: object) -> dict[str, object]:
        return definition(replace(HOURLY, measures=measures, **other))  # type: ignore[arg-type]

    old = definition(HOURLY)
    count, last = ("count", "count(*)"), ("last", "max(time)")
    assert compatible(old, with_measures(count, last, ("first", "min(time)")))
    assert compatible(old, with_measures(("first", "min(time)"), count, last))  # any order
    assert not compatible(old, old)  # nothing changed
    assert not compatible(old, with_measures(count))  # removed
    assert not compatible(old, with_measures(("count", "count(1)"), last))  # changed
    assert not compatible(old, with_measures(("total", "count(*)"), last))  # renamed
    added = (count, last, ("first", "min(time)"))
    assert not compatible(old, with_measures(*added, window="30 minutes"))
    assert not compatible(old, with_measures(*added, keys=("action", "user")))


def test_a_schema_is_split_into_columns_in_one_spelling() -> None:
    assert schema_columns(
        "id STRING,ts  string, user struct<country: string, geo: STRUCT<lat:DOUBLE>>,"
        " amount DECIMAL(10, 2), `odd name` map<string, int >"
    ) == [
        ("id", "STRING"),
        ("ts", "STRING"),
        ("user", "STRUCT<COUNTRY STRING,GEO STRUCT<LAT DOUBLE>>"),
        ("amount", "DECIMAL(10,2)"),
        ("odd name", "MAP<STRING,INT>"),
    ]


def test_bronze_changes_are_named_and_classified() -> None:
    def bronze(**changes: object) -> dict[str, object]:
        fields = {
            "schema": [["id", "STRING"], ["amount", "DOUBLE"]],
            "event_time": "to_timestamp(ts)",
            "rename": [],
            "select": [],
            "schema_evolution": "rescue",
            "required": ["id"],
            "rules": [],
            "quarantine": [],
        }
        return {**fields, **changes}

    old = bronze()
    added = bronze(schema=[["id", "STRING"], ["amount", "DOUBLE"], ["note", "STRING"]])
    ruled = bronze(rules=[["positive", "amount > 0"]], required=["id", "amount"])
    retyped = bronze(schema=[["id", "STRING"], ["amount", "STRING"]])
    removed = bronze(schema=[["id", "STRING"]])
    timed = bronze(event_time="CAST(ts AS TIMESTAMP)")
    assert bronze_changes(old, added) == ["column note added: STRING"]
    assert bronze_changes(old, ruled) == [
        'required ["id"] -> ["id", "amount"]',
        'rules none -> [["positive", "amount > 0"]]',
    ]
    assert bronze_changes(old, retyped) == ["column amount DOUBLE -> STRING"]
    assert bronze_changes(old, removed) == ["column amount removed: DOUBLE"]
    assert bronze_changes(old, timed) == [
        'event_time "to_timestamp(ts)" -> "CAST(ts AS TIMESTAMP)"'
    ]
    assert [bronze_compatible(old, new) for new in (added, ruled, retyped, removed, timed)] == [
        True,
        True,
        False,
        False,
        False,
    ]
