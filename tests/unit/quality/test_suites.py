"""quality.suites: suites follow the dataset specs; every expectation has a severity.

Row-level expectations are in each table's `batch` suite (the quality gate's, before each commit);
silver's uniqueness is in its `rows` suite (validate's, across the table).

Derived from every spec: not-null required columns and keys, one row per key, the window size and
alignment, bronze's metadata. Declared in the specs' `expectations:` (jobs/datasets/*.yaml): the
value sets and ranges of each dataset; they reach the suites as GX expectations.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from core.config import RunoffConfig
from core.errors import ConfigError
from core.specs import Expectation as DeclaredExpectation
from core.specs import interval_seconds
from delta_tables.catalog import Catalog
from jobs.samples.activity import GT_LABELS
from quality.suites import CheckedTable, checked_tables, declared
from tests.seeds import SEED_NAMES, seed, seed_spec

UNIT_SECONDS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 604800}
BRONZE_METADATA = ("event_time", "event_date", "_source_file", "_ingested_at", "_batch_id")


def _seconds_by_hand(text: str) -> int:
    number, unit = text.split()
    return int(number) * UNIT_SECONDS[unit.rstrip("s")]


@pytest.fixture
def catalog(config: RunoffConfig) -> Catalog:
    return Catalog.load(config)


def tables_of(catalog: Catalog, name: str) -> dict[str, CheckedTable]:
    return {t.name: t for t in checked_tables(catalog, name)}


def rows_configs(table: CheckedTable) -> list[Any]:
    """The expectations on the table's rows: the gate's (every batch) and validate's (silver
    uniqueness)."""
    suites = [s for s in table.suites if s.frame in ("batch", "rows")]
    assert suites and suites[0].frame == "batch", table.name
    return [e.configuration for suite in suites for e in suite.expectations]


@pytest.mark.parametrize(
    "text", ["5 seconds", "1 minute", "10 minutes", "1 hour", "2 hours", "1 day", "2 weeks"]
)
def test_interval_seconds(text: str) -> None:
    assert interval_seconds(text) == _seconds_by_hand(text)


@pytest.mark.parametrize("text", ["soon", "10 min", "1.5 hours", "minutes"])
def test_interval_seconds_rejects_other_text(text: str) -> None:
    with pytest.raises(
        ConfigError,
        match=rf"^interval '{re.escape(text)}' is not of the form "
        r"'<n> seconds\|minutes\|hours\|days\|weeks'$",
    ):
        interval_seconds(text)


@pytest.mark.parametrize("name", SEED_NAMES)
def test_tables_are_the_catalog_tables(catalog: Catalog, name: str) -> None:
    tables = catalog.tables(name)
    checked = checked_tables(catalog, name)
    assert [(t.name, t.kind, t.path) for t in checked] == [
        (tables.bronze.name, "bronze", tables.bronze.path),
        (tables.quarantine.name, "quarantine", tables.quarantine.path),
        *((s.name, "silver", s.path) for s in tables.silver),
    ]
    assert [t.name for t in checked] == [
        f"bronze_{name}",
        f"quarantine_{name}",
        *seed_spec(name).silver_tables,
    ]
    assert {t.dataset for t in checked} == {name}
    assert [t.layer for t in checked] == ["bronze", "bronze", *["silver"] * len(tables.silver)]
    suite_names = [suite.name for table in checked for suite in table.suites]
    assert len(suite_names) == len(set(suite_names))


def test_an_unknown_dataset_is_the_catalog_error(catalog: Catalog) -> None:
    with pytest.raises(ConfigError, match=r"^unknown dataset 'nosuch': choose one of activity, "):
        checked_tables(catalog, "nosuch")


@pytest.mark.parametrize("name", SEED_NAMES)
def test_every_expectation_has_a_severity_stated_in_its_notes(catalog: Catalog, name: str) -> None:
    for table in checked_tables(catalog, name):
        for suite in table.suites:
            assert suite.expectations, suite.name
            for expectation in suite.expectations:
                severity = expectation.severity.value
                assert severity in ("critical", "warning")
                assert str(expectation.notes).startswith(f"severity: {severity}.")


@pytest.mark.parametrize("name", SEED_NAMES)
def test_silver_suites_follow_the_silver_specs(catalog: Catalog, name: str) -> None:
    spec = seed_spec(name)
    dataset = seed(name)
    tables = tables_of(catalog, name)
    for silver in spec.silver:
        table = tables[silver.table]
        # the window is part of the key
        window = ("window_start", "window_end") if silver.window else ()
        assert table.keys == (*window, *silver.keys) == dataset.aggregate(silver.table).keys
        configs = rows_configs(table)
        not_null = [
            c.kwargs["column"] for c in configs if c.type == "expect_column_values_to_not_be_null"
        ]
        assert set(table.keys) <= set(not_null)
        unique = [c for c in configs if "unique" in c.type]
        assert len(unique) == 1
        columns = unique[0].kwargs.get("column_list") or [unique[0].kwargs["column"]]
        assert tuple(columns) == table.keys
        sizes = [
            c.kwargs["value_set"] for c in configs if c.kwargs.get("column") == "window_seconds"
        ]
        offsets = [
            c.kwargs["value_set"]
            for c in configs
            if c.kwargs.get("column") == "window_start_offset_seconds"
        ]
        if silver.window is None:
            assert (sizes, offsets) == ([], [])
            assert (table.window_seconds, table.slide_seconds) == (None, None)
        else:
            assert sizes == [[_seconds_by_hand(silver.window)]]
            assert offsets == [[0]]
            assert table.window_seconds == _seconds_by_hand(silver.window)
            assert table.slide_seconds == (_seconds_by_hand(silver.slide) if silver.slide else None)
        # declared in every seed spec: a row exists because something was counted
        positive = [
            c
            for c in configs
            if c.type == "expect_column_values_to_be_between" and c.kwargs["column"] == "count"
        ]
        assert positive and all(c.kwargs["min_value"] == 1 for c in positive), silver.table
        assert "count" in not_null


@pytest.mark.parametrize("name", SEED_NAMES)
def test_bronze_suite_requires_the_required_columns_under_their_bronze_names(
    catalog: Catalog, name: str
) -> None:
    spec = seed_spec(name)
    renames = dict(spec.rename)
    bronze = checked_tables(catalog, name)[0]
    not_null = {
        c.kwargs["column"]
        for c in rows_configs(bronze)
        if c.type == "expect_column_values_to_not_be_null"
    }
    assert {renames.get(c, c) for c in spec.required} <= not_null
    # runoff's own columns are not checked on every batch (set by runoff, never by the data)
    assert not set(BRONZE_METADATA) - {"event_time"} & not_null
    assert "_rescued_data" not in not_null
    if renames:  # checked under the bronze name only
        assert not set(renames) & not_null


@pytest.mark.parametrize("name", SEED_NAMES)
def test_declared_expectations_reach_the_suites(catalog: Catalog, name: str) -> None:
    """Every `expectations:` item of the spec, in order, after the derived ones: its GX type,
    its arguments, its severity, and its notes after the severity."""
    spec = seed_spec(name)
    assert spec.expectations_of("bronze"), name  # every seed spec declares bronze values
    for table in checked_tables(catalog, name):
        table_key = table.kind if table.kind != "silver" else table.name
        # the gate checks them on every batch (freshness: validate; quarantine: bronze's rules)
        items = tuple(
            i
            for i in spec.expectations_of(table_key)
            if not i.is_freshness and i.severity != "quarantine"
        )
        built = list(table.batch_expectations)[len(table.batch_expectations) - len(items) :]
        assert len(built) == len(items)
        for item, expectation in zip(items, built, strict=True):
            config = expectation.configuration
            kwargs = {k: v for k, v in item.kwargs.items() if k != "notes"}
            assert config.type == item.expect
            assert {k: config.kwargs[k] for k in kwargs} == kwargs
            assert expectation.severity.value == item.severity
            why = item.kwargs.get("notes") or "declared in the dataset spec."
            assert expectation.notes == f"severity: {item.severity}. {why}"


def test_the_lost_signal_alert_range_matches_its_having_clause(catalog: Catalog) -> None:
    silver = seed_spec("sensors").silver_spec("sensors_lost_signal")
    match = re.fullmatch(r"count < (\d+)", silver.having or "")
    assert match is not None
    threshold = int(match.group(1))
    table = tables_of(catalog, "sensors")["sensors_lost_signal"]
    ranges = [
        (c.kwargs.get("min_value"), c.kwargs.get("max_value"))
        for c in rows_configs(table)
        if c.type == "expect_column_values_to_be_between" and c.kwargs["column"] == "count"
    ]
    assert (1, threshold - 1) in ranges


def test_the_activity_labels_cover_what_the_generator_writes(catalog: Catalog) -> None:
    """The sample data must pass the declared label sets (bronze and silver)."""
    tables = tables_of(catalog, "activity")
    for name in ("bronze_activity", "activity_user_minute"):
        (labels,) = [
            c.kwargs["value_set"]
            for c in rows_configs(tables[name])
            if c.type == "expect_column_values_to_be_in_set" and c.kwargs["column"] == "gt"
        ]
        assert set(GT_LABELS) <= set(labels), name


def test_declared_maps_names_and_severities() -> None:
    items = (
        DeclaredExpectation(
            table="bronze",
            expect="expect_column_values_to_be_in_set",
            kwargs={"column": "action", "value_set": ["Open", "Close"], "notes": "two actions."},
            severity="critical",
        ),
        DeclaredExpectation(
            table="bronze",
            expect="expect_column_values_to_be_between",
            kwargs={"column": "time", "min_value": 0},
            severity="quarantine",  # reported like a warning; bronze quarantines the rows
        ),
        DeclaredExpectation(
            table="bronze", expect="expect_column_values_to_be_unique", kwargs={"column": "time"}
        ),
    )
    built = declared(items)
    assert [type(e).__name__ for e in built] == [
        "ExpectColumnValuesToBeInSet",
        "ExpectColumnValuesToBeBetween",
        "ExpectColumnValuesToBeUnique",
    ]
    assert [e.severity.value for e in built] == ["critical", "warning", "warning"]
    assert [e.notes for e in built] == [
        "severity: critical. two actions.",
        "severity: warning. declared in the dataset spec.",
        "severity: warning. declared in the dataset spec.",
    ]
    assert built[0].configuration.kwargs["value_set"] == ["Open", "Close"]
    assert "notes" not in built[0].configuration.kwargs
    # the spec is not changed by building
    assert items[0].kwargs["notes"] == "two actions."


def test_declared_refuses_an_unknown_expectation() -> None:
    item = DeclaredExpectation(
        table="bronze", expect="expect_the_moon", kwargs={"column": "x"}, severity="warning"
    )
    with pytest.raises(
        ConfigError,
        match=r"^unknown expectation 'expect_the_moon' \(no gx.expectations.ExpectTheMoon\)$",
    ):
        declared((item,))


MINE_SPEC = """\
name: mine
source: {format: json}
schema: "id BIGINT, ts TIMESTAMP, kind STRING"
event_time: "ts"
required: [id, ts, kind]
bronze:
  rename: {kind: category}
silver:
  - table: mine_totals
    keys: [category]
    measures: {n: "count(*)"}
expectations:
  bronze:
    - {expect: expect_column_values_to_match_regex, column: category, regex: "^[a-z]+$",
       severity: quarantine}
  quarantine:
    - {expect: expect_column_values_to_not_be_null, column: _raw, severity: critical}
  mine_totals:
    - {expect: expect_column_values_to_be_between, column: n, min_value: 1, severity: critical,
       notes: "counted."}
"""


def test_a_declared_dataset_gets_derived_and_declared_expectations(
    tmp_path: Path, home: Path
) -> None:
    """A spec outside the seed folder (`--datasets`): no window, a renamed required column."""
    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "mine.yaml").write_text(MINE_SPEC)
    config = RunoffConfig.from_sources(home=home, env={}, datasets=[folder])
    tables = tables_of(Catalog.load(config), "mine")
    assert list(tables) == ["bronze_mine", "quarantine_mine", "mine_totals"]

    bronze = rows_configs(tables["bronze_mine"])
    not_null = {
        c.kwargs["column"] for c in bronze if c.type == "expect_column_values_to_not_be_null"
    }
    assert {"id", "ts", "category", "event_time"} <= not_null
    assert "kind" not in not_null
    # severity quarantine: a bronze row rule (jobs.streaming.dataset), not a gate expectation
    assert "expect_column_values_to_match_regex" not in {c.type for c in bronze}

    quarantine = rows_configs(tables["quarantine_mine"])
    assert (quarantine[-1].type, quarantine[-1].kwargs["column"]) == (
        "expect_column_values_to_not_be_null",
        "_raw",
    )

    totals = tables["mine_totals"]
    assert (totals.keys, totals.window_seconds, totals.slide_seconds) == (
        ("category",),
        None,
        None,
    )
    configs = rows_configs(totals)
    assert [c.type for c in configs] == [
        "expect_column_values_to_not_be_null",  # batch: key
        "expect_column_values_to_be_between",  # batch: declared
        "expect_column_values_to_be_unique",  # rows: across the table
    ]
    assert [c.kwargs["column"] for c in configs] == ["category", "n", "category"]
    assert configs[1].kwargs["min_value"] == 1


def test_quarantine_share_has_a_warning_and_a_critical_threshold(catalog: Catalog) -> None:
    quarantine = checked_tables(catalog, "events")[1]
    share = quarantine.suite("quarantine_share")
    assert share is not None
    limits = sorted(
        (e.configuration.kwargs["max_value"], e.severity.value) for e in share.expectations
    )
    assert [severity for _, severity in limits] == ["warning", "critical"]
    assert limits[0][0] < limits[1][0]


# -- freshness ----------------------------------------------------------------------------------
def test_freshness_is_a_column_max_on_the_age_of_the_newest_event() -> None:
    items = (
        DeclaredExpectation("bronze", "freshness", {}, "critical", max_age="2 hours"),
        DeclaredExpectation("quarantine", "freshness", {"notes": "why"}, "warning", "3 days"),
    )
    built = declared(items)
    assert [type(e).__name__ for e in built] == ["ExpectColumnMaxToBeBetween"] * 2
    assert [
        (e.column, e.min_value, e.max_value, e.severity.value)
        for e in built  # type: ignore[attr-defined]
    ] == [
        ("newest_event_age_seconds", None, 2 * 3600, "critical"),
        ("newest_event_age_seconds", None, 3 * 86400, "warning"),
    ]
    assert (
        built[1].notes
        == "severity: warning. freshness: the newest event is at most 3 days old. why"
    )
    with pytest.raises(
        ConfigError, match=r"'freshness' takes max_age, severity and notes, not column"
    ):
        declared((DeclaredExpectation("bronze", "freshness", {"column": "x"}, max_age="1 hour"),))
    with pytest.raises(ConfigError, match=r"'freshness' needs `max_age`"):
        declared((DeclaredExpectation("bronze", "freshness", {}),))


def test_freshness_gets_its_own_suite(tmp_path: Path) -> None:
    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "shop.yaml").write_text(
        """\
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
    - {expect: expect_column_values_to_not_be_null, column: id}
    - {expect: freshness, max_age: "2 hours", severity: critical}
  shop_hourly:
    - {expect: freshness, max_age: "1 hour"}
"""
    )
    config = RunoffConfig.from_sources(home=tmp_path / "home", env={}, datasets=[folder])
    tables = tables_of(Catalog.load(config), "shop")
    bronze, quarantine, hourly = (
        tables[n] for n in ("bronze_shop", "quarantine_shop", "shop_hourly")
    )
    assert [s.frame for s in bronze.suites] == ["batch", "counts", "freshness"]
    assert [s.frame for s in quarantine.suites] == ["quarantine_share"]  # nothing declared
    assert [s.frame for s in hourly.suites] == ["batch", "rows", "freshness"]
    assert (bronze.newest_event_column, quarantine.newest_event_column) == (
        "event_time",
        "_ingested_at",
    )
    assert hourly.newest_event_column == "window_end"
    fresh = bronze.suite("freshness")
    assert fresh is not None and fresh.name == "bronze_shop_freshness"
    assert [
        (e.configuration.type, e.configuration.kwargs["max_value"]) for e in fresh.expectations
    ] == [("expect_column_max_to_be_between", 7200)]
    # the rows suite holds the other declared expectation, never the freshness one
    assert "expect_column_max_to_be_between" not in {c.type for c in rows_configs(bronze)}
    assert any(
        c.type == "expect_column_values_to_not_be_null" and c.kwargs["column"] == "id"
        for c in rows_configs(bronze)
    )
    hourly_fresh = hourly.suite("freshness")
    assert hourly_fresh is not None
    assert [e.configuration.kwargs["max_value"] for e in hourly_fresh.expectations] == [3600]
    assert [e.severity.value for e in hourly_fresh.expectations] == ["warning"]
