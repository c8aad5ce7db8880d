"""The one line of a streaming query that failed outside its batches."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import RunoffError
from jobs.streaming.query import SUMMARY_LINE_CHARS, BatchFunction, raise_failure, summary_for_jvm

STREAM_FAILED = (
    "[STREAM_FAILED] Query [id = 5f0c, runId = 9a1e] terminated with exception: "
    "Exception thrown in awaitResult: SQLSTATE: XXKST"
)


class Captured(Exception):
    """What PySpark raises for a JVM exception: its first line in `desc`, the JVM's cause as
    another such exception in `_cause`."""

    def __init__(self, desc: str, cause: Captured | None = None) -> None:
        super().__init__(desc)
        self.desc = desc
        self._cause = cause


def failure(exc: BaseException, checkpoint: Path) -> str:
    with pytest.raises(RunoffError) as raised:
        raise_failure(
            exc,
            BatchFunction(lambda batch, batch_id: None),
            "silver table t",
            checkpoint,
            after_batch=3,
        )
    return str(raised.value)


def test_the_line_names_the_innermost_cause_and_that_a_rerun_is_safe(tmp_path: Path) -> None:
    root = Captured(
        "java.io.IOException: Stream closed\n\tat java.base/java.io.BufferedInputStream.read"
    )
    wrapped = Captured(STREAM_FAILED, Captured("Exception thrown in awaitResult:", root))
    assert failure(wrapped, tmp_path / "checkpoint") == (
        f"silver table t failed after batch 3: {STREAM_FAILED}: caused by "
        "java.io.IOException: Stream closed. Nothing of a batch after the checkpoint's last one "
        "was kept: running the command again is safe"
    )


def test_a_cause_the_error_already_says_is_not_repeated(tmp_path: Path) -> None:
    wrapped = Captured(
        "[STREAM_FAILED] ... terminated with exception: disk quota", Captured("disk quota")
    )
    assert failure(wrapped, tmp_path / "checkpoint") == (
        "silver table t failed after batch 3: [STREAM_FAILED] ... terminated with exception: "
        "disk quota. Nothing of a batch after the checkpoint's last one was kept: running the "
        "command again is safe"
    )


class Py4JJavaError(Exception):
    """Named as py4j names its error."""


Py4JJavaError.__module__ = "py4j.protocol"


def test_the_jvm_is_told_of_a_batch_error_in_a_few_short_lines() -> None:
    frames = "".join(f"\tat org.example.Frame{i}.run(Frame.java:{i})\n" for i in range(300))
    error = Py4JJavaError(
        "An error occurred while calling o412.save.\n"
        f": org.apache.spark.SparkException: Job 7 cancelled\n{frames}"
        f"Caused by: java.util.concurrent.ExecutionException: boom\n{frames}\t... 12 more\n"
        f"Caused by: java.lang.InterruptedException\n{frames}\t... 40 more\n"
    )
    assert summary_for_jvm(error) == (
        "py4j.protocol.Py4JJavaError: An error occurred while calling o412.save.\n"
        ": org.apache.spark.SparkException: Job 7 cancelled\n"
        "Caused by: java.util.concurrent.ExecutionException: boom\n"
        "Caused by: java.lang.InterruptedException"
    )


def test_a_long_line_is_cut_and_only_the_last_causes_are_kept() -> None:
    causes = "".join(f"Caused by: java.lang.Error{i}\n" for i in range(6))
    summary = summary_for_jvm(ValueError("x" * 5000 + "\nsecond\n" + causes))
    head, second, *rest = summary.split("\n")
    assert head == ("builtins.ValueError: " + "x" * 5000)[:SUMMARY_LINE_CHARS]
    assert second == "second"
    assert rest == [f"Caused by: java.lang.Error{i}" for i in (3, 4, 5)]
