"""The predicate language of `replaceWhere` and file skipping, checked against DuckDB's SQL."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from delta_tables.errors import DeltaOptionError
from delta_tables.predicate import (
    And,
    Cmp,
    FileFacts,
    InList,
    IsNull,
    classify,
    evaluate,
    parse_predicate,
    to_sql,
)

DATA = pa.table(
    {
        "id": pa.array([1, 2, 3, None, 5, 6], pa.int64()),
        "name": ["a", "b", None, "d", "e'x", "f"],
        "day": pa.array(
            [
                date(2024, 1, 1),
                date(2024, 1, 2),
                date(2024, 1, 2),
                None,
                date(2024, 1, 3),
                date(2024, 1, 9),
            ]
        ),
        "ts": pa.array(
            [
                datetime(2024, 1, 1, h, tzinfo=UTC) if h is not None else None
                for h in (0, 1, 2, 3, None, 5)
            ],
            pa.timestamp("us", tz="UTC"),
        ),
        "x": [0.5, 1.5, None, 2.5, 3.5, -1.0],
    }
)

PREDICATES = [
    "id = 2",
    "id == 2 OR id <> 3",
    "2 < id",
    "id >= 2 AND id <= 5",
    "id BETWEEN 2 AND 5",
    "id NOT BETWEEN 2 AND 5",
    "id IN (1, 3, 6)",
    "id NOT IN (1, 3)",
    "id IN (1, NULL)",
    "name IS NULL",
    "name IS NOT NULL AND NOT (id = 5)",
    "name = 'e''x'",
    "day = DATE '2024-01-02'",
    "day >= '2024-01-02' AND day < '2024-01-09'",
    "ts >= TIMESTAMP '2024-01-01 01:00:00' AND ts < TIMESTAMP '2024-01-01 03:00:00'",
    "x > 1.0 OR x IS NULL",
    "NOT (x > 1.0)",
    "(id = 1 OR id = 6) AND day > DATE '2024-01-01'",
    "`id` <=> 3",
    "TRUE",
]


def duckdb_mask(sql: str) -> list[bool | None]:
    con = duckdb.connect()
    con.register("t", DATA)
    rows = con.execute(f"SELECT ({sql}) AS m FROM t").fetchall()
    return [r[0] for r in rows]


@pytest.mark.parametrize("text", PREDICATES)
def test_evaluation_matches_duckdb(text: str) -> None:
    expr = parse_predicate(text)
    ours = evaluate(expr, DATA).to_pylist()
    duck_sql = text.replace("`id` <=> 3", "id IS NOT DISTINCT FROM 3").replace("==", "=")
    assert ours == duckdb_mask(duck_sql)
    # The SQL rendering re-parses to the same tree.
    assert parse_predicate(to_sql(expr)) == expr


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "empty"),
        ("id =", "unexpected end"),
        ("id = name", "one column and one literal"),
        ("id = 1 AND", "unexpected end"),
        ("day = DATE '2024-13-01'", "not a valid date"),
        ("id ~ 3", "unexpected text"),
    ],
)
def test_bad_predicates_name_the_option(text: str, why: str) -> None:
    with pytest.raises(DeltaOptionError, match=rf"option replaceWhere=.*{why}"):
        parse_predicate(text)


def facts(**kwargs: Any) -> FileFacts:
    defaults: dict[str, Any] = {
        "num_records": 10,
        "partition_values": {},
        "min_values": {},
        "max_values": {},
        "null_counts": {},
        "column_types": {
            "id": pa.int64(),
            "day": pa.date32(),
            "name": pa.string(),
            "ts": pa.timestamp("us", tz="UTC"),
        },
    }
    defaults.update(kwargs)
    return FileFacts(**defaults)


def test_classify_partition_values_exactly() -> None:
    jan2 = facts(partition_values={"day": date(2024, 1, 2)})
    assert classify(parse_predicate("day = '2024-01-02'"), jan2) == "all"
    assert classify(parse_predicate("day <> DATE'2024-01-02'"), jan2) == "none"
    assert classify(parse_predicate("day IS NULL"), facts(partition_values={"day": None})) == "all"
    assert (
        classify(parse_predicate("day = '2024-01-02'"), facts(partition_values={"day": None}))
        == "none"
    )


def test_classify_by_min_max_statistics() -> None:
    stats = facts(min_values={"id": 10}, max_values={"id": 20}, null_counts={"id": 0})
    assert classify(Cmp("id", "<", 10), stats) == "none"
    assert classify(Cmp("id", ">=", 10), stats) == "all"
    assert classify(Cmp("id", "=", 15), stats) == "some"
    assert classify(InList("id", (1, 2, 30)), stats) == "none"
    assert classify(IsNull("id"), stats) == "none"
    assert classify(And((Cmp("id", ">", 5), Cmp("id", "<", 25))), stats) == "all"
    unknown = facts()
    assert classify(Cmp("id", "=", 15), unknown) == "some"
    all_null = facts(null_counts={"id": 10})
    assert classify(Cmp("id", "=", 15), all_null) == "none"


def test_timestamp_statistics_are_widened_to_milliseconds() -> None:
    # Delta keeps statistics in milliseconds: a max of 00:00:00.001 may hide 00:00:00.001500.
    stats = facts(
        min_values={"ts": datetime(2024, 1, 1, 0, 0, 0, 0, tzinfo=UTC)},
        max_values={"ts": datetime(2024, 1, 1, 0, 0, 0, 1000, tzinfo=UTC)},
        null_counts={"ts": 0},
    )
    later = datetime(2024, 1, 1, 0, 0, 0, 1500, tzinfo=UTC)
    assert classify(Cmp("ts", ">=", later), stats) == "some"
    assert classify(Cmp("ts", ">", datetime(2024, 1, 1, 0, 0, 1, tzinfo=UTC)), stats) == "none"


def test_classification_never_contradicts_the_rows() -> None:
    """For each predicate and each single-row 'file', the verdict agrees with evaluation."""
    columns = {"id": pa.int64(), "name": pa.string(), "day": pa.date32(), "x": pa.float64()}
    for text in PREDICATES:
        if "ts" in text:
            continue
        expr = parse_predicate(text)
        for row in DATA.select(list(columns)).to_pylist():
            truth = evaluate(expr, pa.table({k: pa.array([v], columns[k]) for k, v in row.items()}))
            value = truth.to_pylist()[0]
            verdict = classify(
                expr,
                facts(
                    num_records=1,
                    min_values={k: v for k, v in row.items() if v is not None},
                    max_values={k: v for k, v in row.items() if v is not None},
                    null_counts={k: int(v is None) for k, v in row.items()},
                    column_types=columns,
                ),
            )
            if verdict == "none":
                assert value is not True, (text, row)
            if verdict == "all":
                assert value is True, (text, row)
