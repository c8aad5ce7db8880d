"""runoff's bronze against the hand-written query: the same files, a cold process each.

The hand-written job is what an engineer would write for `events` without runoff:
`spark.readStream.schema("time BIGINT, action STRING").json(landing)`, `event_time` and
`event_date` added, `writeStream.format("delta").partitionBy("event_date")`,
`trigger(availableNow=True)`: no strict JSON, no quarantine, no rescued fields, no quality
gate, no exactly-once bookkeeping of its own. runoff's side is `runoff bronze events` in a
scratch home. Each runs as its own process (`jobs.spark.get_spark`'s session for both: the same
jars, JVM options and `local[2]`), on the same landing files (benchmarks/bench_delta_sink.py's
`events` lines), in two sizes: `ROWS_MANY` records in `FILES_MANY` files, and `ROWS_ONE`
records in one file. The two sides take turns, `ROUNDS` rounds.

Measured: micro-batch seconds (runoff: its batches' own seconds, as its batch lines print them;
hand-written: the query's `triggerExecution` of every batch, from `recentProgress`), and each
process's wall time. Both tables must hold every record. Reported: medians, runoff over the
hand-written query (the issue's target for micro-batches: at most 1.5). Load averages before
and after every run are in `params`. Writes `benchmarks/results/bronze_handwritten.json`.
Run: `uv run --frozen python -m benchmarks.bench_bronze_handwritten` (about 15 minutes on 2
idle cores); `... bench_bronze_handwritten ROWS FILES` for one size only.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_delta_sink import generate
from benchmarks.result import load_average, metric, runoff_command, runoff_environment, write_result

ROWS_MANY, FILES_MANY = 1_000_000, 20
ROWS_ONE = 10_000_000
ROUNDS = 2
TARGET = "<= 1.5"
MASTER = "local[2]"
REPO = Path(__file__).resolve().parents[1]
WORK = REPO / "benchmarks" / "work" / "bronze_handwritten"
DAY = "date=2023-11-14"  # the landing's day folder (backfills select files by it)
BATCH_LINE = re.compile(r"^bronze events batch \d+: .*, ([0-9.]+) s$")


def handwritten(landing: str, out: str) -> None:
    """The hand-written job (run in its own process by `main`): prints the seconds of its
    micro-batches as JSON."""
    from pyspark.sql import functions as F

    from core.config import RunoffConfig
    from jobs.spark import get_spark

    config = RunoffConfig.from_sources(home=Path(out) / "home", env=os.environ)
    spark = get_spark("handwritten-bronze", config)
    query = (
        spark.readStream.schema("time BIGINT, action STRING")  # jobs/datasets/events.yaml
        .json(landing)
        .withColumn("event_time", F.col("time").cast("timestamp"))
        .withColumn("event_date", F.to_date("event_time"))
        .writeStream.format("delta")
        .partitionBy("event_date")
        .option("checkpointLocation", str(Path(out) / "_checkpoint"))
        .trigger(availableNow=True)
        .start(str(Path(out) / "table"))
    )
    query.awaitTermination()
    batches = [p["durationMs"]["triggerExecution"] / 1000 for p in query.recentProgress]
    print(json.dumps({"batch_seconds": batches}), flush=True)
    spark.stop()


def run_process(command: list[str], env: dict[str, str]) -> tuple[float, str, list[float]]:
    """Wall seconds, stdout, load averages before."""
    load = load_average()
    started = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{command} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return seconds, done.stdout, load


def run_runoff(source: Path, scratch: Path) -> dict[str, Any]:
    home = scratch / "home"
    landing = home / "landing" / "events" / DAY
    shutil.copytree(source, landing, copy_function=os.link)
    env = {**runoff_environment(MASTER), "RUNOFF_HOME": str(home)}
    seconds, out, load = run_process([*runoff_command(), "bronze", "events"], env)
    batches = [float(m.group(1)) for line in out.splitlines() if (m := BATCH_LINE.match(line))]
    return {
        "seconds": round(seconds, 2),
        "batch_seconds": batches,
        "table": home / "delta" / "bronze" / "events",
        "load_before": load,
        "load_after": load_average(),
    }


def run_handwritten(source: Path, scratch: Path) -> dict[str, Any]:
    landing = scratch / "landing"
    shutil.copytree(source, landing, copy_function=os.link)
    env = {**runoff_environment(MASTER)}
    code = (
        "import sys; from benchmarks.bench_bronze_handwritten import handwritten; "
        "handwritten(sys.argv[1], sys.argv[2])"
    )
    command = [sys.executable, "-c", code, str(landing), str(scratch)]
    seconds, out, load = run_process(command, env)
    batches = json.loads(out.strip().splitlines()[-1])["batch_seconds"]
    return {
        "seconds": round(seconds, 2),
        "batch_seconds": batches,
        "table": scratch / "table",
        "load_before": load,
        "load_after": load_average(),
    }


def measure(rows: int, files: int) -> dict[str, list[dict[str, Any]]]:
    """`ROUNDS` runs of each side over the same `rows` records in `files` files."""
    from delta_tables.arrow import count_rows

    source = WORK / f"source-{rows}-{files}"
    shutil.rmtree(WORK, ignore_errors=True)
    generate(source, events=rows, files=files)
    runs: dict[str, list[dict[str, Any]]] = {"runoff": [], "handwritten": []}
    sides = {"runoff": run_runoff, "handwritten": run_handwritten}
    for round_number in range(ROUNDS):
        order = list(sides) if round_number % 2 == 0 else list(reversed(sides))
        for side in order:
            scratch = WORK / f"{side}-{round_number}"
            run = sides[side](source, scratch)
            written = count_rows(str(run.pop("table")))
            if written != rows:
                raise RuntimeError(f"{side} wrote {written} rows of {rows}")
            run["batch_total"] = round(sum(run["batch_seconds"]), 2)
            print(f"{rows:,} rows / {files} files, {side}: {run}", flush=True)
            runs[side].append(run)
            shutil.rmtree(scratch, ignore_errors=True)
    shutil.rmtree(WORK, ignore_errors=True)
    return runs


def size_metrics(rows: int, files: int, runs: dict[str, list[dict[str, Any]]]) -> list[Any]:
    def median(side: str, key: str) -> float:
        return round(statistics.median(r[key] for r in runs[side]), 2)

    size = f"{rows:,} rows in {files} file{'s' if files > 1 else ''}"
    return [
        metric(
            f"bronze micro-batches, {size}",
            median("runoff", "batch_total"),
            unit="s",
            baseline=median("handwritten", "batch_total"),
            baseline_label="hand-written availableNow JSON -> Delta query",
            target=TARGET,
        ),
        metric(
            f"bronze process wall time, {size}",
            median("runoff", "seconds"),
            unit="s",
            baseline=median("handwritten", "seconds"),
            baseline_label="hand-written query's process",
        ),
    ]


def main(sizes: tuple[tuple[int, int], ...] = ((ROWS_MANY, FILES_MANY), (ROWS_ONE, 1))) -> Any:
    load_start = load_average()
    metrics, params = [], {}
    for rows, files in sizes:
        runs = measure(rows, files)
        metrics += size_metrics(rows, files, runs)
        params[f"{rows}_rows_{files}_files"] = runs
    return write_result(
        "bronze_handwritten",
        "`runoff bronze events` against a hand-written availableNow JSON -> Delta query (same "
        "schema, partitioning and files; a cold process each, two rounds in turns)",
        metrics,
        params={
            "rounds": ROUNDS,
            "spark_master": MASTER,
            "load_start": load_start,
            "load_end": load_average(),
            **params,
        },
    )


if __name__ == "__main__":
    if len(sys.argv) == 3:
        main(((int(sys.argv[1]), int(sys.argv[2])),))
    else:
        main()
