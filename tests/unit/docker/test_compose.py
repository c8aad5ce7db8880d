"""docker/: the image installs what `make install` installs; compose wires Airflow to Spark.

No Docker engine runs in CI, so these tests check the files themselves: the Dockerfile against
the Makefile and pyproject.toml, the compose file's services, volume, environment and images.
Compose's `${VAR}`, `${VAR:-default}` and `${VAR:?message}` are resolved here as compose does:
published ports listen on loopback unless `RUNOFF_BIND` says otherwise, and the secrets come
from the environment only (compose refuses to start without them).
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO_ROOT

DOCKER = REPO_ROOT / "docker"
DOCKERFILE = DOCKER / "Dockerfile"
COMPOSE = DOCKER / "compose.yaml"
AIRFLOW_SERVICES = (
    "airflow-init",
    "airflow-api-server",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-triggerer",
)
SPARK_SERVICES = ("spark-master", "spark-worker")
MASTER_URL = "spark://spark-master:7077"
# What `docker/.env` (or the shell) provides: compose's secrets, required from the environment.
SECRET_VARIABLES = (
    "RUNOFF_POSTGRES_PASSWORD",
    "RUNOFF_JWT_SECRET",
    "RUNOFF_FERNET_KEY",
    "RUNOFF_SERVER_SECRET",
)
SECRETS = {name: f"{name.lower()}0123456789" for name in SECRET_VARIABLES}
LOOPBACK = {"127.0.0.1", "::1"}


class MissingVariable(Exception):
    """`${NAME:?message}` with NAME unset or empty: compose stops with the message."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"required variable {name} is missing a value: {message}")
        self.name, self.message = name, message


_VARIABLE = re.compile(r"\$\$|\$\{(?P<name>\w+)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}|\$(?P<bare>\w+)")


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's variable substitution of one string (`$$` is a literal `$`)."""

    def substitute(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match["name"] or match["bare"]
        op, arg, current = match["op"] or "", match["arg"] or "", env.get(name)
        missing = not current if op.startswith(":") else current is None
        if op.endswith("-"):
            return arg if missing else str(current)
        if op.endswith("?"):
            if missing:
                raise MissingVariable(name, arg)
            return str(current)
        return current or ""

    return _VARIABLE.sub(substitute, value)


def resolved(node: Any, env: dict[str, str]) -> Any:
    """The compose file (or part of it) with every string interpolated from `env`."""
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, dict):
        return {key: resolved(value, env) for key, value in node.items()}
    if isinstance(node, list):
        return [resolved(value, env) for value in node]
    return node


def published_ports(compose: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(service, host address, host port) of every published port (short and long syntax); a
    port published without an address listens on every interface (0.0.0.0)."""
    ports = []
    for name, service in compose["services"].items():
        for port in service.get("ports", []):
            if isinstance(port, dict):
                address = str(port.get("host_ip", "0.0.0.0"))
                ports.append((name, address, str(port.get("published", ""))))
                continue
            spec = str(port).split("/")[0]
            if spec.startswith("["):  # [IPv6]:host:container
                address, _, rest = spec[1:].partition("]:")
                ports.append((name, address, rest.split(":")[0]))
                continue
            parts = spec.split(":")
            address = parts[0] if len(parts) == 3 else "0.0.0.0"
            ports.append((name, address, parts[-2] if len(parts) >= 2 else ""))
    return ports


def dockerfile_instructions(path: Path = DOCKERFILE) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    logical: list[str] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    pairs = []
    for line in logical:
        instruction, _, rest = line.partition(" ")
        pairs.append((instruction.upper(), " ".join(rest.split())))
    return pairs


def run_commands() -> list[str]:
    return [args for instruction, args in dockerfile_instructions() if instruction == "RUN"]


def makefile_recipe(target: str) -> list[str]:
    lines = (REPO_ROOT / "Makefile").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"^{target}\s*:", line))
    recipe = []
    for line in lines[start + 1 :]:
        if not line.startswith("\t"):
            break
        recipe.append(line.strip())
    return recipe


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


@pytest.fixture(scope="module")
def pyproject() -> dict[str, Any]:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())


# -- the image ----------------------------------------------------------------------------------
def test_image_python_is_the_minor_version_pyproject_requires(pyproject: dict[str, Any]) -> None:
    from packaging.specifiers import SpecifierSet

    base = next(args for instruction, args in dockerfile_instructions() if instruction == "FROM")
    match = re.fullmatch(r"python:(\d+)\.(\d+)-slim-(\w+)", base)
    assert match, f"base image {base!r} is not python:<major>.<minor>-slim-<debian release>"
    major, minor, _release = match.groups()
    requires = SpecifierSet(pyproject["project"]["requires-python"])
    minors_allowed = [m for m in range(0, 30) if f"{major}.{m}.0" in requires]
    assert minors_allowed == [int(minor)], (base, str(requires))
    assert pyproject["tool"]["mypy"]["python_version"] == f"{major}.{minor}"


def test_image_installs_java_17_from_debian_bookworm() -> None:
    base = next(args for instruction, args in dockerfile_instructions() if instruction == "FROM")
    # Debian trixie (the default of python:*-slim since 2025) ships no openjdk-17.
    assert base.endswith("-slim-bookworm")
    apt = [c for c in run_commands() if "apt-get install" in c and "openjdk" in c]
    assert len(apt) == 1
    assert "openjdk-17-jre-headless" in shlex.split(apt[0])
    # The Makefile's hint names the same package.
    assert "openjdk-17-jre-headless" in (REPO_ROOT / "Makefile").read_text()


def test_image_installs_like_make_install() -> None:
    install = makefile_recipe("install")
    assert any("pip install" in line and "uv" in line for line in install)
    assert any(re.search(r"(^|\s)(uv|\$\(UV\)) sync --frozen(\s|$)", line) for line in install), (
        install
    )

    runs = run_commands()
    assert any(re.search(r"pip install .*\buv==", c) for c in runs), runs
    syncs = [c for c in runs if "uv sync" in c]
    assert syncs and all(c.startswith("uv sync --frozen") for c in syncs), syncs
    # The last sync installs the project itself, after the code was copied.
    instructions = dockerfile_instructions()
    last_sync = max(i for i, (ins, a) in enumerate(instructions) if ins == "RUN" and "uv sync" in a)
    copies = [i for i, (ins, a) in enumerate(instructions) if ins == "COPY" and a == ". ."]
    assert copies and copies[0] < last_sync
    assert "--no-install-project" not in instructions[last_sync][1]
    lock_copy = next(a for ins, a in instructions if ins == "COPY" and "uv.lock" in a)
    assert "pyproject.toml" in lock_copy


def test_image_bakes_the_jars_like_make_jars() -> None:
    jars = makefile_recipe("jvm/jars/.fetched")
    fetch = next(line for line in jars if line.startswith("mvn "))
    runs = run_commands()
    assert any(fetch in c and "touch jvm/jars/.fetched" in c for c in runs), (fetch, runs)
    instructions = dockerfile_instructions()
    pom_copy = next(
        i for i, (ins, a) in enumerate(instructions) if ins == "COPY" and "pom.xml" in a
    )
    fetch_run = next(i for i, (ins, a) in enumerate(instructions) if ins == "RUN" and fetch in a)
    assert pom_copy < fetch_run
    # The host's jars never enter the build context: the image fetches its own.
    assert "jvm/jars/" in (DOCKER / "Dockerfile.dockerignore").read_text().split()


def test_image_installs_the_data_docs_assets_like_make_install() -> None:
    install = makefile_recipe("install")
    npm_ci = next(line for line in install if "npm ci" in line)
    assert "(cd quality/vendor && npm ci)" in npm_ci
    runs = run_commands()
    assert any("(cd quality/vendor && npm ci)" in c for c in runs), runs
    instructions = dockerfile_instructions()
    lock_copy = next(
        i
        for i, (ins, a) in enumerate(instructions)
        if ins == "COPY" and "quality/vendor/package-lock.json" in a
    )
    npm_run = next(i for i, (ins, a) in enumerate(instructions) if ins == "RUN" and "npm ci" in a)
    assert lock_copy < npm_run
    # The host's node_modules never enter the build context: the image fetches its own.
    ignored = (DOCKER / "Dockerfile.dockerignore").read_text().split()
    assert "quality/vendor/node_modules/" in ignored


def test_image_extra_for_postgres_is_locked(pyproject: dict[str, Any]) -> None:
    extras = {re.findall(r"--extra (\S+)", c)[0] for c in run_commands() if "--extra" in c}
    assert extras == {"postgres"}
    assert any(
        r.startswith("psycopg") for r in pyproject["project"]["optional-dependencies"]["postgres"]
    )
    lock = tomllib.loads((REPO_ROOT / "uv.lock").read_text())
    runoff = next(p for p in lock["package"] if p["name"] == "runoff")
    assert [d["name"] for d in runoff["optional-dependencies"]["postgres"]] == ["psycopg"]


def test_build_context_leaves_out_the_host_venv() -> None:
    ignore = (DOCKER / "Dockerfile.dockerignore").read_text().split()
    assert ".venv/" in ignore and ".runoff/" in ignore and ".git/" in ignore


def test_image_puts_the_venv_first_on_path() -> None:
    env = " ".join(a for ins, a in dockerfile_instructions() if ins == "ENV")
    assert "PATH=/app/.venv/bin:$PATH" in env
    assert "RUNOFF_HOME=/data/runoff" in env
    assert "UV_PROJECT_ENVIRONMENT=/app/.venv" in env


# -- compose ------------------------------------------------------------------------------------
def test_compose_has_the_services(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert {"postgres", *AIRFLOW_SERVICES, *SPARK_SERVICES} <= set(services)
    assert services["postgres"]["image"].startswith("postgres:")


def test_every_runoff_service_is_built_from_the_dockerfile(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        if name == "postgres":
            continue
        build = service.get("build")
        assert build, f"service {name} is not built from docker/Dockerfile"
        context = (DOCKER / build["context"]).resolve()
        assert context == REPO_ROOT
        assert (context / build["dockerfile"]).resolve() == DOCKERFILE
        assert service["image"] == "runoff:latest", name


def test_airflow_services_run_their_component(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert "airflow db migrate" in " ".join(services["airflow-init"]["command"])
    for component in ("api-server", "scheduler", "dag-processor", "triggerer"):
        service = services[f"airflow-{component}"]
        assert service["command"] == ["airflow", component]
        assert service["depends_on"]["airflow-init"] == {
            "condition": "service_completed_successfully"
        }
    assert services["airflow-init"]["depends_on"]["postgres"] == {"condition": "service_healthy"}


def test_spark_cluster_comes_from_pyspark_in_the_image(compose: dict[str, Any]) -> None:
    master = compose["services"]["spark-master"]["command"]
    worker = compose["services"]["spark-worker"]["command"]
    assert master[:2] == ["spark-class", "org.apache.spark.deploy.master.Master"]
    assert master[master.index("--port") + 1] == "7077"
    assert master[master.index("--host") + 1] == "spark-master"
    assert worker[:3] == ["spark-class", "org.apache.spark.deploy.worker.Worker", MASTER_URL]


def test_one_shared_volume_holds_the_runoff_home(compose: dict[str, Any]) -> None:
    assert "runoff-home" in compose["volumes"]
    for name in (*AIRFLOW_SERVICES, "spark-worker"):
        service = compose["services"][name]
        assert "runoff-home:/data/runoff" in service["volumes"], name
        assert service["environment"]["RUNOFF_HOME"] == "/data/runoff", name


def test_airflow_environment(compose: dict[str, Any]) -> None:
    services = resolved(compose, SECRETS)["services"]
    password = SECRETS["RUNOFF_POSTGRES_PASSWORD"]
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD"] == password
    for name in AIRFLOW_SERVICES:
        env = services[name]["environment"]
        assert env["AIRFLOW__CORE__DAGS_FOLDER"] == "/app/dags"
        assert env["AIRFLOW_CONN_SPARK_DEFAULT"] == MASTER_URL
        for key in (
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC",
        ):
            assert env[key] == f"postgresql+psycopg://airflow:{password}@postgres:5432/airflow"
        # One JWT secret and one Fernet key for every component (tokens, encrypted connections).
        assert env["AIRFLOW__API_AUTH__JWT_SECRET"] == SECRETS["RUNOFF_JWT_SECRET"]
        assert env["AIRFLOW__CORE__FERNET_KEY"] == SECRETS["RUNOFF_FERNET_KEY"]
        assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"].startswith(
            "http://airflow-api-server:8080/"
        )
    assert (REPO_ROOT / "dags").is_dir()  # /app/dags in the image


def test_spark_connection_resolves_to_the_compose_master(
    compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """What SparkSubmitOperator will pass to spark-submit, from the compose environment."""
    env = compose["services"]["airflow-scheduler"]["environment"]
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", env["AIRFLOW_CONN_SPARK_DEFAULT"])
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    hook = SparkSubmitHook(conn_id="spark_default")

    command = hook._build_spark_submit_command("jobs/cli/submit.py")
    assert command[:3] == ["spark-submit", "--master", MASTER_URL]


# -- safe defaults ------------------------------------------------------------------------------
def test_published_ports_listen_on_loopback_unless_configured(compose: dict[str, Any]) -> None:
    default = published_ports(resolved(compose, SECRETS))
    assert {(name, port) for name, _, port in default} >= {
        ("airflow-api-server", "8080"),
        ("spark-master", "8081"),
    }
    assert [p for p in default if p[1] not in LOOPBACK] == []
    # RUNOFF_BIND publishes every port on the address it names.
    wide = published_ports(resolved(compose, {**SECRETS, "RUNOFF_BIND": "0.0.0.0"}))
    assert {address for _, address, _ in wide} == {"0.0.0.0"}
    assert len(wide) == len(default)
    for name, service in compose["services"].items():
        assert service.get("network_mode") != "host", name  # would bypass the published addresses


@pytest.mark.parametrize("variable", sorted(SECRETS))
def test_compose_requires_each_secret_from_the_environment(
    compose: dict[str, Any], variable: str
) -> None:
    for env in ({k: v for k, v in SECRETS.items() if k != variable}, {**SECRETS, variable: ""}):
        with pytest.raises(MissingVariable) as missing:
            resolved(compose, env)
        assert missing.value.name == variable
        assert f"set {variable} in the environment or docker/.env" in missing.value.message


def test_compose_holds_no_secret_default(compose: dict[str, Any]) -> None:
    """Without the variables nothing resolves to a built-in password, secret or key."""
    text = COMPOSE.read_text()
    for variable in SECRETS:
        references = re.findall(rf"\$\{{{variable}(:?[-?])?[^}}]*\}}", text)
        assert references, variable
        assert all(op == ":?" for op in references), (variable, references)


def test_airflow_in_compose_requires_a_login(compose: dict[str, Any]) -> None:
    services = resolved(compose, SECRETS)["services"]
    for name in AIRFLOW_SERVICES:
        env = services[name]["environment"]
        all_admins = str(env.get("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS", "False"))
        assert all_admins.lower() != "true", name
        assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] == "admin:admin"  # user:role


def test_secrets_file_stays_out_of_git_and_the_image() -> None:
    assert ".env" in (DOCKER / ".gitignore").read_text().split()
    assert "**/.env" in (DOCKER / "Dockerfile.dockerignore").read_text().split()


def test_the_readmes_env_file_holds_every_secret_compose_requires(compose: dict[str, Any]) -> None:
    """README, Scaling out, writes docker/.env with a `python3 -c` program: run here, it prints
    each variable compose requires, once, with a value compose and runoff accept."""
    from jobs.cli.server import MIN_SECRET_CHARS
    from tests.readme import blocks, section

    [writer] = [b.text for b in blocks(section("Scaling out")) if "> docker/.env" in b.text]
    program = re.search(r"python3 -c '(.*?)' > docker/\.env", writer, re.S)
    assert program, writer
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(program.group(1), {})
    pairs = [line.split("=", 1) for line in printed.getvalue().splitlines()]
    values = dict(pairs)
    assert len(values) == len(pairs)
    assert set(values) == set(SECRET_VARIABLES)
    assert values["RUNOFF_POSTGRES_PASSWORD"].isalnum()  # it goes into a URL unquoted
    assert len(values["RUNOFF_SERVER_SECRET"]) >= MIN_SECRET_CHARS
    resolved(compose, values)  # nothing missing
