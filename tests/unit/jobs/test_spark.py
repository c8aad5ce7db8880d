"""jobs/spark.py: delta-spark's jars are found, or one line says what to run."""

from __future__ import annotations

from pathlib import Path

import pytest
from upath import UPath

from core.errors import ConfigError
from jobs.cli.main import main
from jobs.spark import (
    INTERPRETED_PROJECTIONS,
    JARS_DIR,
    SMALL_INPUT_BYTES,
    SMALL_INPUT_FILES,
    delta_jars,
    get_spark,
    projections_for,
)

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


def test_s3a_settings_come_from_the_standard_aws_variables() -> None:
    from jobs.spark import S3A_PROVIDERS, s3a_conf

    assert s3a_conf({}) == {"spark.hadoop.fs.s3a.aws.credentials.provider": S3A_PROVIDERS}
    placeholder = "-".join(("not", "a", "key"))
    env = {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AWS_DEFAULT_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "id",
        "AWS_SECRET_ACCESS_KEY": placeholder,
        "AWS_SESSION_TOKEN": "token",
    }
    assert s3a_conf(env) == {
        "spark.hadoop.fs.s3a.aws.credentials.provider": S3A_PROVIDERS,
        "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9000",
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.endpoint.region": "eu-west-1",
    }  # no credential: spark-submit would show it on the JVM's command line
    # the S3-specific endpoint wins
    only_s3 = {
        "AWS_ENDPOINT_URL": "http://a",
        "AWS_ENDPOINT_URL_S3": "https://b",
        "AWS_ACCESS_KEY_ID": "x",
    }
    conf = s3a_conf(only_s3)
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "https://b"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "true"


def test_a_commands_driver_stops_at_the_quick_jit_tier_and_a_servers_does_not() -> None:
    from jobs.spark import COMMAND_JIT, LONG_LIVED_JIT, driver_java_options

    command, server = driver_java_options().split(), driver_java_options(long_lived=True).split()
    assert "-XX:TieredStopAtLevel=1" in command
    assert "-XX:TieredStopAtLevel=1" not in server
    assert "-XX:Tier4InvocationThreshold=150000" in server
    assert not [o for o in command if o.startswith("-XX:Tier4")]
    assert [o for o in command if o not in COMMAND_JIT.split()] == [
        o for o in server if o not in LONG_LIVED_JIT.split()
    ]


@pytest.mark.parametrize(
    ("master", "conf"),
    [
        ("local[2]", {"spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"}),
        ("local[*]", {"spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"}),
        ("spark://10.0.0.5:7077", {}),  # the executors must reach the driver
    ],
)
def test_a_local_drivers_endpoints_listen_on_loopback_only(
    master: str, conf: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from core.config import RunoffConfig
    from jobs.spark import driver_address_conf

    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    config = RunoffConfig.from_sources(home=tmp_path, spark_master=master, env={})
    assert driver_address_conf(config) == conf


def test_small_inputs_get_interpreted_projections_and_larger_ones_spark_s_default(
    tmp_path: Path,
) -> None:
    """At most SMALL_INPUT_FILES files of SMALL_INPUT_BYTES together: interpreted; one byte or one
    file more: no setting. A file gone since it was listed counts for nothing."""

    def files(sizes: list[int]) -> list[UPath]:
        made = []
        for i, size in enumerate(sizes):
            (path := tmp_path / f"{len(sizes)}-{sum(sizes)}-{i}.json").write_bytes(b"x" * size)
            made.append(UPath(path))
        return made

    half = SMALL_INPUT_BYTES // 2
    assert projections_for([]) == INTERPRETED_PROJECTIONS
    assert projections_for(files([half, half])) == INTERPRETED_PROJECTIONS
    assert projections_for(files([half, half + 1])) == {}
    assert projections_for(files([1] * SMALL_INPUT_FILES)) == INTERPRETED_PROJECTIONS
    assert projections_for(files([1] * (SMALL_INPUT_FILES + 1))) == {}
    gone = UPath(tmp_path / "gone.json")
    assert projections_for([gone, *files([SMALL_INPUT_BYTES])]) == INTERPRETED_PROJECTIONS
