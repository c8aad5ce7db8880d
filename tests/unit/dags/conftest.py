"""The DAG tests' Airflow (tests/airflow_env.py): set up before these modules import Airflow."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.airflow_env import _remove_airflow_home, airflow_db, spark_connection
from tests.receiver import Receiver

__all__ = ["_remove_airflow_home", "airflow_db", "spark_connection"]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """An HTTP endpoint on loopback that records what it is sent (the notify connection's)."""
    fake = Receiver()
    try:
        yield fake
    finally:
        fake.stop()
