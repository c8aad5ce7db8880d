"""The seed datasets as the jobs see them (specs from jobs/datasets/, compiled for Spark)."""

from __future__ import annotations

from core.specs import SEED_DIR, DatasetSpec, load_spec
from jobs.streaming.dataset import Dataset, compile_dataset

SEED_NAMES = ("activity", "events", "lines", "sensors")


def seed_spec(name: str) -> DatasetSpec:
    return load_spec(SEED_DIR / f"{name}.yaml")


def seed(name: str) -> Dataset:
    """The compiled seed dataset `name` (Spark columns are built lazily, on a running session)."""
    return compile_dataset(seed_spec(name))
