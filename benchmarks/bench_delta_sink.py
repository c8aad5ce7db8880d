"""Delta sink vs Spark's native Parquet sink: 1,000,000 landing events -> bronze-like table.

Input: ~20 JSON-lines files of `{"time": <epoch s>, "action": "Open"|"Close"}` generated into a
scratch directory (seeded). Each run is one streaming query with `trigger(availableNow=True)`:
parse the JSON, add `event_time`/`event_date`, write partitioned by `event_date` to
- Spark's native Parquet sink (the baseline),
- `writeStream.format("delta")` (runoff's Python data-source sink: Arrow batches to Python
  workers, pyarrow Parquet files, one delta-rs commit per batch),
- `foreachBatch(delta_tables.foreach_batch_writer(...))` (the fast path: Spark's Parquet writer,
  then one delta-rs commit of the files with stats from their footers).
Runs are interleaved (round-robin) after a warm-up and every output is checked to hold all
events. Output: `benchmarks/results/delta_sink.json` (medians, ratio = Delta / Parquet).

    uv run --frozen python -m benchmarks.bench_delta_sink
"""

from __future__ import annotations

import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.result import metric, write_result
from delta_tables.arrow import count_rows as count_delta_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

EVENTS = 1_000_000
FILES = 20
REPETITIONS = 3
START_EPOCH = 1_700_000_000
SPAN_SECONDS = 8 * 24 * 3600
WORK_DIR = Path(__file__).resolve().parent / "work"


def generate(directory: Path, events: int = EVENTS, files: int = FILES, seed: int = 7) -> None:
    """JSON-lines landing files: `{"time": <epoch seconds>, "action": "Open"|"Close"}`."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    per_file = events // files
    for index in range(files):
        count = per_file if index < files - 1 else events - per_file * (files - 1)
        lines = [
            f'{{"time": {START_EPOCH + rng.randrange(SPAN_SECONDS)}, '
            f'"action": "{"Open" if rng.random() < 0.5 else "Close"}"}}'
            for _ in range(count)
        ]
        (directory / f"events-{index:03d}.json").write_text("\n".join(lines) + "\n")


def events_stream(spark: SparkSession, landing: Path) -> DataFrame:
    from pyspark.sql import functions as F

    from jobs.datasets.events import RECORD_SCHEMA

    return (
        spark.readStream.schema(RECORD_SCHEMA)
        .json(str(landing))
        .withColumn("event_time", F.col("time").cast("timestamp"))
        .withColumn("event_date", F.to_date("event_time"))
    )


def run_parquet(spark: SparkSession, landing: Path, out: Path) -> None:
    (
        events_stream(spark, landing)
        .writeStream.format("parquet")
        .partitionBy("event_date")
        .option("checkpointLocation", str(out / "_checkpoint"))
        .trigger(availableNow=True)
        .start(str(out / "table"))
        .awaitTermination()
    )


def run_delta_sink(spark: SparkSession, landing: Path, out: Path) -> None:
    (
        events_stream(spark, landing)
        .writeStream.format("delta")
        .option("partitionBy", "event_date")
        .option("checkpointLocation", str(out / "_checkpoint"))
        .trigger(availableNow=True)
        .start(str(out / "table"))
        .awaitTermination()
    )


def run_delta_fast(spark: SparkSession, landing: Path, out: Path) -> None:
    from delta_tables import write_stream

    write_stream(
        events_stream(spark, landing),
        out / "table",
        checkpoint_location=out / "_checkpoint",
        partition_by=["event_date"],
        fast_path=True,
    ).awaitTermination()


def count_rows(kind: str, table: Path) -> int:
    import pyarrow.dataset as ds

    if kind == "parquet":
        return int(ds.dataset(str(table), format="parquet", partitioning="hive").count_rows())
    return count_delta_rows(str(table))


def main() -> dict[str, Any]:
    from jobs.config import RunoffConfig
    from jobs.spark import get_spark

    WORK_DIR.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="bench_delta_sink-", dir=WORK_DIR))
    try:
        landing = scratch / "landing"
        generate(landing)
        spark = get_spark(
            "bench-delta-sink", RunoffConfig.from_sources(home=scratch / "home", env={})
        )
        runners: dict[str, Callable[[SparkSession, Path, Path], None]] = {
            "parquet": run_parquet,
            "delta_sink": run_delta_sink,
            "delta_fast_path": run_delta_fast,
        }
        # Warm-up: JVM code paths and Python workers for every variant (not measured).
        warm = scratch / "warm-landing"
        generate(warm, events=20_000, files=2)
        for name, runner in runners.items():
            runner(spark, warm, scratch / f"warm-{name}")
        timings: dict[str, list[float]] = {name: [] for name in runners}
        for rep in range(REPETITIONS):
            for name, runner in runners.items():
                out = scratch / f"{name}-{rep}"
                started = time.perf_counter()
                runner(spark, landing, out)
                timings[name].append(time.perf_counter() - started)
                rows = count_rows("parquet" if name == "parquet" else "delta", out / "table")
                if rows != EVENTS:
                    raise RuntimeError(f"{name} run {rep} wrote {rows} rows, expected {EVENTS}")
                shutil.rmtree(out, ignore_errors=True)
        spark.stop()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    medians = {name: statistics.median(values) for name, values in timings.items()}
    for name, values in timings.items():
        print(f"{name:>16}: median {medians[name]:.2f} s  runs {[round(v, 2) for v in values]}")
    for name in ("delta_sink", "delta_fast_path"):
        print(f"{name} / parquet = {medians[name] / medians['parquet']:.3f}")
    return write_result(
        "delta_sink",
        f"Streaming ingest (availableNow) of {EVENTS:,} JSON events into a table partitioned by "
        "event_date: runoff's Delta writers vs Spark's native Parquet sink.",
        [
            metric(
                "ingest time, format('delta') sink",
                round(medians["delta_sink"], 3),
                unit="s",
                baseline=round(medians["parquet"], 3),
                baseline_label="Spark Parquet sink",
                target="<= 1.10",
            ),
            metric(
                "ingest time, foreachBatch fast path",
                round(medians["delta_fast_path"], 3),
                unit="s",
                baseline=round(medians["parquet"], 3),
                baseline_label="Spark Parquet sink",
                target="<= 1.10",
            ),
        ],
        params={
            "events": EVENTS,
            "files": FILES,
            "repetitions": REPETITIONS,
            "partition_by": "event_date",
            "runs_s": {name: [round(v, 3) for v in values] for name, values in timings.items()},
            # Each round runs the three writers back to back: ratios within a round are the
            # least sensitive to load from other processes on a shared machine.
            "ratio_per_round": {
                name: [
                    round(v / p, 3) for v, p in zip(timings[name], timings["parquet"], strict=True)
                ]
                for name in ("delta_sink", "delta_fast_path")
            },
        },
    )


if __name__ == "__main__":
    main()
