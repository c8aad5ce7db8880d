"""A query stopped while its batch fails: Spark reads the error's summary, not its pages.

Spark asks whether a stopped query's error is an interruption by matching the error's text with a
pattern that recurses once per character (`StreamExecution.PROXY_ERROR`); the text of an
interrupted Spark call (a JVM stack trace) overflowed the stream thread's stack, and the JVM
printed a StackOverflowError of a thousand frames into runoff's log.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from jobs.streaming.query import BatchFunction

pytestmark = pytest.mark.spark

# What an interrupted Spark call raises in Python: py4j's error, holding the JVM's stack trace.
FRAMES = "".join(
    f"\tat org.apache.spark.scheduler.Frame{i}.run(Frame.scala:{i})\n" for i in range(400)
)


class Py4JJavaError(Exception):
    pass


Py4JJavaError.__module__ = "py4j.protocol"


def interrupted_call() -> Py4JJavaError:
    return Py4JJavaError(
        "An error occurred while calling o412.save.\n"
        ": org.apache.spark.SparkException: Job 7 cancelled part of cancelled job group 3\n"
        f"{FRAMES}Caused by: java.lang.InterruptedException\n{FRAMES}"
    )


def jvm_error_log(spark: Any) -> Path:
    """The file the driver JVM's standard error goes to (runoff's log: jobs.spark.driver_output)."""
    pid = spark.sparkContext._gateway.proc.pid
    target = Path(os.readlink(f"/proc/{pid}/fd/2"))
    assert target.is_file(), f"the JVM's stderr is {target}, not a log file"
    return target


def stop_during_the_batch(spark: Any, error: Exception) -> tuple[Any, BatchFunction]:
    """Start a query whose first batch stops the query, waits until Spark has marked it stopped,
    then raises `error`; return the ended query."""
    started: dict[str, Any] = {}

    def process(batch: Any, batch_id: int) -> None:
        query = started["query"]
        threading.Thread(target=query.stop, daemon=True).start()
        while query.isActive:
            time.sleep(0.05)
        raise error

    function = BatchFunction(process)
    stream = spark.readStream.format("rate").option("rowsPerSecond", 1).load()
    query = started["query"] = stream.writeStream.foreachBatch(function).start()
    query.awaitTermination(120)
    assert not query.isActive
    return query, function


def test_a_query_stopped_mid_batch_ends_as_stopped_without_a_stack_overflow(spark: Any) -> None:
    log = jvm_error_log(spark)
    before = log.stat().st_size
    error = interrupted_call()
    query, function = stop_during_the_batch(spark, error)
    time.sleep(1)  # what the stream thread prints as it ends
    with log.open("rb") as text:
        text.seek(before)
        printed = text.read().decode(errors="replace")
    assert "StackOverflowError" not in printed
    assert "java.util.regex.Pattern" not in printed
    # Spark recognized the interruption in the summary: the query ended stopped, not failed.
    assert query.exception() is None
    assert function.error is error
    assert function.failed_batch == 0
