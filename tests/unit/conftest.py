"""The unit tier: no JVM, no child process. A test that needs either belongs in tests/spark/ or
tests/e2e/; here it fails at once, naming the tier it belongs to."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest


def _refuse(what: str) -> Any:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(
            f"a unit test {what}: move it to tests/spark/ (a SparkSession) or tests/e2e/"
        )

    return refuse


@pytest.fixture(autouse=True)
def no_jvm_and_no_child_process(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    if "spark" in request.fixturenames:
        raise AssertionError("a unit test asks for the SparkSession: move it to tests/spark/")
    monkeypatch.setattr(subprocess.Popen, "_execute_child", _refuse("starts a child process"))
    monkeypatch.setattr(os, "fork", _refuse("forks"))
    monkeypatch.setattr(os, "posix_spawn", _refuse("starts a child process"))
    monkeypatch.setattr(os, "posix_spawnp", _refuse("starts a child process"))
    yield


@pytest.fixture(scope="session", autouse=True)
def fonts_listed() -> None:
    """matplotlib lists the machine's fonts with a child process (`fc-list`) the first time it
    runs on a machine, then reads its cache: listed here, before the tests (the report's
    charts) and their guard, so that a fresh machine's first unit run passes as every later."""
    import matplotlib.font_manager  # noqa: F401
