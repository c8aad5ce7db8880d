"""Terminal output shared by every command: progress lines, summaries and tables (rich)."""

from __future__ import annotations

import os

from rich.console import Console

# No `file`: rich then writes to whatever sys.stdout is at print time (pytest capture works).
# Wide enough that progress lines and summary tables are never wrapped in Airflow task logs.
console = Console(
    width=int(os.environ.get("COLUMNS", "120")),
    highlight=False,
    soft_wrap=True,
)


def say(message: str) -> None:
    """One progress line (flushed at once so that Airflow and pipes see it live)."""
    console.print(message)
    console.file.flush()
