"""Airflow as docker/compose.yaml deploys it, as data: the commands and the configuration.

docker/compose.yaml runs PostgreSQL, `runoff serve` and each Airflow component as a service:
`runoff-server` runs `server_command(<site>)` (one warm Spark driver on the cluster, listening on
TCP) with `server_settings(<site>)`; `airflow-init` runs INIT_COMMANDS once, then
`airflow-api-server`, `airflow-scheduler` (LocalExecutor: the tasks run there, each a client of the
server through `RUNOFF_SERVER`), `airflow-dag-processor` and `airflow-triggerer` run
`component_command(<component>)`, every one with `airflow_settings(<site>)` in its environment.
tests/e2e/test_airflow_postgres.py runs the same commands with the same settings as processes on
loopback (its own PostgreSQL server: tests/postgres_server.py), and
tests/unit/docker/test_compose_airflow.py checks that compose runs exactly these commands with
exactly these keys (and, for compose's site, these values).

What differs between deployments is a `Site`: where the database, the API server and the runoff
server are, the secrets, the DAG folder, the Spark master. Secrets are never literals: compose
takes them from the environment (`${...:?}`), the test generates them.
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass

POSTGRES_USER = "airflow"
POSTGRES_DB = "airflow"
# The readiness check of the database (compose's healthcheck; the test's wait), pointed at the
# server by PGHOST/PGPORT (compose: the container's own server).
POSTGRES_READY = ("pg_isready", "-U", POSTGRES_USER)

SPARK_POOL_SLOTS = 2
INIT_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("airflow", "db", "migrate"),
    (
        "airflow",
        "pools",
        "set",
        "spark",
        str(SPARK_POOL_SLOTS),
        "Spark applications running at once",
    ),
)
COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
# Each component's service is started again when it ends (`make airflow`: dags.standalone.RESTARTS);
# airflow-init runs once.
COMPONENT_RESTART = "unless-stopped"
# The user the api-server generates a password for (simple auth manager), and its role.
ADMIN_USER = "admin"


def component_command(component: str) -> list[str]:
    """The command of one long-running Airflow component (one service, one process)."""
    if component not in COMPONENTS:
        raise ValueError(f"unknown Airflow component {component!r}")
    return ["airflow", component]


@dataclass(frozen=True)
class Site:
    """Where one deployment's pieces are, and its secrets."""

    postgres: str  # host:port of the metadata database
    postgres_password: str
    jwt_secret: str  # signs the tokens every component checks
    fernet_key: str  # encrypts connections and variables in the database
    api_host: str  # the address the api-server listens on
    api_port: int
    base_url: str  # how browsers and REST clients reach the api-server
    execution_api_url: str  # how task processes reach it
    dags_folder: str
    spark_connection: str  # AIRFLOW_CONN_SPARK_DEFAULT: spark-submit's master, if no server
    server_secret: str  # RUNOFF_SERVER_SECRET: what clients of the runoff server prove
    server_listen: str  # HOST:PORT the runoff server listens on (`runoff serve --listen`)
    server_address: str  # HOST:PORT where the tasks reach it
    spark_master: str  # RUNOFF_SPARK_MASTER: the runoff server's (and the CLI's) master
    worker_log_port: int = 8793  # the scheduler's log server (task logs while they run)
    trigger_log_port: int = 8794  # the triggerer's


def database_url(site: Site) -> str:
    """The metadata database (psycopg 3, the `postgres` extra). The password is letters and
    digits: it goes into the URL unquoted."""
    return (
        f"postgresql+psycopg://{POSTGRES_USER}:{site.postgres_password}"
        f"@{site.postgres}/{POSTGRES_DB}"
    )


def server_command(site: Site) -> list[str]:
    """The runoff server's command: one long-lived Spark driver that runs every task's Spark
    step, reached over TCP."""
    return ["runoff", "serve", "--listen", site.server_listen]


def server_settings(site: Site) -> dict[str, str]:
    """The runoff server's environment (with the runoff home): its secret and its master."""
    return {"RUNOFF_SERVER_SECRET": site.server_secret, "RUNOFF_SPARK_MASTER": site.spark_master}


def airflow_settings(site: Site) -> dict[str, str]:
    """The environment every Airflow process of the deployment gets: `AIRFLOW__*` settings, the
    `spark_default` connection, and the runoff server its tasks are clients of (its address
    and secret: `dags.hooks.RunoffCliHook`). Without `RUNOFF_SERVER` a task is a spark-submit
    through `spark_default` (README, Scaling out)."""
    url = database_url(site)
    return {
        "AIRFLOW__CORE__DAGS_FOLDER": site.dags_folder,
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": url,
        # psycopg 3 serves async connections too (Airflow would otherwise look for asyncpg).
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC": url,
        "AIRFLOW__API__HOST": site.api_host,
        "AIRFLOW__API__PORT": str(site.api_port),
        "AIRFLOW__API__BASE_URL": site.base_url,
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": site.execution_api_url,
        # Task processes call the api-server; its default 5 s answer time is short while the
        # same machine runs Spark drivers.
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "30",
        # Every component signs and checks the same tokens, and decrypts the same connections.
        "AIRFLOW__API_AUTH__JWT_SECRET": site.jwt_secret,
        "AIRFLOW__CORE__FERNET_KEY": site.fernet_key,
        # Users log in (the api-server generates the admin password): no all-admins mode.
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN_USER}:admin",
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(site.worker_log_port),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(site.trigger_log_port),
        "AIRFLOW_CONN_SPARK_DEFAULT": site.spark_connection,
        "RUNOFF_SERVER": f"tcp://{site.server_address}",
        "RUNOFF_SERVER_SECRET": site.server_secret,
    }


def new_secrets() -> dict[str, str]:
    """A new JWT secret, Fernet key and runoff server secret (what README's Scaling out writes
    into docker/.env), as `Site` fields."""
    return {
        "jwt_secret": secrets.token_hex(32),
        "fernet_key": base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
        "server_secret": secrets.token_hex(32),
    }
