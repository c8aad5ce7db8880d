"""A long-lived driver JVM with fewer optimizing compiles, against the JVM's defaults, in one run.

A long-lived driver (`runoff serve`, the test session) runs many commands' small plans.
`jobs.spark.LONG_LIVED_JIT` raises the thresholds at which its JIT compiles a method with the
optimizing tier (C2) thirty-fold. The workload is one session running the 50 tests of
`tests/spark/jobs/silver` (every silver table of the seed datasets built, rebuilt and merged in
many small runs); the baseline runs the same with the JVM's default thresholds
(`LONG_LIVED_JIT` emptied in the child before the session starts).

`REPETITIONS` times, alternating the two settings. Measured: wall seconds, and the CPU seconds
the whole machine spent meanwhile (`/proc/stat`; run it on an otherwise quiet machine).
Reported: the median of each, fewer compiles over the defaults (ratio < 1: cheaper). `params`
has every timing and the load averages before and after. Writes
`benchmarks/results/long_lived_jit.json`. Run:
`uv run --frozen python -m benchmarks.bench_long_lived_jit` (about 12 minutes on 2 cores).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from benchmarks.result import (
    in_turns,
    load_average,
    runoff_environment,
    timed_command,
    wall_and_cpu,
    write_result,
)

REPO = Path(__file__).resolve().parents[1]
WORKLOAD = "tests/spark/jobs/silver"
SPARK_MASTER = "local[2]"  # the test session's own
REPETITIONS = 1
PYTEST = (
    "import sys, pytest; "
    "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '-o', 'addopts=', {path!r}]))"
)
DEFAULTS = "import jobs.spark; jobs.spark.LONG_LIVED_JIT = ''; "


def timed_session(defaults: bool, label: str) -> dict[str, Any]:
    code = (DEFAULTS if defaults else "") + PYTEST.format(path=WORKLOAD)
    env = {**runoff_environment(SPARK_MASTER), "PYTHONPATH": str(REPO)}
    return timed_command([sys.executable, "-c", code], env, label)


def main() -> dict[str, Any]:
    load_before = load_average()
    os.chdir(REPO)
    settings = {"fewer compiles": False, "JVM defaults": True}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in settings}
    for rep in range(REPETITIONS):
        for name in in_turns(settings, rep):
            runs[name].append(timed_session(settings[name], f"{WORKLOAD} ({name})"))
    metrics = wall_and_cpu(
        f"one session over `{WORKLOAD}`",
        runs["fewer compiles"],
        runs["JVM defaults"],
        "the JVM's default C2 thresholds",
    )
    return write_result(
        "long_lived_jit",
        "A long-lived driver: C2 thresholds x30 (`LONG_LIVED_JIT`) against the JVM's defaults, "
        "one session over the silver tests, medians",
        metrics,
        rerun="uv run --frozen python -m benchmarks.bench_long_lived_jit",
        params={
            "workload": WORKLOAD,
            "repetitions": REPETITIONS,
            "runs": runs,
            "load_before": load_before,
            "load_after": load_average(),
        },
    )


if __name__ == "__main__":
    main()
