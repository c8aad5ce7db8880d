"""A DAG run's validate step as a plain `runoff` process against a spark-submit, in the same run.

`runoff validate` never starts Spark (delta-rs, Great Expectations on pandas), so an Airflow task
runs it as a plain process (`dags.hooks.RunoffCliHook`, `jobs.cli.main.SPARK_FREE_COMMANDS`). The
baseline is the spark-submit a task ran before: the same call through `spark-submit` with the
DAG's own settings (`dags.hooks.spark_conf`, `submit_jars`, `spark_env`), which starts a driver
JVM that the command never uses.

One home with one hourly `events` file run through bronze and silver, then `REPETITIONS` times,
alternating the two: `jobs/cli/submit.py --home H validate events --full` (`--full`: every run
validates the same rows). Measured: wall seconds, and the CPU seconds the whole machine spent
meanwhile (`/proc/stat`; run it on an otherwise quiet machine). Reported: medians, process over
spark-submit (ratio < 1: the process is cheaper). Writes `benchmarks/results/validate_task.json`.
Run: `uv run --frozen python -m benchmarks.bench_validate_task` (about 3 minutes on 2 cores).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.result import (
    in_turns,
    load_average,
    runoff_command,
    runoff_environment,
    timed_command,
    wall_and_cpu,
    write_result,
)

DATASET = "events"
REPETITIONS = 3
SPARK_MASTER = "local[2]"
WORK = Path(__file__).resolve().parent / "work" / "validate_task"


def commands() -> dict[str, list[str]]:
    """The validate step as each way runs it, without its arguments."""
    from dags.hooks import SUBMIT_APPLICATION, spark_conf, submit_jars

    conf = [item for k, v in spark_conf().items() for item in ("--conf", f"{k}={v}")]
    spark_submit = str(Path(sys.executable).parent / "spark-submit")
    jars = submit_jars()
    return {
        "plain process": [sys.executable, str(SUBMIT_APPLICATION)],
        "spark-submit": [
            spark_submit,
            "--master",
            SPARK_MASTER,
            *conf,
            *(["--jars", jars] if jars else []),
            str(SUBMIT_APPLICATION),
        ],
    }


def main() -> dict[str, Any]:
    from dags.hooks import spark_env

    load_before = load_average()
    shutil.rmtree(WORK, ignore_errors=True)
    home = WORK / "home"
    env = {**runoff_environment(SPARK_MASTER), **spark_env()}
    runoff = [*runoff_command(), "--home", str(home)]
    for step in (["generate", DATASET, "--files", "1"], ["bronze", DATASET], ["silver", DATASET]):
        subprocess.run([*runoff, *step], env=env, check=True, capture_output=True)
    ways = commands()
    runs: dict[str, list[dict[str, Any]]] = {way: [] for way in ways}
    call = ["--home", str(home), "validate", DATASET, "--full"]
    for rep in range(REPETITIONS):
        for way in in_turns(ways, rep):
            runs[way].append(timed_command([*ways[way], *call], env, way))
    metrics = wall_and_cpu(
        "a DAG run's validate step, 1 hourly file",
        runs["plain process"],
        runs["spark-submit"],
        "a spark-submit",
    )
    shutil.rmtree(WORK, ignore_errors=True)
    return write_result(
        "validate_task",
        "A DAG run's validate step: a plain runoff process against a spark-submit, medians",
        metrics,
        rerun="uv run --frozen python -m benchmarks.bench_validate_task",
        params={
            "repetitions": REPETITIONS,
            "spark_master": SPARK_MASTER,
            "runs": runs,
            "load_before": load_before,
            "load_after": load_average(),
            "cpu_count": os.cpu_count(),
        },
    )


if __name__ == "__main__":
    main()
