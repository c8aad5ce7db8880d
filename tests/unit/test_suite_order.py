"""The suite's slowest-first order names files that exist (tests/conftest.py)."""

from __future__ import annotations

from tests.conftest import REPO_ROOT, SLOWEST_FIRST


def test_every_file_of_the_slowest_first_order_exists() -> None:
    assert [p for p in SLOWEST_FIRST if not (REPO_ROOT / p).is_file()] == []
    assert len(set(SLOWEST_FIRST)) == len(SLOWEST_FIRST)
