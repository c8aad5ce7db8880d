"""jobs/spark.py: delta-spark's jars are found, or one line says what to run."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import ConfigError
from jobs.cli import main
from jobs.spark import JARS_DIR, delta_jars, get_spark

MISSING = (
    r"delta-spark's jars are missing from {folder}: run `make install` \(it fetches them from "
    r"Maven Central\), or set RUNOFF_JARS_DIR= on a cluster that already has them"
)


def test_the_installed_jars_include_delta_spark_of_the_python_package_version() -> None:
    from importlib.metadata import version

    names = sorted(Path(j).name for j in delta_jars())
    assert all(Path(j).parent == JARS_DIR for j in delta_jars())
    assert f"delta-spark_4.2_2.13-{version('delta-spark')}.jar" in names
    assert f"delta-storage-{version('delta-spark')}.jar" in names
    # Spark's own jars are not duplicated.
    assert not [n for n in names if n.startswith(("scala-library", "hadoop-", "jackson-core"))]


def test_missing_jars_are_one_line_before_any_jvm_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNOFF_JARS_DIR", str(tmp_path))
    with pytest.raises(ConfigError, match="^" + MISSING.format(folder=tmp_path) + "$"):
        get_spark()


def test_a_cluster_with_its_own_delta_adds_no_jars(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNOFF_JARS_DIR", "")
    assert delta_jars() == []


def test_cli_says_make_install_and_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "jars"
    empty.mkdir()
    monkeypatch.setenv("RUNOFF_JARS_DIR", str(empty))
    (tmp_path / "home" / "landing" / "events").mkdir(parents=True)

    code = main(["--home", str(tmp_path / "home"), "bronze", "events"])

    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1
    assert err[0].startswith("runoff: error: delta-spark's jars are missing from ")
    assert "run `make install`" in err[0]
