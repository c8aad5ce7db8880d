"""Silver gives the same tables whether bronze arrives one file per micro-batch or in several
runs (tests/spark/jobs/silver/test_job.py holds the shared landing and helpers)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from delta_tables.ledger import read_runs
from tests import expected
from tests.seeds import seed as get_dataset
from tests.spark.jobs.silver.test_job import (
    Landing,
    append_bronze,
    assert_matches_expected,
    assert_same_rows,
    landings,
    new_config,
    silver,
)


@pytest.fixture(scope="module")
def landing(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Landing]:
    """Generated landing files per dataset, made once for the module."""
    return landings(tmp_path_factory)


@pytest.mark.slow
@pytest.mark.parametrize("dataset", ["events", "sensors"])
def test_result_is_the_same_in_one_batch_per_file_and_in_several_runs(
    spark: Any, tmp_path: Path, landing: Callable[[str], Landing], dataset: str
) -> None:
    files = landing(dataset).files
    records = expected.valid_records(files)

    one_file_per_batch = new_config(tmp_path, "per-file")
    append_bronze(one_file_per_batch, dataset, files)
    record, _ = silver(spark, one_file_per_batch, dataset, max_files_per_trigger=1)
    for details in record.details["tables"].values():
        assert details["batches"] >= len(files)  # one file per batch (+ no-data batches)

    several_runs = new_config(tmp_path, "several-runs")
    for part in (files[:2], files[2:5], files[5:]):
        append_bronze(several_runs, dataset, part)
        silver(spark, several_runs, dataset)
    runs = read_runs(several_runs.runs_path, dataset)
    assert [r["status"] for r in runs] == ["success"] * 3

    per_file = assert_matches_expected(one_file_per_batch, dataset, records)
    in_runs = assert_matches_expected(several_runs, dataset, records)
    for table, rows in per_file.items():
        keys = get_dataset(dataset).aggregate(table).keys
        assert_same_rows(table, keys, in_runs[table], rows)
