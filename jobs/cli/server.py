"""`runoff serve`: one long-lived Spark driver that runs the CLI's Spark commands for clients.

Input: requests on a Unix socket (`--socket`, default `<home>/run/runoff.sock`), and with
`--listen HOST:PORT` on TCP from clients that prove `RUNOFF_SERVER_SECRET` (`TcpListener`), from
`runoff` clients that have `RUNOFF_SERVER` set (`jobs.cli.client`), e.g. Airflow's tasks under `make
airflow`. Output: each command run in this process, with this process's SparkSession, exactly as
the CLI runs it locally (`jobs.cli.main.main`), its output relayed to the client as it is printed.
Commands run side by side, up to `--parallel` at once (more wait for a slot, saying so), each in
its own thread, Spark session (`SparkSession.newSession`: its own SQL settings) and fair-scheduler
pool, with its client's `RUNOFF_*` and `OPENLINEAGE_*` variables, working directory, terminal and
signals (`core.caller.Caller`): nothing of the process is borrowed. Design, protocol and limits:
docs/server.md.
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
import ssl
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core import caller
from core.caller import Caller
from core.config import DEFAULT_PARALLEL, RunoffConfig
from core.console import new_console, say
from core.errors import ConfigError, LockHeldError
from jobs.cli import logs
from jobs.cli.client import (
    BORROWED_PREFIXES,
    SECRET_ENV,
    SERVER_ENV,
    address,
    answer,
    frames,
    host_port,
    send,
)
from jobs.cli.tls import CERT_ENV, KEY_ENV, secured, server_context

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
    """A request being served: the thread running it, the signals its client sent (its
    caller's, once it runs) and the Spark session it runs in."""

    argv: list[str]
    thread: threading.Thread = field(default_factory=threading.current_thread)
    signals: list[int] = field(default_factory=list)
    running: bool = False
    session: SparkSession | None = None

    def __str__(self) -> str:
        return "runoff " + " ".join(a for a in self.argv if not a.startswith("--outcome"))


# The fair-scheduler pool of each slot: commands share the cores by turns, so that a long
# backfill cannot hold back an hourly run's jobs.
SCHEDULER_CONF = {"spark.scheduler.mode": "FAIR"}
POOL_PROPERTY = "spark.scheduler.pool"


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, path: Path, config: RunoffConfig, parallel: int = DEFAULT_PARALLEL) -> None:
        self.path = path
        self.config = config
        self.spark: SparkSession | None = None
        self.ready = threading.Event()
        self.parallel = parallel
        self.lock = threading.Lock()
        self.freed = threading.Condition(self.lock)
        self.running: dict[int, Command] = {}  # by slot (its scheduler pool)
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
        config = self.config.with_changes(spark_conf={**SCHEDULER_CONF, **self.config.spark_conf})
        self.spark = get_spark(app_name="runoff-server", config=config, long_lived=True)
        for module in WARM_MODULES:
            importlib.import_module(module)
        self.ready.set()
        say(
            f"runoff: serving on {self.path} (Spark {self.spark.sparkContext.master}, "
            f"ready in {time.perf_counter() - started:.1f} s)"
        )

    def stop(self) -> None:
        """Stop the running commands (as SIGTERM would), then Spark; remove the socket."""
        with self.lock:
            running = list(self.running.values())
        for command in running:
            self.cancel(command, signal.SIGTERM)
        for command in running:
            command.thread.join(timeout=60)
        self.server_close()
        self.path.unlink(missing_ok=True)
        if self.spark is not None:
            self.spark.stop()

    # -- slots ---------------------------------------------------------------------------------
    @contextmanager
    def slot(self, command: Command, sock: socket.socket) -> Iterator[int]:
        """A free slot for `command` (waiting for one, saying so, when all are taken); its
        number names the command's scheduler pool."""
        with self.lock:
            if len(self.running) >= self.parallel:
                busy = ", ".join(str(c) for c in self.running.values())
                with suppress(OSError):
                    send(sock, {"err": f"runoff: waiting for a free slot of the server ({busy})\n"})
            while len(self.running) >= self.parallel:
                self.freed.wait()
            number = min(set(range(self.parallel)) - self.running.keys())
            self.running[number] = command
        try:
            yield number
        finally:
            with self.lock:
                del self.running[number]
                self.freed.notify()

    # -- one command ---------------------------------------------------------------------------
    def cancel(self, command: Command, signum: int) -> None:
        """Stop `command` as `signum` stops a local run: the signal is delivered to its caller
        (`core.interrupts`, which the command's streaming loops check), then the streaming
        queries and Spark jobs of its session are stopped so that it gets to see it."""
        command.signals.append(signum)
        session = command.session
        if not command.running or session is None:
            return
        for query in session.streams.active:
            with suppress(Exception):
                query.stop()
        with suppress(Exception):
            session.interruptAll()

    def execute(
        self, command: Command, request: Mapping[str, Any], sock: socket.socket, slot: int
    ) -> int:
        """Run the request's CLI command in this thread, in a Spark session of its own, as its
        client would have run it."""
        from jobs.cli.main import main

        terminal = bool(request.get("terminal"))
        out, err = FrameStream(sock, "out", terminal), FrameStream(sock, "err", terminal)
        columns = request.get("columns")
        try:
            folder = client_directory(str(request.get("cwd") or ""))
        except ConfigError as exc:
            err.write(f"runoff: error: {exc}\n")
            return exc.exit_code
        if self.spark is not None:
            command.session = self.spark.newSession()
        served = Caller(
            env=client_environment(request.get("env") or {}),
            cwd=folder,
            stdout=out,
            stderr=err,
            console=new_console(out, columns if isinstance(columns, int) and columns > 0 else None),
            signals=command.signals,
            session=command.session,
        )
        context = command.session.sparkContext if command.session is not None else None
        caller.serve_streams()  # what a command prints goes to its client
        with caller.bound(served):
            if context is not None:
                context.setLocalProperty(POOL_PROPERTY, f"runoff-{slot}")
            command.running = True
            try:
                if command.signals:  # the client gave up while it waited
                    return 128 + command.signals[-1]
                return main(command.argv, served=True)
            except SystemExit as exc:  # --help and usage errors
                return exc.code if isinstance(exc.code, int) else 2
            finally:
                command.running = False
                if served.verbose:
                    logs.verbose_commands.ended()
                if context is not None:
                    context.setLocalProperty(POOL_PROPERTY, None)  # type: ignore[arg-type]


class TcpListener(socketserver.ThreadingMixIn, socketserver.TCPServer):
    """The server's TCP address (`--listen`): the same commands as its Unix socket, for clients
    that prove the shared secret (`RUNOFF_SERVER_SECRET`) by answering a fresh challenge."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        server: Server,
        secret: str,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.runner = server
        self.secret = secret
        self.tls = tls  # its connections speak TLS (jobs.cli.tls)
        self.request_timeout = server.request_timeout
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.address_family = family
        super().__init__(address, Handler)


class Handler(socketserver.StreamRequestHandler):
    server: Server | TcpListener

    def handle(self) -> None:
        tls = getattr(self.server, "tls", None)
        if tls is None:
            self.serve(self.request)
            return
        try:
            relay = secured(
                self.request, tls, server_side=True, timeout=self.server.request_timeout
            )
        except (OSError, ssl.SSLError) as exc:
            log.warning("runoff server: a TCP client failed the TLS handshake (%s)", exc)
            return
        try:
            self.serve(relay.local)
        finally:
            relay.close()

    def serve(self, sock: socket.socket) -> None:
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
        try:
            with server.slot(command, sock) as slot:
                server.ready.wait()
                code = server.execute(command, request, sock, slot)
        except BaseException as exc:  # the client gets an exit code whatever happened
            log.exception("runoff server: %s failed", command)
            code = 1 if not isinstance(exc, KeyboardInterrupt) else 130
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
        if not command.signals:  # gone while it waited or ran (not after it ended: see handle)
            self.runner.cancel(command, signal.SIGTERM)


# -- what a command gets from its client ----------------------------------------------------
def client_environment(env: Mapping[str, Any]) -> dict[str, str]:
    """The server's environment with the client's `RUNOFF_*` and `OPENLINEAGE_*` variables in
    place of its own (never a server's address)."""
    own = {k: v for k, v in os.environ.items() if not k.startswith(BORROWED_PREFIXES)}
    borrowed = {k: str(v) for k, v in env.items() if k.startswith(BORROWED_PREFIXES)}
    borrowed.pop(SERVER_ENV, None)
    return {**own, **borrowed}


def client_directory(path: str) -> Path:
    """The client's working directory, where its relative paths start; it must exist here."""
    folder = Path(path)
    if not folder.is_absolute() or not folder.is_dir():
        raise ConfigError(
            f"the client's working directory {path} is not reachable from the server: run the "
            "client from a folder the server's host has too"
        )
    return folder


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
    parsed = host_port(text, default_host="127.0.0.1")
    if parsed is None:
        raise ConfigError(f"--listen {text}: expected HOST:PORT or PORT, e.g. 127.0.0.1:7079")
    return parsed


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
    path = caller.absolute(args.socket) if args.socket else default_socket(config)
    listen = listen_address(args.listen) if args.listen else None
    secret = server_secret(os.environ) if listen else ""
    tls = server_context(os.environ) if listen else None
    unused = [name for name in (CERT_ENV, KEY_ENV) if os.environ.get(name) and not listen]
    if unused:
        say(
            f"runoff: {' and '.join(unused)} set, but the server has no --listen address: TLS is "
            "for the TCP address only (the Unix socket is local), so it is not used"
        )
    prepare_socket(path)
    logs.serve()
    server = Server(path, config, args.parallel or DEFAULT_PARALLEL)
    tcp: TcpListener | None = None
    if listen:
        try:
            tcp = TcpListener(listen, server, secret, tls)
        except OSError as exc:
            server.server_close()
            path.unlink(missing_ok=True)
            raise ConfigError(f"cannot listen on {args.listen}: {exc.strerror or exc}") from None
        threading.Thread(
            target=tcp.serve_forever, kwargs={"poll_interval": 0.5}, name="runoff-tcp", daemon=True
        ).start()
    clients = f"{SERVER_ENV}={path}" + (
        f", or {SERVER_ENV}={'tls' if tls else 'tcp'}://{listen[0]}:{listen[1]} with {SECRET_ENV}"
        if listen
        else ""
    )
    say(
        f"runoff: starting Spark for the server on {path} (clients: {clients}; "
        f"{server.parallel} commands at once)"
    )
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
