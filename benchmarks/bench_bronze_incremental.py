"""Bronze run time per increment stays flat on top of a long history of ingested files.

In a scratch runoff home (`benchmarks/work/bronze_incremental`): land `HISTORY_FILES` small
`events` files and ingest them (`jobs.bronze.job.run_bronze`, `HISTORY_BATCH_FILES` files per
micro-batch, so the checkpoint's file-source log, the bronze table's log and the archive all carry
that history), then land one file at a time and run bronze after each, `INCREMENTS` times, in one
process on one SparkSession, timing every run (`RunRecord.seconds`: lock, checks, query start,
the batch, ledger row).

What keeps the cost flat: ingested files are archived out of the landing folder
(`cleanSource=archive`), so the file source lists only what is new; its metadata log is
compacted (`spark.sql.streaming.fileSource.log.compactInterval`, 10); the Delta tables are
checkpointed by delta-spark every `RunoffConfig.checkpoint_interval` commits
(`delta.checkpointInterval`), so opening them replays at most that many JSON commits.

Reported (medians, so that one noisy run on a shared machine does not decide): the last
`WINDOW` increments against the `WINDOW` increments after the first `WARMUP` (the JVM's JIT
still speeds up the first few runs); target: within 1.2x. The machine's load averages (1/5/15
min) before and after are in `params`.
Writes `benchmarks/results/bronze_incremental.json`. Run:
`uv run --frozen python -m benchmarks.bench_bronze_incremental` (about 3-4 minutes on 2 cores).
"""

from __future__ import annotations

import shutil
import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HISTORY_FILES = 1_000
HISTORY_BATCH_FILES = 200
ROWS_PER_FILE = 20
INCREMENTS = 30
WARMUP = 5
WINDOW = 5
DATASET = "events"
START = datetime(2024, 1, 1, tzinfo=UTC)
WORK = Path(__file__).resolve().parent / "work" / "bronze_incremental"


def landing_listing(landing: Path) -> int:
    return sum(1 for p in landing.rglob("*") if p.is_file())


def main() -> dict[str, Any]:
    from benchmarks.result import load_average, metric, write_result
    from core.config import RunoffConfig
    from delta_tables.writes import table_version
    from jobs.bronze.job import BronzeOptions, run_bronze
    from jobs.samples import generate_dataset
    from jobs.spark import get_spark

    load_before = load_average()
    started_all = time.perf_counter()
    shutil.rmtree(WORK, ignore_errors=True)
    config = RunoffConfig.from_sources(home=WORK, spark_master="local[2]", env={})
    spark = get_spark(app_name="bench-bronze-incremental", config=config)
    try:
        started = time.perf_counter()
        generate_dataset(
            config, DATASET, files=HISTORY_FILES, rows_per_file=ROWS_PER_FILE, start=START, seed=1
        )
        landed_s = time.perf_counter() - started
        history = run_bronze(
            spark, config, DATASET, BronzeOptions(max_files_per_trigger=HISTORY_BATCH_FILES)
        )
        assert history.files == HISTORY_FILES, history
        print(
            f"history: {HISTORY_FILES} files landed in {landed_s:.1f} s, ingested in "
            f"{history.seconds:.1f} s ({history.batches} batches)"
        )

        seconds: list[float] = []
        listed: list[int] = []
        next_start = START + timedelta(days=30)
        for i in range(INCREMENTS):
            generate_dataset(
                config, DATASET, files=1, rows_per_file=ROWS_PER_FILE, start=next_start, seed=i
            )
            next_start += timedelta(hours=1)
            listed.append(landing_listing(config.landing_dir(DATASET)))
            record = run_bronze(spark, config, DATASET)
            assert (record.files, record.rows) == (1, ROWS_PER_FILE), record
            seconds.append(record.seconds)
            print(f"increment {i + 1}: {record.seconds:.2f} s ({listed[-1]} files in landing)")
    finally:
        spark.stop()
    total_seconds = time.perf_counter() - started_all
    load_after = load_average()

    first = statistics.median(seconds[WARMUP : WARMUP + WINDOW])
    last = statistics.median(seconds[-WINDOW:])
    return write_result(
        "bronze_incremental",
        f"Bronze run time for one new file on top of {HISTORY_FILES:,} ingested files: "
        f"the last {WINDOW} of {INCREMENTS} single-file increments against the first {WINDOW}.",
        [
            metric(
                "run time per increment",
                round(last, 3),
                unit="s",
                baseline=round(first, 3),
                baseline_label=f"increments {WARMUP + 1}-{WARMUP + WINDOW}",
                target="<= 1.2",
            ),
            metric(
                "history ingest",
                round(HISTORY_FILES / history.seconds, 1),
                unit="files/s",
            ),
        ],
        params={
            "dataset": DATASET,
            "history_files": HISTORY_FILES,
            "history_batch_files": HISTORY_BATCH_FILES,
            "rows_per_file": ROWS_PER_FILE,
            "increments": INCREMENTS,
            "warmup": WARMUP,
            "window": WINDOW,
            "statistic": "median",
            "increment_seconds": [round(s, 3) for s in seconds],
            "files_in_landing_before_each_run": listed,
            "bronze_version_after": table_version(config.bronze_path(DATASET)),
            "history_seconds": round(history.seconds, 2),
            "total_seconds": round(total_seconds, 1),
            "load_average_before": load_before,
            "load_average_after": load_after,
        },
    )


if __name__ == "__main__":
    main()
