"""The client side of `runoff serve`: run one command in a server's warm Spark driver.

Input: the CLI's arguments and `RUNOFF_SERVER` (or `--server`), the path of the server's Unix
socket, or `tcp://host:port` for a server's TCP address (`runoff serve --listen`; `tls://host:port`
when it speaks TLS), which also needs `RUNOFF_SERVER_SECRET`. Output: what the command prints,
relayed line by line, and its exit code. The request carries the client's working directory
and its `RUNOFF_*` variables (not the secret), so the command sees what a local run would see.
Ctrl-C and SIGTERM are passed on: the server stops the command as a local run stops, and the
client exits with the same one line and code (130, 143). A client that dies takes its command
with it (the server stops a command whose client is gone). Nothing of Spark is imported here: a
client starts in a fraction of a second.

Frames are JSON objects, one per line. Over TCP the server speaks first: `{"challenge": nonce}`.
Client to server: the request `{"argv", "cwd", "env", "terminal", "columns"}` (over TCP with
`"auth"`: HMAC-SHA256 of the nonce under the shared secret), then `{"signal": N}` at most
twice. Server to client: `{"out": text}`, `{"err": text}`, then `{"exit": code}`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import signal
import socket
import ssl
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from core.errors import ConfigError
from jobs.cli.tls import CA_ENV, CERT_ENV, client_context, secured

SERVER_ENV = "RUNOFF_SERVER"
# The shared secret of a server's TCP address (`runoff serve --listen`): read from the environment
# by the server and its clients, never sent: the client answers the server's challenge with
# HMAC-SHA256(secret, challenge).
SECRET_ENV = "RUNOFF_SERVER_SECRET"
TCP_SCHEME = "tcp://"
TLS_SCHEME = "tls://"  # the same address, over TLS (jobs.cli.tls)
NETWORK_SCHEMES = (TCP_SCHEME, TLS_SCHEME)
# The variables a request carries, which the command in the server sees in place of the server's:
# runoff's own and OpenLineage's (where lineage goes, and the Airflow task as parent run).
BORROWED_PREFIXES = ("RUNOFF_", "OPENLINEAGE_")
# sockaddr_un holds 108 bytes: longer paths are reached through their folder (see `address`).
MAX_SOCKET_PATH = 100


def send(sock: socket.socket, frame: Mapping[str, Any]) -> None:
    sock.sendall(json.dumps(frame).encode() + b"\n")


def frames(sock: socket.socket, limit: int | None = None) -> Iterator[dict[str, Any]]:
    """The frames the peer sends, until it closes the connection. A frame that is not a JSON
    object, or longer than `limit` bytes, raises ValueError (nothing more is read)."""
    with sock.makefile("rb") as stream:
        while line := stream.readline(-1 if limit is None else limit + 1):
            if limit is not None and len(line) > limit:
                raise ValueError(f"a frame longer than {limit} bytes")
            frame = json.loads(line)
            if not isinstance(frame, dict):
                raise ValueError(f"a frame that is not a JSON object ({type(frame).__name__})")
            yield frame


@contextmanager
def address(path: Path) -> Iterator[str]:
    """The address to bind or connect to: the path itself, or, when it is longer than a Unix
    socket address may be, its name relative to its folder (made the working directory while
    the block runs; the CLI and the server are single-threaded when they bind or connect)."""
    text = os.fspath(path)
    if len(text.encode()) <= MAX_SOCKET_PATH:
        yield text
        return
    previous = os.getcwd()
    os.chdir(path.parent)
    try:
        yield path.name
    finally:
        os.chdir(previous)


def connect(path: Path) -> socket.socket:
    """A connection to the server at `path`, or a one-line ConfigError naming the remedy."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with address(path) as where:
            sock.connect(where)
    except OSError as exc:
        sock.close()
        reason = "no server is listening there" if path.exists() else "no such socket"
        raise ConfigError(
            f"cannot reach the runoff server at {path} ({reason}: {exc.strerror or exc}): start "
            f"it with `runoff serve --socket {path}`, or unset {SERVER_ENV} to run here"
        ) from None
    return sock


def host_port(text: str, default_host: str | None = None) -> tuple[str, int] | None:
    """(host, port) of `HOST:PORT` (`[::1]:PORT` for an IPv6 host), or of a bare `PORT` when a
    `default_host` is given; None when `text` is neither."""
    host, _, port = text.rpartition(":")
    host = host.strip("[]") or (default_host or "")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    return host, int(port)


def tcp_address(server: str) -> tuple[str, int] | None:
    """(host, port) of a `tcp://host:port` or `tls://host:port` server; None for a Unix
    socket's path."""
    scheme = next((s for s in NETWORK_SCHEMES if server.startswith(s)), None)
    if scheme is None:
        return None
    parsed = host_port(server.removeprefix(scheme))
    if parsed is None:
        raise ConfigError(
            f"{SERVER_ENV}={server}: expected {scheme}HOST:PORT, e.g. {scheme}runoff:7079"
        )
    return parsed


def answer(challenge: str, secret: str) -> str:
    """The proof of the secret for one challenge (HMAC-SHA256, hex)."""
    return hmac.new(secret.encode(), challenge.encode(), hashlib.sha256).hexdigest()


def connect_tcp(server: str, env: Mapping[str, str]) -> tuple[socket.socket, str]:
    """A connection to a server's TCP address and the answer to its challenge; a one-line
    ConfigError naming the remedy when it cannot be reached or no secret is set."""
    host, port = tcp_address(server) or ("", 0)
    secret = env.get(SECRET_ENV)
    if not secret:
        raise ConfigError(f"set {SECRET_ENV} (the server's secret) to use the server at {server}")
    try:
        sock = socket.create_connection((host, port), timeout=30)
    except OSError as exc:
        raise ConfigError(
            f"cannot reach the runoff server at {server} ({exc.strerror or exc}): start it with "
            f"`runoff serve --listen {host}:{port}`, or unset {SERVER_ENV} to run here"
        ) from None
    tls = server.startswith(TLS_SCHEME)
    if tls:
        sock = secure(sock, server, host, env)
    try:
        challenge = next(frames(sock, limit=1024)).get("challenge")
    except (OSError, ValueError, StopIteration):
        sock.close()
        hint = "" if tls else f" (a server with TLS is {TLS_SCHEME}...)"
        raise ConfigError(f"the runoff server at {server} sent no challenge{hint}") from None
    sock.settimeout(None)
    return sock, answer(str(challenge), secret)


def secure(sock: socket.socket, server: str, host: str, env: Mapping[str, str]) -> socket.socket:
    """The connection to a `tls://` server over TLS (`jobs.cli.tls`), its certificate checked;
    a one-line ConfigError naming the remedy when it fails."""
    context = client_context(env)
    try:
        return secured(sock, context, server_side=False, server_hostname=host).local
    except ssl.SSLCertVerificationError as exc:
        raise ConfigError(
            f"the runoff server at {server} has a certificate this client does not trust "
            f"({exc.verify_message}): set {CA_ENV} to the certificate that signed it"
        ) from None
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"no TLS with the runoff server at {server} ({exc.strerror or exc}): is it started "
            f"with {CERT_ENV}, or is it {TCP_SCHEME}...?"
        ) from None


def request(argv: Sequence[str], env: Mapping[str, str], stdout: TextIO) -> dict[str, Any]:
    """What the server needs to run `argv` as this process would."""
    columns = env.get("COLUMNS")
    if columns is None and stdout.isatty():
        columns = str(os.get_terminal_size(stdout.fileno()).columns)
    return {
        "argv": list(argv),
        "cwd": os.getcwd(),
        "env": {
            k: v
            for k, v in env.items()
            if k.startswith(BORROWED_PREFIXES) and k not in (SERVER_ENV, SECRET_ENV, CA_ENV)
        },
        "terminal": stdout.isatty(),
        "columns": int(columns) if columns and columns.isdigit() else None,
    }


class Forwarder:
    """Passes SIGINT and SIGTERM on to the server while the command runs; a second signal
    closes the connection (the server then stops the command) and the client exits."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.signals: list[int] = []

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.signals.append(signum)
        if len(self.signals) > 1:
            raise KeyboardInterrupt
        try:
            send(self.sock, {"signal": signum})
        except OSError:
            raise KeyboardInterrupt from None

    @contextmanager
    def installed(self) -> Iterator[None]:
        previous = {s: signal.signal(s, self) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def run_remote(
    server: Path | str,
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run `runoff <argv>` in the server at `server` (a Unix socket's path, or `tcp://host:port`);
    its exit code."""
    env = os.environ if env is None else env
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    proof: dict[str, str] = {}
    if isinstance(server, str) and tcp_address(server):
        sock, proof["auth"] = connect_tcp(server, env)
    else:
        sock = connect(Path(server))
    forwarder = Forwarder(sock)
    try:
        with forwarder.installed():
            send(sock, {**request(argv, env, stdout), **proof})
            for frame in frames(sock):
                if "out" in frame:
                    stdout.write(frame["out"])
                    stdout.flush()
                elif "err" in frame:
                    stderr.write(frame["err"])
                    stderr.flush()
                elif "exit" in frame:
                    return int(frame["exit"])
    except (KeyboardInterrupt, ConnectionError):  # a second signal; a reset connection
        pass
    finally:
        sock.close()
    # The server went away without an exit code (killed, or out of memory: its log says), or a
    # second signal gave up waiting.
    if forwarder.signals:
        signum = forwarder.signals[-1]
        name = "terminated (SIGTERM)" if signum == signal.SIGTERM else "interrupted"
        print(f"runoff: {name}; the server stops the command", file=stderr)
        return 128 + signum
    print(
        f"runoff: error: the runoff server at {server} closed the connection before the command "
        "ended (its log says why): run the command again; what it committed is kept, and it "
        "resumes from its checkpoint",
        file=stderr,
    )
    return 1
