"""Which log records reach the terminal: runoff's own; the libraries' go to the log file."""

from __future__ import annotations

import logging

import pytest

from jobs.cli.logs import from_library


def record(name: str, pathname: str = "/src/x.py") -> logging.LogRecord:
    return logging.LogRecord(name, logging.WARNING, pathname, 1, "message", None, None)


@pytest.mark.parametrize(
    ("name", "library"),
    [
        ("py4j.clientserver", True),
        ("pyspark.sql", True),
        ("urllib3.connectionpool", True),  # the lineage client's retries
        ("openlineage.client.transport.http", True),
        ("jobs.lineage", False),  # runoff's one line per event that could not be sent
        ("delta_tables.ledger", False),
        ("root", False),
    ],
)
def test_library_records_stay_off_the_terminal(name: str, library: bool) -> None:
    assert from_library(record(name)) is library


def test_a_library_logging_through_the_root_logger_is_known_by_its_source() -> None:
    assert from_library(record("root", "/venv/lib/site-packages/py4j/java_gateway.py"))
