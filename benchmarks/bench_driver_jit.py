"""A command's driver JVM with the JIT's quick tier only, against both tiers, in the same run.

Every `runoff` command (and every Airflow task's spark-submit) starts a driver JVM that lives for
one run. `jobs.spark.driver_java_options()` stops its JIT at the quick tier (C1,
`-XX:TieredStopAtLevel=1`); a long-lived driver (`runoff serve`) keeps the optimizing tier (C2)
too. This benchmark runs the same cold `runoff run events` both ways: the baseline sets the
server's options (`driver_java_options(long_lived=True)`) through `RUNOFF_SPARK_CONF`.

For each size (`SIZES`: a small hourly increment and 500,000 rows), `REPETITIONS` times,
alternating the two settings: a fresh home, `runoff generate events`, then one timed
`runoff run events` (bronze, silver, validate in one process). Measured: wall seconds of the run,
and the CPU seconds the whole machine spent meanwhile (`/proc/stat`, all processes: the driver
JVM, the Python driver and its workers; run it on an otherwise quiet machine). Reported: the
median of each, quick tier over both tiers (ratio < 1: the quick tier is cheaper). `params` has
every timing and the load averages before and after. Writes
`benchmarks/results/driver_jit.json`. Run: `uv run --frozen python -m benchmarks.bench_driver_jit`
(about 10 minutes on 2 cores).
"""

from __future__ import annotations

import shutil
import subprocess
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
SIZES = {"600 rows": (3, 200), "500,000 rows": (10, 50_000)}
REPETITIONS = 2
SPARK_MASTER = "local[2]"
WORK = Path(__file__).resolve().parent / "work" / "driver_jit"


def both_tiers_conf() -> str:
    from jobs.spark import driver_java_options

    return f"spark.driver.extraJavaOptions={driver_java_options(long_lived=True)}"


def timed_run(files: int, rows: int, spark_conf: str | None, label: str) -> dict[str, Any]:
    home = WORK / "home"
    shutil.rmtree(home, ignore_errors=True)
    env = runoff_environment(SPARK_MASTER, spark_conf)
    command = [*runoff_command(), "--home", str(home)]
    generate = ["generate", DATASET, "--files", str(files), "--rows-per-file", str(rows)]
    subprocess.run([*command, *generate, "--seed", "3"], env=env, check=True, capture_output=True)
    return timed_command([*command, "run", DATASET], env, f"runoff run ({label})")


def main() -> dict[str, Any]:
    load_before = load_average()
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    settings = {"quick tier": None, "both tiers": both_tiers_conf()}
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for size, (files, rows) in SIZES.items():
        runs[size] = {name: [] for name in settings}
        for rep in range(REPETITIONS):
            for name in in_turns(settings, rep):
                runs[size][name].append(timed_run(files, rows, settings[name], f"{size}, {name}"))
    metrics = [
        measured
        for size in SIZES
        for measured in wall_and_cpu(
            f"cold `runoff run events`, {size}",
            runs[size]["quick tier"],
            runs[size]["both tiers"],
            "driver JIT with both tiers (C1 and C2)",
        )
    ]
    shutil.rmtree(WORK, ignore_errors=True)
    return write_result(
        "driver_jit",
        "A command's driver JVM: the JIT's quick tier only (C1) against both tiers, "
        "cold `runoff run events`, medians",
        metrics,
        rerun="uv run --frozen python -m benchmarks.bench_driver_jit",
        params={
            "sizes": {size: {"files": f, "rows_per_file": r} for size, (f, r) in SIZES.items()},
            "repetitions": REPETITIONS,
            "spark_master": SPARK_MASTER,
            "runs": runs,
            "load_before": load_before,
            "load_after": load_average(),
        },
    )


if __name__ == "__main__":
    main()
