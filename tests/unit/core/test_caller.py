"""`core.caller`: commands side by side in one process, each with its own caller.

What `runoff serve` relies on when it runs several clients' commands at once (the server itself
is tests/e2e/test_server.py's): each thread bound to a caller prints to that caller's streams,
sees that caller's signals, variables and folder, and hears only its own runs; threads the
command starts carry its caller along.
"""

from __future__ import annotations

import io
import logging
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from core import caller, interrupts
from core.caller import Caller
from core.config import RunoffConfig
from core.console import new_console, say
from delta_tables.ledger import RunRecord, listening, recorded_run
from jobs.cli import logs


def new_caller(cwd: Path, env: dict[str, str] | None = None) -> Caller:
    out, err = io.StringIO(), io.StringIO()
    return Caller(env=env or {}, cwd=cwd, stdout=out, stderr=err, console=new_console(out))


def in_threads(*work: Callable[[], None]) -> None:
    """Run each function in its own thread, all at once; re-raise the first failure."""
    errors: list[BaseException] = []
    start = threading.Barrier(len(work))

    def run(function: Callable[[], None]) -> None:
        try:
            start.wait()
            function()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(w,)) for w in work]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    if errors:
        raise errors[0]


def test_each_command_prints_to_its_own_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own_out, own_err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", own_out)
    monkeypatch.setattr(sys, "stderr", own_err)
    caller.serve_streams()
    callers = {name: new_caller(tmp_path) for name in ("a", "b")}

    def command(name: str) -> Callable[[], None]:
        def lines() -> None:
            with caller.bound(callers[name]):
                for i in range(50):
                    print(f"{name} print {i}")
                    say(f"{name} say {i}")
                    print(f"{name} error {i}", file=sys.stderr)

        return lines

    in_threads(command("a"), command("b"))
    print("the process's own")
    for name, served in callers.items():
        out, err = served.stdout.getvalue(), served.stderr.getvalue()  # type: ignore[attr-defined]
        assert out.splitlines() == [
            line for i in range(50) for line in (f"{name} print {i}", f"{name} say {i}")
        ]
        assert err.splitlines() == [f"{name} error {i}" for i in range(50)]
    assert own_out.getvalue() == "the process's own\n"
    assert own_err.getvalue() == ""


def test_log_records_go_to_their_commands_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under `logs.serve`: runoff's warnings to the command's stderr (all records with
    --verbose), a library's to the command's home log; the server's own records stay its own."""
    own = io.StringIO()
    root = logging.getLogger()
    handler = logging.StreamHandler(own)
    monkeypatch.setattr(root, "handlers", [handler])
    monkeypatch.setattr(root, "level", logging.WARNING)
    logs.serve()
    quiet, verbose = new_caller(tmp_path), new_caller(tmp_path)
    quiet.library = logs.LibraryLog()
    quiet.library.path = tmp_path / "quiet.log"
    verbose.verbose = True
    runoff, library = logging.getLogger("jobs.test"), logging.getLogger("py4j.test")

    def log_as(served: Caller, name: str) -> Callable[[], None]:
        def run() -> None:
            with caller.bound(served):
                if served.verbose:
                    logs.verbose_commands.started()
                runoff.warning("%s warns", name)
                runoff.debug("%s debugs", name)
                library.warning("%s library", name)
                if served.verbose:
                    logs.verbose_commands.ended()

        return run

    in_threads(log_as(quiet, "quiet"), log_as(verbose, "verbose"))
    runoff.warning("server warns")
    quiet_err = quiet.stderr.getvalue()  # type: ignore[attr-defined]
    verbose_err = verbose.stderr.getvalue()  # type: ignore[attr-defined]
    assert [line.split(": ", 1)[1] for line in quiet_err.splitlines()] == ["quiet warns"]
    assert (tmp_path / "quiet.log").read_text().count("library") == 1
    assert "quiet library" in (tmp_path / "quiet.log").read_text()
    assert [line.split(": ", 1)[1] for line in verbose_err.splitlines()] == [
        "verbose warns",
        "verbose debugs",
        "verbose library",
    ]
    assert own.getvalue() == "server warns\n"
    assert root.level == logging.WARNING  # DEBUG only while a verbose command ran


def test_a_signal_reaches_its_own_command_only(tmp_path: Path) -> None:
    stopped, other = new_caller(tmp_path), new_caller(tmp_path)
    stopped.signals.append(signal.SIGTERM)
    with caller.bound(stopped), pytest.raises(interrupts.Terminated):
        interrupts.check()
    with caller.bound(other):
        interrupts.check()
        assert not interrupts.received()
    interrupts.check()  # the process's own: nothing received
    with caller.bound(other):
        interrupts.deliver(signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):
            interrupts.check()
    assert other.signals == [signal.SIGINT] and stopped.signals == [signal.SIGTERM]


def test_configuration_comes_from_the_callers_variables_and_folder(tmp_path: Path) -> None:
    datasets = tmp_path / "client" / "specs"
    datasets.mkdir(parents=True)
    served = new_caller(
        tmp_path / "client", {"RUNOFF_HOME": "home", "RUNOFF_DATASETS": "specs", "RUNOFF_DATA": "d"}
    )
    with caller.bound(served):
        config = RunoffConfig.from_sources()
    assert config.home == tmp_path / "client" / "home"
    assert config.dataset_dirs[-1] == datasets
    assert str(config.data) == str(tmp_path / "client" / "d")
    assert RunoffConfig.from_sources(env={}).home == Path.cwd() / ".runoff"


def test_threads_a_command_starts_carry_its_caller(tmp_path: Path) -> None:
    served = new_caller(tmp_path)
    seen: list[Caller | None] = []
    with caller.bound(served):
        carried = caller.carried(lambda: seen.append(caller.current()))
    thread = threading.Thread(target=carried)
    thread.start()
    thread.join()
    bare = threading.Thread(target=lambda: seen.append(caller.current()))
    bare.start()
    bare.join()
    assert seen == [served, None]


def test_a_command_hears_its_own_runs_only(tmp_path: Path) -> None:
    class Heard:
        def __init__(self) -> None:
            self.runs: list[str] = []

        def run_started(self, record: RunRecord) -> None:
            self.runs.append(f"{record.dataset} started")

        def run_ended(self, record: RunRecord) -> None:
            self.runs.append(f"{record.dataset} {record.status}")

    heard = {name: Heard() for name in ("a", "b")}
    callers = {name: new_caller(tmp_path) for name in heard}

    def command(name: str) -> Callable[[], None]:
        def run() -> None:
            with (
                caller.bound(callers[name]),
                listening(heard[name]),  # type: ignore[arg-type]
                recorded_run(tmp_path / f"runs-{name}", RunRecord(name, "bronze")),
            ):
                pass

        return run

    in_threads(command("a"), command("b"))
    assert heard["a"].runs == ["a started", "a success"]
    assert heard["b"].runs == ["b started", "b success"]
