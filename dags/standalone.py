"""`make airflow`: a local Airflow (api-server, scheduler, dag-processor, triggerer) for runoff.

Input: the runoff home (`--home`, else `RUNOFF_HOME`, else `./.runoff`) and a port. Output: the
components `airflow standalone` would run, started here so that every one listens on loopback
only (`COMPONENTS`: no log servers), whose metadata DB (sqlite) and logs live in
`<home>/airflow`, whose DAGs folder is this repository's `dags/`, with the `spark_default`
connection and the `spark` pool; it prints the URL and the admin login, then runs until Ctrl-C
and stops every process it started; a component that ends is started again (`RESTARTS`). Its
settings are also written to `<home>/airflow/airflow.cfg`: any `airflow` command with
`AIRFLOW_HOME=<home>/airflow` talks to the same Airflow. Unless `--no-server`, it first starts
`runoff serve` (log in `<home>/logs/server.log`) and gives the tasks `RUNOFF_SERVER`: every Spark
step runs in that one warm driver.

The `spark_default` connection names the Spark master of every task, served or not: a
`spark-submit` task passes it as `--master`, and the server runs on it too (`server_env`: the
master the Spark provider's `SparkSubmitHook` reads from the connection). Set
`AIRFLOW_CONN_SPARK_DEFAULT` (`spark://host:7077`, or JSON such as `{"conn_type": "spark",
"host": "spark://host", "port": 7077}`) to run the DAGs on a cluster; without it the connection
is `RUNOFF_SPARK_MASTER` (default `local[*]`).

    uv run --frozen python -m dags.standalone [--home PATH] [--port 8080] [--spark-slots 2]
                                              [--no-server]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

REPO_ROOT = Path(__file__).resolve().parents[1]
DAGS_FOLDER = REPO_ROOT / "dags"
SPARK_POOL = "spark"
SPARK_CONNECTION = {"conn_type": "spark", "host": "local[*]"}
PASSWORD_FILE = "simple_auth_manager_passwords.json.generated"
# Holds the process group id of Airflow's components while they run.
PID_FILE = "runoff-standalone.pid"
# ... and of `runoff serve` (its process group too).
SERVER_PID_FILE = "runoff-server.pid"


def runoff_home(home: str | None, env: Mapping[str, str]) -> Path:
    return Path(home or env.get("RUNOFF_HOME") or "./.runoff").expanduser().absolute()


def airflow_env(
    home: Path,
    port: int,
    base: Mapping[str, str] | None = None,
    host: str = "127.0.0.1",
) -> dict[str, str]:
    """The environment of every Airflow process: settings already in `base` win, except paths.

    The venv's `bin` leads PATH: the components start their task processes as `airflow ...` and
    the Spark tasks run `spark-submit`, both found there.
    """
    env = dict(os.environ if base is None else base)
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in (bin_dir, env.get("PATH", "")) if p)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    env["RUNOFF_HOME"] = str(home)
    env["AIRFLOW_HOME"] = str(home / "airflow")
    env["AIRFLOW__CORE__DAGS_FOLDER"] = str(DAGS_FOLDER)
    env["AIRFLOW__API__HOST"] = host
    env["AIRFLOW__API__PORT"] = str(port)
    url = f"http://{host}:{port}"
    env["AIRFLOW__API__BASE_URL"] = url
    # Task workers reach the API server here: follow the port, not the default :8080.
    env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] = f"{url}/execution/"
    # sqlite: writers wait up to 60 s for the lock (default 5 s), because the scheduler, the API
    # server, the CLI and every task process write to the one file, and a busy laptop is slow.
    env.setdefault(
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN",
        f"sqlite:///{home / 'airflow' / 'airflow.db'}?timeout=60",
    )
    # Task processes call the API server; its default 5 s answer time is too short while a busy
    # machine also runs Spark (a task then fails before it starts).
    env.setdefault("AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT", "30")
    env.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    env.setdefault("AIRFLOW__CORE__EXECUTOR", "LocalExecutor")
    # A laptop, not a cluster: a few task processes (the `spark` pool bounds Spark jobs anyway).
    env.setdefault("AIRFLOW__CORE__PARALLELISM", "4")
    # The master of every task, spark-submit or served (`server_env`).
    master = env.get("RUNOFF_SPARK_MASTER") or SPARK_CONNECTION["host"]
    env.setdefault("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({**SPARK_CONNECTION, "host": master}))
    return env


# Prints the `--master` a task's spark-submit gets from `spark_default`: the Spark provider's own
# reading of the connection (URI or JSON, a host with or without its scheme, a port). The hook
# falls back to `yarn` when it cannot read the connection: looking it up first fails instead.
_CONNECTION_MASTER = (
    "from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook\n"
    "SparkSubmitHook.get_connection('spark_default')\n"
    "print(SparkSubmitHook(conn_id='spark_default')._connection['master'])\n"
)


def connection_master(env: Mapping[str, str]) -> str:
    """The Spark master the `spark_default` connection names in the Airflow environment `env`
    (`AIRFLOW_CONN_SPARK_DEFAULT`, else the metadata database), as `SparkSubmitHook` resolves it
    for a task's spark-submit. Read in a child process: importing Airflow here would configure it
    from this process's environment, not from `env`."""
    result = subprocess.run(
        [sys.executable, "-c", _CONNECTION_MASTER],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        output = (result.stderr or result.stdout).strip().splitlines()[-20:]
        raise RuntimeError("the spark_default connection cannot be read:\n" + "\n".join(output))
    return lines[-1].strip()


def server_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment of `runoff serve`: the Airflow environment, with `RUNOFF_SPARK_MASTER` the
    master of the `spark_default` connection (`connection_master`), so that the served tasks run
    where a spark-submit task would."""
    served = {k: v for k, v in env.items() if k != "RUNOFF_SERVER"}
    served["RUNOFF_SPARK_MASTER"] = connection_master(env)
    return served


def airflow(env: Mapping[str, str], *args: str) -> None:
    """Run one `airflow` CLI command; a failure raises with its output."""
    result = subprocess.run(
        [str(Path(sys.executable).parent / "airflow"), *args],
        env=dict(env),
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        output = (result.stderr or result.stdout).strip().splitlines()[-20:]
        raise RuntimeError(f"`airflow {' '.join(args)}` failed:\n" + "\n".join(output))


def write_airflow_cfg(env: Mapping[str, str]) -> Path:
    """Every `AIRFLOW__<SECTION>__<KEY>` setting of `env` into `$AIRFLOW_HOME/airflow.cfg`, so
    that an `airflow` command run from any shell with only `AIRFLOW_HOME` set (e.g.
    `airflow backfill create`) uses this Airflow's database, with its lock timeout, and DAGs."""
    import configparser

    path = Path(env["AIRFLOW_HOME"]) / "airflow.cfg"
    config = configparser.ConfigParser(interpolation=None)
    config.read(path)
    for name, value in sorted(env.items()):
        parts = name.split("__")
        if len(parts) != 3 or parts[0] != "AIRFLOW":
            continue
        section, key = parts[1].lower(), parts[2].lower()
        if not config.has_section(section):
            config.add_section(section)
        config.set(section, key, value)
    with path.open("w", encoding="utf-8") as cfg:
        config.write(cfg)
    path.chmod(0o600)  # it may hold secrets given in the environment
    return path


def prepare(env: Mapping[str, str], spark_slots: int) -> None:
    """Migrate the metadata DB, add this Airflow's settings to airflow.cfg and create the `spark`
    pool that bounds concurrent Spark jobs. The first `airflow` command writes the default
    airflow.cfg with the secrets every component must share (the JWT secret that signs task
    tokens among them): the settings are merged into it afterwards, never written before it."""
    Path(env["AIRFLOW_HOME"]).mkdir(parents=True, exist_ok=True)
    airflow(env, "db", "migrate")
    write_airflow_cfg(env)
    airflow(
        env,
        "pools",
        "set",
        SPARK_POOL,
        str(spark_slots),
        "Spark applications running at once (runoff tasks)",
    )


def admin_password(airflow_home: Path) -> str | None:
    """The admin password the api-server generated, once it has written it."""
    path = airflow_home / PASSWORD_FILE
    try:
        passwords: dict[str, str] = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return passwords.get("admin")


def api_ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/api/v2/monitor/health", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def api_token(url: str, password: str | None, username: str = "admin") -> str:
    """A JWT for the REST API of the Airflow at `url` (POST /auth/token with the login)."""
    request = urllib.request.Request(
        f"{url}/auth/token",
        method="POST",
        data=json.dumps({"username": username, "password": password}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        token: str = json.loads(response.read())["access_token"]
        return token


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


# The components `airflow standalone` runs, started here without its log servers: the scheduler
# and the triggerer would each start `airflow serve-logs`, which listens on every interface (its
# host is fixed). Their task and trigger logs are files under AIRFLOW_HOME/logs on this machine,
# which the api-server reads itself.
COMPONENTS: tuple[tuple[str, ...], ...] = (
    ("api-server",),
    ("scheduler", "--skip-serve-logs"),
    ("dag-processor",),
    ("triggerer", "--skip-serve-logs"),
)


# A component that ends while Airflow runs is started again (compose: `restart: unless-stopped`):
# with sqlite, a scheduler can end on a write that another process removed under it (a backfill
# refused with "database is locked" removes the runs it had created). More than RESTARTS ends
# within RESTART_WINDOW seconds is a fault that restarting does not cure: Airflow is stopped.
RESTARTS = 3
RESTART_WINDOW = 600.0


@dataclass
class Components:
    """Airflow's running components, one process group (`pid`: its id)."""

    commands: list[list[str]]
    env: dict[str, str]
    output: IO[bytes] | None
    processes: list[subprocess.Popen[bytes]] = field(init=False)
    group: int = field(init=False)  # the process group: the first component's pid
    ended: list[float] = field(default_factory=list)  # when components ended (monotonic)

    def __post_init__(self) -> None:
        first = self._spawn(self.commands[0], group=0)  # leads a new process group
        self.group = first.pid
        self.processes = [first, *(self._spawn(c, self.group) for c in self.commands[1:])]

    def _spawn(self, command: list[str], group: int) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            command,
            env=self.env,
            stdout=self.output,
            stderr=subprocess.STDOUT if self.output else None,
            process_group=group,
        )

    @property
    def pid(self) -> int:
        return self.group

    def poll(self) -> int | None:
        """None while every component runs, else the exit code of one that ended."""
        return next((p.returncode for p in self.processes if p.poll() is not None), None)

    def wait(self, restarts: int = RESTARTS, window: float = RESTART_WINDOW) -> int:
        """Start again each component that ends, until components have ended more than
        `restarts` times within `window` seconds; then the exit code of the last one."""
        while True:
            for index, process in enumerate(self.processes):
                if (code := process.poll()) is None:
                    continue
                now = time.monotonic()
                self.ended = [t for t in self.ended if now - t < window] + [now]
                name = " ".join([Path(self.commands[index][0]).name, *self.commands[index][1:2]])
                if code < 0:  # ended by a signal: the shell's exit status for it
                    said, code = f"{name} was ended by {signal.Signals(-code).name}", 128 - code
                else:
                    said = f"{name} exited with code {code}"
                if len(self.ended) > restarts:
                    print(
                        f"runoff: error: {said}; components ended {len(self.ended)} times within "
                        f"{window:.0f} s: stopping Airflow",
                        file=sys.stderr,
                        flush=True,
                    )
                    return code
                print(f"runoff: {said}: starting it again", flush=True)
                try:
                    self.processes[index] = self._spawn(self.commands[index], self.group)
                except OSError as exc:  # the group is gone: every component ended
                    print(f"runoff: error: {said}; {exc}", file=sys.stderr, flush=True)
                    return code
            time.sleep(1)


def start(
    env: Mapping[str, str],
    log_path: Path | None = None,
    commands: Sequence[Sequence[str]] | None = None,
) -> Components:
    """Start Airflow's components (`COMPONENTS`, or `commands`: whole command lines) in a process
    group of their own (stop them with `stop`)."""
    airflow = str(Path(sys.executable).parent / "airflow")
    if commands is None:
        commands = [[airflow, *component] for component in COMPONENTS]
    output = open(log_path, "ab") if log_path else None  # noqa: SIM115 - owned by the children
    return Components([list(c) for c in commands], dict(env), output)


def stop(*groups: subprocess.Popen[bytes] | Components, timeout: float = 30.0) -> None:
    """Terminate the process groups led by `groups` (processes, or the components) together,
    then kill those still running `timeout` seconds later: the groups stop side by side, so
    stopping them all takes as long as the slowest."""
    running = [g for g in groups if not all(p.poll() is not None for p in _members(g))]
    for group in running:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for group in running:
        for member in _members(group):
            try:
                member.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(group.pid, signal.SIGKILL)
                member.wait(timeout=timeout)


def _members(group: subprocess.Popen[bytes] | Components) -> list[subprocess.Popen[bytes]]:
    return group.processes if isinstance(group, Components) else [group]


def server_socket(home: Path) -> Path:
    """Where `make airflow`'s `runoff serve` listens (the default of `runoff serve`)."""
    return home / "run" / "runoff.sock"


def start_server(env: Mapping[str, str], home: Path) -> subprocess.Popen[bytes]:
    """Start `runoff serve` in its own process group, its output in `<home>/logs/server.log`:
    the warm Spark driver every task of this Airflow runs its step in (`RUNOFF_SERVER`), on the
    master of the `spark_default` connection (`server_env`)."""
    served = server_env(env)
    log_path = home / "logs" / "server.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    output = open(log_path, "ab")  # noqa: SIM115 - owned by the child
    socket_path = server_socket(home)
    command = ["--home", str(home), "serve", "--socket", str(socket_path)]
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "runoff"), *command],
        env=served,
        stdout=output,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    # The socket exists as soon as the server listens; clients wait there until Spark is up.
    deadline = time.monotonic() + 60
    while not socket_path.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            stop(process)
            raise RuntimeError(f"`runoff serve` did not start: see {log_path}")
        time.sleep(0.2)
    return process


def wait_until_ready(process: Components, env: Mapping[str, str], timeout: float) -> str | None:
    """Wait for the API to answer and the admin password to exist; return the password.

    With `AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS=True` there is no password: None.
    """
    deadline = time.monotonic() + timeout
    url = env["AIRFLOW__API__BASE_URL"]
    airflow_home = Path(env["AIRFLOW_HOME"])
    all_admins = env.get("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS", "").lower()
    while time.monotonic() < deadline:
        if (code := process.poll()) is not None:
            raise RuntimeError(f"an Airflow component exited with code {code}")
        password = admin_password(airflow_home)
        if password is not None:
            # Airflow writes the file with the umask's mode (often readable by every user).
            (airflow_home / PASSWORD_FILE).chmod(0o600)
        if api_ready(url) and (password is not None or all_admins == "true"):
            return password
        time.sleep(1)
    raise RuntimeError(f"Airflow did not answer on {url} within {timeout:.0f} s")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dags.standalone", description=__doc__)
    parser.add_argument("--home", help="runoff home (else $RUNOFF_HOME, else ./.runoff)")
    parser.add_argument("--port", type=int, default=8080, help="API server and UI port")
    parser.add_argument("--spark-slots", type=int, default=2, help="size of the `spark` pool")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the UI")
    parser.add_argument(
        "--no-server",
        action="store_true",
        help="no `runoff serve`: every task is a spark-submit with a Spark start of its own",
    )
    args = parser.parse_args(argv)

    home = runoff_home(args.home, os.environ)
    env = airflow_env(home, args.port)
    airflow_home = Path(env["AIRFLOW_HOME"])
    url = env["AIRFLOW__API__BASE_URL"]
    print(
        f"runoff: Airflow home {airflow_home}, DAGs {DAGS_FOLDER}, runoff home {home}", flush=True
    )
    try:
        prepare(env, args.spark_slots)
    except RuntimeError as exc:
        print(f"runoff: error: {exc}", file=sys.stderr)
        return 1
    # SIGTERM (e.g. from a test or a supervisor) stops Airflow like Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server = None
    if not args.no_server:
        try:
            server = start_server(env, home)
        except RuntimeError as exc:
            print(f"runoff: error: {exc}", file=sys.stderr)
            return 1
        env["RUNOFF_SERVER"] = str(server_socket(home))
        (airflow_home / SERVER_PID_FILE).write_text(f"{server.pid}\n")
    process = start(env)
    pid_file = airflow_home / PID_FILE
    pid_file.write_text(f"{process.pid}\n")
    try:
        password = wait_until_ready(process, env, args.timeout)
        lines = [f"Airflow UI at {url}"]
        if password is None:
            lines.append("no login needed (simple auth manager: all admins)")
        else:
            lines.append(f"login admin / {password} (from {airflow_home / PASSWORD_FILE})")
        lines.append("DAGs start paused: unpause runoff_<dataset> in the UI; Ctrl-C stops Airflow")
        print("\n".join(f"runoff: {line}" for line in lines), flush=True)
        return process.wait()
    except RuntimeError as exc:
        print(f"runoff: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        stop(process, *([server] if server is not None else []))
        pid_file.unlink(missing_ok=True)
        if server is not None:
            (airflow_home / SERVER_PID_FILE).unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())
