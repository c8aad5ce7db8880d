"""docker/compose.yaml runs Airflow exactly as tests/airflow_deployment.py defines it.

tests/e2e/test_airflow_postgres.py starts PostgreSQL, the runoff server and Airflow's components as
processes on loopback from that definition; here compose is held to it: the same init commands,
one service per component with the component's command, the same `AIRFLOW__*` and
`RUNOFF_SERVER*` keys with the values of compose's site (its service names, ports and `${...}`
secrets), the same PostgreSQL user, database and readiness check, and the runoff server's command
and settings, at the address the tasks are given. Compose's variables are resolved as compose
does (tests/unit/docker/test_compose.py).
"""

from __future__ import annotations

import shlex
from typing import Any

import pytest
import yaml

from tests.airflow_deployment import (
    COMPONENT_RESTART,
    COMPONENTS,
    INIT_COMMANDS,
    POSTGRES_DB,
    POSTGRES_READY,
    POSTGRES_USER,
    Site,
    airflow_settings,
    component_command,
    database_url,
    server_command,
    server_settings,
)
from tests.unit.docker.test_compose import COMPOSE, SECRETS, resolved

INIT_SERVICE = "airflow-init"
SERVER_SERVICE = "runoff-server"
COMPONENT_SERVICES = {f"airflow-{component}": component for component in COMPONENTS}


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    compose: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    resolved_services: dict[str, Any] = resolved(compose, SECRETS)["services"]
    return resolved_services


def compose_site(services: dict[str, Any]) -> Site:
    """Compose's site: its service names and container ports, the secrets of the environment."""
    api = services["airflow-api-server"]
    [published] = api["ports"]
    api_port = int(str(published).split(":")[-1])  # the container's port
    return Site(
        postgres="postgres:5432",  # the service, the postgres image's port
        postgres_password=SECRETS["RUNOFF_POSTGRES_PASSWORD"],
        jwt_secret=SECRETS["RUNOFF_JWT_SECRET"],
        fernet_key=SECRETS["RUNOFF_FERNET_KEY"],
        # Inside its container: the published port (127.0.0.1 unless RUNOFF_BIND) reaches it.
        api_host="0.0.0.0",
        api_port=api_port,
        base_url=f"http://localhost:{api_port}",
        execution_api_url=f"http://airflow-api-server:{api_port}/execution/",
        dags_folder="/app/dags",
        spark_connection="spark://spark-master:7077",
        server_secret=SECRETS["RUNOFF_SERVER_SECRET"],
        # Inside its container, on every interface: the other services reach it by its name.
        server_listen="0.0.0.0:7079",
        server_address=f"{SERVER_SERVICE}:7079",
        spark_master="spark://spark-master:7077",
    )


def airflow_environment(service: dict[str, Any]) -> dict[str, str]:
    """The deployment's settings of a service: Airflow's, and the runoff server it reaches."""
    return {
        k: str(v)
        for k, v in service["environment"].items()
        if k.startswith(("AIRFLOW", "RUNOFF_SERVER"))
    }


def test_compose_runs_one_service_per_component_with_its_command(
    services: dict[str, Any],
) -> None:
    airflow = {name for name in services if name.startswith("airflow")}
    assert airflow == {INIT_SERVICE, *COMPONENT_SERVICES}
    for name, component in COMPONENT_SERVICES.items():
        assert services[name]["command"] == component_command(component), name
        assert services[name]["restart"] == COMPONENT_RESTART, name
    assert "restart" not in services[INIT_SERVICE]


def test_compose_init_runs_the_init_commands_in_order(services: dict[str, Any]) -> None:
    shell, flag, script = services[INIT_SERVICE]["command"]
    assert (shell, flag) == ("bash", "-c")
    commands: list[tuple[str, ...]] = [()]
    for word in shlex.split(script):
        if word == "&&":  # each runs only when the one before succeeded
            commands.append(())
        else:
            commands[-1] = (*commands[-1], word)
    assert tuple(commands) == INIT_COMMANDS


@pytest.mark.parametrize("name", [INIT_SERVICE, *COMPONENT_SERVICES])
def test_compose_gives_every_airflow_service_the_deployment_settings(
    services: dict[str, Any], name: str
) -> None:
    """The same keys as the test's Airflow, no other, with compose's values."""
    assert airflow_environment(services[name]) == airflow_settings(compose_site(services))


def test_compose_site_agrees_with_the_services(services: dict[str, Any]) -> None:
    site = compose_site(services)
    api = services["airflow-api-server"]
    assert str(api["ports"][0]).endswith(f":{site.api_port}:{site.api_port}")
    health = " ".join(api["healthcheck"]["test"])
    assert f"http://localhost:{site.api_port}/api/v2/monitor/health" in health
    master = services["spark-master"]["command"]
    host, port = master[master.index("--host") + 1], master[master.index("--port") + 1]
    assert site.spark_connection == f"spark://{host}:{port}"
    assert site.postgres.split(":")[0] in services


def test_compose_postgres_is_the_database_of_the_settings(services: dict[str, Any]) -> None:
    postgres = services["postgres"]
    env = postgres["environment"]
    assert (env["POSTGRES_USER"], env["POSTGRES_DB"]) == (POSTGRES_USER, POSTGRES_DB)
    assert env["POSTGRES_PASSWORD"] == SECRETS["RUNOFF_POSTGRES_PASSWORD"]
    assert postgres["healthcheck"]["test"] == ["CMD", *POSTGRES_READY]
    url = database_url(compose_site(services))
    assert url == (
        f"postgresql+psycopg://{POSTGRES_USER}:{SECRETS['RUNOFF_POSTGRES_PASSWORD']}"
        f"@postgres:5432/{POSTGRES_DB}"
    )


def test_compose_runs_the_runoff_server_as_in_the_test(services: dict[str, Any]) -> None:
    """The server's command and settings are the definition's, at the address the tasks are
    given: its service's name (the host other containers reach) and its port."""
    site = compose_site(services)
    server = services[SERVER_SERVICE]
    assert server["command"] == server_command(site)
    env = {k: str(v) for k, v in server["environment"].items() if v is not None}
    assert {k: env.get(k) for k in server_settings(site)} == server_settings(site)
    assert "RUNOFF_SERVER" not in env  # the server is nobody's client
    host, port = site.server_address.split(":")
    assert server["hostname"] == host
    assert site.server_listen.split(":")[1] == port
    assert "runoff-home:/data/runoff" in server["volumes"]


def test_compose_runs_every_spark_command_in_the_server(services: dict[str, Any]) -> None:
    """Airflow's tasks and the one-off `runoff` service are the server's clients (its address
    and secret); nothing else starts a Spark driver of its own."""
    site = compose_site(services)
    client = {k: v for k, v in airflow_settings(site).items() if k.startswith("RUNOFF_SERVER")}
    assert client == {
        "RUNOFF_SERVER": f"tcp://{SERVER_SERVICE}:7079",
        "RUNOFF_SERVER_SECRET": SECRETS["RUNOFF_SERVER_SECRET"],
    }
    for name in (*COMPONENT_SERVICES, "runoff"):
        env = services[name]["environment"]
        assert {k: env.get(k) for k in client} == client, name
    for name in COMPONENT_SERVICES:
        assert services[name]["depends_on"][SERVER_SERVICE] == {"condition": "service_started"}
