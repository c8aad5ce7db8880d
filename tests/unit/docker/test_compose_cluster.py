"""docker/compose.yaml runs the Spark cluster exactly as tests/spark_cluster.py defines it.

tests/e2e/test_spark_cluster.py starts a master and a worker as processes on loopback from
`master_command` and `worker_command`; here compose's `spark-master` and `spark-worker` are held
to the same definition: PySpark's `spark-class` with the same classes, the same flags in the
same order and the worker's cores and memory, with the values of compose's site (service
hostnames, Spark's standard ports, a work dir in the container). Compose's variables are resolved
as compose does (tests/unit/docker/test_compose.py).
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.spark_cluster import HOST, master_command, spark_class, worker_command
from tests.unit.docker.test_compose import COMPOSE, MASTER_URL, SECRETS, resolved

# Compose's site: Spark's standard ports inside the containers, the worker's work dir.
MASTER_PORT, MASTER_WEBUI_PORT = 7077, 8080
WORKER_PORT, WORKER_WEBUI_PORT = 7078, 8081
WORK_DIR = "/tmp/spark-work"
# Flags whose values are a site's (hosts, ports, paths); everything else must be equal.
SITE_FLAGS = ("--host", "--port", "--webui-port", "--work-dir")


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    compose: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    resolved_services: dict[str, Any] = resolved(compose, SECRETS)["services"]
    return resolved_services


def without_site(command: list[str]) -> list[str]:
    """The command with the values of the site's flags and the master URL's address blanked."""
    shape = []
    for index, arg in enumerate(command):
        if index > 0 and command[index - 1] in SITE_FLAGS:
            shape.append("<site>")
        elif arg.startswith("spark://"):
            shape.append("spark://<site>")
        else:
            shape.append(arg)
    return shape


def loopback_commands() -> tuple[list[str], list[str]]:
    """What tests/spark_cluster.py runs (any free ports: they are the site's)."""
    launcher = str(spark_class())
    master = master_command(launcher, HOST, 40001, 40002)
    worker = worker_command(launcher, f"spark://{HOST}:40001", HOST, 40003, 40004, "/tmp/work")
    return master, worker


def test_the_master_service_runs_the_master_command(services: dict[str, Any]) -> None:
    master = services["spark-master"]
    assert master["command"] == master_command(
        "spark-class", master["hostname"], MASTER_PORT, MASTER_WEBUI_PORT
    )
    # The master's UI is its web UI port, published (on 127.0.0.1 unless RUNOFF_BIND).
    [published] = master["ports"]
    assert str(published).endswith(f":{MASTER_WEBUI_PORT}")


def test_the_worker_service_runs_the_worker_command(services: dict[str, Any]) -> None:
    worker = services["spark-worker"]
    master_url = f"spark://{services['spark-master']['hostname']}:{MASTER_PORT}"
    assert worker["command"] == worker_command(
        "spark-class", master_url, worker["hostname"], WORKER_PORT, WORKER_WEBUI_PORT, WORK_DIR
    )
    # Drivers connect to the master the worker registers with.
    assert master_url == MASTER_URL
    assert worker["environment"]["RUNOFF_SPARK_MASTER"] == MASTER_URL


def test_compose_and_the_cluster_test_differ_only_in_the_sites_values(
    services: dict[str, Any],
) -> None:
    master, worker = loopback_commands()
    # The same launcher: PySpark's bin/spark-class, the venv's `spark-class` on the image's PATH.
    assert spark_class().name == "spark-class" == services["spark-master"]["command"][0]
    assert without_site(services["spark-master"]["command"])[1:] == without_site(master)[1:]
    assert without_site(services["spark-worker"]["command"])[1:] == without_site(worker)[1:]
