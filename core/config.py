"""Configuration: one frozen dataclass built once (flags > environment > defaults).

Every path of the home directory layout is derived here so that no other module joins path
strings by hand.

The data (landing files and their archive, Delta tables, checkpoints, quality results) lives
under `data`: the home itself, or the folder or `s3a://bucket/prefix` of `RUNOFF_DATA` (README,
"Scaling out"). What one machine's runoff keeps for itself (run ledger, locks, logs, the Great
Expectations project and its Data Docs, reports, the server socket) stays in the home. A path
under an `s3a://` data root is a `upath.UPath` (fsspec's S3 filesystem, s3fs): the same
pathlib calls work on both (`Location`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from upath import UPath

from core import caller
from core.errors import ConfigError
from core.locking import local_lock_file, lock_path
from core.specs import SEED_DIR

# A folder or file of the data: a local path (upath's PosixUPath, a pathlib.Path too), or an
# s3a:// object path (upath's S3Path).
Location = UPath
OBJECT_STORE_SCHEMES = ("s3a",)

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
        path = caller.absolute(raw)
        if not path.is_dir():
            raise ConfigError(f"datasets folder {str(raw)!r} is not a directory")
        if path not in dirs:
            dirs.append(path)
    return tuple(dirs)


def is_local(location: Location) -> bool:
    return isinstance(location, Path)


def real_name(location: Location) -> str:
    """How Spark's file source log names a file: a local path with its symlinks resolved, or the
    object's URI."""
    return os.path.realpath(location) if isinstance(location, Path) else str(location)


def remove_tree(location: Location) -> bool:
    """Delete a folder and everything below it; False when there was nothing."""
    if isinstance(location, Path):
        if not location.exists():
            return False
        shutil.rmtree(location)
        return True
    if not location.exists():
        return False
    location.fs.rm(location.path, recursive=True)
    return True


def write_whole(location: Location, text: str) -> None:
    """Replace a file's content at once: locally a hidden temp file renamed over it; on object
    storage one PUT (atomic by itself)."""
    if not isinstance(location, Path):
        location.write_text(text)
        return
    temp = location.with_name(f".{location.name}.tmp")
    temp.write_text(text)
    temp.replace(location)


def append_text(location: Location, text: str) -> None:
    """Append to a file, flushed to disk; on object storage (no appends) the object is written
    again whole, which is safe for the one writer that holds the checkpoint's lock."""
    if not isinstance(location, Path):
        before = location.read_text() if location.exists() else ""
        location.write_text(before + text)
        return
    with location.open("a", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())


def object_path(uri: str) -> Location:
    """An object store path. Listings are not cached: a long-lived process (`runoff serve`) must
    see the files that land after it first looked."""
    return UPath(uri, use_listings_cache=False)


def as_location(path: str | os.PathLike[str] | Location) -> Location:
    """A path or URI as the `Location` it names."""
    if isinstance(path, UPath):
        return path
    text = os.fspath(path)
    return object_path(text) if "://" in text else UPath(text)


def data_location(raw: str | os.PathLike[str], what: str = "RUNOFF_DATA") -> Location:
    """A local folder (absolute) or an `s3a://bucket/prefix` URI; other schemes are refused."""
    text = os.fspath(raw).strip()
    scheme, sep, rest = text.partition("://")
    if not sep:
        return UPath(caller.absolute(text))
    if scheme not in OBJECT_STORE_SCHEMES or not rest.split("/")[0]:
        raise ConfigError(
            f"{what}={text!r}: use a local folder or s3a://<bucket>/<prefix> (other URI schemes "
            "are not supported)"
        )
    return object_path(text.rstrip("/"))


# Streaming runs at once in one driver by default (the datasets of `runoff run A B`, the commands
# of `runoff serve`): two on a small machine, half the cores on a larger one (each run's
# micro-batches use every core of a local driver while they compute).
DEFAULT_PARALLEL = max(2, (os.cpu_count() or 2) // 2)


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
    # Where the data lives (RUNOFF_DATA): None is the home itself.
    data_root: Location | None = None

    @classmethod
    def from_sources(
        cls,
        home: str | os.PathLike[str] | None = None,
        spark_master: str | None = None,
        verbose: bool = False,
        env: Mapping[str, str] | None = None,
        datasets: Sequence[str | os.PathLike[str]] = (),
    ) -> RunoffConfig:
        """Build the configuration: explicit arguments, then `RUNOFF_*` variables (the caller's:
        `core.caller`), then defaults. Relative paths are the caller's working directory's."""
        env = caller.environ() if env is None else env
        raw_home = home if home is not None else env.get("RUNOFF_HOME") or DEFAULT_HOME
        home_path = caller.absolute(raw_home)
        if home_path.exists() and not home_path.is_dir():
            raise ConfigError(f"home {str(raw_home)!r} exists and is not a directory")
        master = spark_master or env.get("RUNOFF_SPARK_MASTER") or "local[*]"
        config = cls(
            home=home_path,
            spark_master=master,
            shuffle_partitions=_env_int(env, "RUNOFF_SHUFFLE_PARTITIONS", 4),
            spark_conf=_parse_spark_conf(env.get("RUNOFF_SPARK_CONF", "")),
            checkpoint_interval=_env_int(env, "RUNOFF_CHECKPOINT_INTERVAL", 10),
            vacuum_retention_hours=_env_int(env, "RUNOFF_VACUUM_RETENTION_HOURS", 168, minimum=0),
            verbose=verbose,
            dataset_dirs=_dataset_dirs(env.get("RUNOFF_DATASETS", ""), datasets),
            data_root=data_location(env["RUNOFF_DATA"]) if env.get("RUNOFF_DATA") else None,
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
    def data(self) -> Location:
        """Root of landing/, archive/, delta/ (not the ledger), checkpoints/, quality/results."""
        return UPath(self.home) if self.data_root is None else self.data_root

    @property
    def on_object_store(self) -> bool:
        return not is_local(self.data)

    @property
    def landing_root(self) -> Location:
        return self.data / "landing"

    def landing_dir(self, dataset: str) -> Location:
        """The default landing folder (`landing/<dataset>`); a spec's `source.path` may name
        another: ask `delta_tables.catalog.Catalog.landing_dir`."""
        return self.landing_root / dataset

    @property
    def archive_root(self) -> Location:
        return self.data / "archive"

    def archived(self, path: str | Location) -> Location:
        """Where Spark's `cleanSource=archive` moves a landing file or folder of bronze: the archive
        root plus its absolute path (for an object, its key: archives stay in the object's
        bucket)."""
        text = str(path)
        key = urlparse(text).path if "://" in text else text  # a local name may hold '#' or '?'
        return self.archive_root / "bronze" / key.lstrip("/")

    def bronze_path(self, dataset: str) -> Location:
        return self.data / "delta" / "bronze" / dataset

    def quarantine_path(self, dataset: str) -> Location:
        return self.data / "delta" / "quarantine" / dataset

    def silver_path(self, table: str) -> Location:
        """`table` is the full silver table name, e.g. `events_action_hourly`."""
        return self.data / "delta" / "silver" / table

    @property
    def runs_path(self) -> Location:
        """The run ledger: in the home (each machine's runs), not under `data`."""
        return UPath(self.home / "delta" / "ops" / "runs")

    def checkpoint_dir(self, layer: str, table: str) -> Location:
        if layer not in LAYERS:
            raise ConfigError(f"layer {layer!r} is not one of {', '.join(LAYERS)}")
        return self.data / "checkpoints" / layer / table

    def lock_path(self, checkpoint: Location) -> Path:
        """The lock file of a checkpoint: beside it when local (deleting a checkpoint keeps the
        lock); on object storage, where no lock can be held, `core.locking.local_lock_file`."""
        if isinstance(checkpoint, Path):
            return lock_path(Path(checkpoint))
        return local_lock_file(checkpoint.parent, f"{checkpoint.name}.lock")

    @property
    def quality_dir(self) -> Path:
        return self.home / "quality"

    @property
    def quality_results_path(self) -> Location:
        return self.data / "quality" / "results"

    @property
    def quality_metrics_path(self) -> Location:
        return self.data / "quality" / "metrics"
