"""RunoffConfig: flags over environment over defaults, and errors that name the bad key."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import pytest

from core.config import DEFAULT_HOME, RunoffConfig
from core.errors import ConfigError


def test_defaults_without_flags_or_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = RunoffConfig.from_sources(env={})
    assert config == RunoffConfig(
        home=(tmp_path / DEFAULT_HOME).absolute(),
        spark_master="local[*]",
        shuffle_partitions=4,
        spark_conf={},
        checkpoint_interval=10,
        vacuum_retention_hours=168,
        verbose=False,
    )


def test_environment_over_defaults(tmp_path: Path) -> None:
    env = {
        "RUNOFF_HOME": str(tmp_path / "env-home"),
        "RUNOFF_SPARK_MASTER": "spark://master:7077",
        "RUNOFF_SHUFFLE_PARTITIONS": "8",
        "RUNOFF_SPARK_CONF": "spark.a=1, spark.b = x=y ,",
        "RUNOFF_CHECKPOINT_INTERVAL": "25",
        "RUNOFF_VACUUM_RETENTION_HOURS": "0",
    }
    config = RunoffConfig.from_sources(env=env, verbose=True)
    assert config == RunoffConfig(
        home=tmp_path / "env-home",
        spark_master="spark://master:7077",
        shuffle_partitions=8,
        spark_conf={"spark.a": "1", "spark.b": "x=y"},
        checkpoint_interval=25,
        vacuum_retention_hours=0,
        verbose=True,
    )


def test_flags_over_environment(tmp_path: Path) -> None:
    env = {"RUNOFF_HOME": str(tmp_path / "env-home"), "RUNOFF_SPARK_MASTER": "spark://m:7077"}
    config = RunoffConfig.from_sources(
        home=tmp_path / "flag-home", spark_master="local[2]", env=env
    )
    assert (config.home, config.spark_master) == (tmp_path / "flag-home", "local[2]")


def test_empty_environment_values_mean_the_default(tmp_path: Path) -> None:
    env = dict.fromkeys(
        (
            "RUNOFF_SPARK_MASTER",
            "RUNOFF_SHUFFLE_PARTITIONS",
            "RUNOFF_SPARK_CONF",
            "RUNOFF_CHECKPOINT_INTERVAL",
            "RUNOFF_VACUUM_RETENTION_HOURS",
        ),
        "",
    )
    config = RunoffConfig.from_sources(home=tmp_path, env=env)
    assert config == RunoffConfig(home=tmp_path)


def test_process_environment_is_the_default_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNOFF_HOME", str(tmp_path / "from-os"))
    monkeypatch.setenv("RUNOFF_SHUFFLE_PARTITIONS", "6")
    config = RunoffConfig.from_sources()
    assert (config.home, config.shuffle_partitions) == (tmp_path / "from-os", 6)


def test_home_expands_the_user_and_becomes_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert RunoffConfig.from_sources(home="~/data", env={}).home == tmp_path / "data"
    assert RunoffConfig.from_sources(home="rel", env={}).home == tmp_path / "rel"


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("RUNOFF_SHUFFLE_PARTITIONS", "four", "RUNOFF_SHUFFLE_PARTITIONS='four' is not an integer"),
        ("RUNOFF_SHUFFLE_PARTITIONS", "0", "RUNOFF_SHUFFLE_PARTITIONS='0' must be at least 1"),
        ("RUNOFF_CHECKPOINT_INTERVAL", "1.5", "RUNOFF_CHECKPOINT_INTERVAL='1.5' is not an integer"),
        ("RUNOFF_CHECKPOINT_INTERVAL", "-3", "RUNOFF_CHECKPOINT_INTERVAL='-3' must be at least 1"),
        (
            "RUNOFF_VACUUM_RETENTION_HOURS",
            "-1",
            "RUNOFF_VACUUM_RETENTION_HOURS='-1' must be at least 0",
        ),
        (
            "RUNOFF_SPARK_CONF",
            "spark.a=1,oops",
            "RUNOFF_SPARK_CONF entry 'oops' is not of the form key=value",
        ),
        (
            "RUNOFF_SPARK_CONF",
            "=1",
            "RUNOFF_SPARK_CONF entry '=1' is not of the form key=value",
        ),
    ],
)
def test_bad_environment_values_name_the_key(
    tmp_path: Path, key: str, value: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        RunoffConfig.from_sources(home=tmp_path, env={key: value})


def test_home_that_is_a_file_is_refused(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    with pytest.raises(ConfigError, match=r"^home '.*/file' exists and is not a directory$"):
        RunoffConfig.from_sources(env={"RUNOFF_HOME": str(not_a_dir)})


def test_home_layout(tmp_path: Path) -> None:
    config = RunoffConfig.from_sources(home=tmp_path, env={})
    assert config.landing_dir("events") == tmp_path / "landing" / "events"
    assert config.bronze_path("events") == tmp_path / "delta" / "bronze" / "events"
    assert config.quarantine_path("events") == tmp_path / "delta" / "quarantine" / "events"
    assert config.silver_path("events_action_hourly") == (
        tmp_path / "delta" / "silver" / "events_action_hourly"
    )
    assert config.runs_path == tmp_path / "delta" / "ops" / "runs"
    assert config.checkpoint_dir("silver", "events_action_hourly") == (
        tmp_path / "checkpoints" / "silver" / "events_action_hourly"
    )
    assert config.quality_dir == tmp_path / "quality"
    with pytest.raises(ConfigError, match=r"^layer 'gold' is not one of bronze, silver$"):
        config.checkpoint_dir("gold", "x")


def test_data_elsewhere_moves_the_data_not_what_belongs_to_the_home(tmp_path: Path) -> None:
    for data in ("s3a://lake/runoff/", str(tmp_path / "data")):
        config = RunoffConfig.from_sources(home=tmp_path, env={"RUNOFF_DATA": data})
        root = data.rstrip("/")
        assert str(config.data) == root
        assert str(config.landing_dir("events")) == f"{root}/landing/events"
        assert str(config.bronze_path("events")) == f"{root}/delta/bronze/events"
        assert str(config.checkpoint_dir("bronze", "events")) == f"{root}/checkpoints/bronze/events"
        assert str(config.quality_results_path) == f"{root}/quality/results"
        assert str(config.archive_root) == f"{root}/archive"
        assert config.runs_path == tmp_path / "delta" / "ops" / "runs"
        assert config.quality_dir == tmp_path / "quality"
    local = RunoffConfig.from_sources(home=tmp_path, env={"RUNOFF_DATA": str(tmp_path / "data")})
    checkpoint = local.checkpoint_dir("silver", "t")
    assert local.lock_path(checkpoint) == tmp_path / "data" / "checkpoints" / "silver" / "t.lock"
    stored = RunoffConfig.from_sources(home=tmp_path, env={"RUNOFF_DATA": "s3a://lake/r"})
    lock = stored.lock_path(stored.checkpoint_dir("silver", "t"))
    assert str(lock).endswith(
        f"/runoff-locks-{os.getuid()}/s3a/lake/r/checkpoints/silver/t.lock"
    ), lock


@pytest.mark.parametrize("data", ["gs://b/x", "s3a://", "ftp://h/x"])
def test_data_with_another_scheme_is_refused(tmp_path: Path, data: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"RUNOFF_DATA={data!r}: use a local folder")):
        RunoffConfig.from_sources(home=tmp_path, env={"RUNOFF_DATA": data})


def test_config_is_frozen_and_changes_make_a_copy(tmp_path: Path) -> None:
    config = RunoffConfig.from_sources(home=tmp_path, env={})
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.home = tmp_path / "other"  # type: ignore[misc]
    changed = config.with_changes(shuffle_partitions=2)
    assert (config.shuffle_partitions, changed.shuffle_partitions) == (4, 2)
