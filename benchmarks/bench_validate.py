"""Validation cost follows the rows a run added, not the size of the table.

Builds an `events` bronze table in a temporary runoff home through delta-spark, as the bronze
job does (`delta_tables.catalog.ensure_table`, then `delta_tables.writes.append` partitioned by
`event_date`: one version per simulated run of `ROWS_PER_VERSION` rows), and times
`validate_dataset` (which reads with delta-rs and checks with Great Expectations):
- on a small table (`SMALL_VERSIONS` versions): the first (whole-table) validation, then a
  one-file increment;
- after growing it to `LARGE_VERSIONS` versions: a one-file increment, then `--full`.
The writes run in a child process (`python -m benchmarks.bench_validate --writer HOME`) that
holds the SparkSession and appends versions on request, so that the validations run as
`runoff validate` does: in a process without Spark (the ledger and results-history rows are
parked for the next Spark run, `delta_tables.ops`). The machine's load averages (1/5/15 min)
before and after are in `params`.
Writes `benchmarks/results/validate.json` and `validate.md`. Run:
`uv run --frozen python -m benchmarks.bench_validate` (a few minutes on 2 cores: most of it is
the 160 Spark appends).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from benchmarks.result import load_average, metric, results_dir, write_result

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROWS_PER_VERSION = 10_000
SMALL_VERSIONS = 15
LARGE_VERSIONS = 150
INCREMENT_REPEATS = 5
START = 1_709_251_200  # 2024-03-01T00:00:00Z
REPO_ROOT = Path(__file__).resolve().parents[1]
# The app transaction of the appends (as the bronze job's streaming query id would be).
APP_ID = "bench-validate"


def bronze_batch(version: int, rows: int = ROWS_PER_VERSION) -> pa.Table:
    """`rows` bronze events one second apart, Open/Close alternating, continuing `version`."""
    first = START + version * rows
    seconds = np.arange(first, first + rows, dtype=np.int64)
    event_time = pa.array(seconds * 1_000_000, pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    return pa.table(
        {
            "time": pa.array(seconds),
            "action": pa.array(np.where(seconds % 2 == 0, "Open", "Close")),
            "event_time": event_time,
            "event_date": event_time.cast(pa.date32()),
            "_source_file": pa.array([f"landing/events/part-{version:05d}.json"] * rows),
            "_ingested_at": pa.array(
                [datetime(2024, 3, 1, tzinfo=UTC)] * rows, pa.timestamp("us", tz="UTC")
            ),
            "_batch_id": pa.array(np.full(rows, version, dtype=np.int64)),
        }
    )


def append_versions(spark: SparkSession, path: Path, first: int, count: int) -> float:
    """Append `count` bronze versions through delta-spark, one commit each; returns seconds."""
    from delta_tables.writes import append

    started = time.perf_counter()
    for version in range(first, first + count):
        append(
            # One Parquet file per version, as the bronze job writes a one-file batch.
            spark.createDataFrame(bronze_batch(version)).coalesce(1),
            path,
            partition_by=["event_date"],
            app_id=APP_ID,
            version=version,
        )
    return time.perf_counter() - started


def serve_writes(home: Path) -> None:
    """The writer child: create the bronze table, answer `ready`, then for each `<first>
    <count>` line on stdin append those versions and answer the seconds it took."""
    from core.config import RunoffConfig
    from delta_tables.catalog import Catalog, ensure_table
    from jobs.spark import get_spark
    from jobs.streaming.dataset import load_dataset

    # Answers go to the original stdout; anything else written there (the JVM inherits the
    # descriptor) goes to stderr instead.
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    config = RunoffConfig.from_sources(home=home, spark_master="local[2]", env={})
    spark = get_spark(app_name="bench-validate-writer", config=config)
    try:
        catalog = Catalog.load(config)
        schema = load_dataset(catalog, "events").full_bronze_schema
        ensure_table(spark, catalog.tables("events").bronze, schema)
        print("ready", file=answers, flush=True)
        for line in sys.stdin:
            first, count = (int(x) for x in line.split())
            seconds = append_versions(spark, config.bronze_path("events"), first, count)
            print(f"{seconds:.6f}", file=answers, flush=True)
    finally:
        spark.stop()


class BronzeWriter:
    """The parent's handle on the writer child (`serve_writes`)."""

    def __init__(self, home: Path) -> None:
        started = time.perf_counter()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.bench_validate", "--writer", str(home)],
            cwd=REPO_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._answer()
        self.start_seconds = time.perf_counter() - started

    def _answer(self) -> str:
        stdout: IO[str] | None = self.process.stdout
        assert stdout is not None
        line = stdout.readline()
        if not line:
            code = self.process.wait()
            raise RuntimeError(f"the bronze writer process exited with code {code}")
        return line.strip()

    def write(self, first: int, count: int) -> float:
        """Append versions first..first+count-1; the seconds the appends took in the child."""
        stdin: IO[str] | None = self.process.stdin
        assert stdin is not None
        stdin.write(f"{first} {count}\n")
        stdin.flush()
        return float(self._answer())

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def timed_validation(config: Any, full: bool = False) -> dict[str, Any]:
    from quality.runner import validate_dataset

    started = time.perf_counter()
    report = validate_dataset(config, "events", layers=("bronze",), full=full)
    seconds = time.perf_counter() - started
    bronze = next(t for t in report.tables if t.table == "bronze_events")
    assert report.passed, report.failure_message()
    return {"seconds": round(seconds, 3), "rows": bronze.rows, "versions": bronze.versions}


def main() -> dict[str, Any]:
    from core.config import RunoffConfig

    load_before = load_average()
    started_all = time.perf_counter()
    started = time.perf_counter()
    import quality.suites  # noqa: F401 - importing Great Expectations is not what is measured

    import_seconds = time.perf_counter() - started

    with tempfile.TemporaryDirectory(prefix="bench-validate-") as tmp:
        config = RunoffConfig.from_sources(home=tmp, env={})
        writer = BronzeWriter(config.home)
        try:
            write_small = writer.write(0, SMALL_VERSIONS)
            first_small = timed_validation(config)  # no history yet: the whole table (+ GX)
            increments_small = []
            version = SMALL_VERSIONS
            for _ in range(INCREMENT_REPEATS):
                writer.write(version, 1)
                version += 1
                increments_small.append(timed_validation(config))

            grow = LARGE_VERSIONS - version
            write_large = writer.write(version, grow)
            version += grow
            catch_up = timed_validation(config)  # an increment of `grow` versions
            increments_large = []
            for _ in range(INCREMENT_REPEATS):
                writer.write(version, 1)
                version += 1
                increments_large.append(timed_validation(config))
            full_large = timed_validation(config, full=True)
        finally:
            writer.close()
    total_seconds = time.perf_counter() - started_all
    load_after = load_average()

    def median(runs: list[dict[str, Any]]) -> float:
        return round(statistics.median(r["seconds"] for r in runs), 3)

    small_inc = median(increments_small)
    large_inc = median(increments_large)
    details: dict[str, Any] = {
        "rows_per_version": ROWS_PER_VERSION,
        "bronze_writer": "delta-spark (delta_tables.writes.append), in a child process",
        "writer_start_seconds": round(writer.start_seconds, 3),
        "import_seconds": round(import_seconds, 3),
        "total_seconds": round(total_seconds, 1),
        # Other work on the machine inflates every number alike; this says how busy it was.
        "load_average_before": load_before,
        "load_average_after": load_after,
        "small_table": {
            "versions": SMALL_VERSIONS + INCREMENT_REPEATS,
            "write_seconds": round(write_small, 3),
            "first_validation": first_small,
            "increments": increments_small,
            "increment_median_seconds": small_inc,
        },
        "large_table": {
            "versions": version,
            "rows": version * ROWS_PER_VERSION,
            "write_seconds": round(write_large, 3),
            "catch_up_increment": catch_up,
            "increments": increments_large,
            "increment_median_seconds": large_inc,
            "full": full_large,
        },
        "repetitions": INCREMENT_REPEATS,
    }
    document = write_result(
        "validate",
        "Validation of a 1-file increment vs the whole table (events bronze appended through "
        "delta-spark; validation reads with delta-rs and checks with GX).",
        [
            metric(
                f"1-file increment on a {version}-version table",
                large_inc,
                unit="s",
                baseline=small_inc,
                baseline_label=f"same on a {SMALL_VERSIONS + INCREMENT_REPEATS}-version table",
                target="<= 1.20",
            ),
            metric(
                f"--full on the {version}-version table",
                full_large["seconds"],
                unit="s",
                baseline=large_inc,
                baseline_label="1-file increment, same table",
            ),
        ],
        params=details,
    )
    (results_dir() / "validate.md").write_text(markdown(document))
    return document


def markdown(document: dict[str, Any]) -> str:
    result = document["params"]
    small, large = result["small_table"], result["large_table"]

    def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
        return sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]

    rows = [
        ("first validation: whole table (creates the GX project)", small["first_validation"]),
        (f"1-file increment, {small['versions']}-version table", median_run(small["increments"])),
        ("catch-up increment after growing the table", large["catch_up_increment"]),
        (f"1-file increment, {large['versions']}-version table", median_run(large["increments"])),
        (f"--full, {large['versions']}-version table", large["full"]),
    ]
    lines = [
        "# validate: increment vs whole table",
        "",
        f"events bronze appended through delta-spark, {result['rows_per_version']:,} rows per "
        "version (one Parquet file per day partition; version 0 creates the table), "
        f"{document['machine']['cpus']} CPUs, measured {document['measured_at']}; "
        "seconds of `validate_dataset(layers=('bronze',))` after imports "
        f"(increments: the median of {INCREMENT_REPEATS} runs).",
        "",
        "| step | versions validated | rows read | seconds |",
        "|---|---|---:|---:|",
        *(f"| {step} | {r['versions']} | {r['rows']:,} | {r['seconds']} |" for step, r in rows),
        "",
        f"Increment medians: {small['increment_median_seconds']} s on the small table, "
        f"{large['increment_median_seconds']} s on the large one "
        f"({document['metrics'][0]['ratio']}x); --full takes "
        f"{document['metrics'][1]['ratio']}x the increment on the large table.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--writer"]:
        serve_writes(Path(sys.argv[2]))
    else:
        print(json.dumps(main(), indent=2))
