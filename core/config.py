"""Configuration: one frozen dataclass built once (flags > environment > defaults).

Every path of the home directory layout (README, "Home directory") is derived here so that no
other module joins path strings by hand.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from core.errors import ConfigError
from core.specs import SEED_DIR

DEFAULT_HOME = "./.runoff"
LAYERS = ("bronze", "silver")


def _env_int(env: Mapping[str, str], key: str, default: int, minimum: int = 1) -> int:
    raw = env.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{key}={raw!r} is not an integer") from None
    if value < minimum:
        raise ConfigError(f"{key}={raw!r} must be at least {minimum}")
    return value


def _parse_spark_conf(raw: str) -> dict[str, str]:
    """`RUNOFF_SPARK_CONF="spark.a=1,spark.b=2"` -> {"spark.a": "1", "spark.b": "2"}."""
    conf: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"RUNOFF_SPARK_CONF entry {item!r} is not of the form key=value")
        conf[key.strip()] = value.strip()
    return conf


def _dataset_dirs(env_value: str, flags: Sequence[str | os.PathLike[str]]) -> tuple[Path, ...]:
    """The seed folder, every folder of RUNOFF_DATASETS (colon-separated), every --datasets."""
    dirs = [SEED_DIR]
    for raw in [*(p for p in env_value.split(os.pathsep) if p.strip()), *flags]:
        path = Path(raw).expanduser().absolute()
        if not path.is_dir():
            raise ConfigError(f"datasets folder {str(raw)!r} is not a directory")
        if path not in dirs:
            dirs.append(path)
    return tuple(dirs)


@dataclass(frozen=True)
class RunoffConfig:
    """Where runoff keeps its data and how it talks to Spark."""

    home: Path
    spark_master: str = "local[*]"
    # Fixed once per checkpoint: stateful queries persist this number in their checkpoint.
    shuffle_partitions: int = 4
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    checkpoint_interval: int = 10
    vacuum_retention_hours: int = 168
    verbose: bool = False
    # Folders of dataset specs: the repo's seed datasets, then RUNOFF_DATASETS, then --datasets.
    dataset_dirs: tuple[Path, ...] = (SEED_DIR,)

    @classmethod
    def from_sources(
        cls,
        home: str | os.PathLike[str] | None = None,
        spark_master: str | None = None,
        verbose: bool = False,
        env: Mapping[str, str] | None = None,
        datasets: Sequence[str | os.PathLike[str]] = (),
    ) -> RunoffConfig:
        """Build the configuration: explicit arguments, then `RUNOFF_*` variables, then defaults."""
        env = os.environ if env is None else env
        raw_home = home if home is not None else env.get("RUNOFF_HOME") or DEFAULT_HOME
        home_path = Path(raw_home).expanduser()
        if home_path.exists() and not home_path.is_dir():
            raise ConfigError(f"home {str(raw_home)!r} exists and is not a directory")
        master = spark_master or env.get("RUNOFF_SPARK_MASTER") or "local[*]"
        config = cls(
            home=home_path.absolute(),
            spark_master=master,
            shuffle_partitions=_env_int(env, "RUNOFF_SHUFFLE_PARTITIONS", 4),
            spark_conf=_parse_spark_conf(env.get("RUNOFF_SPARK_CONF", "")),
            checkpoint_interval=_env_int(env, "RUNOFF_CHECKPOINT_INTERVAL", 10),
            vacuum_retention_hours=_env_int(env, "RUNOFF_VACUUM_RETENTION_HOURS", 168, minimum=0),
            verbose=verbose,
            dataset_dirs=_dataset_dirs(env.get("RUNOFF_DATASETS", ""), datasets),
        )
        return config

    def with_changes(self, **changes: Any) -> RunoffConfig:
        return replace(self, **changes)

    def ensure_home(self) -> None:
        """Create the home directory if needed; one clear error when it cannot be used."""
        try:
            self.home.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise ConfigError(
                f"home {str(self.home)!r} cannot be created ({reason}): choose another with "
                "--home or RUNOFF_HOME"
            ) from exc
        if not os.access(self.home, os.R_OK | os.W_OK | os.X_OK):
            raise ConfigError(
                f"home {str(self.home)!r} is not readable and writable by this user: choose "
                "another with --home or RUNOFF_HOME"
            )

    # -- home directory layout -------------------------------------------------------------
    @property
    def landing_root(self) -> Path:
        return self.home / "landing"

    def landing_dir(self, dataset: str) -> Path:
        """The default landing folder (`landing/<dataset>`); a spec's `source.path` may name
        another: ask `delta_tables.catalog.Catalog.landing_dir`."""
        return self.landing_root / dataset

    def bronze_path(self, dataset: str) -> Path:
        return self.home / "delta" / "bronze" / dataset

    def quarantine_path(self, dataset: str) -> Path:
        return self.home / "delta" / "quarantine" / dataset

    def silver_path(self, table: str) -> Path:
        """`table` is the full silver table name, e.g. `events_action_hourly`."""
        return self.home / "delta" / "silver" / table

    @property
    def runs_path(self) -> Path:
        return self.home / "delta" / "ops" / "runs"

    def checkpoint_dir(self, layer: str, table: str) -> Path:
        if layer not in LAYERS:
            raise ConfigError(f"layer {layer!r} is not one of {', '.join(LAYERS)}")
        return self.home / "checkpoints" / layer / table

    @property
    def quality_dir(self) -> Path:
        return self.home / "quality"
