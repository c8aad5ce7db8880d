"""Where the CLI's log records go: runoff's own on the terminal, the libraries' in a file.

py4j and PySpark log whole tracebacks when a run is interrupted or a batch fails (through the
root logger, at ERROR); runoff reports those events itself in one line. The OpenLineage client
and urllib3 under it log every retry when a lineage server cannot be reached: `jobs.lineage`
says so in one line per event. Without `--verbose`
their records go to `<home>/logs/runoff.log` (created when the first one arrives) and the
terminal shows runoff's own warnings only; `--verbose` shows everything, at DEBUG, on stderr.
Under `runoff serve` each command's records go the same way, to its own client and home
(`CallerLog`), whatever other commands run beside it.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from pathlib import Path

from core import caller

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# The libraries whose records stay off the terminal (by logger name, and by source folder).
LIBRARY_NAMES = ("py4j", "pyspark", "openlineage", "urllib3")
LIBRARIES = tuple(f"{os.sep}{name}{os.sep}" for name in LIBRARY_NAMES)


def from_library(record: logging.LogRecord) -> bool:
    return record.name.startswith(LIBRARY_NAMES) or any(
        part in record.pathname for part in LIBRARIES
    )


class LibraryLog(logging.Handler):
    """Appends the libraries' records to a file, once `path` is known (the home's `logs/`)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.path: Path | None = None
        self.written = 0
        self.addFilter(from_library)
        self.setFormatter(logging.Formatter(FORMAT))

    def emit(self, record: logging.LogRecord) -> None:
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as log:
                log.write(self.format(record) + "\n")
            self.written += 1
        except OSError:
            self.handleError(record)


def configure(verbose: bool) -> LibraryLog | None:
    """Set up the CLI's logging; returns the library log (None with `--verbose`), whose `path`
    the caller sets once the home is known."""
    terminal = logging.StreamHandler(sys.stderr)
    terminal.setFormatter(logging.Formatter(FORMAT))
    if verbose:
        logging.basicConfig(level=logging.DEBUG, handlers=[terminal])
        return None
    terminal.addFilter(lambda record: not from_library(record))
    library = LibraryLog()
    # Like basicConfig, nothing changes when the process configured logging already (embedding).
    logging.basicConfig(level=logging.WARNING, handlers=[terminal, library])
    return library


# -- under `runoff serve` --------------------------------------------------------------------
class CallerLog(logging.Handler):
    """A served command's records (`core.caller`), as its own process would log them: runoff's
    warnings on its client's stderr (every record with `--verbose`), the libraries' in its
    home's log (`Caller.library`). Records of no command are the server's own handlers'."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter(FORMAT))

    def emit(self, record: logging.LogRecord) -> None:
        served = caller.current()
        if served is None:
            return
        if not served.verbose and from_library(record):
            if served.library is not None and record.levelno >= served.library.level:
                served.library.handle(record)
            return
        if served.verbose or record.levelno >= logging.WARNING:
            try:
                served.stderr.write(self.format(record) + "\n")
            except Exception:  # noqa: BLE001 - the client is gone
                self.handleError(record)


def serve() -> None:
    """Route records to the commands of this server (`CallerLog`): its own handlers keep the
    records of no command, at the level the server was started with; the root logger passes
    DEBUG on while a `--verbose` command runs (`verbose_commands`)."""
    root = logging.getLogger()
    for handler in root.handlers:
        handler.addFilter(lambda record: caller.current() is None)
        if handler.level == logging.NOTSET:
            handler.setLevel(root.level)
    root.addHandler(CallerLog())


class _VerboseCommands:
    """The served `--verbose` commands running: while there is one, the root logger makes DEBUG
    records (`CallerLog` gives them to the verbose commands alone)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.level = logging.WARNING  # the root's level while none runs

    def started(self) -> None:
        root = logging.getLogger()
        with self.lock:
            if self.running == 0:
                self.level = root.level
                root.setLevel(logging.DEBUG)
            self.running += 1

    def ended(self) -> None:
        with self.lock:
            self.running -= 1
            if self.running == 0:
                logging.getLogger().setLevel(self.level)


verbose_commands = _VerboseCommands()
