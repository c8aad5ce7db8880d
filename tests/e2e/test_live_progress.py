"""`runoff bronze` on a terminal: a live status line while micro-batches run, then the plain lines.

The command runs as a real process on a pseudo-terminal (`tests/terminal.py`). Its raw output
must hold the live line of a running batch (its file count, elapsed times) redrawn in place;
the screen it leaves must hold what a pipe gets: each batch line once, the summary once, and no
trace of the live line. (Off a terminal the output is the plain lines only:
tests/unit/core/test_live_status.py, and every test that reads the CLI's output.)
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from core.config import RunoffConfig
from delta_tables.ledger import read_runs
from tests import expected
from tests.conftest import REPO_ROOT
from tests.spark.jobs.bronze.test_job import land
from tests.terminal import run_on_terminal, screen_lines

pytestmark = [pytest.mark.slow]

RUN_TIMEOUT_S = 300
# Variables that would make rich decide the terminal question itself.
RICH_OVERRIDES = ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "COLUMNS")
LIVE = re.compile(
    r"bronze events batch (\d+) running: 1 file, ([^\r\n\x1b]*?)(\d+\.\d) s \(run (\d+\.\d) s\)"
)


def test_bronze_on_a_terminal_shows_a_live_line_and_leaves_the_plain_lines(tmp_path: Path) -> None:
    config = RunoffConfig.from_sources(home=tmp_path / "home", env={})
    files = land(config, "events", files=2, seed=4)
    env = {k: v for k, v in os.environ.items() if k not in RICH_OVERRIDES}
    env.update({"PYTHONPATH": str(REPO_ROOT), "RUNOFF_SPARK_MASTER": "local[2]", "TERM": "xterm"})
    argv = [sys.executable, "-m", "jobs.cli", "--home", str(config.home), "bronze", "events"]
    raw, code = run_on_terminal(
        [*argv, "--max-files-per-trigger", "1"], REPO_ROOT, env, RUN_TIMEOUT_S
    )
    text = raw.decode(errors="replace")
    assert code == 0, text

    # The live display: a running batch's line, with its one file and elapsed times, drawn
    # over itself (carriage return, erase line) a few times a second; the cursor hidden meanwhile.
    live = LIVE.findall(text)
    assert {batch for batch, *_ in live} == {"0", "1"}, text
    assert any("rows in" in details for _, details, _, _ in live), text  # after the count
    assert any(float(run) > float(batch) > 0 for _, _, batch, run in live), text
    assert re.search(r"\r\x1b\[2Kbronze events batch \d running: ", text), text
    assert "\x1b[?25l" in text and "\x1b[?25h" in text, text  # the cursor comes back

    # What stays on the screen: the plain lines, each once; the live line is gone.
    screen = [line for line in screen_lines(raw) if line]
    batches = [line for line in screen if line.startswith("bronze events batch ")]
    assert [line.split(":")[0] for line in batches] == [
        f"bronze events batch {n}" for n in range(2)
    ], screen
    assert all(re.fullmatch(r"bronze events batch \d: 1 file, .* s", b) for b in batches), screen
    summaries = [line for line in screen if line.startswith("bronze events: success in ")]
    valid, malformed, _ = expected.counts(files)
    assert len(summaries) == 1, screen
    assert f"2 batches, 2 files, {valid} rows written, {malformed} quarantined" in summaries[0]
    assert screen[-1] == summaries[0], screen
    for line in screen:
        assert not re.search(r"running:|waiting for the next batch|starting the stream", line)
        assert "\x1b" not in line and "\r" not in line, line
    assert read_runs(config.runs_path, "events")[-1]["status"] == "success"
