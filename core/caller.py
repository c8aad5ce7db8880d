"""What a command borrows from whoever runs it: environment, working directory, output, signals.

A command of the `runoff` CLI in its own process has the process's: `os.environ`, the working
directory, `sys.stdout` and `sys.stderr`, the signals the process receives. `runoff serve` runs
the commands of several clients side by side in one process, so each gets its client's instead:
a `Caller` bound to the command's thread (`bound`), which these functions return, and which the
threads a command starts carry along (`carried`: py4j's callback threads that run `foreachBatch`
functions, the threads of `runoff run A B`). Code asks here, never the process, for what belongs
to the caller. Spark-free.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

if TYPE_CHECKING:
    from rich.console import Console

P = ParamSpec("P")
R = TypeVar("R")


class Stream(Protocol):
    """What a command prints to: a text stream."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...

    def isatty(self) -> bool: ...


@dataclass
class Caller:
    """One served command's client: its variables, folder, streams, console and signals, and
    the Spark session the command runs in (its own: `SparkSession.newSession`)."""

    env: Mapping[str, str]
    cwd: Path
    stdout: Stream
    stderr: Stream
    console: Console  # core.console.new_console, writing to `stdout`
    signals: list[int] = field(default_factory=list)
    session: Any = None  # pyspark.sql.SparkSession
    verbose: bool = False
    library: Any = None  # the command's jobs.cli.logs.LibraryLog, once it has one


_current: ContextVar[Caller | None] = ContextVar("runoff_caller", default=None)


def current() -> Caller | None:
    """The caller of the command running in this thread; None in a command's own process."""
    return _current.get()


def environ() -> Mapping[str, str]:
    caller = _current.get()
    return os.environ if caller is None else caller.env


def cwd() -> Path:
    caller = _current.get()
    return Path.cwd() if caller is None else caller.cwd


def absolute(path: str | os.PathLike[str]) -> Path:
    """`path` with `~` expanded, relative to the caller's working directory."""
    resolved = Path(path).expanduser()
    return resolved if resolved.is_absolute() else cwd() / resolved


@contextmanager
def bound(caller: Caller | None) -> Iterator[None]:
    """`caller` is this thread's while the block runs."""
    token = _current.set(caller)
    try:
        yield
    finally:
        _current.reset(token)


def carried(function: Callable[P, R]) -> Callable[P, R]:
    """`function`, run with this thread's caller in whatever thread calls it."""
    caller = _current.get()
    if caller is None:
        return function

    def with_caller(*args: P.args, **kwargs: P.kwargs) -> R:
        with bound(caller):
            return function(*args, **kwargs)

    return with_caller


class CallerStream(io.TextIOBase):
    """`sys.stdout` or `sys.stderr` of a process that serves commands: what a command prints
    goes to its caller's stream, anything else to the process's own."""

    def __init__(self, name: str, own: Any) -> None:
        super().__init__()
        self.name, self.own = name, own

    def target(self) -> Stream:
        caller = _current.get()
        return self.own if caller is None else getattr(caller, self.name)

    def write(self, text: str) -> int:
        return self.target().write(text)

    def flush(self) -> None:
        self.target().flush()

    def isatty(self) -> bool:
        return self.target().isatty()

    def fileno(self) -> int:
        return self.own.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.target(), "encoding", None) or "utf-8"


def serve_streams() -> None:
    """Make `sys.stdout` and `sys.stderr` follow each command's caller (again when something
    else replaced them since)."""
    if not isinstance(sys.stdout, CallerStream):
        sys.stdout = CallerStream("stdout", sys.stdout)
    if not isinstance(sys.stderr, CallerStream):
        sys.stderr = CallerStream("stderr", sys.stderr)
