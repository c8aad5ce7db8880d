"""docker/compose.yaml runs Airflow exactly as tests/airflow_deployment.py defines it.

tests/e2e/test_airflow_postgres.py starts PostgreSQL and Airflow's components as processes on
loopback from that definition; here compose is held to it: the same init commands, one service
per component with the component's command, the same `AIRFLOW__*` keys with the values of
compose's site (its service names, ports and `${...}` secrets), the same PostgreSQL user,
database and readiness check, and tasks as spark-submits (no `runoff serve` in compose, none in
the test). Compose's variables are resolved as compose does (tests/unit/docker/test_compose.py).
"""

from __future__ import annotations

import shlex
from typing import Any

import pytest
import yaml

from tests.airflow_deployment import (
    COMPONENTS,
    INIT_COMMANDS,
    POSTGRES_DB,
    POSTGRES_READY,
    POSTGRES_USER,
    Site,
    airflow_settings,
    component_command,
    database_url,
)
from tests.unit.docker.test_compose import COMPOSE, SECRETS, resolved

INIT_SERVICE = "airflow-init"
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
    )


def airflow_environment(service: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in service["environment"].items() if k.startswith("AIRFLOW")}


def test_compose_runs_one_service_per_component_with_its_command(
    services: dict[str, Any],
) -> None:
    airflow = {name for name in services if name.startswith("airflow")}
    assert airflow == {INIT_SERVICE, *COMPONENT_SERVICES}
    for name, component in COMPONENT_SERVICES.items():
        assert services[name]["command"] == component_command(component), name


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


def test_compose_tasks_are_spark_submits_as_in_the_test(services: dict[str, Any]) -> None:
    """No `runoff serve` in compose: a task without RUNOFF_SERVER is a spark-submit through
    `spark_default` (dags/hooks.py), as in tests/e2e/test_airflow_postgres.py."""
    for name, service in services.items():
        assert "RUNOFF_SERVER" not in (service.get("environment") or {}), name
        command = service.get("command") or []
        words = shlex.split(command) if isinstance(command, str) else command
        assert "serve" not in words, name
