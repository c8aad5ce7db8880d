"""`runoff serve` and its clients: the same commands, the same rows, the same exit codes.

One server for the module (`runoff serve --socket ...`, a real process with its own JVM and a
1 GiB driver, stopped by its pid at the end); each test drives it with `runoff` clients (real
processes with `RUNOFF_SERVER` set) in homes of its own, and compares the tables with
tests/expected.py.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from core.config import RunoffConfig
from core.locking import checkpoint_lock
from delta_tables.ledger import read_runs
from jobs.ops.status import bronze_checkpoint
from tests.conftest import REPO_ROOT
from tests.e2e.test_huge_line import (
    DRIVER_MEMORY,
    assert_the_huge_line_quarantined,
    land_a_huge_line,
)
from tests.spark.jobs.bronze.test_job import assert_tables_hold_exactly, land
from tests.tables import assert_silver_matches_expected, snapshot_tables
from tests.terminal import run_on_terminal, screen_lines

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

# The TCP address's shared secret, made for this module's server.
SECRET = secrets.token_hex(32)
START_TIMEOUT = 240.0
RUN_TIMEOUT = 300.0
RESUME = "the next run resumes from the checkpoint"


@dataclass
class Server:
    socket: Path
    process: subprocess.Popen[bytes]
    log: Path
    tcp: str  # its TCP address, tcp://127.0.0.1:PORT (`--listen`), or ""

    def env(self, server: str | None = None, secret: str | None = None) -> dict[str, str]:
        """A client's environment: the Unix socket, or `server` (with `secret`, if any)."""
        clean = {k: v for k, v in os.environ.items() if not k.startswith("RUNOFF_")}
        env = {**clean, "PYTHONPATH": str(REPO_ROOT), "RUNOFF_SERVER": server or str(self.socket)}
        return env if secret is None else {**env, "RUNOFF_SERVER_SECRET": secret}

    def command(self, home: Path, *args: str) -> list[str]:
        return [sys.executable, "-m", "jobs.cli", "--home", str(home), *args]

    def run(
        self, home: Path, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(home, *args),
            cwd=REPO_ROOT,
            env=env or self.env(),
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            check=False,
        )

    def start(self, home: Path, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.command(home, *args),
            cwd=REPO_ROOT,
            env=self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


@contextlib.contextmanager
def serving(root: Path, secret: str | None = None) -> Iterator[Server]:
    """`runoff serve` on a Unix socket in `root` (with `secret`: also on a free TCP port of
    loopback), a real process in a process group of its own, with a 1 GiB driver; killed with its
    group at the end if it still runs."""
    socket_path = root / "runoff.sock"
    log = root / "serve.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNOFF_")}
    env.update({"PYTHONPATH": str(REPO_ROOT), "RUNOFF_SPARK_MASTER": "local[2]"})
    env["RUNOFF_SPARK_CONF"] = DRIVER_MEMORY
    argv = ["--home", str(root / "home"), "serve", "--socket", str(socket_path)]
    tcp = ""
    if secret is not None:
        env["RUNOFF_SERVER_SECRET"] = secret
        with socket.socket() as probe:  # a free port on loopback
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        argv += ["--listen", f"127.0.0.1:{port}"]
        tcp = f"tcp://127.0.0.1:{port}"
    process = subprocess.Popen(
        [sys.executable, "-m", "jobs.cli", *argv],
        cwd=REPO_ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while "runoff: serving on" not in log.read_text(errors="replace"):
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.5)
        yield Server(socket_path, process, log, tcp)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=60)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving(tmp_path_factory.mktemp("server"), SECRET) as served:
        yield served
        # SIGTERM stops it: Spark stopped, socket removed, exit 0.
        served.process.send_signal(signal.SIGTERM)
        assert served.process.wait(timeout=120) == 0, served.log.read_text()[-3000:]
        assert not served.socket.exists()
        assert served.log.read_text().rstrip().endswith("runoff: server stopped")


def test_a_pipeline_through_the_server_holds_exactly_the_landed_rows(
    server: Server, tmp_path: Path
) -> None:
    config = RunoffConfig.from_sources(home=tmp_path / "home", env={})
    files = land(config, "events", files=3, seed=11)
    bronze = server.run(config.home, "bronze", "events")
    assert bronze.returncode == 0, bronze.stderr
    summary = [line for line in bronze.stdout.splitlines() if "bronze events: success" in line]
    assert len(summary) == 1, bronze.stdout  # printed once
    assert_tables_hold_exactly(config, "events", files)
    for command in ("silver", "validate"):
        done = server.run(config.home, command, "events")
        assert done.returncode == 0, done.stdout + done.stderr
    assert_silver_matches_expected(config, "events")
    # The ledger: one row per command, written by the server in the client's home.
    layers = [r["layer"] for r in read_runs(config.runs_path)]
    assert sorted(layers) == ["bronze", "silver", "validate"]
    # Nothing new: a run through the warm driver changes nothing.
    tables = snapshot_tables(config, "events")
    again = server.run(config.home, "run", "events")
    assert again.returncode == 0, again.stderr
    assert snapshot_tables(config, "events") == tables


def test_a_tcp_client_with_the_secret_is_served_and_one_without_is_refused(
    server: Server, tmp_path: Path
) -> None:
    """`--listen`: a client naming tcp://127.0.0.1:PORT with the server's secret runs its
    command in the server exactly as a Unix socket's client does; without the secret, or with
    another, it is refused in one line (exit 2) and nothing is written."""
    config = RunoffConfig.from_sources(home=tmp_path / "home", env={})
    files = land(config, "events", files=2, seed=12)
    for secret in (None, "another-secret-of-enough-length"):
        refused = server.run(config.home, "bronze", "events", env=server.env(server.tcp, secret))
        assert refused.returncode == 2, refused.stderr
        assert len(refused.stderr.splitlines()) == 1, refused.stderr
        assert "RUNOFF_SERVER_SECRET" in refused.stderr
        assert not config.bronze_path("events").exists()
    served = server.run(config.home, "bronze", "events", env=server.env(server.tcp, SECRET))
    assert served.returncode == 0, served.stderr
    assert_tables_hold_exactly(config, "events", files)
    assert [r["layer"] for r in read_runs(config.runs_path)] == ["bronze"]
    assert SECRET not in server.log.read_text(errors="replace")


def test_exit_codes_through_the_server_are_the_documented_ones(
    server: Server, tmp_path: Path
) -> None:
    config = RunoffConfig.from_sources(home=tmp_path / "home", env={})
    land(config, "events", files=1, seed=12)
    unknown = server.run(config.home, "bronze", "nope")
    assert unknown.returncode == 2
    assert unknown.stderr.count("\n") == 1 and "nope" in unknown.stderr, unknown.stderr
    empty = server.run(
        config.home, "backfill", "events", "--start", "2024-01-02", "--end", "2024-01-01"
    )
    assert empty.returncode == 2, empty.stderr
    assert empty.stderr.startswith("runoff: error: --end"), empty.stderr
    with checkpoint_lock(bronze_checkpoint(config, "events"), "a test"):
        held = server.run(config.home, "bronze", "events")
    assert held.returncode == 3, held.stderr
    assert held.stderr.count("\n") == 1 and "is in use by pid" in held.stderr, held.stderr
    # The server is fine afterwards: the same command now succeeds.
    assert server.run(config.home, "bronze", "events").returncode == 0


def test_ctrl_c_on_a_terminal_stops_the_command_in_the_server(
    server: Server, tmp_path: Path
) -> None:
    """SIGINT to the client's process group mid-run: exit 130 and one line, as a local run (the
    live status line shown on the client's terminal meanwhile); the ledger says interrupted; the
    next run finishes exactly once."""
    config = RunoffConfig.from_sources(home=tmp_path / "home", env={})
    files = land(config, "events", files=4, seed=13)
    interrupted: list[bool] = []

    def ctrl_c(output: bytes, pid: int) -> None:
        if not interrupted and b"bronze events batch 0:" in output:  # not the live line
            os.killpg(os.getpgid(pid), signal.SIGINT)  # what the terminal does on Ctrl-C
            interrupted.append(True)

    argv = server.command(config.home, "bronze", "events", "--max-files-per-trigger", "1")
    output, code = run_on_terminal(argv, REPO_ROOT, server.env(), RUN_TIMEOUT, ctrl_c)
    assert b"bronze events batch 0 running: 1 file" in output, output  # the live status line
    text = "\n".join(screen_lines(output))  # what the terminal shows once the client ended
    assert interrupted, text
    assert code == 130, text
    after = text[text.index("bronze events batch 0") :].splitlines()[1:]
    after = [line for line in after if line.strip() and "bronze events batch" not in line]
    assert len(after) == 1 and after[0].startswith(f"runoff: interrupted; {RESUME}"), text
    runs = read_runs(config.runs_path)
    assert [(r["layer"], r["status"]) for r in runs] == [("bronze", "interrupted")], runs
    finished = server.run(config.home, "bronze", "events")
    assert finished.returncode == 0, finished.stderr
    assert_tables_hold_exactly(config, "events", files)


def test_sigterm_and_a_vanished_client_stop_their_command_only_and_the_server_goes_on(
    server: Server, tmp_path: Path
) -> None:
    config = RunoffConfig.from_sources(home=tmp_path / "home", env={})
    files = land(config, "events", files=6, seed=14)
    client = server.start(config.home, "bronze", "events", "--max-files-per-trigger", "1")
    assert client.stdout is not None and client.stderr is not None
    assert "bronze events batch 0" in client.stdout.readline()
    client.send_signal(signal.SIGTERM)
    assert client.wait(timeout=RUN_TIMEOUT) == 143
    assert client.stderr.read().startswith(f"runoff: terminated (SIGTERM); {RESUME}")
    # A client killed outright: the server stops its command when the connection drops, and
    # that command only: another client's, running beside it, goes on to the end.
    client = server.start(config.home, "bronze", "events", "--max-files-per-trigger", "1")
    assert client.stdout is not None
    assert "bronze events batch" in client.stdout.readline()
    beside = RunoffConfig.from_sources(home=tmp_path / "beside", env={})
    beside_files = land(beside, "events", files=3, seed=15)
    bystander = server.start(beside.home, "bronze", "events", "--max-files-per-trigger", "1")
    assert bystander.stdout is not None
    assert "bronze events batch 0" in bystander.stdout.readline()
    client.kill()
    client.wait(timeout=60)
    _, err = bystander.communicate(timeout=RUN_TIMEOUT)
    assert bystander.returncode == 0, err
    assert [r["status"] for r in read_runs(beside.runs_path)] == ["success"]
    assert_tables_hold_exactly(beside, "events", beside_files)
    finished = server.run(config.home, "bronze", "events")
    assert finished.returncode == 0, finished.stderr
    assert_tables_hold_exactly(config, "events", files)
    statuses = [r["status"] for r in read_runs(config.runs_path)]
    assert statuses.count("interrupted") == 2 and statuses[-1] == "success", statuses


def test_commands_run_side_by_side_up_to_the_limit_and_one_dataset_once(
    server: Server, tmp_path: Path
) -> None:
    """The module's server runs 2 commands at once. While a first bronze runs: the same dataset
    again is refused by the checkpoint's lock (exit 3) naming it; a second home's bronze runs
    beside it without waiting; a third waits for a free slot, saying what runs, then runs. Each
    client gets only its own lines and exit code, each home its own ledger rows and exactly its
    own files' rows."""
    names = ("first", "second", "third")
    configs = {n: RunoffConfig.from_sources(home=tmp_path / n, env={}) for n in names}
    files = {"first": 4, "second": 3, "third": 1}
    landed = {
        n: land(configs[n], "events", files=files[n], seed=20 + i) for i, n in enumerate(names)
    }
    running = {}
    for name in ("first", "second"):
        started = server.start(
            configs[name].home, "bronze", "events", "--max-files-per-trigger", "1"
        )
        assert started.stdout is not None
        assert "bronze events batch 0" in started.stdout.readline()
        running[name] = started
        if name == "first":
            again = server.run(configs[name].home, "bronze", "events")
            assert again.returncode == 3, again.stdout + again.stderr
            [line] = again.stderr.splitlines()
            assert "is in use by pid" in line and "(runoff bronze events, since" in line, line
    assert running["first"].poll() is None, "the first ended before the second ran: no overlap"
    third = server.run(configs["third"].home, "bronze", "events")
    assert third.returncode == 0, third.stderr
    waited = [line for line in third.stderr.splitlines() if "waiting" in line]
    assert len(waited) == 1, third.stderr
    assert waited[0].startswith("runoff: waiting for a free slot of the server (runoff --home ")
    assert waited[0].count("bronze events --max-files-per-trigger 1") == 2, waited
    outputs = {"third": third.stdout}
    for name, process in running.items():
        out, err = process.communicate(timeout=RUN_TIMEOUT)
        assert process.returncode == 0, err
        assert "waiting" not in err, err
        outputs[name] = out
    for name in names:
        batches = [line for line in outputs[name].splitlines() if "bronze events batch" in line]
        # its own batches: one per file (batch 0 of the first two was read above), one for all
        assert len(batches) == (files[name] - 1 if name != "third" else 1), outputs[name]
        runs = read_runs(configs[name].runs_path)
        ended = [(r["status"], r["files"]) for r in runs]
        assert ("success", files[name]) in ended, runs
        refused = [("failed", 0)] if name == "first" else []
        assert sorted(ended) == sorted([("success", files[name]), *refused]), runs
        assert_tables_hold_exactly(configs[name], "events", landed[name])


def test_a_line_of_hundreds_of_mib_leaves_the_shared_driver_serving(
    server: Server, tmp_path: Path
) -> None:
    """The huge line of tests/e2e/test_huge_line.py through the server's 1 GiB driver: quarantined,
    the good file ingested, and the same server then serves the next command (a new bronze)."""
    config = RunoffConfig.from_sources(home=tmp_path / "home", env={})
    records = land_a_huge_line(config)
    done = server.run(config.home, "bronze", "events")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "OutOfMemoryError" not in done.stderr + server.log.read_text(errors="replace")
    assert_the_huge_line_quarantined(config, records)
    after = RunoffConfig.from_sources(home=tmp_path / "after", env={})
    files = land(after, "events", files=1, seed=15)
    again = server.run(after.home, "bronze", "events")
    assert again.returncode == 0, again.stderr
    assert_tables_hold_exactly(after, "events", files)
    assert server.process.poll() is None
