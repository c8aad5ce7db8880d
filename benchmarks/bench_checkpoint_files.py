"""Checkpoint files through Hadoop's FileSystem API, against its FileContext API, in one run.

`jobs.spark.FILE_SYSTEM_CHECKPOINTS` makes Spark write a stream's checkpoint files (offsets,
commits, state, their checksums) through Hadoop's FileSystem API. Spark's default is the
FileContext API, whose rename on the local file system asks for the link status of each path:
Hadoop answers it by starting a `readlink` process, and each file it creates by starting `chmod`.
The workload is one session running `tests/spark/jobs/silver/test_batches.py` (two datasets'
silver tables built one file per micro-batch, then in several runs: hundreds of micro-batches);
the baseline runs the same with Spark's default manager (`FILE_SYSTEM_CHECKPOINTS` set to it in
the child before the session starts).

`REPETITIONS` times, alternating the two settings. Measured: wall seconds, and the CPU seconds
the whole machine spent meanwhile (`/proc/stat`; run it on an otherwise quiet machine).
Reported: the median of each, FileSystem over FileContext (ratio < 1: cheaper). `params` has
every timing and the load averages before and after. Writes
`benchmarks/results/checkpoint_files.json`. Run:
`uv run --frozen python -m benchmarks.bench_checkpoint_files` (about 10 minutes on 2 cores).
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
WORKLOAD = "tests/spark/jobs/silver/test_batches.py"
SPARK_MASTER = "local[2]"  # the test session's own
REPETITIONS = 2
PYTEST = (
    "import sys, pytest; "
    "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '-o', 'addopts=', {path!r}]))"
)
FILE_CONTEXT = (
    "import jobs.spark; jobs.spark.FILE_SYSTEM_CHECKPOINTS = "
    "'org.apache.spark.sql.execution.streaming.checkpointing."
    "FileContextBasedCheckpointFileManager'; "
)


def timed_session(file_context: bool, label: str) -> dict[str, Any]:
    code = (FILE_CONTEXT if file_context else "") + PYTEST.format(path=WORKLOAD)
    env = {**runoff_environment(SPARK_MASTER), "PYTHONPATH": str(REPO)}
    return timed_command([sys.executable, "-c", code], env, label)


def main() -> dict[str, Any]:
    load_before = load_average()
    os.chdir(REPO)
    settings = {"FileSystem": False, "FileContext": True}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in settings}
    for rep in range(REPETITIONS):
        for name in in_turns(settings, rep):
            runs[name].append(timed_session(settings[name], f"{WORKLOAD} ({name})"))
    metrics = wall_and_cpu(
        f"one session over `{WORKLOAD}`",
        runs["FileSystem"],
        runs["FileContext"],
        "Spark's default checkpoint files (FileContext)",
    )
    return write_result(
        "checkpoint_files",
        "Checkpoint files through Hadoop's FileSystem API (`FILE_SYSTEM_CHECKPOINTS`) against "
        "Spark's default (FileContext), one session over the silver batch tests, medians",
        metrics,
        rerun="uv run --frozen python -m benchmarks.bench_checkpoint_files",
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
