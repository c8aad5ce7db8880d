"""Batch read throughput: `spark.read.format("delta")` vs Spark's Parquet reader on the same files.

Input: a bronze-like Delta table (2,000,000 events: time, action, event_time; partitioned by
event_date over 8 days) written once with runoff's file writer. Two queries, each run on both
readers, interleaved, median of 3 after a warm-up:
- full scan: every column of every row materialized (`write.format("noop")`);
- one day: `event_date = <day>` (partition pruning), materialized the same way.
The Parquet baseline reads the table directory as plain Parquet (it holds exactly the table's
files: one commit, nothing removed). Output: `benchmarks/results/delta_read.json`.

    uv run --frozen python -m benchmarks.bench_delta_read
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.result import metric, write_result

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ROWS = 2_000_000
DAYS = 8
CHUNK = 250_000
REPETITIONS = 3
WORK_DIR = Path(__file__).resolve().parent / "work"
FIRST_DAY = date(2024, 1, 1)


def build_table(path: Path, rows: int = ROWS, seed: int = 11) -> None:
    """A bronze-like Delta table written by runoff's writer (one commit)."""
    import numpy as np
    import pyarrow as pa
    from pyspark.sql.types import DateType, LongType, StringType, StructField, StructType
    from pyspark.sql.types import TimestampType as Ts

    from delta_tables.commit import commit_write
    from delta_tables.files import FileWriter, WriteSpec

    first_day = (FIRST_DAY - date(1970, 1, 1)).days
    schema = StructType(
        [
            StructField("time", LongType()),
            StructField("action", StringType()),
            StructField("event_time", Ts()),
            StructField("event_date", DateType()),
        ]
    )
    rng = np.random.default_rng(seed)
    start = int(datetime(FIRST_DAY.year, FIRST_DAY.month, FIRST_DAY.day, tzinfo=UTC).timestamp())
    spec = WriteSpec(str(path), schema.json(), tuple(schema.fieldNames()), ("event_date",))
    files = []
    for offset in range(0, rows, CHUNK):
        n = min(CHUNK, rows - offset)
        times = np.sort(start + rng.integers(0, DAYS * 86_400, n))
        actions = np.where(rng.random(n) < 0.5, "Open", "Close")
        chunk = pa.table(
            {
                "time": pa.array(times, pa.int64()),
                "action": pa.array(actions, pa.string()),
                "event_time": pa.array(times * 1_000_000, pa.int64()).cast(
                    pa.timestamp("us", tz="UTC")
                ),
                "event_date": pa.array(((times - start) // 86_400 + first_day), pa.int32()).cast(
                    pa.date32()
                ),
            }
        )
        files.extend(FileWriter(spec).write_all([chunk]))
    commit_write(str(path), files, schema=schema, partition_by=("event_date",))


def materialize(df: DataFrame) -> None:
    df.write.format("noop").mode("overwrite").save()


def queries(spark: SparkSession, table: Path) -> dict[str, dict[str, Any]]:
    day = (FIRST_DAY + timedelta(days=3)).isoformat()
    return {
        "full scan": {
            "delta": lambda: spark.read.format("delta").load(str(table)),
            "parquet": lambda: spark.read.parquet(str(table)),
        },
        "one day (partition filter)": {
            "delta": lambda: (
                spark.read.format("delta").load(str(table)).where(f"event_date = '{day}'")
            ),
            "parquet": lambda: spark.read.parquet(str(table)).where(f"event_date = '{day}'"),
        },
    }


def main() -> dict[str, Any]:
    from jobs.config import RunoffConfig
    from jobs.spark import get_spark

    WORK_DIR.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="bench_delta_read-", dir=WORK_DIR))
    timings: dict[str, dict[str, list[float]]] = {}
    try:
        table = scratch / "bronze"
        build_table(table)
        spark = get_spark(
            "bench-delta-read", RunoffConfig.from_sources(home=scratch / "home", env={})
        )
        plan = queries(spark, table)
        for readers in plan.values():  # warm-up, and both readers must agree on the row count
            counts = {name: make().count() for name, make in readers.items()}
            if counts["delta"] != counts["parquet"]:
                raise RuntimeError(f"row counts differ: {counts}")
            for make in readers.values():
                materialize(make())
        for query, readers in plan.items():
            timings[query] = {name: [] for name in readers}
            for _ in range(REPETITIONS):
                for name, make in readers.items():
                    started = time.perf_counter()
                    materialize(make())
                    timings[query][name].append(time.perf_counter() - started)
        spark.stop()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    metrics = []
    for query, runs in timings.items():
        delta_s = statistics.median(runs["delta"])
        parquet_s = statistics.median(runs["parquet"])
        print(
            f"{query}: delta {delta_s:.2f} s, parquet {parquet_s:.2f} s, "
            f"ratio {delta_s / parquet_s:.2f}"
        )
        metrics.append(
            metric(
                f"{query} time",
                round(delta_s, 3),
                unit="s",
                baseline=round(parquet_s, 3),
                baseline_label="Spark Parquet reader, same files",
            )
        )
    full = statistics.median(timings["full scan"]["delta"])
    metrics.append(metric("full scan throughput", round(ROWS / full), unit="rows/s"))
    return write_result(
        "delta_read",
        f"Batch reads of a {ROWS:,}-row Delta table partitioned by event_date: "
        "format('delta') (delta-rs plan + pyarrow per file group) vs Spark's Parquet reader.",
        metrics,
        params={
            "rows": ROWS,
            "days": DAYS,
            "repetitions": REPETITIONS,
            "runs_s": {
                q: {k: [round(v, 3) for v in vs] for k, vs in r.items()} for q, r in timings.items()
            },
        },
    )


if __name__ == "__main__":
    main()
