"""Terminal output shared by every command: progress lines, summaries and tables (rich).

`say()` prints a permanent line; `live_status()` shows a transient status line below the
printed ones while a block runs, on a terminal only (pipes and log files get the plain lines);
`print_whole()` prints a table that a pipe gets uncut.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, cast

from rich.console import Console, RenderableType
from rich.live import Live
from rich.measure import Measurement
from rich.text import Text

from core.caller import Stream, current

# Wide enough that progress lines and summary tables are never wrapped in Airflow task logs.
DEFAULT_WIDTH = int(os.environ.get("COLUMNS", "120"))


def new_console(file: Stream | None = None, width: int | None = None) -> Console:
    """A console as runoff prints: no highlighting, long lines kept whole. Without `file`, rich
    writes to whatever sys.stdout is at print time (pytest capture works)."""
    return Console(
        file=cast(IO[str] | None, file),
        width=width or DEFAULT_WIDTH,
        highlight=False,
        soft_wrap=True,
    )


# The process's console. A command that `runoff serve` runs prints to its client's
# (`current_console`).
console = new_console()


def current_console() -> Console:
    """The console of the command running in this thread: its caller's under `runoff serve`
    (`core.caller`), else the process's own."""
    caller = current()
    return console if caller is None else caller.console


def say(message: str) -> None:
    """One progress line (flushed at once so that Airflow and pipes see it live)."""
    target = current_console()
    target.print(message)
    target.file.flush()


@contextmanager
def live_status(describe: Callable[[], str], refreshes_per_second: float = 4) -> Iterator[None]:
    """While the block runs, `describe()` as one transient line, redrawn a few times a second
    (from rich's refresh thread: `describe` must be cheap and thread-safe) below what `say()`
    prints meanwhile; the line is erased when the block ends, however it ends.

    On a terminal only, decided now from the stream the command's console writes to (under
    `runoff serve`, its client's): elsewhere nothing at all is written.
    """
    # One live line at a time: a block that starts while another thread's line is shown (`runoff
    # run` of several datasets, another client's command) prints its plain lines only.
    target = current_console()
    if not target.is_terminal or target.is_dumb_terminal or not _live.acquire(blocking=False):
        yield
        return
    try:
        with _live_line(target, describe, refreshes_per_second):
            yield
    finally:
        _live.release()


_live = threading.Lock()


@contextmanager
def _live_line(
    console: Console, describe: Callable[[], str], refreshes_per_second: float
) -> Iterator[None]:
    def line() -> Text:
        try:
            text = Text(describe(), no_wrap=True, overflow="ellipsis", end="")
        except Exception as exc:  # noqa: BLE001 - a status line never stops the run
            text = Text(f"(no status: {type(exc).__name__})", end="")
        # One screen line: rich could not erase a line the terminal wrapped.
        text.truncate(max(_columns(console) - 1, 20), overflow="ellipsis")
        return text

    # rich moves the live line below each print only when the console is interactive, which it
    # decided once, for the stream of its creation: this stream is a terminal.
    interactive, console.is_interactive = console.is_interactive, True
    try:
        with Live(
            console=console,
            get_renderable=line,
            refresh_per_second=refreshes_per_second,
            transient=True,
            redirect_stdout=False,  # `runoff serve` owns sys.stdout
            redirect_stderr=False,
        ) as live:
            live.refresh()
            yield
    finally:
        console.is_interactive = interactive


def print_whole(table: RenderableType) -> None:
    """Print a table; piped (no terminal width to fit), as wide as its cells, never cut."""
    console = current_console()
    if console.is_terminal:
        console.print(table)
        return
    natural = Measurement.get(console, console.options.update_width(10_000), table).maximum
    width = console.width
    console.width = max(width, natural)  # print's own `width` cannot exceed the console's
    try:
        console.print(table)
    finally:
        console.width = width


def _columns(console: Console) -> int:
    """The terminal's width now, else the console's (`runoff serve`: the client's)."""
    try:
        columns = os.get_terminal_size(console.file.fileno()).columns
    except (AttributeError, OSError, ValueError):
        columns = 0
    return columns if columns > 0 else console.width
