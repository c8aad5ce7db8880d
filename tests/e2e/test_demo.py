"""`runoff demo` on a small size: generate, run, summarise, report; and again (idempotent).

Expected numbers come from the landing bytes (tests/expected.py, pure Python), not from the
pipeline. One dataset (events) keeps the test within the shared SparkSession's budget.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from core.config import RunoffConfig
from jobs.bronze.job import landing_dirs
from jobs.samples.demo import DatasetOutcome, count_files, render_summary, run_demo
from tests import expected
from tests.browser import dump_dom

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SIZES = {"events": {"files": 4, "rows_per_file": 250, "malformed_rate": 0.01, "late_rate": 0.02}}


def landing_of(config: RunoffConfig, dataset: str) -> list[expected.LandingFile]:
    """Every landing file of the dataset, waiting or archived after ingestion."""
    files = []
    for folder in landing_dirs(config, dataset):
        if folder.is_dir():
            files.extend(expected.read_landing(dataset, folder))
    return files


def versions(outcome: DatasetOutcome) -> dict[str, int | None]:
    return {t.name: t.version for t in outcome.tables}


def test_count_files_skips_files_in_flight(tmp_path: Path) -> None:
    (tmp_path / "date=2024-01-01").mkdir()
    (tmp_path / "date=2024-01-01" / "part-1.json").write_text("{}\n")
    (tmp_path / "date=2024-01-01" / ".part-2.json.tmp").write_text("{}\n")
    (tmp_path / "_SUCCESS").write_text("")

    assert count_files(tmp_path, tmp_path / "missing") == 1


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.browser
def test_demo_runs_reports_and_is_idempotent(
    spark: SparkSession, config: RunoffConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    [first] = run_demo(spark, config, datasets=("events",), sizes=SIZES)

    files = landing_of(config, "events")
    valid, malformed, _blank = expected.counts(files)
    hourly = expected.events_action_hourly(expected.valid_records(files))
    assert first.error is None and first.passed
    assert (first.generated_files, first.generated_records) == (4, 1000) == (len(files), valid)
    rows = {t.name: t.rows for t in first.tables}
    assert rows["bronze_events"] == valid == first.new_bronze_rows
    assert rows["quarantine_events"] == malformed == 10
    assert rows["events_action_hourly"] == len(hourly)
    assert first.quality.startswith("passed (")

    render_summary(config, [first])
    out = capsys.readouterr().out
    assert re.search(r"events\s+│\s+1,000\s+│\s+10\s+│\s+events_action_hourly", out), out

    # The report of a real run: one chart per silver measure (events: two tables, one measure
    # each), four run/quality charts and the batches' rows, lag and silver rows (no column had
    # a null: a note takes the place of that chart); one point per hour on each action's line.
    assert first.report == config.home / "reports" / "events.html"
    dom = dump_dom(first.report)
    assert dom.count('<svg class="chart"') == 2 + 4 + 3
    charts = re.findall(r'<svg class="chart" data-chart="(metric-[a-z]+)"', dom)
    assert charts == ["metric-rows", "metric-lag", "metric-silver"]
    assert "No bronze column of events had a null in any batch." in dom
    silver = re.search(r'<svg class="chart" data-chart="silver0".*?</svg>', dom, re.S)
    assert silver is not None
    lines = re.findall(
        r'<path d="([^"]+)" clip-path="[^"]+" style="fill: none; stroke: #\w+; stroke-width: 1.6',
        silver[0],
    )
    hours = len({row["window_start"] for row in hourly})
    assert [len(re.findall(r"[ML] ", d)) for d in lines] == [hours, hours]

    # Again on the same home: nothing generated, nothing new ingested, no table changed.
    [second] = run_demo(spark, config, datasets=("events",), sizes=SIZES)

    assert second.error is None and second.passed
    assert (second.landing_files_before, second.generated_files) == (4, 0)
    assert second.new_bronze_rows == 0
    assert versions(second) == versions(first)
    assert {t.name: t.rows for t in second.tables} == rows
    assert len(landing_of(config, "events")) == 4
