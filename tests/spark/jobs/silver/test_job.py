"""`runoff silver`: streaming aggregates from bronze Delta tables, compared with tests/expected.py.

Landing files come from the generators (with late and malformed lines). The first tests run the real
chain (`jobs.bronze.job.run_bronze`, then `run_silver`); the others build bronze here, one Delta
commit per landing file holding the valid records tests/expected.py parses from the bytes, so that
they control what each micro-batch holds. Every silver table is compared row for row with
expected.py's aggregates (counts exactly, means within 1e-9), whether the data arrives in one batch,
one file per batch, in several runs, or through a run killed with SIGKILL and restarted.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from core.config import RunoffConfig
from core.errors import LockHeldError, RunoffError
from core.locking import checkpoint_lock
from delta_tables.arrow import read_arrow
from delta_tables.ledger import RunRecord, read_runs
from jobs.samples import generate
from jobs.silver import SilverOptions, run_silver
from tests import expected
from tests.seeds import seed as get_dataset

pytestmark = pytest.mark.spark

# Small samples that still close windows: sensors need more than their 10-minute watermark of
# event time (20 devices signal every 2-3 s) for `sensors_lost_signal` to hold rows.
SAMPLES: dict[str, dict[str, Any]] = {
    "events": {"files": 6, "rows_per_file": 40, "late_rate": 0.05},
    "sensors": {"files": 8, "rows_per_file": 800, "late_rate": 0.01},
    "activity": {"files": 6, "rows_per_file": 60, "late_rate": 0.05},
    "lines": {"files": 4, "rows_per_file": 30, "late_rate": 0.0},
}
MALFORMED_RATE = 0.05
REL = 1e-9
UV = shutil.which("uv") or str(Path.home() / ".local" / "bin" / "uv")


# -- building bronze ---------------------------------------------------------------------------
def generate_landing(landing_dir: Path, dataset: str, seed: int = 1) -> list[expected.LandingFile]:
    """Generated landing files, parsed by expected.py, in delivery order."""
    generate(dataset, landing_dir, seed=seed, malformed_rate=MALFORMED_RATE, **SAMPLES[dataset])
    files = expected.read_landing(dataset, landing_dir)
    assert files and sum(f.malformed for f in files) > 0
    if SAMPLES[dataset]["late_rate"]:
        assert sum(expected.late_counts(files)) > 0
    return files


def bronze_schema(dataset: str) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(get_dataset(dataset).full_bronze_schema, timezone="UTC")


def append_bronze(
    config: RunoffConfig, dataset: str, files: Sequence[expected.LandingFile]
) -> None:
    """One bronze commit per landing file, as the bronze job writes them."""
    schema = bronze_schema(dataset)
    path = config.bronze_path(dataset)
    for landing in files:
        batch = table_version(path) + 1
        rows = [
            {**record, "_ingested_at": datetime.now(UTC), "_batch_id": batch}
            for record in landing.records
        ]
        write_deltalake(
            str(path),
            pa.Table.from_pylist(rows, schema=schema),
            mode="append",
            partition_by=["event_date"],
        )


def table_version(path: Path) -> int:
    return DeltaTable(str(path)).version() if DeltaTable.is_deltatable(str(path)) else -1


# -- comparing ---------------------------------------------------------------------------------
def silver_rows(config: RunoffConfig, table: str) -> list[dict[str, Any]]:
    return read_arrow(str(config.silver_path(table))).to_pylist()


def expected_tables(dataset: str, records: list[dict[str, Any]]) -> dict[str, list[dict]]:
    """expected.py's tables; the append-mode table only holds windows the watermark closed."""
    tables = expected.silver(dataset, records)
    if "sensors_lost_signal" in tables:
        tables["sensors_lost_signal"] = expected.closed_windows(
            tables["sensors_lost_signal"],
            expected.max_event_time(records),
            expected.WATERMARK[dataset],
        )
    return tables


def assert_same_rows(
    table: str, keys: Sequence[str], actual: list[dict], wanted: list[dict]
) -> None:
    def keyed(rows: list[dict]) -> dict[tuple[Any, ...], dict]:
        result = {tuple(r[k] for k in keys): r for r in rows}
        assert len(result) == len(rows), f"{table}: duplicate keys"
        return result

    got, want = keyed(actual), keyed(wanted)
    assert sorted(got) == sorted(want), f"{table}: different windows/keys"
    for key, row in want.items():
        assert set(got[key]) == set(row), f"{table}: different columns"
        for column, value in row.items():
            if isinstance(value, float):
                assert got[key][column] == pytest.approx(value, rel=REL), (table, key, column)
            else:
                assert got[key][column] == value, (table, key, column)


def assert_matches_expected(
    config: RunoffConfig, dataset: str, records: list[dict[str, Any]]
) -> dict[str, list[dict]]:
    """Every silver table equals expected.py's; returns the tables' rows."""
    ds = get_dataset(dataset)
    actual = {agg.table: silver_rows(config, agg.table) for agg in ds.aggregates}
    for table, wanted in expected_tables(dataset, records).items():
        assert wanted, f"the sample gives {table} rows"
        rows = actual[table]
        if ds.aggregate(table).partition_by == ("window_date",):
            # the partition column derives from window_start; expected.py leaves it out
            assert all(r["window_date"] == r["window_start"].date() for r in rows), table
            rows = [{k: v for k, v in r.items() if k != "window_date"} for r in rows]
        assert_same_rows(table, ds.aggregate(table).keys, rows, wanted)
    return actual


def silver(
    spark: Any, config: RunoffConfig, dataset: str, **options: Any
) -> tuple[RunRecord, list[str]]:
    lines: list[str] = []
    record = run_silver(spark, config, dataset, SilverOptions(**options), report=lines.append)
    return record, lines


@dataclass(frozen=True)
class Landing:
    directory: Path
    files: list[expected.LandingFile]

    @property
    def records(self) -> list[dict[str, Any]]:
        return expected.valid_records(self.files)


@dataclass(frozen=True)
class Pipeline:
    config: RunoffConfig
    landing: Landing
    record: RunRecord
    lines: list[str]


def landings(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Landing]:
    """Generated landing files per dataset, each made on first use."""
    made: dict[str, Landing] = {}

    def get(dataset: str) -> Landing:
        if dataset not in made:
            directory = tmp_path_factory.mktemp(f"landing-{dataset}")
            made[dataset] = Landing(directory, generate_landing(directory, dataset))
        return made[dataset]

    return get


@pytest.fixture(scope="module")
def landing(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Landing]:
    """Generated landing files per dataset, made once for the module."""
    return landings(tmp_path_factory)


@pytest.fixture(scope="module")
def pipeline(
    spark: Any, tmp_path_factory: pytest.TempPathFactory, landing: Callable[[str], Landing]
) -> Callable[[str], Pipeline]:
    """`bronze` then `silver` over a dataset's landing files, once per dataset for the module."""
    from jobs.bronze.job import run_bronze

    done: dict[str, Pipeline] = {}

    def get(dataset: str) -> Pipeline:
        if dataset not in done:
            files = landing(dataset)
            home = tmp_path_factory.mktemp(f"home-{dataset}")
            config = RunoffConfig.from_sources(home=home, env={})
            shutil.copytree(files.directory, config.landing_dir(dataset))
            run_bronze(spark, config, dataset)
            record, lines = silver(spark, config, dataset)
            done[dataset] = Pipeline(config, files, record, lines)
        return done[dataset]

    return get


def new_config(tmp_path: Path, name: str) -> RunoffConfig:
    home = tmp_path / name
    home.mkdir()
    return RunoffConfig.from_sources(home=home, env={})


# -- every table equals the independent computation --------------------------------------------
@pytest.mark.parametrize("dataset", ["events", "sensors", "activity", "lines"])
def test_silver_tables_equal_expected_aggregates(
    pipeline: Callable[[str], Pipeline], dataset: str
) -> None:
    run = pipeline(dataset)
    config, record, records = run.config, run.record, run.landing.records

    assert_matches_expected(config, dataset, records)
    tables = [agg.table for agg in get_dataset(dataset).aggregates]
    silver_runs = [r for r in read_runs(config.runs_path, dataset) if r["layer"] == "silver"]
    assert len(silver_runs) == 1
    ledger = silver_runs[0]
    assert (ledger["status"], ledger["trigger"], ledger["late_rows"]) == (
        "success",
        "available-now",
        0,
    )
    assert json.loads(ledger["versions_before"]) == {t: -1 for t in tables}
    after = {t: table_version(config.silver_path(t)) for t in tables}
    assert json.loads(ledger["versions_after"]) == after == record.versions_after
    assert all(v >= 1 for v in after.values())
    details = record.details["tables"]
    for table in tables:
        assert details[table]["input_rows"] == len(records)
        batch_lines = [line for line in run.lines if line.startswith(f"silver {table} batch ")]
        assert len(batch_lines) == details[table]["batches"] >= 1
    assert run.lines[-1].startswith(f"silver {dataset}: success in ")


def test_events_tables_keep_the_notebook_invariants(pipeline: Callable[[str], Pipeline]) -> None:
    run = pipeline("events")
    records = run.landing.records
    hourly = silver_rows(run.config, "events_action_hourly")
    sliding = silver_rows(run.config, "events_action_sliding")

    for action in ("Open", "Close"):
        inputs = sum(r["action"] == action for r in records)
        assert inputs > 0
        assert sum(r["count"] for r in hourly if r["action"] == action) == inputs
        # every event lies in exactly two 10-minute windows sliding by 5 minutes
        assert sum(r["count"] for r in sliding if r["action"] == action) == 2 * inputs
    per_hour: dict[datetime, dict[str, int]] = {}
    for r in hourly:
        per_hour.setdefault(r["window_start"], {"Open": 0, "Close": 0})[r["action"]] = r["count"]
    opens = closes = 0
    for hour in sorted(per_hour):
        opens += per_hour[hour]["Open"]
        closes += per_hour[hour]["Close"]
        assert opens >= closes, f"more Closes than Opens up to {hour}"


# -- batching does not change the result -------------------------------------------------------


# -- late rows ---------------------------------------------------------------------------------
def events_file(path: str, rows: list[tuple[int, str]]) -> expected.LandingFile:
    """A landing file of events (epoch seconds, action), parsed by expected.py."""
    lines = tuple(
        expected.classify("events", f'{{"time":{t},"action":"{a}"}}'.encode(), n, Path(path))
        for n, (t, a) in enumerate(rows, start=1)
    )
    return expected.LandingFile(Path(path), None, lines)


def test_rows_behind_the_watermark_are_left_out_and_counted(spark: Any, tmp_path: Path) -> None:
    t0 = int(datetime(2024, 1, 1, tzinfo=UTC).timestamp())
    on_time = events_file("f0", [(t0 + m * 60, "Open" if m % 2 else "Close") for m in range(240)])
    # 3 hours behind the newest event: its windows closed long ago (watermark 1 hour)
    late = events_file("f1", [(t0 + 600, "Open"), (t0 + 1200, "Close")])
    config = new_config(tmp_path, "home")
    append_bronze(config, "events", [on_time])
    silver(spark, config, "events")
    append_bronze(config, "events", [late])

    record, lines = silver(spark, config, "events")

    # Spark counts late (window, key) groups: 2 hourly, 4 sliding (each event is in 2 windows)
    tables = record.details["tables"]
    assert tables["events_action_hourly"]["late_rows"] == 2
    assert tables["events_action_sliding"]["late_rows"] == 4
    assert record.late_rows == 4
    assert read_runs(config.runs_path, "events")[-1]["late_rows"] == 4
    assert any("behind the watermark" in line and "backfill" in line for line in lines)
    assert_matches_expected(config, "events", on_time.records)  # the late rows are not in silver


def test_watermark_option_keeps_rows_a_longer_delay_allows(spark: Any, tmp_path: Path) -> None:
    t0 = int(datetime(2024, 1, 1, tzinfo=UTC).timestamp())
    on_time = events_file("f0", [(t0 + m * 60, "Open") for m in range(240)])
    late = events_file("f1", [(t0 + 600, "Close")])
    config = new_config(tmp_path, "home")
    append_bronze(config, "events", [on_time])
    silver(spark, config, "events", watermark="6 hours")
    append_bronze(config, "events", [late])

    record, _ = silver(spark, config, "events", watermark="6 hours")

    assert record.late_rows == 0 and record.details["watermark"] == "6 hours"
    assert_matches_expected(config, "events", on_time.records + late.records)


# -- refusals ----------------------------------------------------------------------------------
def test_silver_without_bronze_names_the_missing_table(spark: Any, config: RunoffConfig) -> None:
    with pytest.raises(RunoffError, match=r"bronze table .*/delta/bronze/events does not exist: "
                       r"run `runoff bronze events` first"):  # fmt: skip
        run_silver(spark, config, "events")

    (ledger,) = read_runs(config.runs_path, "events")
    assert (ledger["layer"], ledger["status"]) == ("silver", "failed")
    assert "does not exist" in ledger["error"]


def test_second_run_on_a_held_checkpoint_is_refused(spark: Any, config: RunoffConfig) -> None:
    t0 = int(datetime(2024, 1, 1, tzinfo=UTC).timestamp())
    append_bronze(config, "events", [events_file("f0", [(t0, "Open")])])
    checkpoint = config.checkpoint_dir("silver", "events_action_sliding")

    with (
        checkpoint_lock(checkpoint, "runoff silver events"),
        pytest.raises(
            LockHeldError, match=rf"{re.escape(str(checkpoint))} is in use by pid {os.getpid()} on "
        ),
    ):
        run_silver(spark, config, "events")

    (ledger,) = read_runs(config.runs_path, "events")
    assert (ledger["status"], ledger["batches"]) == ("failed", 0)
    assert "is in use by" in ledger["error"]
    assert not config.silver_path("events_action_hourly").exists()
