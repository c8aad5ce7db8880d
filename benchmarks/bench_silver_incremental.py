"""Silver run time per increment stays flat as history grows; MERGE time per batch too.

Builds a `sensors` bronze table in a scratch runoff home (`benchmarks/work/silver_incremental`)
and appends one increment at a time, as an hourly schedule would: `SIGNALS_PER_HOUR` signals of
the sensors generator's 20 devices (about 75 minutes of event time), thinned to every `THIN`-th
(`ROWS_PER_INCREMENT` rows, a signal per device about every 10 seconds, so that 30 increments
run in minutes), one bronze commit. The bronze table is created and appended to through
delta-spark, as the bronze job does (`delta_tables.catalog.ensure_table`, then
`delta_tables.writes.append` partitioned by `event_date`, one app transaction per increment);
delta-rs only reads (table sizes, the MERGE commits' metrics). After each increment, it runs
`runoff silver sensors` (`run_silver`: `sensors_device_counts`, `sensors_type_signal`,
`sensors_lost_signal` in one session). The increments cross midnight; `sensors_device_counts`
grows by about 6,300 rows per increment.

What keeps a MERGE from growing with the table: the `window_start` range in its condition (files
of older windows are skipped by their statistics) and the `window_date` partitions (a
copy-on-write MERGE rewrites at most the files of its batch's day). So the rows a MERGE rewrites
follow the hour of the day, not the length of the history; `params.per_increment` lists them
(`numTargetRowsCopied` of delta-spark's MERGE commits, read from the table's history).

Reported (medians; the first `WARMUP` increments are left out: JVM and Python worker warm-up):
- run time per increment: the last `WINDOW` increments against increments WARMUP..WARMUP+WINDOW-1
  (target: flat within 1.2x);
- MERGE time per committed batch over the same two windows (target: within 1.2x);
- the most rows one MERGE of `sensors_device_counts` rewrote, against the table's final size
  (no target: it is bounded by a day's rows, whatever the history).
The machine's load averages (1/5/15 min) before and after the run, and the 1-minute load after
each increment, are in `params`.
Writes `benchmarks/results/silver_incremental.json`. Run:
`uv run --frozen python -m benchmarks.bench_silver_incremental` (about 5 minutes on 2 idle cores;
longer on a shared machine).
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from core.config import RunoffConfig

INCREMENTS = 30
WARMUP = 2
WINDOW = 5
SIGNALS_PER_HOUR = 28_800  # 20 devices, one signal every 2-3 s
THIN = 4
ROWS_PER_INCREMENT = SIGNALS_PER_HOUR // THIN
SEED = 7
START = datetime(2024, 3, 1, tzinfo=UTC)
WORK = Path(__file__).resolve().parent / "work" / "silver_incremental"
DATASET = "sensors"
# The app transaction of the bronze appends (as the bronze job's query id would be).
APP_ID = "bench-silver-incremental"


def increments() -> list[list[Any]]:
    """The generator's records of one hour per increment (time-ordered), every THIN-th kept."""
    from jobs.samples import GENERATORS

    spec = GENERATORS[DATASET]
    rng = random.Random(f"runoff/{DATASET}/{SEED}/records")
    built: list[list[Any]] = spec.build(rng, START, INCREMENTS + WARMUP, SIGNALS_PER_HOUR)
    return [records[::THIN] for records in built]


def bronze_rows(records: list[Any], batch: int, schema: pa.Schema) -> pa.Table:
    """Bronze rows of one increment, as the bronze job writes them."""
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    ingested = datetime.now(UTC)
    rows = []
    for record in records:
        value = record.value
        moment = epoch + timedelta(microseconds=record.time_us)
        rows.append(
            {
                "timestamp": moment,
                "deviceId": value["deviceId"],
                "deviceType": value["deviceType"],
                "signalStrength": float(value["signalStrength"]),
                "event_time": moment,
                "event_date": moment.date(),
                "_source_file": f"landing/{DATASET}/date={moment.date()}/part-{batch:05d}.json",
                "_ingested_at": ingested,
                "_batch_id": batch,
            }
        )
    return pa.Table.from_pylist(rows, schema=schema)


def write_bronze(spark: SparkSession, config: RunoffConfig, rows: pa.Table, batch: int) -> float:
    """Append one increment to bronze through delta-spark (one commit); returns its seconds."""
    from delta_tables.writes import append

    started = time.perf_counter()
    append(
        # One Parquet file per day partition, as the bronze job writes a one-file batch.
        spark.createDataFrame(rows).coalesce(1),
        config.bronze_path(DATASET),
        partition_by=["event_date"],
        app_id=APP_ID,
        version=batch,
    )
    return time.perf_counter() - started


def table_size(path: Path) -> tuple[int, int]:
    """(rows, data files) of a Delta table (read with delta-rs)."""
    from deltalake import DeltaTable

    dt = DeltaTable(str(path))
    return int(dt.count()), len(dt.file_uris())


def rows_copied(path: Path, after: int, through: int) -> list[int]:
    """`numTargetRowsCopied` of each MERGE commit in versions (after, through]: the unchanged
    target rows each MERGE rewrote (copy-on-write), from the commits' metrics (delta-rs read)."""
    from deltalake import DeltaTable

    if through <= after:
        return []
    commits = DeltaTable(str(path)).history(limit=through - max(after, -1))
    return [
        int((commit.get("operationMetrics") or {}).get("numTargetRowsCopied") or 0)
        for commit in sorted(commits, key=lambda c: int(c["version"]))
        if int(commit["version"]) > after and commit.get("operation") == "MERGE"
    ]


def median(values: list[float]) -> float:
    return round(statistics.median(values), 4)


def main() -> dict[str, Any]:
    from pyspark.sql.pandas.types import to_arrow_schema

    from benchmarks.result import load_average, metric, write_result
    from core.config import RunoffConfig
    from delta_tables.catalog import Catalog, ensure_table
    from jobs.silver import run_silver
    from jobs.spark import get_spark
    from jobs.streaming.dataset import load_dataset

    load_before = load_average()
    started_all = time.perf_counter()
    shutil.rmtree(WORK, ignore_errors=True)
    (WORK / "home").mkdir(parents=True)
    config = RunoffConfig.from_sources(home=WORK / "home", spark_master="local[2]", env={})
    catalog = Catalog.load(config)
    spark = get_spark(app_name="runoff-bench-silver", config=config)
    dataset = load_dataset(catalog, DATASET)
    schema = to_arrow_schema(dataset.full_bronze_schema, timezone="UTC")
    ensure_table(spark, catalog.tables(DATASET).bronze, dataset.full_bronze_schema)
    tables = [agg.table for agg in dataset.aggregates]
    counts_table = "sensors_device_counts"
    per_increment: list[dict[str, Any]] = []
    try:
        for i, records in enumerate(increments()):
            bronze_seconds = write_bronze(spark, config, bronze_rows(records, i, schema), i)
            started = time.perf_counter()
            record = run_silver(spark, config, DATASET, report=lambda _line: None)
            seconds = time.perf_counter() - started
            assert record.status == "success", record.error
            details = record.details["tables"]
            merges = [s for t in tables for s in details[t]["merge_seconds"]]
            copied = rows_copied(
                config.silver_path(counts_table),
                record.versions_before[counts_table],
                record.versions_after[counts_table],
            )
            load = os.getloadavg()[0]
            rows, files = table_size(config.silver_path(counts_table))
            per_increment.append(
                {
                    "increment": i,
                    "first_event": records[0].time_us // 1_000_000,
                    "bronze_write_seconds": round(bronze_seconds, 3),
                    "run_seconds": round(seconds, 3),
                    "batches": record.batches,
                    "merge_seconds": [round(s, 4) for s in merges],
                    "device_counts_rows_copied_per_merge": copied,
                    "device_counts_rows": rows,
                    "device_counts_files": files,
                    "load_average_1m": round(load, 2),
                }
            )
            print(
                f"increment {i}: bronze append {bronze_seconds:.2f} s, silver {seconds:.2f} s, "
                f"{record.batches} batches, "
                f"MERGE median {median(merges) if merges else 0:.3f} s, "
                f"sensors_device_counts {rows} rows in {files} files, "
                f"rows rewritten per MERGE {copied}, load {load:.1f}",
                flush=True,
            )
    finally:
        spark.stop()
    total_seconds = time.perf_counter() - started_all
    load_after = load_average()

    measured = per_increment[WARMUP:]
    early, late = measured[:WINDOW], measured[-WINDOW:]
    early_run = median([m["run_seconds"] for m in early])
    late_run = median([m["run_seconds"] for m in late])
    early_merge = median([s for m in early for s in m["merge_seconds"]])
    late_merge = median([s for m in late for s in m["merge_seconds"]])
    largest_rewrite = max(
        (n for m in per_increment for n in m["device_counts_rows_copied_per_merge"]), default=0
    )
    final_rows = per_increment[-1]["device_counts_rows"]
    return write_result(
        "silver_incremental",
        f"`runoff silver sensors` after each of {INCREMENTS} hourly increments of "
        f"{ROWS_PER_INCREMENT:,} signals (appended to bronze through delta-spark): run time "
        f"and MERGE time per batch, last {WINDOW} increments against the first {WINDOW} "
        "measured, and the most rows one MERGE "
        f"rewrote (sensors_device_counts grows to {final_rows:,} rows; a MERGE rewrites at most "
        "its day partition). Medians; the machine's load average is in params.",
        [
            metric(
                "silver run time per increment",
                late_run,
                unit="s",
                baseline=early_run,
                baseline_label=f"increments {WARMUP}-{WARMUP + WINDOW - 1}",
                target="<= 1.2",
            ),
            metric(
                "MERGE time per batch",
                late_merge,
                unit="s",
                baseline=early_merge,
                baseline_label=f"increments {WARMUP}-{WARMUP + WINDOW - 1}",
                target="<= 1.2",
            ),
            metric(
                "largest MERGE rewrite of sensors_device_counts",
                largest_rewrite,
                unit="rows",
                baseline=final_rows,
                baseline_label="rows in the table",
            ),
        ],
        params={
            "dataset": DATASET,
            "tables": tables,
            "increments": INCREMENTS,
            "warmup_increments": WARMUP,
            "window": WINDOW,
            "rows_per_increment": ROWS_PER_INCREMENT,
            "spark_master": "local[2]",
            "shuffle_partitions": config.shuffle_partitions,
            "bronze_writer": "delta-spark (delta_tables.writes.append)",
            "statistic": "median",
            "total_seconds": round(total_seconds, 1),
            "load_average_before": load_before,
            "load_average_after": load_after,
            "per_increment": per_increment,
        },
    )


if __name__ == "__main__":
    main()
