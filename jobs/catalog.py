"""The table catalog without Spark: dataset names and the tables each one feeds.

DAG files and other light callers import this module (never pyspark). `jobs.datasets` holds the
full definitions (schemas, transforms, generators) and is checked against this catalog in tests.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    description: str
    silver_tables: tuple[str, ...]

    @property
    def bronze_table(self) -> str:
        return f"bronze_{self.name}"

    @property
    def quarantine_table(self) -> str:
        return f"quarantine_{self.name}"


CATALOG: dict[str, DatasetInfo] = {
    info.name: info
    for info in (
        DatasetInfo(
            "events",
            "Open/Close events: {time: epoch seconds, action: Open|Close}",
            ("events_action_hourly", "events_action_sliding"),
        ),
        DatasetInfo(
            "sensors",
            "IoT signals: {timestamp, deviceId, deviceType, signalStrength}",
            ("sensors_device_counts", "sensors_type_signal", "sensors_lost_signal"),
        ),
        DatasetInfo(
            "activity",
            "Phone/watch accelerometer readings (heterogeneity activity recognition)",
            ("activity_user_minute",),
        ),
        DatasetInfo(
            "lines",
            "Plain text lines",
            ("lines_word_counts",),
        ),
    )
}

DATASET_NAMES: tuple[str, ...] = tuple(CATALOG)


def dataset_info(name: str) -> DatasetInfo:
    from jobs.errors import ConfigError

    try:
        return CATALOG[name]
    except KeyError:
        raise ConfigError(
            f"unknown dataset {name!r}: choose one of {', '.join(DATASET_NAMES)}"
        ) from None
