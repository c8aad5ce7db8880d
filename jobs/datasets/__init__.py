"""The dataset registry: one module per dataset (schema, event time, watermark, aggregates)."""

from __future__ import annotations

from jobs.catalog import DATASET_NAMES, dataset_info
from jobs.datasets import activity, events, lines, sensors
from jobs.datasets.base import Dataset, SilverAggregate

DATASETS: dict[str, Dataset] = {
    module.DATASET.name: module.DATASET for module in (events, sensors, activity, lines)
}


def get_dataset(name: str) -> Dataset:
    """The dataset called `name`; a ConfigError naming the choices otherwise."""
    dataset_info(name)  # raises the user-facing error for unknown names
    return DATASETS[name]


__all__ = ["DATASETS", "DATASET_NAMES", "Dataset", "SilverAggregate", "get_dataset"]
