"""With `RUNOFF_SERVER` in the worker's environment a task is a `runoff` client of that server."""

from __future__ import annotations

import signal
import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobs.cli import client
from tests.unit.jobs.cli.test_client import FakeServer


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeServer]:
    path = tmp_path / "s.sock"
    server = FakeServer(path, [])
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    monkeypatch.setenv("RUNOFF_SERVER", str(path))
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


def test_a_task_runs_its_step_in_the_server_and_logs_its_output(
    fake: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dags.factory import build_dataset_dag

    fake.answer = [{"out": "bronze events: success in 0.7 s\n"}, {"exit": 0}]
    task = build_dataset_dag("events").get_task("bronze")
    task.application_args = ["--home", str(tmp_path), "bronze", "events"]
    task.execute(context={})
    [request] = fake.requests
    assert request["argv"] == ["--home", str(tmp_path), "bronze", "events"]
    logged = [line for line in capsys.readouterr().out.splitlines() if "success in" in line]
    assert len(logged) == 1 and "bronze events: success in 0.7 s" in logged[0], logged


def test_a_failed_step_in_the_server_fails_its_task(fake: FakeServer, tmp_path: Path) -> None:
    from airflow.providers.common.compat.sdk import AirflowException

    from dags.factory import build_dataset_dag

    fake.answer = [{"err": "runoff: error: something\n"}, {"exit": 1}]
    task = build_dataset_dag("events").get_task("silver")
    task.application_args = ["--home", str(tmp_path), "silver", "events"]
    with pytest.raises(AirflowException, match="runoff exited with code 1"):
        task.execute(context={})


class StoppingHandler(socketserver.BaseRequestHandler):
    """A server whose command runs until the client passes a signal on, then exits 128 + N."""

    server: FakeServer

    def handle(self) -> None:
        sock: socket.socket = self.request
        received = client.frames(sock)
        self.server.requests.append(next(received))
        client.send(sock, {"out": "bronze events: running\n"})
        for frame in received:
            self.server.requests.append(frame)
            if "signal" in frame:
                client.send(sock, {"exit": 128 + int(frame["signal"])})
                return


def test_killing_a_task_passes_sigterm_to_the_server(fake: FakeServer, tmp_path: Path) -> None:
    """`on_kill` (Airflow stops the task): its hook sends the client SIGTERM, which the client
    passes on to the server; the server stops the command and the task fails with its code."""
    from airflow.providers.common.compat.sdk import AirflowException

    from dags.factory import build_dataset_dag

    fake.RequestHandlerClass = StoppingHandler
    task = build_dataset_dag("events").get_task("bronze")
    task.application_args = ["--home", str(tmp_path), "bronze", "events"]
    failures: list[BaseException] = []

    def execute() -> None:
        try:
            task.execute(context={})
        except AirflowException as exc:
            failures.append(exc)

    running = threading.Thread(target=execute)
    running.start()
    deadline = time.monotonic() + 30
    while not fake.requests and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fake.requests, "the client never reached the server"
    task.on_kill()
    running.join(timeout=30)
    assert not running.is_alive()
    assert fake.requests[1:] == [{"signal": signal.SIGTERM}]
    assert [str(exc) for exc in failures] == ["runoff exited with code 143"]
