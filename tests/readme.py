"""The README's fenced blocks as a user copies them, and a fresh shell to type them into.

A fresh shell is `bash` with an empty environment but HOME and the system's default PATH: what a
new terminal on a machine with runoff cloned has before the user exports what the README tells
them to. `verbatim` swaps the README's placeholder folders for real ones (a user types their
own); nothing else of a block is changed.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO_ROOT

# Debian's default PATH for a login shell (/etc/profile, /etc/login.defs ENV_SUPATH).
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
REPOSITORY_PLACEHOLDER = "/path/to/runoff"
SHOP_PLACEHOLDER = "/tmp/shop"  # the walkthrough's folder
# Box-drawing characters of rich's tables: a cell's content is compared, not its padding.
TABLE_RULES = "┏┳┓┡╇┩└┴┘━┃│"
_FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```$", re.M | re.S)


@dataclass(frozen=True)
class Block:
    lang: str  # the fence's info string: bash, yaml, python, or "" (a console transcript)
    text: str  # its lines, the fence's indentation removed
    before: str  # the prose between the previous block and this one


def readme_blocks() -> list[Block]:
    return blocks((REPO_ROOT / "README.md").read_text())


def section(title: str) -> str:
    """The README's `## title` section, up to the next `## ` heading."""
    text = (REPO_ROOT / "README.md").read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def blocks(text: str) -> list[Block]:
    found, last = [], 0
    for match in _FENCE.finditer(text):
        indent = len(match.group(1))
        body = "".join(line[indent:] for line in match.group(3).splitlines(keepends=True))
        found.append(Block(match.group(2), body, text[last : match.start()]))
        last = match.end()
    return found


def commands(transcript: Block) -> list[tuple[str, list[str]]]:
    """A console transcript's `$ command` lines, each with the output lines shown after it."""
    steps: list[tuple[str, list[str]]] = []
    for line in transcript.text.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
    return steps


def verbatim(text: str, shop: Path) -> str:
    """`text` with the README's placeholder folders replaced: the repository's path, and the
    walkthrough's /tmp/shop by `shop`."""
    return text.replace(REPOSITORY_PLACEHOLDER, str(REPO_ROOT)).replace(SHOP_PLACEHOLDER, str(shop))


def fresh_environment(home: Path) -> dict[str, str]:
    return {"HOME": str(home), "PATH": SYSTEM_PATH, "LANG": "C.UTF-8"}


class Typist:
    """A fresh `bash` reading what is typed line by line, as a terminal's user types it, and
    the output so far (stdout and stderr together)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    def type(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text if text.endswith("\n") else text + "\n")
        self.process.stdin.flush()

    def wait_for(self, text: str, timeout: float) -> str:
        """Everything printed so far, once `text` has been printed (a failure after `timeout`)."""
        deadline = time.monotonic() + timeout
        while text not in (printed := "".join(self.lines)):
            assert time.monotonic() < deadline, f"no {text!r} within {timeout:.0f} s:\n{printed}"
            assert self.process.poll() is None or self._reader.is_alive(), printed
            time.sleep(0.2)
        return printed


@contextlib.contextmanager
def typist(home: Path, cwd: Path) -> Iterator[Typist]:
    """A `Typist` on a fresh shell in `cwd`; its process group (whatever it started in the
    background too) is killed at the end."""
    process = subprocess.Popen(
        ["bash", "--noprofile", "--norc", "-s"],
        env=fresh_environment(home),
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        yield Typist(process)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=60)


def fresh_shell(script: str, home: Path, cwd: Path, timeout: float) -> str:
    """Run `script` in a fresh `bash` (see the module's docstring); return what it printed
    (stdout and stderr as a terminal shows them). The script's own exit code is not checked:
    scripts report each command's with `echo`."""
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", script],
        env=fresh_environment(home),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        check=False,
    )
    return done.stdout


_RUN_TIME = re.compile(r"20(2[5-9]|[3-9]\d)-\d\d-\d\d[T ]\d\d:\d\d:\d\d")  # a run's own time
_SECONDS = re.compile(r"\b\d+(\.\d+)? ?s\b")


def comparable(line: str) -> str:
    """A printed line without what differs from run to run: durations, the time a run or commit
    happened, and the width of table cells."""
    line = _SECONDS.sub("<s>", _RUN_TIME.sub("<now>", line))
    if any(rule in line for rule in TABLE_RULES):
        cells = [cell.strip() for cell in re.split(f"[{TABLE_RULES}]", line)]
        # the ledger's `seconds` column: one decimal, no unit
        cells = ["<s>" if re.fullmatch(r"\d+\.\d", cell) else cell for cell in cells]
        line = " | ".join(cell for cell in cells if cell)
    return line.rstrip()


def shown_in_order(shown: list[str], printed: list[str]) -> list[str]:
    """The shown lines (README's `...` marks what it leaves out) that `printed` lacks, in
    order: each must appear after the previous one. Empty when every line is there."""
    lines = [comparable(line) for line in printed]
    lines = [line for line in lines if line]
    missing, at = [], 0
    for wanted in (comparable(line) for line in shown):
        if not wanted or wanted == "...":
            continue
        try:
            at = lines.index(wanted, at) + 1
        except ValueError:
            missing.append(wanted)
    return missing
