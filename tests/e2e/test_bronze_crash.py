"""Crash safety of `runoff bronze`: SIGKILL at random moments, restart, finish: exactly once.

One runoff home; `runoff bronze events --max-files-per-trigger 1` runs as a real process (its own
process group: the Python driver, the JVM and the Python workers die together, as on a machine
crash) and is killed at a random moment, again and again: sometimes while it starts (lock,
checkpoint, JVM), mostly within a micro-batch (after the first batch line plus a random delay:
parsing, writing bronze, writing quarantine, Spark's offset and commit logs, archiving). New
files land between some runs. Then a last run finishes, and every landing file's valid lines
must be in bronze exactly once and its malformed lines in quarantine exactly once.

RUNOFF_SOAK_RUNS sets the number of killed runs (default 4; the soak runs 50:
`RUNOFF_SOAK_RUNS=50 uv run --frozen pytest tests/e2e/test_bronze_crash.py`).
RUNOFF_SOAK_SEED replays the kill schedule of a failed run (printed at the start).
"""

from __future__ import annotations

import contextlib
import os
import queue
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import pytest

from core.config import RunoffConfig
from delta_tables.ledger import read_runs
from jobs.bronze.job import landing_dirs
from tests import expected
from tests.conftest import REPO_ROOT
from tests.spark.jobs.bronze.test_job import assert_tables_hold_exactly, land
from tests.terminal import run_on_terminal, screen_lines

pytestmark = [pytest.mark.slow]

KILLED_RUNS = int(os.environ.get("RUNOFF_SOAK_RUNS", "4"))
EARLY_KILL_SHARE = 0.4  # killed at a random moment from the start (startup, lock, first batch)
RUN_TIMEOUT_S = 600


def start_bronze(home: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jobs.cli",
            "--home",
            str(home),
            "bronze",
            "events",
            "--max-files-per-trigger",
            "1",
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: the JVM dies with it
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "RUNOFF_SPARK_MASTER": "local[2]"},
    )


def pump(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line.rstrip("\n"))
    lines.put(None)


def kill_group(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=60)


def drain(lines: queue.Queue[str | None], timeout: float) -> list[str]:
    """The rest of a finished run's output (up to the end-of-output marker)."""
    rest: list[str] = []
    deadline = time.monotonic() + timeout
    while (line := lines.get(timeout=max(0.1, deadline - time.monotonic()))) is not None:
        rest.append(line)
    return rest


def group_ends(pgid: int, timeout: float) -> bool:
    """Wait until no process of the group is left (the JVM follows its driver out)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.5)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    return False


def wait_for_batches(lines: queue.Queue[str | None], count: int, log: list[str]) -> bool:
    """Wait until `count` batch lines were printed; False if the run ended first."""
    seen = 0
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while seen < count:
        try:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            pytest.fail(f"no batch line within {RUN_TIMEOUT_S} s; output: {log[-20:]}")
        if line is None:
            return False
        log.append(line)
        seen += "bronze events batch " in line
    return True


def test_sigkill_at_random_moments_then_finish_ingests_every_line_once(tmp_path: Path) -> None:
    seed = int(os.environ.get("RUNOFF_SOAK_SEED", str(random.SystemRandom().randrange(10**6))))
    print(f"kill schedule seed: RUNOFF_SOAK_SEED={seed}, killed runs: {KILLED_RUNS}")
    rng = random.Random(seed)
    config = RunoffConfig.from_sources(home=tmp_path / "home", env={})
    files = land(config, "events", files=6, seed=0)

    for attempt in range(KILLED_RUNS):
        process = start_bronze(config.home)
        assert process.stdout is not None
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=pump, args=(process.stdout, lines), daemon=True).start()
        log: list[str] = []
        output_ended = False
        if rng.random() < EARLY_KILL_SHARE:
            after = rng.uniform(0.5, 12.0)
            moment = f"{after:.1f} s after the start"
            time.sleep(after)
        else:
            # A micro-batch of one file takes a few seconds: the delay lands anywhere in the
            # next one (parse, bronze commit, quarantine commit, offset/commit logs, archiving).
            delay = rng.uniform(0.0, 4.0)
            moment = f"{delay:.1f} s after the first batch line"
            if wait_for_batches(lines, 1, log):
                time.sleep(delay)
            else:  # it ended without a batch (nothing new to ingest), output read to the end
                output_ended = True
        ended = process.poll()
        kill_group(process)
        if ended is not None:  # it finished before the kill: it must have succeeded
            rest = [] if output_ended else drain(lines, timeout=60)
            assert ended == 0, [*log, *rest]
        print(f"run {attempt}: killed {moment} (exit {process.returncode}); last: {log[-1:]}")
        if attempt % 2:  # new files keep arriving between crashes
            files += land(config, "events", files=1, seed=100 + attempt)

    final = start_bronze(config.home)
    output, _ = final.communicate(timeout=RUN_TIMEOUT_S)
    print(output)
    assert final.returncode == 0, output

    assert_tables_hold_exactly(config, "events", files)
    assert read_runs(config.runs_path, "events")[-1]["status"] == "success"
    landing, archived = landing_dirs(config, "events")
    for f in files:  # no landing file lost or duplicated by archiving under crashes
        assert f.path.exists() != (archived / f.path.relative_to(landing)).exists(), f.path
    valid, malformed, _ = expected.counts(files)
    print(f"{len(files)} files, {valid} records, {malformed} malformed lines: exactly once")


def test_sigterm_ends_the_run_as_interrupted_and_the_next_run_finishes(tmp_path: Path) -> None:
    """SIGTERM (Airflow, systemd, `docker stop`) mid-run: exit 143, one clear line, an
    `interrupted` ledger row, the lock released, and nothing lost or duplicated afterwards."""
    config = RunoffConfig.from_sources(home=tmp_path / "home", env={})
    files = land(config, "events", files=4, seed=1)
    process = start_bronze(config.home)
    assert process.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=pump, args=(process.stdout, lines), daemon=True).start()
    log: list[str] = []
    assert wait_for_batches(lines, 1, log), log
    process.send_signal(signal.SIGTERM)  # the driver only, as a supervisor does
    assert process.wait(timeout=120) == 128 + signal.SIGTERM, log
    log += drain(lines, timeout=60)
    # The driver's last word is this one line, and the output holds nothing but runoff's lines:
    # what the JVM prints (its start-up warning, the interrupted query's stack, printed as it
    # outlives the driver by a moment) goes to the home's log.
    runoff_lines = [line for line in log if line.startswith("runoff")]
    assert len(runoff_lines) == 1, log
    assert [line for line in log if not line.startswith(("bronze events", "runoff"))] == [], log
    assert re.fullmatch(
        "runoff: terminated \\(SIGTERM\\); the next run resumes from the checkpoint"
        f"( \\(Spark's messages: {re.escape(str(config.home / 'logs' / 'runoff.log'))}\\))?",
        runoff_lines[0],
    ), log
    assert group_ends(process.pid, timeout=60), "the JVM outlived the terminated driver"
    last = read_runs(config.runs_path, "events")[-1]
    assert (last["status"], last["error"]) == ("interrupted", "terminated by SIGTERM")

    final = start_bronze(config.home)
    output, _ = final.communicate(timeout=RUN_TIMEOUT_S)
    assert final.returncode == 0, output
    assert_tables_hold_exactly(config, "events", files)
    assert read_runs(config.runs_path, "events")[-1]["status"] == "success"


def test_ctrl_c_on_a_terminal_prints_one_line(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT to the foreground process group of a terminal) mid-run: exit 130 and one
    line after the last batch line on the screen (the live status line erased); py4j's and
    PySpark's tracebacks go to the home's log file, which the line names."""
    config = RunoffConfig.from_sources(home=tmp_path / "home", env={})
    land(config, "events", files=4, seed=2)
    interrupted: list[bool] = []

    def ctrl_c(output: bytes, pid: int) -> None:
        if not interrupted and b"bronze events batch 0:" in output:  # not the live line
            os.killpg(os.getpgid(pid), signal.SIGINT)  # what the terminal does on Ctrl-C
            interrupted.append(True)

    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "RUNOFF_SPARK_MASTER": "local[2]"}
    argv = ["--home", str(config.home), "bronze", "events", "--max-files-per-trigger", "1"]
    command = [sys.executable, "-m", "jobs.cli", *argv]
    output, code = run_on_terminal(command, REPO_ROOT, env, RUN_TIMEOUT_S, ctrl_c)
    text = "\n".join(screen_lines(output))  # what the terminal shows once the run ended
    assert interrupted, text
    assert code == 130, text
    after = text[text.index("bronze events batch 0") :].splitlines()[1:]
    after = [line for line in after if not line.startswith("bronze events batch ")]
    log = config.home / "logs" / "runoff.log"
    resume = "runoff: interrupted; the next run resumes from the checkpoint"
    assert after in ([resume], [f"{resume} (Spark's messages: {log})"]), text
    # Nothing but runoff's lines on the screen, before the interrupt either (the JVM's start-up
    # warning goes to the log).
    shown = [line for line in text.splitlines() if line.strip()]
    assert all(line.startswith(("bronze events", "runoff")) for line in shown), text
