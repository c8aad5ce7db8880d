"""`runoff check events`: in a warm server, and without a JVM, against a cold check.

Three ways to ask whether a spec holds, each a `runoff` process as a user (or an editor's hook)
starts it, in a scratch home under `benchmarks/work/check`:
- cold: `runoff check events` on its own: a JVM started, the SQL resolved (the baseline);
- warm: the same command as a client of a `runoff serve` started once for the benchmark, as
  `make airflow` starts it (`dags.standalone.start_server`): the server's driver resolves the SQL;
- no JVM: `runoff check --no-spark events`: the format's checks and the outline, no SQL resolved.
Each is run `RUNS` times after one warm-up run (the server's first check compiles what later ones
reuse); reported are the medians, as ratios to the cold median. The issue's bounds, under 3 s
warm and under 1 s without a JVM, are the targets of the absolute medians in `params`. Load
averages before and after are in `params`. Writes `benchmarks/results/check.json`. Run:
`uv run --frozen python -m benchmarks.bench_check` (about 3 minutes on 2 idle cores).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

RUNS = 5
WORK = Path(__file__).resolve().parent / "work" / "check"
REPO_ROOT = Path(__file__).resolve().parent.parent


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "jobs.cli", *argv],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    seconds = round(time.perf_counter() - started, 3)
    if done.returncode != 0 or "check: 1 datasets ok" not in done.stdout:
        raise SystemExit(f"runoff {' '.join(argv)} exited {done.returncode}: {done.stderr[-2000:]}")
    return seconds


def medians(argv: list[str], env: dict[str, str]) -> tuple[float, list[float]]:
    timed(argv, env)  # warm-up
    runs = [timed(argv, env) for _ in range(RUNS)]
    print(f"runoff {' '.join(argv)}: {runs}", flush=True)
    return statistics.median(runs), runs


def main() -> dict[str, Any]:
    from benchmarks.result import load_average, metric, write_result

    load_before = load_average()
    shutil.rmtree(WORK, ignore_errors=True)
    home = WORK / "home"
    home.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNOFF_")}
    env.update({"RUNOFF_HOME": str(home), "RUNOFF_SPARK_MASTER": "local[2]"})
    check = ["check", "events"]

    cold, cold_runs = medians(check, env)
    no_jvm, no_jvm_runs = medians([*check, "--no-spark"], env)

    from dags import standalone

    # `make airflow`'s server, on the home's socket; its master is the spark_default connection.
    spark_default = json.dumps({"conn_type": "spark", "host": "local[2]"})
    server = standalone.start_server({**env, "AIRFLOW_CONN_SPARK_DEFAULT": spark_default}, home)
    try:
        client = {**env, "RUNOFF_SERVER": str(standalone.server_socket(home))}
        warm, warm_runs = medians(check, client)
    finally:
        standalone.stop(server, timeout=120)
    shutil.rmtree(WORK, ignore_errors=True)

    return write_result(
        "check",
        "`runoff check events` as a client of a warm `runoff serve`, and `--no-spark` (no JVM), "
        f"against a cold `runoff check events` (a process each, medians of {RUNS})",
        [
            metric(
                "check in a warm server",
                warm,
                unit="s",
                baseline=cold,
                baseline_label="cold `runoff check` (own JVM)",
                target="< 1",
            ),
            metric(
                "check --no-spark (no JVM)",
                no_jvm,
                unit="s",
                baseline=cold,
                baseline_label="cold `runoff check` (own JVM)",
                target="< 1",
            ),
        ],
        rerun="uv run --frozen python -m benchmarks.bench_check",
        params={
            "dataset": "events",
            "runs": RUNS,
            "spark_master": "local[2]",
            "cold_seconds": cold_runs,
            "warm_seconds": warm_runs,
            "no_jvm_seconds": no_jvm_runs,
            "warm_median_under_3_s": warm < 3,
            "no_jvm_median_under_1_s": no_jvm < 1,
            "load_before": load_before,
            "load_after": load_average(),
        },
    )


if __name__ == "__main__":
    main()
