"""The silver step of a 1-file increment in a warm driver, against the hand-written job's.

An hourly `events` run in `runoff serve` (or a Python process that holds its session): one new
file of `ROWS` records, bronze, then silver. This benchmark times the silver step, both silver
tables of `events` (`events_action_hourly`: 1-hour windows; `events_action_sliding`: 10 minutes
sliding by 5), in one warm session (`local[2]`, long-lived, as the server's) in a scratch home
(`benchmarks/work/warm_silver`).

History first: `HISTORY` files through `runoff run events`. Then `ROUNDS` rounds: a file lands
(an hour of events after the last, a new seed), `runoff bronze events` ingests it (not timed),
then, timed:
- `runoff silver events`: both streaming queries (availableNow, the aggregation's state in their
  checkpoints), the quality gate on each batch, the MERGE of each batch's windows, the ledger,
  results and metrics rows;
- the baseline, the job a data engineer would write by hand for the same increment: the new
  file's rows read from bronze (by `_source_file`), each table's windows counted, and MERGEd
  into a copy of the table (a matched window adds the increment's count; no state, gate or
  ledger).
The first `WARMUP` rounds are left out. After the last round each copy equals its runoff table
row for row (the two did the same work). Reported (medians): the silver step's seconds (target
from issue: at most 3 s on a quiet machine), and the same over the hand-written job's (no
target). Load averages before, after and at each round are in `params`. Writes
`benchmarks/results/warm_silver.json`. Run:
`uv run --frozen python -m benchmarks.bench_warm_silver` (about 4 minutes on 2 idle cores).
"""

from __future__ import annotations

import shutil
import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ROWS = 2_000
HISTORY = 3
ROUNDS = 7
WARMUP = 2
START = datetime(2024, 5, 1, tzinfo=UTC)
WORK = Path(__file__).resolve().parent / "work" / "warm_silver"
# Each silver table of `events`: its window and slide (jobs/datasets/events.yaml).
TABLES = {
    "events_action_hourly": ("1 hour", None),
    "events_action_sliding": ("10 minutes", "5 minutes"),
}
COLUMNS = ("window_start", "window_end", "action", "count")


def windows(rows: DataFrame, window: str, slide: str | None) -> DataFrame:
    """The rows counted per window and action, as the silver table holds them."""
    from pyspark.sql import functions as F

    grouped = F.window("event_time", window, slide) if slide else F.window("event_time", window)
    return (
        rows.groupBy(grouped.alias("w"), "action")
        .agg(F.count(F.lit(1)).alias("count"))
        .select(
            F.col("w.start").alias("window_start"),
            F.col("w.end").alias("window_end"),
            "action",
            "count",
        )
    )


def hand_written(spark: SparkSession, bronze: str, copies: dict[str, str], file: str) -> None:
    """The hand-written incremental job: the file's rows, counted per window, MERGEd."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    rows = spark.read.format("delta").load(bronze).where(F.col("_source_file").endswith(file))
    for table, (window, slide) in TABLES.items():
        (
            DeltaTable.forPath(spark, copies[table])
            .alias("t")
            .merge(
                windows(rows, window, slide).alias("s"),
                "t.window_start = s.window_start AND t.window_end = s.window_end "
                "AND t.action = s.action",
            )
            .whenMatchedUpdate(set={"count": "t.count + s.count"})
            .whenNotMatchedInsertAll()
            .execute()
        )


def table_rows(spark: SparkSession, path: str) -> list[tuple[Any, ...]]:
    rows = spark.read.format("delta").load(path).select(*COLUMNS).collect()
    return sorted(tuple(r) for r in rows)


def main() -> dict[str, Any]:
    from benchmarks.result import load_average, metric, write_result
    from core.config import RunoffConfig
    from jobs.cli.main import main as cli
    from jobs.samples import generate
    from jobs.spark import get_spark

    load_before = load_average()
    shutil.rmtree(WORK, ignore_errors=True)
    home = WORK / "home"
    config = RunoffConfig.from_sources(home=home, spark_master="local[2]", env={})
    spark = get_spark("bench-warm-silver", config, long_lived=True)
    landing = config.landing_dir("events")
    hour = 0

    def land() -> str:
        """One file of the next hour; its name."""
        nonlocal hour
        (written,) = generate(
            "events",
            landing,
            files=1,
            rows_per_file=ROWS,
            start=START + timedelta(hours=hour),
            seed=100 + hour,
            malformed_rate=0.0,
            late_rate=0.0,
        )
        hour += 1
        return f"/{written.path.name}"

    def run(*argv: str) -> None:
        code = cli(["--home", str(home), *argv])
        if code != 0:
            raise SystemExit(f"runoff {' '.join(argv)} exited {code}")

    for _ in range(HISTORY):
        land()
    run("run", "events")
    bronze = str(config.bronze_path("events"))
    copies = {table: str(WORK / "hand" / table) for table in TABLES}
    for table, path in copies.items():
        # The copy starts as the table is: the history's windows.
        spark.read.format("delta").load(str(config.silver_path(table))).select(
            *COLUMNS
        ).write.format("delta").save(path)

    silver: list[float] = []
    hand: list[float] = []
    loads: list[list[float]] = []
    for _ in range(ROUNDS):
        file = land()
        run("bronze", "events")
        started = time.perf_counter()
        run("silver", "events")
        silver.append(round(time.perf_counter() - started, 3))
        started = time.perf_counter()
        hand_written(spark, bronze, copies, file)
        hand.append(round(time.perf_counter() - started, 3))
        loads.append(load_average())
        print(f"round {len(silver)}: silver {silver[-1]:.2f} s, hand-written {hand[-1]:.2f} s")

    for table, path in copies.items():
        ours = table_rows(spark, str(config.silver_path(table)))
        theirs = table_rows(spark, path)
        if ours != theirs:
            raise SystemExit(f"{table}: runoff's rows and the hand-written job's differ")
    silver_median = statistics.median(silver[WARMUP:])
    hand_median = statistics.median(hand[WARMUP:])
    result = write_result(
        "warm_silver",
        f"The silver step (both silver tables of events) of a {ROWS:,}-record 1-file increment "
        "in a warm driver, and the same against the hand-written aggregation and MERGE of the "
        "same rows (medians; load averages in params)",
        [
            metric("silver step of a 1-file increment", silver_median, unit="s", target="<= 3"),
            metric(
                "silver step against the hand-written job",
                silver_median,
                unit="s",
                baseline=hand_median,
                baseline_label="hand-written aggregation and MERGE of the same rows",
            ),
        ],
        rerun="uv run --frozen python -m benchmarks.bench_warm_silver",
        params={
            "rows_per_file": ROWS,
            "history_files": HISTORY,
            "rounds": ROUNDS,
            "warmup": WARMUP,
            "spark_master": "local[2]",
            "silver_seconds": silver,
            "hand_written_seconds": hand,
            "load_average_before": load_before,
            "load_average_each_round": loads,
            "load_average_after": load_average(),
        },
    )
    spark.stop()
    return result


if __name__ == "__main__":
    main()
