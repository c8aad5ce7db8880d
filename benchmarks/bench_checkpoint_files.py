"""Checkpoint files through Hadoop's FileSystem API, against its FileContext API, in one run.

`jobs.spark.FILE_SYSTEM_CHECKPOINTS` makes Spark write a stream's checkpoint files (offsets,
commits, state, their checksums) through Hadoop's FileSystem API. Spark's default is the
FileContext API, whose rename on the local file system asks for the link status of each path:
Hadoop answers it by starting a `readlink` process. (Both start `chmod` for each file created.)

The workload is one session (`local[2]`, as the test session's) running
`tests/spark/jobs/silver/test_batches.py`: two datasets' silver tables built one file per
micro-batch, then in several runs, hundreds of micro-batches. The baseline runs the same with
Spark's default manager, set in the child before the session starts. `REPETITIONS` runs of each,
in turns; wall and machine CPU seconds as `benchmarks.result.timed_command` measures them (run
it on an otherwise quiet machine). Reported: the medians, FileSystem over FileContext (ratio < 1:
cheaper); `params` has every run with its load averages. Writes
`benchmarks/results/checkpoint_files.json`. Run:
`uv run --frozen python -m benchmarks.bench_checkpoint_files` (about 10 minutes on 2 cores).
"""

from __future__ import annotations

from typing import Any

from benchmarks.result import compare_test_sessions

WORKLOAD = "tests/spark/jobs/silver/test_batches.py"
REPETITIONS = 2
FILE_CONTEXT = (
    "import jobs.spark; jobs.spark.FILE_SYSTEM_CHECKPOINTS = "
    "'org.apache.spark.sql.execution.streaming.checkpointing."
    "FileContextBasedCheckpointFileManager'; "
)


def main() -> dict[str, Any]:
    return compare_test_sessions(
        "checkpoint_files",
        "Checkpoint files through Hadoop's FileSystem API (`FILE_SYSTEM_CHECKPOINTS`) against "
        "Spark's default (FileContext), one session over the silver batch tests, medians",
        WORKLOAD,
        {"FileSystem": "", "FileContext": FILE_CONTEXT},
        REPETITIONS,
        "Spark's default checkpoint files (FileContext)",
    )


if __name__ == "__main__":
    main()
