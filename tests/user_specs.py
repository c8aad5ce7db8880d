"""Spec folders a user would point `RUNOFF_DATASETS` at: the `orders` dataset of
tests/spark/jobs/test_declared_dataset.py, and specs the catalog refuses (schema errors).

The problem lines a refused spec must produce are restated here, not taken from core.specs.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.config import RunoffConfig
from tests.spark.jobs.test_declared_dataset import SPEC as ORDERS_SPEC

ORDERS_TABLES = ("orders_store_hourly", "orders_store_sliding")
ORDERS_SCHEDULE = "@daily"


def _renamed(name: str) -> str:
    """The orders spec as dataset `name` (its own silver tables, so nothing clashes)."""
    text = ORDERS_SPEC.replace("name: orders", f"name: {name}", 1)
    text = text.replace("landing/orders", f"landing/{name}").replace("orders_store_", f"{name}_")
    assert f"name: {name}" in text and "orders_store" not in text
    return text


# file name -> (content, the start of the one problem line after "<path>: ")
BAD_SPECS: dict[str, tuple[str, str]] = {
    # a key the schema does not know (a typo of `schedule`)
    "refunds.yaml": (
        _renamed("refunds").replace("schedule:", "shedule:", 1),
        "shedule: unknown key (allowed: ",
    ),
    # a source format runoff does not read
    "returns.yaml": (
        _renamed("returns").replace(
            "source: {format: json, path: landing/returns}", "source: {format: csv}", 1
        ),
        "source.format: 'csv' is not one of ['json', 'text']",
    ),
}


def write_orders(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "orders.yaml"
    path.write_text(ORDERS_SPEC)
    return path


def write_bad_specs(folder: Path) -> dict[Path, str]:
    """Write every bad spec into `folder`; return path -> the start of its problem line."""
    folder.mkdir(parents=True, exist_ok=True)
    problems = {}
    for name, (content, problem) in BAD_SPECS.items():
        path = folder / name
        path.write_text(content)
        assert content != ORDERS_SPEC
        problems[path] = f"{path}: {problem}"
    return problems


def declared(
    folder: Path, home: Path, monkeypatch: pytest.MonkeyPatch, specs: dict[str, str]
) -> RunoffConfig:
    """A user's setup: each spec (dataset name -> YAML) written into `folder`, which
    `RUNOFF_DATASETS` names, and `RUNOFF_HOME` set to `home`; its config."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in specs.items():
        (folder / f"{name}.yaml").write_text(text)
    monkeypatch.setenv("RUNOFF_HOME", str(home))
    monkeypatch.setenv("RUNOFF_DATASETS", str(folder))
    return RunoffConfig.from_sources(home=home, env=os.environ)
