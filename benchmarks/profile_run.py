"""Where an hourly `runoff run` spends its time: one warm driver, `events`, one file per run.

Not part of `make bench` (it measures stages, not a ratio): run it to see what a change did to
each stage, on this checkout and on another side by side.

    uv run --frozen python -m benchmarks.profile_run [--runs 3] [--rows 2000]

A SparkSession is started once (its start is not counted); each run lands one generated file
of `--rows` records and calls the CLI in-process (`runoff run events`: bronze, silver, validate).
For every run after the first (the first warms the JVM) it prints the run's seconds and Spark
jobs, then per stage the calls, Spark jobs and seconds: bronze's batch function, silver's
`merge_batch` and, inside it, the window range (`batch_profile`), the quality gate
(`Gate.check`, bronze's and silver's) and the MERGE. Spark jobs are counted from the driver's
status store, whatever thread runs them (foreachBatch functions run on Spark's threads).
"""

from __future__ import annotations

import argparse
import functools
import os
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

STAGES: list[tuple[str, str, str]] = [
    ("bronze batch", "jobs.bronze.job", "BronzeBatch.__call__"),
    ("silver merge_batch", "jobs.silver", "merge_batch"),
    ("  window range", "jobs.silver", "batch_profile"),
    ("  quality gate", "quality.gate", "Gate.check"),
    ("  MERGE", "jobs.silver", "merge"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rows", type=int, default=2000)
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="runoff-profile-"))
    os.environ["RUNOFF_HOME"] = str(home)
    import importlib

    from core.config import RunoffConfig
    from jobs.cli import main as cli
    from jobs.spark import get_spark

    spark = get_spark("runoff-profile", RunoffConfig.from_sources(home=home))
    store = spark.sparkContext._jsc.sc().statusStore()  # type: ignore[union-attr]

    def jobs() -> int:
        return int(store.jobsList(None).size())

    totals: dict[str, list[float]] = {}
    lock = threading.Lock()

    def timed(label: str, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def wrapper(*a: Any, **k: Any) -> Any:
            started_jobs, started = jobs(), time.perf_counter()
            try:
                return function(*a, **k)
            finally:
                with lock:
                    entry = totals.setdefault(label, [0, 0, 0.0])
                    entry[0] += 1
                    entry[1] += jobs() - started_jobs
                    entry[2] += time.perf_counter() - started

        return wrapper

    for label, module_name, name in STAGES:
        owner: Any = importlib.import_module(module_name)
        *path, attribute = name.split(".")
        for part in path:
            owner = getattr(owner, part)
        setattr(owner, attribute, timed(label, getattr(owner, attribute)))

    load = os.getloadavg()
    print(f"load averages at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    for run in range(args.runs):
        day = f"2024-01-{run + 1:02d}T00:00:00+00:00"
        sample = ["--files", "1", "--rows-per-file", str(args.rows), "--seed", str(run)]
        cli.main(["generate", "events", *sample, "--start", day, "--malformed-rate", "0.01"])
        totals.clear()
        started_jobs, started = jobs(), time.perf_counter()
        code = cli.main(["run", "events"])
        seconds, spark_jobs = time.perf_counter() - started, jobs() - started_jobs
        if run == 0:
            print(f"run 0 (warm-up): exit {code}, {seconds:.1f} s, {spark_jobs} Spark jobs")
            continue
        print(f"run {run}: exit {code}, {seconds:.1f} s, {spark_jobs} Spark jobs")
        for label, _, _ in STAGES:
            calls, stage_jobs, stage_seconds = totals.get(label, [0, 0, 0.0])
            print(
                f"  {label:20} {int(calls):3} calls {int(stage_jobs):4} jobs {stage_seconds:7.2f} s"
            )
    load = os.getloadavg()
    print(f"load averages at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    spark.stop()


if __name__ == "__main__":
    main()
