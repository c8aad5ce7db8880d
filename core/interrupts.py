"""SIGTERM (Airflow, systemd, `docker stop`) ends a run like Ctrl-C: recorded as `interrupted`.

The CLI installs `install()` for the duration of a command. The handler remembers the signal and
raises `Terminated` (a `KeyboardInterrupt`, so `except Exception` blocks let it through and the
checkpoint locks are released on the way out). py4j turns an interrupt that arrives while the
driver waits for the JVM into its own network error, so the ledger and the CLI ask `received()`
rather than trusting the exception's type. The checkpoint is untouched by an interrupted batch:
the next run replays it (exactly once, as after a crash). Under `runoff serve` a command runs
in a thread of its own: its client's signals arrive in its caller's list (`core.caller`: each
served command its own) and are raised by `check()`.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

from core.caller import current
from core.errors import RunoffError

_process_received: list[int] = []


def _received() -> list[int]:
    """The signals of the command running in this thread: its caller's, else the process's."""
    caller = current()
    return _process_received if caller is None else caller.signals


class Terminated(KeyboardInterrupt):
    """Raised in the main thread when SIGTERM arrives."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    _process_received.append(signum)
    raise Terminated


def install() -> Any:
    """Handle SIGTERM (main thread only); returns the handler to give back to `restore`."""
    reset()
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _on_sigterm)


def restore(previous: Any) -> None:
    if previous is not None:
        signal.signal(signal.SIGTERM, previous)


def received(signum: int = signal.SIGTERM) -> bool:
    """True once `signum` (SIGTERM unless named) arrived during the current command."""
    return signum in _received()


def deliver(signum: int) -> None:
    """A signal for the command running in this thread from elsewhere (`runoff run A B` stopping
    its datasets). The command sees it at its next `check()`. (`runoff serve` appends its
    client's signals to the command's caller.)"""
    _received().append(signum)


def reset() -> None:
    _received().clear()


def check() -> None:
    """Raise the interrupt of a delivered signal (streaming loops call it between waits)."""
    received_now = _received()
    if signal.SIGTERM in received_now:
        raise Terminated
    if received_now:
        raise KeyboardInterrupt


def exit_code(exc: BaseException) -> int:
    """The exit code of a command that raised `exc`: 143 after SIGTERM, 130 after Ctrl-C, a
    runoff error's own code, else 1."""
    if received():
        return 128 + signal.SIGTERM
    if isinstance(exc, KeyboardInterrupt) or received(signal.SIGINT):
        return 130
    return exc.exit_code if isinstance(exc, RunoffError) else 1
