"""A silver table remembers the definition that built it: a spec that changes it is refused
before anything is written, and `runoff rebuild` gives the table a fresh start would give.

The dataset is `clicks`, the `events` seed spec under another name in a user's folder, landed
with `events` sample files; the expected tables are tests/expected.py's computation over the
landing files' valid records.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from core.config import RunoffConfig
from core.errors import ConfigError
from core.specs import SEED_DIR
from delta_tables.ledger import read_runs
from delta_tables.writes import table_version
from jobs.bronze.job import run_bronze
from jobs.cli.main import main
from jobs.samples import generate
from jobs.silver import run_silver
from tests import expected
from tests.tables import read_table

pytestmark = pytest.mark.spark

HOURLY, SLIDING = "clicks_action_hourly", "clicks_action_sliding"


def write_spec(folder: Path, text: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "clicks.yaml").write_text(text)


def seed_spec() -> str:
    text = (SEED_DIR / "events.yaml").read_text().replace("events", "clicks")
    assert 'window: "1 hour"' in text and 'measures: {count: "count(*)"}' in text
    return text


def changed_spec() -> str:
    """The hourly table's window halved; the sliding table gains a measure."""
    text = seed_spec().replace('window: "1 hour"', 'window: "30 minutes"', 1)
    sliding = 'slide: "5 minutes"\n    keys: [action]\n    measures: {count: "count(*)"'
    assert sliding in text
    return text.replace(sliding, sliding + ', last: "max(time)"', 1)


def rows(config: RunoffConfig, table: str) -> list[dict[str, Any]]:
    found = expected.naive_utc(read_table(config.silver_path(table)).to_pylist())
    return sorted(found, key=repr)


def want(records: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The changed definition's tables, computed independently."""
    hourly = expected._grouped(records, ("action",), timedelta(minutes=30))
    sliding = expected._grouped(records, ("action",), timedelta(minutes=10), timedelta(minutes=5))
    last = {"last": lambda members: max(m["time"] for m in members)}
    return {
        HOURLY: sorted(expected.naive_utc(expected._rows(hourly, ("action",))), key=repr),
        SLIDING: sorted(expected.naive_utc(expected._rows(sliding, ("action",), **last)), key=repr),
    }


def snapshot(config: RunoffConfig) -> dict[str, Any]:
    """Every file of the silver tables and checkpoints, with its size."""
    return {
        str(p.relative_to(config.home)): p.stat().st_size
        for folder in (config.home / "delta" / "silver", config.home / "checkpoints" / "silver")
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_a_changed_definition_is_refused_then_rebuilt_exactly(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    specs = tmp_path / "specs"
    write_spec(specs, seed_spec())
    config = RunoffConfig.from_sources(home=tmp_path / "home", datasets=[specs], env={})
    config.ensure_home()
    generate("events", config.landing_dir("clicks"), files=3, rows_per_file=150, seed=11)
    files = expected.read_landing("events", config.landing_dir("clicks"))
    records = expected.valid_records(files)
    assert run_bronze(spark, config, "clicks").status == "success"
    assert run_silver(spark, config, "clicks").status == "success"
    hourly_before = rows(config, HOURLY)
    assert {r["window_end"] - r["window_start"] for r in hourly_before} == {timedelta(hours=1)}

    # The hourly window changes (refused), the sliding table gains a measure (what a run
    # applies): a run that would apply the one is refused for the other, before anything is
    # written; a backfill refuses both.
    write_spec(specs, changed_spec())
    before = snapshot(config)
    refused_by_runs = (
        f"{specs / 'clicks.yaml'} changed the definition of silver tables built by the old one "
        f'({HOURLY}: window "1 hour" -> "30 minutes"): their new rows would mix with rows of the '
        "old definition, so nothing was written. Rebuild them from bronze with "
        f"`runoff rebuild {HOURLY}`, or restore the old definition"
    )
    refused_by_backfills = (
        f"{specs / 'clicks.yaml'} changed the definition of silver tables built by the old one "
        f'({HOURLY}: window "1 hour" -> "30 minutes" | {SLIDING}: measure last added: '
        '"max(time)"): their new rows would mix with rows of the old definition, so nothing was '
        f"written. Rebuild them from bronze with `runoff rebuild {HOURLY}` and "
        f"`runoff rebuild {SLIDING}`, or restore the old definition"
    )
    with pytest.raises(ConfigError) as refused:
        run_silver(spark, config, "clicks")
    assert str(refused.value) == refused_by_runs
    capsys.readouterr()
    home = ["--home", str(config.home), "--datasets", str(specs)]
    assert main([*home, "backfill", "clicks", "--start", "2024-01-01", "--end", "2024-01-02"]) == 2
    assert capsys.readouterr().err.strip() == f"runoff: error: {refused_by_backfills}"
    # `runoff check` says what a run does with each, its exit code unchanged (the spec is good).
    assert main([*home, "check"]) == 0
    printed = " ".join(capsys.readouterr().out.split())  # the console wraps long lines
    assert (
        'built by another definition (window "1 hour" -> "30 minutes"): runs refuse the table '
        f"until `runoff rebuild {HOURLY}`"
    ) in printed
    assert (
        'built by another definition (measure last added: "max(time)"): the next silver run '
        "applies it, rebuilding the table from bronze"
    ) in printed
    # `runoff run` stops before bronze reads the file that landed since.
    bronze = table_version(config.bronze_path("clicks"))
    generate("events", config.landing_dir("clicks"), files=1, rows_per_file=50, seed=12)
    assert main([*home, "run", "clicks"]) == 2
    assert capsys.readouterr().err.strip() == f"runoff: error: {refused_by_runs}"
    assert table_version(config.bronze_path("clicks")) == bronze
    assert snapshot(config) == before  # neither table nor checkpoint touched
    assert rows(config, HOURLY) == hourly_before
    ledger = read_runs(config.runs_path, "clicks")
    assert [(r["layer"], r["status"]) for r in ledger[-2:]] == [
        ("silver", "failed"),
        ("backfill", "failed"),
    ]

    # Rebuilding the refused table: its silver run applies the other change too. The tables are
    # what a fresh start with the new spec gives (all of bronze in one batch).
    assert main([*home, "rebuild", HOURLY]) == 0
    assert (
        f'silver {SLIDING}: measure last added: "max(time)": applied, the table is rebuilt from '
        "bronze"
    ) in capsys.readouterr().out
    assert {table: rows(config, table) for table in (HOURLY, SLIDING)} == want(records)
    # The next run accepts the tables: they were built by the spec as it is.
    assert run_silver(spark, config, "clicks").status == "success"
    rebuilt = [r for r in read_runs(config.runs_path, "clicks") if r["layer"] == "rebuild"]
    assert [(r["status"], r["trigger"]) for r in rebuilt] == [
        ("success", HOURLY),
        ("success", SLIDING),
    ]


def test_a_measure_added_is_applied_by_the_next_run_for_the_whole_history(
    spark: Any, tmp_path: Path
) -> None:
    """A compatible change (a measure added, nothing else): the next silver run rebuilds the
    table from bronze, says so, records it; the new column holds values for every window, equal
    to an independent computation, and the other table carries on untouched."""
    specs = tmp_path / "specs"
    write_spec(specs, seed_spec())
    config = RunoffConfig.from_sources(home=tmp_path / "home", datasets=[specs], env={})
    config.ensure_home()
    generate("events", config.landing_dir("clicks"), files=2, rows_per_file=120, seed=13)
    assert run_bronze(spark, config, "clicks").status == "success"
    assert run_silver(spark, config, "clicks").status == "success"
    hourly = 'window: "1 hour"\n    keys: [action]\n    measures: {count: "count(*)"'
    text = seed_spec()
    assert hourly in text
    write_spec(specs, text.replace(hourly, hourly + ', first: "min(time)"', 1))
    sliding_version = table_version(config.silver_path(SLIDING))
    generate("events", config.landing_dir("clicks"), files=1, rows_per_file=60, seed=14)
    # Every file delivered, before bronze archives the first ones.
    records = expected.valid_records(expected.read_landing("events", config.landing_dir("clicks")))
    assert run_bronze(spark, config, "clicks").status == "success"
    said: list[str] = []
    record = run_silver(spark, config, "clicks", report=said.append)
    assert record.status == "success"
    assert record.details["applied"] == {HOURLY: ['measure first added: "min(time)"']}
    assert said[0] == (
        f'silver {HOURLY}: measure first added: "min(time)": applied, the table is rebuilt from '
        "bronze"
    )
    grouped = expected._grouped(records, ("action",), timedelta(hours=1))
    first = {"first": lambda members: min(m["time"] for m in members)}
    want_hourly = sorted(
        expected.naive_utc(expected._rows(grouped, ("action",), **first)), key=repr
    )
    assert rows(config, HOURLY) == want_hourly
    assert table_version(config.silver_path(SLIDING)) > sliding_version  # carried on, not rebuilt
    ledger = read_runs(config.runs_path, "clicks")
    assert [(r["layer"], r["trigger"]) for r in ledger if r["layer"] == "rebuild"] == [
        ("rebuild", HOURLY)
    ]
    # Applied once: the next run finds the table built by the spec as it is.
    assert run_silver(spark, config, "clicks").details["applied"] == {}


def test_a_table_made_before_definitions_were_kept_adopts_the_spec_once(
    spark: Any, tmp_path: Path
) -> None:
    from dataclasses import replace

    from delta_tables import definitions
    from delta_tables.catalog import Catalog, ensure_table

    config = RunoffConfig.from_sources(home=tmp_path / "home", env={})
    table = Catalog.load(config).tables("events").named("events_action_hourly")
    spec = next(s for s in Catalog.load(config).spec("events").silver if s.table == table.name)
    older = replace(table, properties={})  # as runoff created tables before
    schema = "window_start TIMESTAMP, window_end TIMESTAMP, action STRING, count BIGINT"
    ensure_table(spark, older, schema=spark.createDataFrame([], schema).schema)
    assert definitions.stored(table) is None

    assert definitions.adopt(spark, [table], Catalog.load(config).spec("events")) == [table.name]
    assert definitions.stored(table) == definitions.definition(spec)
    version = table_version(table.path)
    assert definitions.adopt(spark, [table], Catalog.load(config).spec("events")) == []  # once
    assert table_version(table.path) == version
