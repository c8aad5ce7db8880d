"""`core.console.live_status` and `jobs.streaming.query.CurrentBatch`: the live status line.

Off a terminal the display writes nothing and never asks for its text: the plain lines only. On
a (fake) terminal it draws its line, `say()` prints above it, and it is erased when the block
ends, also when the block raises.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Iterator

import pytest

from core import console as console_module
from core.console import live_status, say
from jobs.streaming.query import CurrentBatch
from tests.terminal import screen_lines

# Variables that would make rich decide the terminal question itself.
RICH_OVERRIDES = ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")


class Stream(io.StringIO):
    """A stream that says whether it is a terminal."""

    def __init__(self, terminal: bool) -> None:
        super().__init__()
        self.terminal = terminal

    def isatty(self) -> bool:
        return self.terminal


@pytest.fixture
def stream_of(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[bool], Stream]]:
    """Points runoff's console at a new stream, terminal or not (restored afterwards)."""
    for name in RICH_OVERRIDES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setattr(console_module.console, "width", 100)

    def make(terminal: bool) -> Stream:
        stream = Stream(terminal)
        # `_file`, not the `file` property: undoing a patch of `file` would pin the console.
        monkeypatch.setattr(console_module.console, "_file", stream)
        return stream

    yield make


def test_not_a_terminal_writes_the_plain_lines_only(stream_of: Callable[[bool], Stream]) -> None:
    stream = stream_of(False)
    asked: list[float] = []

    def describe() -> str:
        asked.append(time.monotonic())
        return "bronze events batch 0 running: 1 file"

    with live_status(describe, refreshes_per_second=50):
        say("bronze events batch 0: 1 file, 10 rows in, 10 written, 0 quarantined, 0.1 s")
        time.sleep(0.1)
    say("bronze events: success")
    assert stream.getvalue() == (
        "bronze events batch 0: 1 file, 10 rows in, 10 written, 0 quarantined, 0.1 s\n"
        "bronze events: success\n"
    )
    assert asked == []


def test_a_dumb_terminal_gets_the_plain_lines_only(
    stream_of: Callable[[bool], Stream], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TERM", "dumb")
    stream = stream_of(True)
    with live_status(lambda: "live", refreshes_per_second=50):
        say("a line")
        time.sleep(0.1)
    assert stream.getvalue() == "a line\n"


def test_a_terminal_shows_the_line_below_the_printed_ones_then_erases_it(
    stream_of: Callable[[bool], Stream],
) -> None:
    stream = stream_of(True)
    interactive = console_module.console.is_interactive
    texts = iter(f"bronze events batch 0 running: 1 file, {n / 10:.1f} s" for n in range(1000))
    with live_status(lambda: next(texts), refreshes_per_second=50):
        time.sleep(0.1)
        say("bronze events batch 0: 1 file, 10 rows in, 10 written, 0 quarantined, 0.1 s")
        during = screen_lines(stream.getvalue())
        time.sleep(0.1)
    say("bronze events: success")
    raw = stream.getvalue()
    assert "\r\x1b[2Kbronze events batch 0 running: 1 file, " in raw  # redrawn in place
    assert during[0].startswith("bronze events batch 0: 1 file, 10 rows in")
    assert during[1].startswith("bronze events batch 0 running: 1 file, ")  # below it
    assert screen_lines(raw) == [
        "bronze events batch 0: 1 file, 10 rows in, 10 written, 0 quarantined, 0.1 s",
        "bronze events: success",
    ]
    assert console_module.console.is_interactive == interactive


def test_the_line_is_erased_when_the_block_raises_and_never_wraps(
    stream_of: Callable[[bool], Stream],
) -> None:
    stream = stream_of(True)
    with pytest.raises(KeyboardInterrupt), live_status(lambda: "x" * 500):
        say("before")
        raise KeyboardInterrupt
    raw = stream.getvalue()
    assert raw.endswith("\x1b[?25h\r\x1b[1A\x1b[2K")  # the cursor back, the line erased
    assert "x" * 98 + "…" in raw and "x" * 99 not in raw  # within the 100 columns
    assert screen_lines(raw) == ["before"]


def test_a_failing_describe_does_not_stop_the_block(stream_of: Callable[[bool], Stream]) -> None:
    stream = stream_of(True)

    def describe() -> str:
        raise ValueError("no")

    with live_status(describe):
        say("still here")
    assert screen_lines(stream.getvalue()) == ["still here"]


def test_current_batch_describes_the_batch_under_way() -> None:
    current = CurrentBatch("bronze events")
    assert current.describe().startswith("bronze events: starting the stream (run ")
    current.start(3, stage="reading the checkpoint")
    assert current.describe().startswith("bronze events batch 3 running: reading the checkpoint, ")
    current.update(files=2, stage="parsing")
    current.update(rows=400, stage="writing bronze")
    text = current.describe()
    assert text.startswith("bronze events batch 3 running: 2 files, 400 rows in, writing bronze, ")
    assert text.endswith(" s)") and " s (run " in text
    current.finish()
    assert current.describe().startswith("bronze events: waiting for the next batch (run ")
    current.restart("silver events_minute")
    current.start(0, files=1)
    assert current.describe().startswith("silver events_minute batch 0 running: 1 file, ")
