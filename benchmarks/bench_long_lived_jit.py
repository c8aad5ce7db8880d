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

from typing import Any

from benchmarks.result import compare_test_sessions

WORKLOAD = "tests/spark/jobs/silver"
REPETITIONS = 1
DEFAULTS = "import jobs.spark; jobs.spark.LONG_LIVED_JIT = ''; "


def main() -> dict[str, Any]:
    return compare_test_sessions(
        "long_lived_jit",
        "A long-lived driver: C2 thresholds x30 (`LONG_LIVED_JIT`) against the JVM's defaults, "
        "one session over the silver tests, medians",
        WORKLOAD,
        {"fewer compiles": "", "JVM defaults": DEFAULTS},
        REPETITIONS,
        "the JVM's default C2 thresholds",
    )


if __name__ == "__main__":
    main()
