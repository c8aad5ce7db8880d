"""Bronze expectations of severity `quarantine` become row rules: their SQL accepts exactly the
values the expectation accepts (checked against a Python predicate), nulls as GX treats them."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from core.errors import ConfigError
from core.specs import Expectation
from jobs.streaming.dataset import expectation_rule
from jobs.streaming.sql import sql_literal

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

NUMBERS = [None, -5.0, -0.5, 0.0, 0.5, 1.0, 2.0, 9.99, 10.0, 10.5]
WORDS = [None, "", "a", "it's", "Open", "Close", "open", "x" * 12, "a\\b", "ünï"]

CASES: list[tuple[str, dict[str, Any], list[Any], Callable[[Any], bool]]] = [
    ("expect_column_values_to_not_be_null", {}, NUMBERS, lambda v: v is not None),
    (
        "expect_column_values_to_be_between",
        {"min_value": 0, "max_value": 10},
        NUMBERS,
        lambda v: v is None or 0 <= v <= 10,
    ),
    (
        "expect_column_values_to_be_between",
        {"min_value": 0, "strict_min": True},
        NUMBERS,
        lambda v: v is None or v > 0,
    ),
    (
        "expect_column_values_to_be_between",
        {"max_value": 10, "strict_max": True},
        NUMBERS,
        lambda v: v is None or v < 10,
    ),
    (
        "expect_column_values_to_be_in_set",
        {"value_set": ["Open", "Close", "it's", "a\\b"]},
        WORDS,
        lambda v: v is None or v in ("Open", "Close", "it's", "a\\b"),
    ),
    (
        "expect_column_values_to_not_be_in_set",
        {"value_set": ["open", ""]},
        WORDS,
        lambda v: v is None or v not in ("open", ""),
    ),
    (
        "expect_column_value_lengths_to_be_between",
        {"min_value": 1, "max_value": 4},
        WORDS,
        lambda v: v is None or 1 <= len(v) <= 4,
    ),
    (
        "expect_column_values_to_match_regex",
        {"regex": "^[A-Z]"},
        WORDS,
        lambda v: v is None or (v[:1].isascii() and v[:1].isupper()),
    ),
]


@pytest.mark.parametrize(("expect", "kwargs", "values", "accepts"), CASES)
def test_a_rule_accepts_what_the_expectation_accepts(
    spark: SparkSession,
    expect: str,
    kwargs: dict[str, Any],
    values: list[Any],
    accepts: Callable[[Any], bool],
) -> None:
    from pyspark.sql import functions as F

    rule = expectation_rule(Expectation("bronze", expect, {"column": "v", **kwargs}, "quarantine"))
    assert rule.name == f"{expect}(v)"
    kind = "double" if isinstance(values[1], float) else "string"
    frame = spark.createDataFrame([(i, v) for i, v in enumerate(values)], f"i int, v {kind}")
    got = frame.select("i", F.coalesce(F.expr(rule.expr), F.lit(False)).alias("ok")).collect()
    assert {r["i"]: r["ok"] for r in got} == {i: accepts(v) for i, v in enumerate(values)}
    assert any(accepts(v) for v in values) and not all(accepts(v) for v in values)


def test_literals_are_quoted() -> None:
    assert sql_literal("it's") == "'it\\'s'"
    assert sql_literal("a\\b") == "'a\\\\b'"
    assert (sql_literal(3), sql_literal(2.5), sql_literal(True)) == ("3", "2.5", "true")
    with pytest.raises(ConfigError, match=r"^\[1\] cannot be used in a row rule$"):
        sql_literal([1])
