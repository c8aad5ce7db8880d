"""The `runoff` client of `runoff serve`, against a fake server speaking the same frames."""

from __future__ import annotations

import io
import socket
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.errors import ConfigError
from jobs.cli import client
from jobs.cli import main as cli


class FakeServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """Records each request and answers with scripted frames."""

    daemon_threads = True

    def __init__(self, path: Path, answer: list[dict[str, Any]]) -> None:
        self.requests: list[dict[str, Any]] = []
        self.answer = answer
        with client.address(path) as where:
            super().__init__(where, FakeHandler)


class FakeHandler(socketserver.BaseRequestHandler):
    server: FakeServer

    def handle(self) -> None:
        sock: socket.socket = self.request
        self.server.requests.append(next(client.frames(sock)))
        for frame in self.server.answer:
            client.send(sock, frame)


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeServer]:
    server = FakeServer(tmp_path / "s.sock", [{"out": "bronze events: success\n"}, {"exit": 0}])
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


def test_the_client_relays_output_and_exit_code(fake: FakeServer, tmp_path: Path) -> None:
    fake.answer = [{"out": "line 1\n"}, {"err": "warning\n"}, {"out": "line 2\n"}, {"exit": 3}]
    out, err = io.StringIO(), io.StringIO()
    lineage = {"OPENLINEAGE_URL": "http://127.0.0.1:5000", "OPENLINEAGE_PARENT_ID": "ns/j/r"}
    env = {
        "RUNOFF_HOME": "/h",
        "RUNOFF_SERVER": "x",
        "RUNOFF_DATASETS": "/d",
        "HOME": "/root",
        **lineage,
    }
    code = client.run_remote(tmp_path / "s.sock", ["bronze", "events"], env, out, err)
    assert (code, out.getvalue(), err.getvalue()) == (3, "line 1\nline 2\n", "warning\n")
    [request] = fake.requests
    # Only runoff's and OpenLineage's variables travel, never the server's address itself.
    assert request["env"] == {"RUNOFF_HOME": "/h", "RUNOFF_DATASETS": "/d", **lineage}
    assert request["argv"] == ["bronze", "events"]
    assert request["terminal"] is False


def test_the_cli_sends_spark_commands_to_the_server_and_runs_the_others_here(
    fake: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setenv("RUNOFF_SERVER", str(tmp_path / "s.sock"))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["--home", "h", "bronze", "events", "--trigger", "once"]) == 0
    assert capsys.readouterr().out == "bronze events: success\n"
    [request] = fake.requests
    assert request["argv"] == ["--home", "h", "bronze", "events", "--trigger", "once"]
    assert request["cwd"] == str(tmp_path)  # relative paths resolve where the user is
    # `status` needs no Spark: it runs here (and refuses the missing home itself).
    assert cli.main(["--home", "h", "status", "events"]) == 2
    assert len(fake.requests) == 1
    assert "does not exist" in capsys.readouterr().err


def test_no_server_at_the_address_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setenv("RUNOFF_SERVER", str(tmp_path / "missing.sock"))
    assert cli.main(["--home", str(tmp_path), "bronze", "events"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"runoff: error: cannot reach the runoff server at {tmp_path}")
    assert "runoff serve --socket" in err and "unset RUNOFF_SERVER" in err


def test_a_stale_socket_file_is_named_as_such(tmp_path: Path) -> None:
    path = tmp_path / "stale.sock"
    with client.address(path) as where:
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stale.bind(where)
        stale.close()  # the file stays, nobody listens
    with pytest.raises(ConfigError, match="no server is listening there"):
        client.connect(path)


def test_a_socket_path_too_long_for_the_kernel_is_reached_through_its_folder(
    tmp_path: Path,
) -> None:
    folder = tmp_path / ("d" * 60) / ("e" * 60)
    folder.mkdir(parents=True)
    path = folder / "runoff.sock"
    assert len(str(path)) > 108
    server = FakeServer(path, [{"exit": 0}])
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        assert client.run_remote(path, ["check"], {}, io.StringIO(), io.StringIO()) == 0
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert server.requests[0]["argv"] == ["check"]


def test_a_server_gone_without_an_exit_code_is_a_failed_run(tmp_path: Path) -> None:
    server = FakeServer(tmp_path / "s.sock", [{"out": "half\n"}])  # then closes
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    err = io.StringIO()
    try:
        code = client.run_remote(tmp_path / "s.sock", ["bronze", "x"], {}, io.StringIO(), err)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert code == 1
    assert err.getvalue() == (
        f"runoff: error: the runoff server at {tmp_path / 's.sock'} closed the connection before "
        "the command ended (its log says why): run the command again; what it committed is kept, "
        "and it resumes from its checkpoint\n"
    )


def test_only_spark_commands_are_served() -> None:
    served = {c for c in cli.available_commands() if c in cli.SERVED_COMMANDS}
    assert served == {
        "check", "bronze", "silver", "validate", "run", "backfill", "maintain", "reset", "rebuild",
        "demo",
    }  # fmt: skip
    assert not {"generate", "status", "report", "serve"} & cli.SERVED_COMMANDS
    # `quarantine replay` needs Spark, `quarantine list` does not.
    parser = cli.build_parser()
    assert cli.is_served(parser.parse_args(["quarantine", "replay", "events"]))
    assert not cli.is_served(parser.parse_args(["quarantine", "list", "events"]))
    # `check` resolves SQL with Spark; `check --no-spark` does not.
    assert cli.is_served(parser.parse_args(["check", "events"]))
    assert not cli.is_served(parser.parse_args(["check", "--no-spark", "events"]))
