"""Delta sink vs Spark's native Parquet sink: 1,000,000 landing events -> bronze-like table.

Input: ~20 JSON-lines files of `{"time": <epoch s>, "action": "Open"|"Close"}` generated into a
scratch directory (seeded). Each run is one streaming query with `trigger(availableNow=True)`:
parse the JSON, add `event_time`/`event_date`, write partitioned by `event_date` to
- Spark's native Parquet sink (the baseline),
- delta-spark's sink, `writeStream.format("delta")`,
- delta-spark through `foreachBatch`: `batch_df.write.format("delta").mode("append")` with
  `txnAppId` = the streaming query id (from the checkpoint's `metadata` file) and
  `txnVersion` = the batch id, so a replayed batch is skipped (what runoff's bronze does).
All three run in one SparkSession (`jobs.spark.get_spark`, delta-spark's jars and extension).
Every variant runs once on the full data as a warm-up, then the runs are interleaved
(round-robin) and every output is checked to hold all events. Load averages are recorded before
and after each timed run. Output: `benchmarks/results/delta_sink.json` (medians, ratio =
Delta / Parquet, target <= 1.10).

    uv run --frozen python -m benchmarks.bench_delta_sink
"""

from __future__ import annotations

import json
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.result import load_average, metric, write_result
from delta_tables.arrow import count_rows as count_delta_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

EVENTS = 1_000_000
FILES = 20
REPETITIONS = 3
START_EPOCH = 1_700_000_000
SPAN_SECONDS = 8 * 24 * 3600
WORK_DIR = Path(__file__).resolve().parent / "work"
TARGET = "<= 1.10"

Runner = Callable[["SparkSession", Path, Path], None]


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

    return (
        spark.readStream.schema("time BIGINT, action STRING")  # jobs/datasets/events.yaml
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
        .partitionBy("event_date")
        .option("checkpointLocation", str(out / "_checkpoint"))
        .trigger(availableNow=True)
        .start(str(out / "table"))
        .awaitTermination()
    )


def query_id(checkpoint: Path) -> str:
    """The streaming query id Spark persists in `<checkpointLocation>/metadata`."""
    return str(json.loads((checkpoint / "metadata").read_text(encoding="utf-8"))["id"])


def run_delta_foreach_batch(spark: SparkSession, landing: Path, out: Path) -> None:
    checkpoint = out / "_checkpoint"
    table = str(out / "table")

    def write(batch_df: DataFrame, batch_id: int) -> None:
        (
            batch_df.write.format("delta")
            .mode("append")
            .partitionBy("event_date")
            .option("txnAppId", query_id(checkpoint))
            .option("txnVersion", batch_id)
            .save(table)
        )

    (
        events_stream(spark, landing)
        .writeStream.foreachBatch(write)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
        .awaitTermination()
    )


RUNNERS: dict[str, Runner] = {
    "parquet": run_parquet,
    "delta_sink": run_delta_sink,
    "delta_foreach_batch": run_delta_foreach_batch,
}


def count_rows(name: str, table: Path) -> int:
    import pyarrow.dataset as ds

    if name == "parquet":
        return int(ds.dataset(str(table), format="parquet", partitioning="hive").count_rows())
    return count_delta_rows(str(table))


def measure(
    spark: SparkSession, landing: Path, scratch: Path
) -> tuple[dict[str, list[float]], dict[str, list[dict[str, list[float]]]]]:
    """Seconds per run and load averages (1/5/15 min) before and after it, per variant."""
    # Warm-up: every variant once on the full data, so the JVM has compiled the hot paths.
    for name, runner in RUNNERS.items():
        runner(spark, landing, scratch / f"warm-{name}")
        shutil.rmtree(scratch / f"warm-{name}", ignore_errors=True)
    timings: dict[str, list[float]] = {name: [] for name in RUNNERS}
    loads: dict[str, list[dict[str, list[float]]]] = {name: [] for name in RUNNERS}
    for rep in range(REPETITIONS):
        for name, runner in RUNNERS.items():
            out = scratch / f"{name}-{rep}"
            before = load_average()
            started = time.perf_counter()
            runner(spark, landing, out)
            timings[name].append(time.perf_counter() - started)
            loads[name].append({"before": before, "after": load_average()})
            rows = count_rows(name, out / "table")
            if rows != EVENTS:
                raise RuntimeError(f"{name} run {rep} wrote {rows} rows, expected {EVENTS}")
            shutil.rmtree(out, ignore_errors=True)
    return timings, loads


def main() -> dict[str, Any]:
    from core.config import RunoffConfig
    from jobs.spark import get_spark

    WORK_DIR.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="bench_delta_sink-", dir=WORK_DIR))
    load_start = load_average()
    try:
        landing = scratch / "landing"
        generate(landing)
        spark = get_spark(
            "bench-delta-sink", RunoffConfig.from_sources(home=scratch / "home", env={})
        )
        try:
            timings, loads = measure(spark, landing, scratch)
        finally:
            spark.stop()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    load_end = load_average()
    medians = {name: statistics.median(values) for name, values in timings.items()}
    for name, values in timings.items():
        print(f"{name:>20}: median {medians[name]:.2f} s  runs {[round(v, 2) for v in values]}")
    for name in ("delta_sink", "delta_foreach_batch"):
        print(f"{name} / parquet = {medians[name] / medians['parquet']:.3f}")
    baseline = round(medians["parquet"], 3)
    return write_result(
        "delta_sink",
        f"Streaming ingest (availableNow) of {EVENTS:,} JSON events into a table partitioned by "
        "event_date: delta-spark (format('delta') sink, and foreachBatch with txnAppId/"
        "txnVersion as runoff's bronze) vs Spark's native Parquet sink.",
        [
            metric(
                "ingest time, delta-spark format('delta') sink",
                round(medians["delta_sink"], 3),
                unit="s",
                baseline=baseline,
                baseline_label="Spark Parquet sink",
                target=TARGET,
            ),
            metric(
                "ingest time, delta-spark foreachBatch (txnAppId/txnVersion)",
                round(medians["delta_foreach_batch"], 3),
                unit="s",
                baseline=baseline,
                baseline_label="Spark Parquet sink",
                target=TARGET,
            ),
        ],
        params={
            "events": EVENTS,
            "files": FILES,
            "repetitions": REPETITIONS,
            "warm_up": "every variant once on the full data, not measured",
            "partition_by": "event_date",
            "runs_s": {name: [round(v, 3) for v in values] for name, values in timings.items()},
            # Each round runs the writers back to back: ratios within a round are the least
            # sensitive to load from other processes on a shared machine.
            "ratio_per_round": {
                name: [
                    round(v / p, 3) for v, p in zip(timings[name], timings["parquet"], strict=True)
                ]
                for name in ("delta_sink", "delta_foreach_batch")
            },
            "load_average_1_5_15": {"start": load_start, "end": load_end, "runs": loads},
        },
    )


if __name__ == "__main__":
    main()
