"""Predicates over table columns: `replaceWhere` text and Spark's pushed-down read filters.

One small expression tree serves three purposes:
- `classify()` decides, from a file's partition values and min/max/null statistics, whether
  every row, no row, or some rows of the file satisfy the predicate: data skipping on reads,
  and which files `replaceWhere` removes whole, keeps, or rewrites;
- `evaluate()` computes it row by row on Arrow data with SQL's three-valued logic (rewriting
  partially matching files, checking that rows written with `replaceWhere` match it);
- `parse_predicate()` reads the SQL subset `replaceWhere` accepts: comparisons of a column with
  a literal (`=`, `==`, `<=>`, `!=`, `<>`, `<`, `<=`, `>`, `>=`), `[NOT] IN (...)`,
  `[NOT] BETWEEN .. AND ..`, `IS [NOT] NULL`, `AND`, `OR`, `NOT`, parentheses; literals are
  numbers, 'strings', TRUE/FALSE/NULL, DATE '...' and TIMESTAMP '...'.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from delta_tables.errors import DeltaOptionError
from delta_tables.schema import parse_timestamp


# -- the tree -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Cmp:
    column: str
    op: str  # one of = != < <= > >= <=>
    value: Any


@dataclass(frozen=True)
class InList:
    column: str
    values: tuple[Any, ...]
    negated: bool = False


@dataclass(frozen=True)
class IsNull:
    column: str
    negated: bool = False


@dataclass(frozen=True)
class StartsWith:
    column: str
    prefix: str


@dataclass(frozen=True)
class And:
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Or:
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Not:
    item: Expr


@dataclass(frozen=True)
class Const:
    value: bool | None


Expr = Cmp | InList | IsNull | StartsWith | And | Or | Not | Const

_FLIP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<=", "<=>": "<=>"}
_NEGATE = {"=": "!=", "!=": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}


def columns_of(expr: Expr) -> set[str]:
    if isinstance(expr, And | Or):
        return set().union(*(columns_of(e) for e in expr.items)) if expr.items else set()
    if isinstance(expr, Not):
        return columns_of(expr.item)
    if isinstance(expr, Const):
        return set()
    return {expr.column}


def to_sql(expr: Expr) -> str:
    """SQL text of the predicate (for messages and for Spark-side row checks)."""

    def lit(value: Any) -> str:
        if value is None:
            return "NULL"
        if isinstance(value, bool):
            return "TRUE" if value else "FALSE"
        if isinstance(value, datetime):
            ts = value.astimezone(UTC) if value.tzinfo else value
            return f"TIMESTAMP '{ts.strftime('%Y-%m-%d %H:%M:%S.%f')}'"
        if isinstance(value, date):
            return f"DATE '{value.isoformat()}'"
        if isinstance(value, str):
            return "'" + value.replace("'", "\\'") + "'"
        return str(value)

    def col(name: str) -> str:
        return f"`{name.replace('`', '``')}`"

    if isinstance(expr, Cmp):
        return f"{col(expr.column)} {expr.op} {lit(expr.value)}"
    if isinstance(expr, InList):
        inner = ", ".join(lit(v) for v in expr.values)
        return f"{col(expr.column)} {'NOT IN' if expr.negated else 'IN'} ({inner})"
    if isinstance(expr, IsNull):
        return f"{col(expr.column)} IS {'NOT NULL' if expr.negated else 'NULL'}"
    if isinstance(expr, StartsWith):
        return f"startswith({col(expr.column)}, {lit(expr.prefix)})"
    if isinstance(expr, And):
        return "(" + " AND ".join(to_sql(e) for e in expr.items) + ")" if expr.items else "TRUE"
    if isinstance(expr, Or):
        return "(" + " OR ".join(to_sql(e) for e in expr.items) + ")" if expr.items else "FALSE"
    if isinstance(expr, Not):
        return f"NOT ({to_sql(expr.item)})"
    return lit(expr.value)


def negation_normal_form(expr: Expr, negate: bool = False) -> Expr:
    """Push NOT down to the leaves (3-valued logic preserved); `<=>` keeps an explicit NOT."""
    if isinstance(expr, Not):
        return negation_normal_form(expr.item, not negate)
    if isinstance(expr, And | Or):
        items = tuple(negation_normal_form(e, negate) for e in expr.items)
        if negate:
            return Or(items) if isinstance(expr, And) else And(items)
        return type(expr)(items)
    if not negate:
        return expr
    if isinstance(expr, Cmp):
        if expr.op == "<=>":
            return Not(expr)
        return Cmp(expr.column, _NEGATE[expr.op], expr.value)
    if isinstance(expr, InList):
        return InList(expr.column, expr.values, not expr.negated)
    if isinstance(expr, IsNull):
        return IsNull(expr.column, not expr.negated)
    if isinstance(expr, Const):
        return Const(None if expr.value is None else not expr.value)
    return Not(expr)


# -- parsing ------------------------------------------------------------------------------
_TOKEN = re.compile(
    r"""\s*(?:
        (?P<string>'(?:[^'\\]|\\.|'')*')
      | (?P<quoted>`(?:[^`]|``)*`)
      | (?P<number>-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?[lLdD]?)
      | (?P<op><=>|<=|>=|<>|!=|==|=|<|>)
      | (?P<punct>[(),])
      | (?P<word>[A-Za-z_][A-Za-z0-9_.]*)
    )""",
    re.VERBOSE,
)
_KEYWORDS = {
    "AND",
    "OR",
    "NOT",
    "IN",
    "IS",
    "NULL",
    "BETWEEN",
    "TRUE",
    "FALSE",
    "DATE",
    "TIMESTAMP",
}


@dataclass
class _Token:
    kind: str
    text: str


@dataclass
class _Parser:
    text: str
    option: str
    tokens: list[_Token] = field(default_factory=list)
    pos: int = 0

    def fail(self, why: str) -> DeltaOptionError:
        return DeltaOptionError(
            f"option {self.option}={self.text!r} is not a supported predicate: {why}"
        )

    def tokenize(self) -> None:
        index = 0
        text = self.text
        while index < len(text):
            if text[index:].strip() == "":
                break
            match = _TOKEN.match(text, index)
            if match is None or match.end() == index:
                raise self.fail(f"unexpected text at {text[index : index + 20]!r}")
            kind = match.lastgroup or ""
            value = match.group(kind)
            if kind == "word" and value.upper() in _KEYWORDS:
                kind, value = "kw", value.upper()
            self.tokens.append(_Token(kind, value))
            index = match.end()

    def peek(self, offset: int = 0) -> _Token | None:
        i = self.pos + offset
        return self.tokens[i] if i < len(self.tokens) else None

    def take(self) -> _Token:
        token = self.peek()
        if token is None:
            raise self.fail("unexpected end")
        self.pos += 1
        return token

    def accept(self, kind: str, text: str | None = None) -> bool:
        token = self.peek()
        if token is not None and token.kind == kind and (text is None or token.text == text):
            self.pos += 1
            return True
        return False

    def expect(self, kind: str, text: str) -> None:
        if not self.accept(kind, text):
            found = self.peek()
            raise self.fail(f"expected {text!r}, found {found.text if found else 'end'!r}")

    def parse(self) -> Expr:
        self.tokenize()
        if not self.tokens:
            raise self.fail("it is empty")
        expr = self.or_expr()
        if self.peek() is not None:
            raise self.fail(f"unexpected {self.take().text!r}")
        return expr

    def or_expr(self) -> Expr:
        items = [self.and_expr()]
        while self.accept("kw", "OR"):
            items.append(self.and_expr())
        return items[0] if len(items) == 1 else Or(tuple(items))

    def and_expr(self) -> Expr:
        items = [self.not_expr()]
        while self.accept("kw", "AND"):
            items.append(self.not_expr())
        return items[0] if len(items) == 1 else And(tuple(items))

    def not_expr(self) -> Expr:
        if self.accept("kw", "NOT"):
            return Not(self.not_expr())
        return self.comparison()

    def comparison(self) -> Expr:
        token = self.peek()
        if token is not None and token.kind == "punct" and token.text == "(":
            self.take()
            inner = self.or_expr()
            self.expect("punct", ")")
            return inner
        left_is_column, left = self.operand()
        if self.accept("kw", "IS"):
            negated = self.accept("kw", "NOT")
            self.expect("kw", "NULL")
            return IsNull(self.column_name(left_is_column, left), negated)
        negated = self.accept("kw", "NOT")
        if self.accept("kw", "IN"):
            self.expect("punct", "(")
            values = [self.literal()]
            while self.accept("punct", ","):
                values.append(self.literal())
            self.expect("punct", ")")
            return InList(self.column_name(left_is_column, left), tuple(values), negated)
        if self.accept("kw", "BETWEEN"):
            low = self.literal()
            self.expect("kw", "AND")
            high = self.literal()
            column = self.column_name(left_is_column, left)
            between = And((Cmp(column, ">=", low), Cmp(column, "<=", high)))
            return Not(between) if negated else between
        if negated:
            raise self.fail("NOT must precede IN or BETWEEN here")
        op_token = self.peek()
        if op_token is None or op_token.kind != "op":
            if not left_is_column and isinstance(left, bool | type(None)):
                return Const(left)
            raise self.fail("expected a comparison operator")
        self.take()
        op = {"==": "=", "<>": "!="}.get(op_token.text, op_token.text)
        right_is_column, right = self.operand()
        if left_is_column and not right_is_column:
            return Cmp(left, op, right)
        if right_is_column and not left_is_column:
            return Cmp(right, _FLIP[op], left)
        raise self.fail("each comparison must be between one column and one literal")

    def column_name(self, is_column: bool, value: Any) -> str:
        if not is_column:
            raise self.fail(f"{value!r} is not a column")
        return str(value)

    def operand(self) -> tuple[bool, Any]:
        token = self.peek()
        if token is not None and token.kind == "quoted":
            self.take()
            return True, token.text[1:-1].replace("``", "`")
        if token is not None and token.kind == "word":
            self.take()
            return True, token.text
        return False, self.literal()

    def literal(self) -> Any:
        token = self.take()
        if token.kind == "string":
            return _unquote(token.text)
        if token.kind == "number":
            text = token.text.rstrip("lLdD")
            if re.fullmatch(r"-?\d+", text):
                return int(text)
            return float(text) if token.text[-1] in "dD" or "e" in text.lower() else Decimal(text)
        if token.kind == "kw" and token.text in ("TRUE", "FALSE"):
            return token.text == "TRUE"
        if token.kind == "kw" and token.text == "NULL":
            return None
        if token.kind == "kw" and token.text in ("DATE", "TIMESTAMP"):
            inner = self.take()
            if inner.kind != "string":
                raise self.fail(f"{token.text} must be followed by a quoted literal")
            text = _unquote(inner.text)
            try:
                return date.fromisoformat(text) if token.text == "DATE" else parse_timestamp(text)
            except ValueError:
                raise self.fail(
                    f"{token.text} {text!r} is not a valid {token.text.lower()}"
                ) from None
        raise self.fail(f"expected a literal, found {token.text!r}")


def _unquote(text: str) -> str:
    body = text[1:-1].replace("''", "'")
    return re.sub(r"\\(.)", r"\1", body)


def parse_predicate(text: str, option: str = "replaceWhere") -> Expr:
    """Parse SQL predicate text; errors name `option` and the text."""
    return _Parser(text, option).parse()


def from_spark_filters(filters: Iterable[Any]) -> list[tuple[Any, Expr]]:
    """Translate pushed-down `pyspark.sql.datasource` filters; unsupported ones are left out."""
    from pyspark.sql import datasource as ds

    out: list[tuple[Any, Expr]] = []
    for flt in filters:
        expr = _from_spark_filter(flt, ds)
        if expr is not None:
            out.append((flt, expr))
    return out


def _from_spark_filter(flt: Any, ds: Any) -> Expr | None:
    attribute = getattr(flt, "attribute", None)
    if attribute is not None and len(attribute) != 1:
        return None
    column = attribute[0] if attribute else ""
    simple: dict[type, str] = {
        ds.EqualTo: "=",
        ds.EqualNullSafe: "<=>",
        ds.GreaterThan: ">",
        ds.GreaterThanOrEqual: ">=",
        ds.LessThan: "<",
        ds.LessThanOrEqual: "<=",
    }
    for cls, op in simple.items():
        if isinstance(flt, cls):
            return Cmp(column, op, getattr(flt, "value", None))
    if isinstance(flt, ds.In):
        return InList(column, tuple(flt.value))
    if isinstance(flt, ds.IsNull):
        return IsNull(column)
    if isinstance(flt, ds.IsNotNull):
        return IsNull(column, negated=True)
    if isinstance(flt, ds.StringStartsWith):
        return StartsWith(column, flt.value)
    if isinstance(flt, ds.Not):
        inner = _from_spark_filter(flt.child, ds)
        return Not(inner) if inner is not None else None
    return None


# -- coercion of literals to a column's type ----------------------------------------------
def coerce(value: Any, arrow_type: pa.DataType) -> Any:
    """`value` as a Python value of `arrow_type` (SQL-style implicit cast of a literal)."""
    if value is None:
        return None
    if pa.types.is_timestamp(arrow_type):
        if isinstance(value, str):
            value = parse_timestamp(value)
        elif isinstance(value, date) and not isinstance(value, datetime):
            value = datetime(value.year, value.month, value.day, tzinfo=UTC)
        if isinstance(value, datetime):
            if arrow_type.tz is None:
                return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value
            return value if value.tzinfo else value.replace(tzinfo=UTC)
        raise TypeError(f"{value!r} is not a timestamp")
    if pa.types.is_date(arrow_type):
        if isinstance(value, datetime):
            return value.astimezone(UTC).date() if value.tzinfo else value.date()
        if isinstance(value, str):
            return date.fromisoformat(value.strip()[:10])
        if isinstance(value, date):
            return value
        raise TypeError(f"{value!r} is not a date")
    if pa.types.is_integer(arrow_type):
        if isinstance(value, bool):
            raise TypeError("boolean is not an integer")
        if isinstance(value, str):
            value = Decimal(value.strip())
        if isinstance(value, float | Decimal) and value != int(value):
            return float(value)  # compare as a number; an integer column never equals it
        return int(value)
    if pa.types.is_floating(arrow_type):
        return float(value)
    if pa.types.is_decimal(arrow_type):
        return Decimal(str(value))
    if pa.types.is_boolean(arrow_type):
        if isinstance(value, str):
            return value.strip().lower() == "true"
        return bool(value)
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        if isinstance(value, datetime | date):
            return value.isoformat()
        return value if isinstance(value, str) else str(value)
    return value


# -- row-level evaluation -------------------------------------------------------------------
_ARROW_CMP: dict[str, Callable[[Any, Any], Any]] = {
    "=": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}


def _scalar(value: Any, arrow_type: pa.DataType) -> pa.Scalar:
    coerced = coerce(value, arrow_type)
    if isinstance(coerced, float) and pa.types.is_integer(arrow_type):
        return pa.scalar(coerced, pa.float64())
    return pa.scalar(coerced, arrow_type)


def evaluate(expr: Expr, data: pa.Table | pa.RecordBatch) -> pa.ChunkedArray | pa.Array:
    """Row-wise value of `expr` (true/false/null) on Arrow data holding its columns."""
    n = data.num_rows
    if isinstance(expr, Const):
        return pa.array([expr.value] * n, pa.bool_())
    if isinstance(expr, And | Or):
        if not expr.items:
            return pa.array([isinstance(expr, And)] * n, pa.bool_())
        fn = pc.and_kleene if isinstance(expr, And) else pc.or_kleene
        result = evaluate(expr.items[0], data)
        for item in expr.items[1:]:
            result = fn(result, evaluate(item, data))
        return result
    if isinstance(expr, Not):
        return pc.invert(evaluate(expr.item, data))
    column = _column(data, expr.column)
    if isinstance(expr, IsNull):
        return pc.is_valid(column) if expr.negated else pc.is_null(column)
    if isinstance(expr, StartsWith):
        return pc.starts_with(column, pattern=expr.prefix)
    if isinstance(expr, InList):
        values = [coerce(v, column.type) for v in expr.values]
        present = [v for v in values if v is not None]
        found = pc.is_in(column, value_set=pa.array(present, column.type))
        if None in values:  # x IN (.., NULL) is null unless true
            found = pc.if_else(found, True, pa.scalar(None, pa.bool_()))
        found = pc.if_else(pc.is_null(column), pa.scalar(None, pa.bool_()), found)
        return pc.invert(found) if expr.negated else found
    if expr.op == "<=>":
        if expr.value is None:
            return pc.is_null(column)
        equal = pc.equal(column, _scalar(expr.value, column.type))
        return pc.fill_null(equal, False)
    if expr.value is None:
        return pa.nulls(n, pa.bool_())
    return _ARROW_CMP[expr.op](column, _scalar(expr.value, column.type))


def _column(data: pa.Table | pa.RecordBatch, name: str) -> Any:
    names = data.schema.names
    if name in names:
        return data.column(name)
    lowered = {n.lower(): n for n in names}
    if name.lower() in lowered:
        return data.column(lowered[name.lower()])
    raise DeltaOptionError(
        f"predicate column `{name}` is not a column of the table ({', '.join(names)})"
    )


def true_mask(expr: Expr, data: pa.Table | pa.RecordBatch) -> Any:
    """Boolean mask of rows for which `expr` is true (null counts as false)."""
    return pc.fill_null(evaluate(expr, data), False)


# -- file-level classification --------------------------------------------------------------
Verdict = Literal["all", "none", "some"]


@dataclass(frozen=True)
class FileFacts:
    """What the log says about one data file (logical column names)."""

    num_records: int | None
    partition_values: Mapping[str, Any]
    min_values: Mapping[str, Any]
    max_values: Mapping[str, Any]
    null_counts: Mapping[str, Any]
    column_types: Mapping[str, pa.DataType]


def classify(expr: Expr, facts: FileFacts) -> Verdict:
    """Do all, none or some rows of the file satisfy `expr`? Conservative ("some") if unsure."""
    return _classify(negation_normal_form(expr), facts)


def _classify(expr: Expr, facts: FileFacts) -> Verdict:
    if isinstance(expr, Const):
        return "all" if expr.value is True else "none"
    if isinstance(expr, And):
        verdicts = [_classify(e, facts) for e in expr.items]
        if "none" in verdicts:
            return "none"
        return "all" if all(v == "all" for v in verdicts) else "some"
    if isinstance(expr, Or):
        verdicts = [_classify(e, facts) for e in expr.items]
        if "all" in verdicts:
            return "all"
        return "none" if all(v == "none" for v in verdicts) else "some"
    if isinstance(expr, Not):
        column = next(iter(columns_of(expr)))
        if _find(facts.partition_values, column)[0]:
            value = _eval_constant(expr, facts)
            return "all" if value is True else "none"
        return "some"
    found, _ = _find(facts.partition_values, expr.column)
    if found:
        value = _eval_constant(expr, facts)
        return "all" if value is True else "none"
    try:
        return _classify_by_stats(expr, facts)
    except (TypeError, ValueError, ArithmeticError):
        return "some"


def _find(mapping: Mapping[str, Any], column: str) -> tuple[bool, Any]:
    if column in mapping:
        return True, mapping[column]
    lowered = {k.lower(): k for k in mapping}
    key = lowered.get(column.lower())
    return (True, mapping[key]) if key is not None else (False, None)


def _eval_constant(expr: Expr, facts: FileFacts) -> bool | None:
    """Evaluate a leaf (or NOT leaf) on a partition column's single value."""
    column = next(iter(columns_of(expr)))
    _, value = _find(facts.partition_values, column)
    _, arrow_type = _find(facts.column_types, column)
    if arrow_type is None:
        arrow_type = pa.scalar(value).type if value is not None else pa.null()
    table = pa.table({column: pa.array([value], arrow_type)})
    try:
        result = evaluate(expr, table).to_pylist()[0]
        return None if result is None else bool(result)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, TypeError, ValueError):
        return True  # unknown: never skip or remove on a guess


def _classify_by_stats(expr: Expr, facts: FileFacts) -> Verdict:
    assert not isinstance(expr, And | Or | Not | Const)
    column = expr.column
    _, arrow_type = _find(facts.column_types, column)
    n = facts.num_records
    _, nulls = _find(facts.null_counts, column)
    if isinstance(expr, IsNull):
        if nulls is None or n is None:
            return "some"
        if expr.negated:
            return "none" if nulls == n else ("all" if nulls == 0 else "some")
        return "none" if nulls == 0 else ("all" if nulls == n else "some")
    if n is not None and nulls is not None and n > 0 and nulls == n:
        if isinstance(expr, Cmp) and expr.op == "<=>" and expr.value is None:
            return "all"
        return "none"  # every value is null: no comparison is true
    _, low = _find(facts.min_values, column)
    _, high = _find(facts.max_values, column)
    if low is None or high is None or arrow_type is None:
        return "some"
    exact = not (pa.types.is_timestamp(arrow_type) or pa.types.is_string(arrow_type))
    if pa.types.is_timestamp(arrow_type):
        # Delta statistics keep milliseconds: widen the bounds so truncation never skips rows.
        low = coerce(low, arrow_type) - timedelta(milliseconds=1)
        high = coerce(high, arrow_type) + timedelta(milliseconds=1)
    no_nulls = nulls == 0
    if isinstance(expr, StartsWith):
        prefix = expr.prefix
        if isinstance(high, str) and isinstance(low, str):
            if high < prefix and not high.startswith(prefix):
                return "none"
            if low[: len(prefix)] > prefix:
                return "none"
        return "some"
    if isinstance(expr, InList):
        values = [coerce(v, arrow_type) for v in expr.values if v is not None]
        if expr.negated:
            if exact and low == high and low in values:
                return "none"
            return "some"
        if all(v < low or v > high for v in values):
            return "none"
        if exact and no_nulls and low == high and low in values:
            return "all"
        return "some"
    value = coerce(expr.value, arrow_type)
    if value is None:
        return "none"
    op = "=" if expr.op == "<=>" else expr.op
    verdict_none = {
        "=": value < low or value > high,
        "!=": exact and low == high == value,
        "<": low >= value,
        "<=": low > value,
        ">": high <= value,
        ">=": high < value,
    }[op]
    if verdict_none:
        return "none"
    if exact and no_nulls:
        compare = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
        if op == "=" and low == high == value:
            return "all"
        if op == "!=" and (value < low or value > high):
            return "all"
        if op in compare and compare[op](high if op in ("<", "<=") else low, value):
            return "all"
    return "some"


def conjunction(exprs: Sequence[Expr]) -> Expr | None:
    if not exprs:
        return None
    return exprs[0] if len(exprs) == 1 else And(tuple(exprs))
