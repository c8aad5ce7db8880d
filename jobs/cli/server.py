"""`runoff serve`: one long-lived Spark driver that runs the CLI's Spark commands for clients.

Input: requests on a Unix socket (`--socket`, default `<home>/run/runoff.sock`), and with
`--listen HOST:PORT` on TCP from clients that prove `RUNOFF_SERVER_SECRET` (`TcpListener`), from
`runoff` clients that have `RUNOFF_SERVER` set (`jobs.cli.client`), e.g. Airflow's tasks under `make
airflow`. Output: each command run in this process, with this process's SparkSession, exactly as
the CLI runs it locally (`jobs.cli.main.main`), its output relayed to the client as it is printed.
Commands run one at a time; each borrows the client's `RUNOFF_*` and `OPENLINEAGE_*` variables,
working directory and terminal for its run. Design, protocol and limits: docs/server.md.
"""

from __future__ import annotations

import argparse
import hmac
import io
import logging
import os
import secrets
import signal
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core import interrupts
from core.config import RunoffConfig
from core.console import console, say
from core.errors import ConfigError, LockHeldError
from jobs.cli.client import (
    BORROWED_PREFIXES,
    SECRET_ENV,
    SERVER_ENV,
    address,
    answer,
    frames,
    send,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# Imported before the first request, so that the first command is as quick as the next ones.
WARM_MODULES = (
    "jobs.bronze.job",
    "jobs.silver",
    "jobs.backfill.job",
    "quality.runner",
    "quality.gate",
)


# A request (argv, working directory, RUNOFF_* variables) is a few kilobytes; one that is longer,
# or slower to arrive, is refused in one error frame rather than held in memory or in a thread.
MAX_REQUEST_BYTES = 1 << 20
REQUEST_TIMEOUT = 30.0
DRAIN_BYTES = 64 * MAX_REQUEST_BYTES


def default_socket(config: RunoffConfig) -> Path:
    return config.home / "run" / "runoff.sock"


class FrameStream(io.TextIOBase):
    """A text stream whose writes go to the client as `{"out"|"err": text}` frames."""

    def __init__(self, sock: socket.socket, key: str, terminal: bool) -> None:
        super().__init__()
        self.sock, self.key, self.terminal = sock, key, terminal

    def write(self, text: str) -> int:
        if text:
            with suppress(OSError):  # the client is gone: its command is being stopped
                send(self.sock, {self.key: text})
        return len(text)

    def isatty(self) -> bool:
        return self.terminal

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"


@dataclass
class Command:
    """A request being served: the thread running it and the signals its client sent."""

    argv: list[str]
    thread: threading.Thread = field(default_factory=threading.current_thread)
    signals: list[int] = field(default_factory=list)
    running: bool = False

    def __str__(self) -> str:
        return "runoff " + " ".join(a for a in self.argv if not a.startswith("--outcome"))


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, path: Path, config: RunoffConfig) -> None:
        self.path = path
        self.config = config
        self.spark: SparkSession | None = None
        self.ready = threading.Event()
        self.turn = threading.Lock()  # one command at a time
        self.current: Command | None = None
        self.request_timeout = REQUEST_TIMEOUT
        # The owner's commands only: the socket is created 0600 (not chmod'ed after the bind,
        # which would leave a moment when others may connect). The process has no other thread
        # yet, so the umask is nobody else's while it is changed.
        previous = os.umask(0o177)
        try:
            with address(path) as where:
                super().__init__(where, Handler)
        finally:
            os.umask(previous)

    # -- start and stop ----------------------------------------------------------------------
    def start_spark(self) -> None:
        import importlib

        from jobs.spark import get_spark

        started = time.perf_counter()
        self.spark = get_spark(app_name="runoff-server", config=self.config, long_lived=True)
        for module in WARM_MODULES:
            importlib.import_module(module)
        self.ready.set()
        say(
            f"runoff: serving on {self.path} (Spark {self.spark.sparkContext.master}, "
            f"ready in {time.perf_counter() - started:.1f} s)"
        )

    def stop(self) -> None:
        """Stop the running command (as SIGTERM would), then Spark; remove the socket."""
        command = self.current
        if command is not None and command.running:
            self.cancel(command, signal.SIGTERM)
            command.thread.join(timeout=60)
        self.server_close()
        self.path.unlink(missing_ok=True)
        if self.spark is not None:
            self.spark.stop()

    # -- one command ---------------------------------------------------------------------------
    def cancel(self, command: Command, signum: int) -> None:
        """Stop `command` as `signum` stops a local run: the signal is delivered to the CLI
        (`core.interrupts`, which the command's streaming loops check), then its streaming
        queries and Spark jobs are stopped so that it gets to see it."""
        command.signals.append(signum)
        if not command.running or self.spark is None:
            return
        interrupts.deliver(signum)
        for query in self.spark.streams.active:
            with suppress(Exception):
                query.stop()
        with suppress(Exception):
            self.spark.interruptAll()

    def execute(self, command: Command, request: Mapping[str, Any], sock: socket.socket) -> int:
        """Run the request's CLI command in this thread, as its client would have run it."""
        from jobs.cli.main import main

        terminal = bool(request.get("terminal"))
        with (
            client_environment(request.get("env") or {}),
            working_directory(str(request.get("cwd") or os.getcwd())),
            client_streams(sock, terminal, request.get("columns")),
            restored_session_conf(self.spark),
        ):
            interrupts.reset()
            command.running = True
            try:
                if command.signals:  # the client gave up while it waited
                    return 128 + command.signals[-1]
                return main(command.argv, served=True)
            except SystemExit as exc:  # --help and usage errors
                return exc.code if isinstance(exc.code, int) else 2
            finally:
                command.running = False


class TcpListener(socketserver.ThreadingMixIn, socketserver.TCPServer):
    """The server's TCP address (`--listen`): the same commands as its Unix socket, for clients
    that prove the shared secret (`RUNOFF_SERVER_SECRET`) by answering a fresh challenge."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], server: Server, secret: str) -> None:
        self.runner = server
        self.secret = secret
        self.request_timeout = server.request_timeout
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.address_family = family
        super().__init__(address, Handler)


class Handler(socketserver.StreamRequestHandler):
    server: Server | TcpListener

    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.settimeout(self.server.request_timeout)
        challenge = secrets.token_hex(16)
        secret = getattr(self.server, "secret", None)
        if secret is not None:
            with suppress(OSError):
                send(sock, {"challenge": challenge})
        incoming = frames(sock, limit=MAX_REQUEST_BYTES)
        try:
            request = next(incoming)
            sock.settimeout(None)  # the command may run for hours; the client waits as long
        except StopIteration:
            return
        except (OSError, ValueError) as exc:  # too long, too slow, not a request
            reason = "no request in time" if isinstance(exc, TimeoutError) else str(exc)
            self._refuse(sock, reason)
            return
        if secret is not None and not hmac.compare_digest(
            str(request.get("auth") or ""), answer(challenge, secret)
        ):
            log.warning("runoff server: refused a TCP client without the secret")
            self._refuse(sock, f"wrong or missing secret ({SECRET_ENV})")
            return
        command = Command([str(a) for a in request.get("argv") or []])
        watcher = threading.Thread(
            target=self._watch, args=(incoming, command), name="runoff-client", daemon=True
        )
        watcher.start()
        server = self.runner
        if not server.turn.acquire(blocking=False):
            waiting_for = server.current
            note = f" ({waiting_for})" if waiting_for else ""
            with suppress(OSError):
                send(sock, {"err": f"runoff: waiting for the server's current command{note}\n"})
            server.turn.acquire()
        try:
            server.ready.wait()
            server.current = command
            code = server.execute(command, request, sock)
        except BaseException as exc:  # the client gets an exit code whatever happened
            log.exception("runoff server: %s failed", command)
            code = 1 if not isinstance(exc, KeyboardInterrupt) else 130
        finally:
            server.current = None
            server.turn.release()
        with suppress(OSError):
            send(sock, {"exit": code})

    @property
    def runner(self) -> Server:
        """The server that runs the command, whichever of its listeners took the request."""
        return self.server if isinstance(self.server, Server) else self.server.runner

    def _refuse(self, sock: socket.socket, reason: str) -> None:
        """Answer with one error and exit code 2. What the client still sends is read and
        dropped (up to a bound) before the connection closes: closing with unread data would
        reset the connection and lose the answer."""
        with suppress(OSError):
            send(sock, {"err": f"runoff: error: the server refused the request: {reason}\n"})
            send(sock, {"exit": 2})
            sock.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + self.server.request_timeout
            dropped = 0
            while dropped < DRAIN_BYTES and (left := deadline - time.monotonic()) > 0:
                sock.settimeout(left)
                chunk = sock.recv(1 << 16)
                if not chunk:
                    break
                dropped += len(chunk)

    def _watch(self, incoming: Iterator[dict[str, Any]], command: Command) -> None:
        """Signals from the client, and its going away (the same as SIGTERM)."""
        try:
            for frame in incoming:
                signum = frame.get("signal")
                if signum in (signal.SIGINT, signal.SIGTERM):
                    self.runner.cancel(command, int(signum))
        except (OSError, ValueError):
            pass
        if not command.signals and (command.running or self.runner.current is not command):
            self.runner.cancel(command, signal.SIGTERM)


# -- what a command borrows from the process -------------------------------------------------
@contextmanager
def client_environment(env: Mapping[str, str]) -> Iterator[None]:
    """The client's `RUNOFF_*` and `OPENLINEAGE_*` variables in place of the server's, for one
    command."""
    saved = {k: v for k, v in os.environ.items() if k.startswith(BORROWED_PREFIXES)}
    for key in saved:
        del os.environ[key]
    os.environ.update({k: str(v) for k, v in env.items() if k.startswith(BORROWED_PREFIXES)})
    os.environ.pop(SERVER_ENV, None)
    try:
        yield
    finally:
        for key in [k for k in os.environ if k.startswith(BORROWED_PREFIXES)]:
            del os.environ[key]
        os.environ.update(saved)


@contextmanager
def working_directory(path: str) -> Iterator[None]:
    previous = os.getcwd()
    try:
        os.chdir(path)
    except OSError as exc:
        raise ConfigError(f"the client's working directory {path} is not reachable: {exc}") from exc
    try:
        yield
    finally:
        os.chdir(previous)


@contextmanager
def client_streams(sock: socket.socket, terminal: bool, columns: object) -> Iterator[None]:
    """stdout and stderr relayed to the client; the console as wide as the client's."""
    saved = sys.stdout, sys.stderr, console.width, logging.root.handlers[:]
    sys.stdout = FrameStream(sock, "out", terminal)
    sys.stderr = FrameStream(sock, "err", terminal)
    if isinstance(columns, int) and columns > 0:
        console.width = columns
    logging.root.handlers.clear()  # the command's CLI configures its own logging
    try:
        yield
    finally:
        sys.stdout, sys.stderr, console.width, handlers = saved
        for handler in logging.root.handlers:
            with suppress(Exception):
                handler.close()
        logging.root.handlers[:] = handlers


@contextmanager
def restored_session_conf(spark: SparkSession | None) -> Iterator[None]:
    """Session configuration set by the command is undone when it ends."""
    if spark is None:
        yield
        return
    before = dict(spark.conf.getAll)
    try:
        yield
    finally:
        after = dict(spark.conf.getAll)
        for key in after.keys() - before.keys():
            with suppress(Exception):
                spark.conf.unset(key)
        for key, value in before.items():
            if after.get(key) != value:
                with suppress(Exception):
                    spark.conf.set(key, value)


# -- the command -------------------------------------------------------------------------------
def prepare_socket(path: Path) -> None:
    """Refuse when a server already listens at `path`; remove a socket left by a dead one."""
    from jobs.cli.client import connect

    if not path.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        return
    try:
        connect(path).close()
    except ConfigError:
        path.unlink()
        return
    raise LockHeldError(f"a runoff server is already listening on {path}")


def listen_address(text: str) -> tuple[str, int]:
    """`HOST:PORT` (or `PORT`: loopback) of `--listen`; a ConfigError otherwise."""
    host, _, port = text.rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--listen {text}: expected HOST:PORT or PORT, e.g. 127.0.0.1:7079")
    return host.strip("[]") or "127.0.0.1", int(port)


def server_secret(env: Mapping[str, str]) -> str:
    """The TCP address's shared secret, from the environment only (a command line is readable
    by every local user)."""
    secret = env.get(SECRET_ENV, "")
    if len(secret) < MIN_SECRET_CHARS:
        raise ConfigError(
            f"--listen needs {SECRET_ENV} in the environment, at least {MIN_SECRET_CHARS} "
            "characters (e.g. from `python -c 'import secrets; print(secrets.token_hex(32))'`); "
            "clients set the same"
        )
    return secret


MIN_SECRET_CHARS = 16


def cmd_serve(config: RunoffConfig, args: argparse.Namespace) -> int:
    path = Path(args.socket).expanduser().absolute() if args.socket else default_socket(config)
    listen = listen_address(args.listen) if args.listen else None
    secret = server_secret(os.environ) if listen else ""
    prepare_socket(path)
    server = Server(path, config)
    tcp: TcpListener | None = None
    if listen:
        try:
            tcp = TcpListener(listen, server, secret)
        except OSError as exc:
            server.server_close()
            path.unlink(missing_ok=True)
            raise ConfigError(f"cannot listen on {args.listen}: {exc.strerror or exc}") from None
        threading.Thread(
            target=tcp.serve_forever, kwargs={"poll_interval": 0.5}, name="runoff-tcp", daemon=True
        ).start()
    clients = f"{SERVER_ENV}={path}" + (
        f", or {SERVER_ENV}=tcp://{listen[0]}:{listen[1]} with {SECRET_ENV}" if listen else ""
    )
    say(f"runoff: starting Spark for the server on {path} (clients: {clients})")
    try:
        server.start_spark()
        server.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (interrupts.Terminated)
        pass
    finally:
        if tcp is not None:
            tcp.shutdown()
            tcp.server_close()
        server.stop()
    say("runoff: server stopped")
    return 0
