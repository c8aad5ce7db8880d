"""Shared fixtures: one SparkSession for the whole run, fresh runoff homes per test."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from core.config import RunoffConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REPO_ROOT = Path(__file__).resolve().parents[1]
# runoff's console is as wide as COLUMNS, else 120 (what Airflow's task logs get); pytest-xdist's
# workers inherit COLUMNS=80, which would squeeze the tables the tests read.
os.environ["COLUMNS"] = "120"

# The files that take longest, longest first (per-file sums of `pytest --durations=0`'s times
# under `make test`). `make test` hands whole files to its two workers in collection order
# (`--dist loadfile`): a long file started last would run alone at the end. The other files
# follow in the order collected: tests/e2e, tests/spark, tests/unit.
SLOWEST_FIRST = (
    "tests/e2e/test_airflow_postgres.py",
    "tests/spark/jobs/silver/test_batches.py",
    "tests/e2e/test_faults.py",
    "tests/e2e/test_object_storage.py",
    "tests/e2e/test_bronze_crash.py",
    "tests/spark/jobs/test_declared_dataset.py",
    "tests/spark/jobs/backfill/test_job.py",
    "tests/e2e/dags/test_dag_run.py",
    "tests/e2e/test_spark_cluster.py",
    "tests/e2e/test_readme_walkthrough.py",
    "tests/spark/jobs/silver/test_job.py",
    "tests/e2e/test_server.py",
    "tests/spark/quality/test_gate.py",
    "tests/spark/jobs/ops/test_replay.py",
    "tests/spark/jobs/ops/test_ops.py",
    "tests/e2e/test_airflow_e2e.py",
    "tests/spark/jobs/bronze/test_job.py",
    "tests/e2e/test_silver_killed.py",
    "tests/e2e/test_live_progress.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put the files of `SLOWEST_FIRST` first, in its order; the order within a file is kept."""
    rank = {path: i for i, path in enumerate(SLOWEST_FIRST)}

    def file_rank(item: pytest.Item) -> int:
        path = item.path.relative_to(REPO_ROOT).as_posix()
        return rank.get(path, len(rank))

    items.sort(key=file_rank)


@pytest.fixture(autouse=True)
def console_follows_stdout() -> Iterator[None]:
    """Fail a test that leaves runoff's console pinned to one stream.

    The console writes to whatever `sys.stdout` is when it prints, so capsys sees its output. A
    test that swaps its stream must restore `_file` to None; restoring the `file` property's value
    would pin the console to a stream pytest later replaces, and later tests would see nothing.
    """
    from core.console import console

    yield
    assert console._file is None, f"a test left the console writing to {console._file!r}"


@pytest.fixture
def console_output(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """What runoff's rich console prints, 200 columns wide (read it with `take_output`).

    Patched on `_file`, not the `file` property: undoing a patch of `file` would pin the console
    to the stream pytest had installed at that moment, and later tests would never see output.
    """
    from core.console import console

    buffer = io.StringIO()
    monkeypatch.setattr(console, "_file", buffer)
    monkeypatch.setattr(console, "width", 200)
    yield buffer


def take_output(buffer: io.StringIO) -> str:
    """Everything printed since the last call (the buffer is emptied)."""
    text = buffer.getvalue()
    buffer.seek(0)
    buffer.truncate()
    return text


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An empty runoff home for one test."""
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def config(home: Path) -> RunoffConfig:
    return RunoffConfig.from_sources(home=home, env={})


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """The one SparkSession of the test run (local[2], UTC, no UI), long-lived like a server's:
    it runs every Spark test of its worker.

    One shuffle partition (runoff's default is 4): a test's batches hold tens to thousands of
    rows, where each partition is one more task per stage and one more state store file per
    stateful batch, not parallelism. In a warm session, a MERGE of ten rows into a small Delta
    table ran 12.7 Spark jobs in 1.4-1.5 s with one partition, against 15.7 jobs in 1.7-1.8 s with
    four. Every `runoff` process the tests start keeps runoff's default, and a checkpoint keeps the
    number of partitions it was made with whichever process runs it next.

    Interpreted expressions (`jobs.spark.INTERPRETED_PROJECTIONS`, as runoff sets them for small
    inputs), and no whole-stage code: over such batches,
    generating and compiling Java source for every plan and task costs more than the code saves.
    `tests/spark` (228 tests, two workers, one run each) took 0.89x the machine's CPU seconds
    (1,005 against 1,130) and 0.91x the wall time (552 s against 607 s). Spark's own suites run
    the same queries under both settings for the same results; every `runoff` process the tests
    start (tests/e2e) keeps runoff's settings and generates code."""
    from jobs.spark import INTERPRETED_PROJECTIONS, get_spark

    home = tmp_path_factory.mktemp("spark-home")
    config = RunoffConfig.from_sources(home=home, spark_master="local[2]", env={})
    plans = {**INTERPRETED_PROJECTIONS, "spark.sql.codegen.wholeStage": "false"}
    session = get_spark(
        app_name="runoff-tests",
        config=config.with_changes(shuffle_partitions=1, spark_conf=plans),
        long_lived=True,
    )
    yield session
    session.stop()
