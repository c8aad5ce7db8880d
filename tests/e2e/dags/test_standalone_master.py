"""`make airflow`'s `runoff serve` runs on the master the `spark_default` connection names.

`dags.standalone.server_env` gives the server `RUNOFF_SPARK_MASTER` = the master the Spark
provider's `SparkSubmitHook` reads from the connection (what a spark-submit task passes as
`--master`), so changing the connection alone moves every task, served or not. Each case reads
the connection in a child process with Airflow's own code, as `make airflow` does.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dags import standalone


def base_env(**extra: str) -> dict[str, str]:
    env = {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}
    env.update(extra)
    return env


@pytest.mark.parametrize(
    ("connection", "master"),
    [
        ("spark://127.0.0.1:7077", "spark://127.0.0.1:7077"),  # compose's URI form
        (
            json.dumps({"conn_type": "spark", "host": "spark://spark-master", "port": 7077}),
            "spark://spark-master:7077",
        ),
        (json.dumps({"conn_type": "spark", "host": "local[2]"}), "local[2]"),
    ],
)
def test_the_server_runs_on_the_master_the_connection_names(
    tmp_path: Path, connection: str, master: str
) -> None:
    env = standalone.airflow_env(
        tmp_path / "home",
        8080,
        base=base_env(
            AIRFLOW_CONN_SPARK_DEFAULT=connection,
            RUNOFF_SPARK_MASTER="local[1]",  # the connection wins
            RUNOFF_SERVER="/elsewhere.sock",
        ),
    )
    served = standalone.server_env(env)
    assert served["RUNOFF_SPARK_MASTER"] == master
    assert "RUNOFF_SERVER" not in served  # the server is no client of another
    assert served["AIRFLOW_CONN_SPARK_DEFAULT"] == connection


def test_without_a_connection_it_is_runoff_spark_master_for_every_task(tmp_path: Path) -> None:
    env = standalone.airflow_env(
        tmp_path / "home", 8080, base=base_env(RUNOFF_SPARK_MASTER="spark://10.0.0.5:7077")
    )
    assert json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"]) == {
        "conn_type": "spark",
        "host": "spark://10.0.0.5:7077",
    }
    assert standalone.server_env(env)["RUNOFF_SPARK_MASTER"] == "spark://10.0.0.5:7077"

    default = standalone.airflow_env(tmp_path / "home", 8080, base=base_env())
    assert standalone.server_env(default)["RUNOFF_SPARK_MASTER"] == "local[*]"


def test_an_unreadable_connection_stops_make_airflow_with_the_reason(tmp_path: Path) -> None:
    env = standalone.airflow_env(
        tmp_path / "home", 8080, base=base_env(AIRFLOW_CONN_SPARK_DEFAULT='{"conn_type": ')
    )
    with pytest.raises(RuntimeError, match="spark_default connection cannot be read"):
        standalone.server_env(env)
