"""`python -m dags.standalone` (`make airflow`): the environment it gives every Airflow process.

Starting Airflow itself is covered by tests/e2e/test_airflow_e2e.py.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import cast

import pytest

from dags import standalone
from tests.conftest import REPO_ROOT


def test_airflow_env_points_airflow_at_this_repository_and_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = standalone.airflow_env(home, 18080, base={"PATH": "/usr/bin", "KEEP": "1"})
    assert env["KEEP"] == "1"
    assert env["PATH"] == f"{Path(sys.executable).parent}:/usr/bin"
    assert env["PYTHONPATH"] == str(REPO_ROOT)
    assert env["RUNOFF_HOME"] == str(home)
    assert env["AIRFLOW_HOME"] == str(home / "airflow")
    assert env["AIRFLOW__CORE__DAGS_FOLDER"] == str(REPO_ROOT / "dags")
    assert env["AIRFLOW__CORE__LOAD_EXAMPLES"] == "False"
    assert env["AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT"] == "30"
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == (
        f"sqlite:///{home}/airflow/airflow.db?timeout=60"
    )
    assert env["AIRFLOW__API__HOST"] == "127.0.0.1"
    assert env["AIRFLOW__API__PORT"] == "18080"
    assert env["AIRFLOW__API__BASE_URL"] == "http://127.0.0.1:18080"
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://127.0.0.1:18080/execution/"
    assert json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"]) == {
        "conn_type": "spark",
        "host": "local[*]",
    }


def test_airflow_env_keeps_a_configured_spark_connection(tmp_path: Path) -> None:
    cluster = json.dumps({"conn_type": "spark", "host": "spark://master", "port": 7077})
    env = standalone.airflow_env(
        tmp_path, 8080, base={"AIRFLOW_CONN_SPARK_DEFAULT": cluster, "PYTHONPATH": "/extra"}
    )
    assert env["AIRFLOW_CONN_SPARK_DEFAULT"] == cluster
    assert env["PYTHONPATH"] == f"{REPO_ROOT}:/extra"


def test_runoff_home_prefers_the_flag_then_the_environment(tmp_path: Path) -> None:
    assert standalone.runoff_home(str(tmp_path / "a"), {"RUNOFF_HOME": "/b"}) == tmp_path / "a"
    assert standalone.runoff_home(None, {"RUNOFF_HOME": str(tmp_path / "b")}) == tmp_path / "b"
    assert standalone.runoff_home(None, {}) == Path(".runoff").absolute()


def test_admin_password_is_read_from_the_generated_file(tmp_path: Path) -> None:
    assert standalone.admin_password(tmp_path) is None
    (tmp_path / standalone.PASSWORD_FILE).write_text(json.dumps({"admin": "s3cret"}))
    assert standalone.admin_password(tmp_path) == "s3cret"


def test_the_generated_password_file_is_readable_by_its_owner_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Airflow writes the file with the umask's mode: `make airflow` makes it 0600 as soon as it
    reads the password."""
    path = tmp_path / standalone.PASSWORD_FILE
    path.write_text(json.dumps({"admin": "generated"}))
    path.chmod(0o644)
    monkeypatch.setattr(standalone, "api_ready", lambda url: True)

    class Running:
        def poll(self) -> None:
            return None

    env = {"AIRFLOW__API__BASE_URL": "http://127.0.0.1:9", "AIRFLOW_HOME": str(tmp_path)}
    components = cast("standalone.Components", Running())
    assert standalone.wait_until_ready(components, env, timeout=10) == "generated"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_settings_are_merged_into_the_airflow_cfg_airflow_wrote(tmp_path: Path) -> None:
    """Airflow's own airflow.cfg keeps its generated secrets (every component must sign and
    verify task tokens with the same one); runoff's settings are added; owner-only."""
    import configparser

    (tmp_path / "airflow.cfg").write_text("[api_auth]\njwt_algorithm = HS512\n[core]\nx = 1\n")
    env = {
        "AIRFLOW_HOME": str(tmp_path),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": "sqlite:////h/airflow.db?timeout=60",
        "AIRFLOW__CORE__DAGS_FOLDER": "/repo/dags",
        "AIRFLOW_CONN_SPARK_DEFAULT": "{}",  # a connection, not a setting
        "RUNOFF_HOME": "/h",
    }
    path = standalone.write_airflow_cfg(env)
    config = configparser.ConfigParser(interpolation=None)
    config.read(path)
    assert {s: dict(config[s]) for s in config.sections()} == {
        "api_auth": {"jwt_algorithm": "HS512"},
        "core": {"x": "1", "dags_folder": "/repo/dags"},
        "database": {"sql_alchemy_conn": "sqlite:////h/airflow.db?timeout=60"},
    }
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_component_that_ends_is_started_again_until_it_keeps_ending(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`make airflow` restarts a component that ends (a scheduler that died on a sqlite write)
    in Airflow's process group, and the others keep running; components that end more than
    `restarts` times within the window stop Airflow with the last one's exit code."""
    starts = tmp_path / "starts"
    crashing = f"open({str(starts)!r}, 'a').write('x'); raise SystemExit(3)"
    commands = [
        [sys.executable, "-c", "import time; time.sleep(120)"],
        [sys.executable, "-c", crashing],
    ]
    components = standalone.start({"PATH": "/usr/bin"}, tmp_path / "log", commands=commands)
    steady = components.processes[0]
    try:
        assert components.wait(restarts=2, window=60) == 3
        assert starts.read_text() == "xxx"  # started, then started again twice
        assert components.processes[0] is steady and steady.poll() is None
        assert {os.getpgid(p.pid) for p in components.processes if p.poll() is None} == {
            components.pid
        }
        printed = capsys.readouterr()
        name = f"{Path(sys.executable).name} -c"
        assert (
            printed.out.splitlines()
            == [f"runoff: {name} exited with code 3: starting it again"] * 2
        )
        assert printed.err == (
            f"runoff: error: {name} exited with code 3; components ended 3 times within 60 s: "
            "stopping Airflow\n"
        )
    finally:
        standalone.stop(components)
    assert steady.poll() is not None
