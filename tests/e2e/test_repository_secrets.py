"""No secret in the repository (every file git tracks) and Airflow authentication off only in
make airflow's local mode: these read the repository through `git ls-files`."""

from __future__ import annotations

from pathlib import Path

from tests.unit.test_secrets import ALL_ADMINS, LOCAL_MODE, secret_literals, tracked_files


def test_no_secret_literal_in_the_repository() -> None:
    found = [
        f"{name}:{number}: {line.strip()[:120]}"
        for name, text in tracked_files()
        for number, line in enumerate(text.splitlines(), 1)
        if secret_literals(line, Path(name).suffix)
    ]
    assert found == []


def test_airflow_authentication_is_off_only_in_make_airflows_local_mode() -> None:
    found = [
        f"{name}:{number}"
        for name, text in tracked_files()
        if name != LOCAL_MODE
        for number, line in enumerate(text.splitlines(), 1)
        if ALL_ADMINS.search(line)
    ]
    assert found == []
    assert ALL_ADMINS.search("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS: " + '"True"')
