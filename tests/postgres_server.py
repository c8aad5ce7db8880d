"""A throw-away PostgreSQL server on loopback: Debian's binaries, a generated password.

`running_postgres(user, database)` runs `initdb` and `postgres` from
`/usr/lib/postgresql/<version>/bin` (the newest installed; `make postgres` installs Debian's
`postgresql` package) in a new folder, listening on 127.0.0.1 at a free port and on a Unix socket
in that folder, with password authentication (scram-sha-256) for every connection, TCP and
local. The superuser is `user`, its password `secrets.token_hex`, and `database` is created
(`createdb`). PostgreSQL refuses to run as root: as root, every server process runs as the
unprivileged `postgres` system user the Debian package creates (`setpriv`), which owns the folder;
otherwise as the current user. On leaving the context the postmaster started here is stopped by
its pid (SIGINT: fast shutdown; SIGKILL to its process group after a timeout) and the folder is
removed. No server starts: AssertionError with the server's log.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

POSTGRES_ROOT = Path("/usr/lib/postgresql")
# The system user of Debian's postgresql package: the server's processes as root.
SERVER_USER = "postgres"
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0


@dataclass(frozen=True)
class Postgres:
    """A running server: where it listens and how to log in."""

    host: str
    port: int
    user: str
    password: str
    database: str
    bin_dir: Path
    log: Path

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def url(self, driver: str = "postgresql+psycopg") -> str:
        """SQLAlchemy URL of `database` (the password is hex: nothing to quote)."""
        return f"{driver}://{self.user}:{self.password}@{self.address}/{self.database}"

    def tool_env(self) -> dict[str, str]:
        """Environment for the client tools (`pg_isready`, `createdb`, `psql`): this server
        and login, the password in PGPASSWORD (never on a command line)."""
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PGHOST": self.host,
            "PGPORT": str(self.port),
            "PGUSER": self.user,
            "PGPASSWORD": self.password,
        }

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"


def postgres_bin_dir(root: Path = POSTGRES_ROOT) -> Path:
    """The `bin` folder of the newest PostgreSQL installed from Debian's packages."""
    found = sorted(
        (path.parent for path in root.glob("*/bin/initdb")),
        key=lambda path: int(path.parent.name) if path.parent.name.isdigit() else -1,
    )
    if not found:
        raise AssertionError(
            f"no PostgreSQL binaries under {root}/<version>/bin: run `make postgres` "
            "(Debian's postgresql package)"
        )
    return found[-1]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _as_server_user() -> tuple[list[str], int | None, int | None]:
    """The command prefix that runs a server process unprivileged, and the uid/gid to give it
    the folder: as root, the `postgres` system user; otherwise the current user as it is."""
    if os.geteuid() != 0:
        return [], None, None
    try:
        account = pwd.getpwnam(SERVER_USER)
    except KeyError:
        raise AssertionError(
            f"PostgreSQL refuses to run as root and there is no `{SERVER_USER}` user to run it "
            "as: run `make postgres` (Debian's postgresql package creates it)"
        ) from None
    prefix = [
        shutil.which("setpriv") or "setpriv",
        f"--reuid={account.pw_uid}",
        f"--regid={account.pw_gid}",
        "--init-groups",
        "--",
    ]
    return prefix, account.pw_uid, account.pw_gid


def _server_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "TZ": "UTC"}


@contextmanager
def running_postgres(
    user: str = "postgres",
    database: str = "postgres",
    host: str = "127.0.0.1",
    parent: Path | None = None,
) -> Iterator[Postgres]:
    """A new PostgreSQL server for the duration of the context (see the module's docstring)."""
    bin_dir = postgres_bin_dir()
    prefix, uid, gid = _as_server_user()
    root = Path(tempfile.mkdtemp(prefix="runoff-postgres-", dir=parent))
    process: subprocess.Popen[bytes] | None = None
    try:
        data, sockets, log = root / "data", root / "socket", root / "postgres.log"
        sockets.mkdir()
        password = secrets.token_hex(24)
        password_file = root / "password"
        password_file.write_text(password + "\n")
        password_file.chmod(0o600)
        if uid is not None and gid is not None:
            for path in (root, sockets, password_file):
                os.chown(path, uid, gid)
        _run(
            [
                *prefix,
                str(bin_dir / "initdb"),
                "--pgdata",
                str(data),
                "--username",
                user,
                f"--pwfile={password_file}",
                "--auth=scram-sha-256",
                "--encoding=UTF8",
                "--no-locale",
                "--no-sync",  # a throw-away cluster: no need to wait for the disk
            ],
            "initdb",
        )
        password_file.unlink()
        server: Postgres | None = None
        for _attempt in range(3):  # another process may take the free port first
            port = free_port(host)
            output = log.open("ab")
            process = subprocess.Popen(
                [
                    *prefix,
                    str(bin_dir / "postgres"),
                    "-D",
                    str(data),
                    "-p",
                    str(port),
                    "-c",
                    f"listen_addresses={host}",
                    "-c",
                    f"unix_socket_directories={sockets}",
                ],
                env=_server_env(),
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            output.close()
            server = Postgres(host, port, user, password, database, bin_dir, log)
            if _wait_until_ready(process, server):
                break
            _stop(process)
            process = None
        if process is None or server is None:
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            raise AssertionError(f"PostgreSQL did not start on {host}:\n{tail}")
        if database != "postgres":
            _run(
                [str(bin_dir / "createdb"), "--maintenance-db=postgres", database],
                "createdb",
                env=server.tool_env(),
            )
        yield server
    finally:
        if process is not None:
            _stop(process)
        shutil.rmtree(root, ignore_errors=True)


def _run(command: Sequence[str], what: str, env: dict[str, str] | None = None) -> None:
    result = subprocess.run(
        command,
        env=env or _server_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if result.returncode != 0:
        raise AssertionError(f"{what} failed ({result.returncode}): {result.stderr[-2000:]}")


def _wait_until_ready(process: subprocess.Popen[bytes], server: Postgres) -> bool:
    """True once `pg_isready` reaches the server on TCP; False when the postmaster exited or
    did not answer within START_TIMEOUT."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        ready = subprocess.run(
            [str(server.bin_dir / "pg_isready"), "--timeout=2"],
            env=server.tool_env(),
            capture_output=True,
            check=False,
        )
        if ready.returncode == 0:
            return True
        time.sleep(0.2)
    return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Fast shutdown of the postmaster started here: SIGINT to its pid (sessions are ended, the
    cluster shuts down cleanly and its child processes with it); SIGKILL to its process group
    when it has not stopped within STOP_TIMEOUT (its pid is not reaped yet: still ours)."""
    if process.poll() is not None:
        return
    with suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGINT)
    try:
        process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=STOP_TIMEOUT)
