"""A command on a pseudo-terminal, and the text a terminal would show after its output.

`run_on_terminal` runs a command with a pty as its stdin, stdout and stderr (what `runoff` sees
in an interactive shell) and returns its raw output; `screen_lines` plays that output on a tiny
terminal emulator: carriage return, line feed (returning the carriage too, as a tty adds it),
backspace, and the CSI sequences rich's live display uses (erase in line `K`, cursor up `A` /
down `B` / column `G`); other escape sequences (colours, cursor visibility) change no text.
Lines never wrap and scroll back without limit, so every line ever left on the screen is kept.
"""

from __future__ import annotations

import contextlib
import os
import pty
import re
import select
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

# A CSI sequence (parameters, final letter), another escape, a control character, or text.
TOKENS = re.compile(r"\x1b\[([0-9;?]*)([@-~])|\x1b[@-Z\\-_]|([\r\n\b])|([^\x1b\r\n\b]+)")


def screen_lines(raw: bytes | str) -> list[str]:
    """The lines a terminal shows once `raw` was written to it (trailing blanks dropped)."""
    text = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
    lines: list[str] = [""]
    row = column = 0
    for match in TOKENS.finditer(text):
        params, final, control, chars = match.groups()
        if chars:
            line = lines[row].ljust(column)
            lines[row] = line[:column] + chars + line[column + len(chars) :]
            column += len(chars)
        elif control == "\r":
            column = 0
        elif control == "\b":
            column = max(column - 1, 0)
        elif control == "\n":  # the tty's `onlcr` (on by default) adds a carriage return
            row, column = row + 1, 0
        elif final:
            count = int(params) if params.isdigit() else None
            if final == "A":
                row = max(row - (count or 1), 0)
            elif final == "B":
                row += count or 1
            elif final == "G":
                column = (count or 1) - 1
            elif final == "K":  # 0: to the end of the line, 1: to the cursor, 2: all of it
                line = lines[row]
                if count == 2:
                    lines[row] = ""
                elif count == 1:
                    lines[row] = " " * min(column + 1, len(line)) + line[column + 1 :]
                else:
                    lines[row] = line[:column]
        while len(lines) <= row:
            lines.append("")
    while lines and not lines[-1].strip():
        lines.pop()
    return [line.rstrip() for line in lines]


def run_on_terminal(
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    on_output: Callable[[bytes, int], None] | None = None,
) -> tuple[bytes, int]:
    """Run `argv` on a new pseudo-terminal; its raw output and exit code.

    `on_output(output so far, pid)` is called after each read (to send a signal mid-run, say).
    The command is killed (its process group) if it outlives `timeout` seconds.
    """
    pid, terminal = pty.fork()
    if pid == 0:  # the child: the command on the pseudo-terminal
        try:
            os.chdir(cwd)
            os.execve(argv[0], list(argv), dict(env))
        finally:
            os._exit(127)
    output = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not select.select([terminal], [], [], 0.5)[0]:
                continue
            try:
                chunk = os.read(terminal, 65536)
            except OSError:  # the terminal closed: the command is over
                break
            if not chunk:
                break
            output += chunk
            if on_output is not None:
                on_output(output, pid)
        else:
            os.killpg(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(terminal)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)  # the JVM, if the driver left it behind
    return output, os.waitstatus_to_exitcode(status)
