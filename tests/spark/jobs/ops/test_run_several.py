"""`runoff run DATASET DATASET ...`: several datasets side by side in one driver.

Two seed datasets run in one command, in one process (the suite's shared session, as a server's
command would): each dataset's tables equal tests/expected.py's computation over its landing
files, row for row; each has its own ledger rows; the command exits 0. Then one dataset's new
file fails a critical expectation while the other's new file is fine: the command exits 1 (the
worst), prints the failing dataset's one error line, and the other dataset's new rows are
published exactly. Every Spark session of the command is its own: a setting one dataset's steps
make is invisible to another's.
"""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest

from core.config import RunoffConfig
from delta_tables import definitions
from delta_tables.arrow import read_arrow
from delta_tables.catalog import Catalog
from delta_tables.ledger import read_runs
from delta_tables.writes import table_version
from jobs.cli.main import main
from jobs.samples import generate_dataset
from tests import expected
from tests.spark.jobs.silver.test_job import assert_matches_expected

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DATASETS = ("events", "lines")


def cli(home: Path, *args: str) -> int:
    return main(["--home", str(home), *args])


def keep_aside(config: RunoffConfig, aside: Path) -> None:
    """A copy of every landing file delivered so far (bronze archives the ingested ones)."""
    for dataset in DATASETS:
        shutil.copytree(config.landing_dir(dataset), aside / dataset, dirs_exist_ok=True)


def assert_exact(config: RunoffConfig, dataset: str, aside: Path) -> None:
    files = expected.read_landing(dataset, aside / dataset)
    bronze = read_arrow(str(config.bronze_path(dataset)))
    quarantine = read_arrow(str(config.quarantine_path(dataset)))
    assert bronze.num_rows == len(expected.valid_records(files)), dataset
    assert quarantine.num_rows == len(expected.malformed_lines(files)), dataset
    assert_matches_expected(config, dataset, expected.valid_records(files))


def test_datasets_run_side_by_side_each_with_its_own_tables_ledger_and_outcome(
    spark: Any, config: RunoffConfig, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    aside = tmp_path / "delivered"
    for seed, dataset in enumerate(DATASETS):
        generate_dataset(config, dataset, files=1, rows_per_file=80, seed=seed, malformed_rate=0.05)
    keep_aside(config, aside)

    assert cli(config.home, "run", *DATASETS) == 0
    out = capsys.readouterr().out
    for dataset in DATASETS:
        assert_exact(config, dataset, aside)
        assert [(r["layer"], r["status"]) for r in read_runs(config.runs_path, dataset)] == [
            ("bronze", "success"),
            ("silver", "success"),
            ("validate", "success"),
        ]
        assert f"run {dataset}: bronze " in out
        # the silver and validate rows say which definition built the silver tables
        fingerprints = definitions.fingerprints(Catalog.load(config).spec(dataset))
        silver_row, validate_row = read_runs(config.runs_path, dataset)[1:3]
        assert json.loads(silver_row["details"])["definitions"] == fingerprints
        assert json.loads(validate_row["details"])["definitions"] == fingerprints
    assert "run: 2 datasets, 2 at a time" in out
    assert "run: events success, lines success in " in out

    # events' new file fails its critical expectation (an unknown action); lines' is fine
    odd = config.landing_dir("events") / "date=2024-01-01" / "part-odd.json"
    odd.write_text('{"time": 1704067300, "action": "Jump"}\n')
    events_bronze = table_version(config.bronze_path("events"))
    generate_dataset(config, "lines", files=1, rows_per_file=40, seed=5, start="2024-01-02")
    shutil.copytree(config.landing_dir("lines"), aside / "lines", dirs_exist_ok=True)

    for dataset in ("activity", "sensors"):  # the other seed datasets: nothing landed yet
        Path(config.landing_dir(dataset)).mkdir(parents=True)
    outcome = tmp_path / "outcome.json"
    assert cli(config.home, "--outcome", str(outcome), "run", "--all", "--parallel", "2") == 1
    captured = capsys.readouterr()
    errors = captured.err.splitlines()
    assert [e.split(": critical expectation")[0] for e in errors] == [
        "runoff: error: events",
    ], captured.err
    assert "column_values_to_be_in_set(action, value_set=[Open, Close])" in errors[0]
    assert "events failed (exit 1)" in captured.out
    recorded = json.loads(outcome.read_text())
    assert (recorded["command"], recorded["dataset"], recorded["exit_code"]) == ("run", None, 1)
    assert {d: o["exit_code"] for d, o in recorded["summary"]["datasets"].items()} == {
        "activity": 0,
        "events": 1,
        "lines": 0,
        "sensors": 0,
    }
    assert recorded["summary"]["datasets"]["events"]["error"] in errors[0]
    assert "lines success" in captured.out
    assert table_version(config.bronze_path("events")) == events_bronze
    assert_exact(config, "lines", aside)
    assert [(r["layer"], r["status"]) for r in read_runs(config.runs_path, "events")[3:]] == [
        ("bronze", "failed"),
    ]
    assert [(r["layer"], r["status"]) for r in read_runs(config.runs_path, "lines")[3:]] == [
        ("bronze", "success"),
        ("silver", "success"),
        ("validate", "success"),
    ]
    # the other seed datasets ran too, each on its own
    for dataset in ("activity", "sensors"):
        assert [r["status"] for r in read_runs(config.runs_path, dataset)] == [
            "success",
            "success",
            "success",
        ]


def test_each_dataset_has_its_own_spark_session(
    spark: Any, config: RunoffConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A setting made in one dataset's session is not seen by another running at the same
    time, nor by the command's own session."""
    import jobs.ops.pipeline as pipeline

    both_set = threading.Barrier(2, timeout=60)
    seen: dict[str, str | None] = {}

    def fake_pipeline(session: Any, config: RunoffConfig, dataset: str, **_: Any) -> Any:
        session.conf.set("spark.runoff.test.owner", dataset)
        both_set.wait()  # both datasets have set theirs
        seen[dataset] = session.conf.get("spark.runoff.test.owner", None)
        raise pipeline.ConfigError(f"{dataset} stops here")

    monkeypatch.setattr(pipeline, "run_pipeline", fake_pipeline)
    outcomes = pipeline.run_datasets(spark, config, ["a", "b"], parallel=2)
    assert seen == {"a": "a", "b": "b"}
    assert spark.conf.get("spark.runoff.test.owner", None) is None
    assert [(o.dataset, o.exit_code, o.error) for o in outcomes] == [
        ("a", 2, "a stops here"),
        ("b", 2, "b stops here"),
    ]


def test_a_signal_stops_every_dataset_and_the_command(
    spark: Any, config: RunoffConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signal delivered to the command (as `runoff serve` delivers its client's Ctrl-C) stops
    every running dataset; the command then ends interrupted, as a run of one dataset does."""
    import signal

    import jobs.ops.pipeline as pipeline
    from core import interrupts

    running = threading.Barrier(3, timeout=60)
    stopped: list[str] = []

    def fake_pipeline(session: Any, config: RunoffConfig, dataset: str, **_: Any) -> Any:
        running.wait()
        try:
            while True:
                interrupts.check()
                threading.Event().wait(0.05)
        finally:
            stopped.append(dataset)

    monkeypatch.setattr(pipeline, "run_pipeline", fake_pipeline)
    threading.Thread(
        target=lambda: (running.wait(), interrupts.deliver(signal.SIGINT)), daemon=True
    ).start()
    interrupts.reset()
    try:
        with pytest.raises(KeyboardInterrupt):
            pipeline.run_datasets(spark, config, ["a", "b"], parallel=2)
    finally:
        interrupts.reset()
    assert sorted(stopped) == ["a", "b"]
