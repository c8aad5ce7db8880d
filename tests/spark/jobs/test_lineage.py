"""OpenLineage events of real runs, received over HTTP on loopback and checked against the
specification's JSON schemas (tests/lineage_receiver.py).

`runoff run events` (bronze, silver, validate) with `OPENLINEAGE_URL` set emits a START and a
COMPLETE event per run, one run id per ledger row; what the events say of the tables is compared
with the tables themselves, read independently with delta-rs. Then a landing line that breaks a
critical expectation fails bronze: START then FAIL with the ledger's error line, under the
Airflow task given as `OPENLINEAGE_PARENT_ID`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from core.config import RunoffConfig
from delta_tables.arrow import count_rows
from delta_tables.ledger import read_runs
from jobs.cli.main import main
from jobs.samples import generate_dataset
from tests.lineage_receiver import LineageReceiver, problems

PARENT = "default/runoff_events.bronze/01931f2e-6a6e-7c4e-9d3e-2b1f5a0c9e11"
SILVER = ("events_action_hourly", "events_action_sliding")


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[LineageReceiver]:
    server = LineageReceiver()
    monkeypatch.chdir(tmp_path)  # no openlineage.yml of the working directory
    monkeypatch.setenv("OPENLINEAGE_URL", server.url)
    monkeypatch.setenv("OPENLINEAGE_NAMESPACE", "lake")
    try:
        yield server
    finally:
        server.stop()


def by_job(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["job"]["name"], e["eventType"]) for e in events]


def names(datasets: list[dict[str, Any]]) -> list[str]:
    return [d["name"] for d in datasets]


def test_a_pipeline_run_emits_valid_lineage_that_matches_its_tables(
    spark: Any, config: RunoffConfig, receiver: LineageReceiver
) -> None:
    generate_dataset(config, "events", files=1, rows_per_file=40, seed=3, malformed_rate=0.1)
    assert main(["--home", str(config.home), "run", "events"]) == 0

    events = receiver.events()
    assert [problems(e) for e in events] == [[]] * 6
    assert by_job(events) == [
        (f"runoff.events.{command}", state)
        for command in ("bronze", "silver", "validate")
        for state in ("START", "COMPLETE")
    ]
    assert {e["job"]["namespace"] for e in events} == {"lake"}
    runs = read_runs(config.runs_path, "events")
    assert [e["run"]["runId"] for e in events] == [
        str(uuid.UUID(r["run_id"])) for r in runs for _ in ("START", "COMPLETE")
    ]
    bronze_run, silver_run, validate_run = (events[i] for i in (1, 3, 5))
    landing = str(config.home / "landing" / "events")
    bronze = str(config.bronze_path("events"))
    quarantine = str(config.quarantine_path("events"))
    silver = [str(config.silver_path(t)) for t in SILVER]

    # bronze: landing -> bronze and quarantine, at the versions the ledger recorded
    assert (names(bronze_run["inputs"]), names(bronze_run["outputs"])) == (
        [landing],
        [bronze, quarantine],
    )
    versions = json.loads(runs[0]["versions_after"])
    written = {d["name"]: d for d in bronze_run["outputs"]}
    assert written[bronze]["facets"]["version"]["datasetVersion"] == str(
        DeltaTable(bronze).version()
    )
    assert versions["bronze_events"] == DeltaTable(bronze).version()
    schema = [f["name"] for f in written[bronze]["facets"]["schema"]["fields"]]
    assert schema == [f.name for f in DeltaTable(bronze).schema().fields]
    stats = {n: d["outputFacets"]["outputStatistics"]["rowCount"] for n, d in written.items()}
    assert stats == {bronze: count_rows(bronze), quarantine: count_rows(quarantine)}
    assert stats[quarantine] > 0
    lineage = written[bronze]["facets"]["columnLineage"]["fields"]
    assert {c: [f["field"] for f in v["inputFields"]] for c, v in lineage.items()} == {
        "time": ["time"],
        "action": ["action"],
        "event_time": ["time"],
        "event_date": ["time"],
    }
    checked = {
        (a["assertion"], a.get("column"), a["success"])
        for a in written[bronze]["facets"]["dataQualityAssertions"]["assertions"]
    }
    # the spec's two bronze expectations, both met (the generator writes Open and Close only)
    assert {
        ("expect_column_values_to_be_in_set", "action", True),
        ("expect_column_values_to_be_between", "time", True),
    } <= checked

    # silver: bronze -> each silver table, keys and window bounds from bronze's columns
    assert (names(silver_run["inputs"]), names(silver_run["outputs"])) == ([bronze], silver)
    for table, path in zip(SILVER, silver, strict=True):
        out = next(d for d in silver_run["outputs"] if d["name"] == path)
        assert out["facets"]["version"]["datasetVersion"] == str(DeltaTable(path).version())
        assert out["facets"]["symlinks"]["identifiers"][0]["name"] == table
        lineage = out["facets"]["columnLineage"]["fields"]
        assert {
            c: [(f["name"], f["field"]) for f in v["inputFields"]] for c, v in lineage.items()
        } == {
            "window_start": [(bronze, "event_time")],
            "window_end": [(bronze, "event_time")],
            "action": [(bronze, "action")],
        }

    # validate: reads what it validated, with each expectation's result on its table
    assert sorted(names(validate_run["inputs"])) == sorted([bronze, quarantine, *silver])
    assert validate_run["outputs"] == []
    results = {
        d["name"]: sorted(
            (a["assertion"], a.get("column"), a["severity"], a["success"])
            for a in d["inputFacets"]["dataQualityAssertions"]["assertions"]
        )
        for d in validate_run["inputs"]
    }
    share = stats[quarantine] / (stats[bronze] + stats[quarantine])
    between = "expect_column_max_to_be_between"
    assert results == {
        bronze: [("expect_column_min_to_be_between", "rows_added", "critical", True)],
        # the quarantine share: at most 2% (warning) and 20% (critical) of the lines
        quarantine: [
            (between, "quarantine_share", "critical", share <= 0.2),
            (between, "quarantine_share", "warning", share <= 0.02),
        ],
        **{
            path: [("expect_compound_columns_to_be_unique", None, "critical", True)]
            for path in silver
        },
    }


def test_a_failed_run_emits_fail_with_its_error_under_its_airflow_task(
    spark: Any, config: RunoffConfig, receiver: LineageReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENLINEAGE_PARENT_ID", PARENT)
    landing = config.landing_dir("events") / "date=2024-01-01"
    landing.mkdir(parents=True)
    (landing / "bad.json").write_text('{"time": 1704070800, "action": "Jump"}\n')
    assert main(["--home", str(config.home), "bronze", "events"]) == 1

    events = receiver.events()
    assert [problems(e) for e in events] == [[], []]
    assert by_job(events) == [("runoff.events.bronze", "START"), ("runoff.events.bronze", "FAIL")]
    (run,) = read_runs(config.runs_path, "events")
    failed = events[1]
    assert failed["run"]["facets"]["errorMessage"]["message"] == run["error"]
    assert "action" in run["error"]
    parent = failed["run"]["facets"]["parent"]
    assert (parent["job"]["namespace"], parent["job"]["name"], parent["run"]["runId"]) == tuple(
        PARENT.split("/")
    )
    # nothing of the batch committed: the tables as the run created them, empty
    after = {d["name"]: d["facets"]["version"]["datasetVersion"] for d in failed["outputs"]}
    tables = [str(config.bronze_path("events")), str(config.quarantine_path("events"))]
    assert after == {t: str(DeltaTable(t).version()) for t in tables}
    assert [count_rows(t) for t in tables] == [0, 0]
