"""Terminal output shared by every command: progress lines, summaries and tables (rich)."""

from __future__ import annotations

import os
import sys

from rich.console import Console

# Wide enough that progress lines and summary tables are never wrapped in Airflow task logs.
console = Console(
    file=sys.stdout,
    width=int(os.environ.get("COLUMNS", "120")),
    highlight=False,
    soft_wrap=True,
)


def say(message: str) -> None:
    """One progress line (flushed at once so that Airflow and pipes see it live)."""
    console.print(message)
    console.file.flush()
