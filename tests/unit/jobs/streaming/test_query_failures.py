"""The one line of a streaming query that failed outside its batches."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import RunoffError
from jobs.streaming.query import BatchFunction, raise_failure

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
