"""The SparkSession builder shared by the CLI, the Airflow tasks, tests and notebooks.

`get_spark()` returns a session on which `format("delta")` is served by delta-spark: its jars
(fetched from Maven Central by `make install` into `jvm/jars/`, see `jvm/pom.xml`) go on the
classpath, and Delta's SQL extension and catalog are set. `delta_jars()` lists the same jars for
`spark-submit --jars` (the Airflow DAGs). A cluster that already has delta-spark sets
`RUNOFF_JARS_DIR=` (empty): then no jars are added and the cluster's own are used.

Object storage: the s3a:// filesystem's jars (`jvm/jars/s3/`) go on the driver's and executors'
class path, and `s3a_conf()` gives S3A the standard AWS settings of the environment (endpoint,
region). Credentials never go through Spark's configuration: spark-submit would put them on the
JVM's command line, which any local user reads (`ps`). S3A's provider chain reads them where the
AWS SDK does: the environment variables of each JVM (a cluster's workers need them in theirs, as
docker/compose.yaml gives them), a profile, web identity or an instance role. README, "Scaling
out"."""

from __future__ import annotations

import logging
import os
import shutil
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from core.caller import current
from core.config import Location, RunoffConfig
from core.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

JARS_DIR = Path(__file__).resolve().parents[1] / "jvm" / "jars"
DELTA_JAR_PREFIX = "delta-spark_"
DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


def require_java() -> None:
    """Fail early, with one clear line, when no Java runtime is installed."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.path.exists(os.path.join(java_home, "bin", "java")):
        return
    if shutil.which("java") is None:
        raise ConfigError(
            "Java 17+ is required (Spark runs on the JVM) but `java` is not on PATH: "
            "install a Java 17 runtime (apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
        )


def jars_dir() -> Path | None:
    """The folder of delta-spark's jars; None when the cluster has them (`RUNOFF_JARS_DIR=`)."""
    raw = os.environ.get("RUNOFF_JARS_DIR")
    if raw is None:
        return JARS_DIR
    return Path(raw).expanduser() if raw.strip() else None


def s3_classpath() -> str | None:
    """`jvm/jars/s3/*` (hadoop-aws and the AWS SDK): a class path entry, not `spark.jars`, so the
    700 MB SDK bundle is not copied to every application; None when it was not fetched."""
    folder = jars_dir()
    if folder is None or not any((folder / "s3").glob("hadoop-aws-*.jar")):
        return None
    return str(folder / "s3" / "*")


# Keys a user set in S3A's own settings (RUNOFF_SPARK_CONF) first, then the AWS SDK's chain: the
# environment variables, a profile (AWS_PROFILE), web identity, instance roles.
S3A_PROVIDERS = (
    "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider,"
    "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider,"
    "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider"
)


def s3a_conf(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """S3A settings from the standard AWS environment variables: `AWS_ENDPOINT_URL_S3` or
    `AWS_ENDPOINT_URL` (an S3-compatible endpoint: then path-style requests), `AWS_REGION` or
    `AWS_DEFAULT_REGION`. No credential: the providers read `AWS_ACCESS_KEY_ID`,
    `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN` from the JVM's environment."""
    env = os.environ if env is None else env
    conf = {"spark.hadoop.fs.s3a.aws.credentials.provider": S3A_PROVIDERS}
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    if endpoint:
        conf["spark.hadoop.fs.s3a.endpoint"] = endpoint
        conf["spark.hadoop.fs.s3a.path.style.access"] = "true"
        conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(
            endpoint.startswith("https:")
        ).lower()
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if region:
        conf["spark.hadoop.fs.s3a.endpoint.region"] = region
    return conf


def delta_jars() -> list[str]:
    """Absolute paths of the jars to add to Spark (empty when the cluster provides them).

    Raises a one-line error naming the remedy when the folder holds no delta-spark jar.
    """
    folder = jars_dir()
    if folder is None:
        return []
    jars = sorted(str(p) for p in folder.glob("*.jar")) if folder.is_dir() else []
    if not any(Path(j).name.startswith(DELTA_JAR_PREFIX) for j in jars):
        raise ConfigError(
            f"delta-spark's jars are missing from {folder}: run `make install` (it fetches them "
            "from Maven Central), or set RUNOFF_JARS_DIR= on a cluster that already has them"
        )
    return jars


# Spark's log4j2 configuration: no start-up chatter.
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")
JAVA_OPTIONS = f"-Duser.timezone=UTC -Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()}"

# A driver loads and verifies some 20,000 classes before its first query (a third of a cold
# command's start). `make install` dumps them once into a class data sharing archive
# (`python -m jobs.spark`), which every driver then maps instead (README, "Quick start"). The JVM
# checks the archive against its own version and class path and, on any difference (or a
# missing or damaged file), loads the classes as usual; its CDS log is off, as the JVM logs to
# stdout, which carries the command's output.
CLASS_ARCHIVE = JARS_DIR / "driver.jsa"
QUIET_SHARING = "-Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"

# A command's driver lives for a run: seconds to minutes. The JIT's optimizing tier (C2) spends
# more CPU compiling for it than its code wins back, so a command's driver stops at the quick
# tier (C1): a cold `runoff run` then costs a third less CPU at 600 rows and a fifth less at
# 500,000, in less or the same wall time (`benchmarks/bench_driver_jit.py`). A long-lived driver
# (`runoff serve`) keeps both tiers: its hot code is compiled once and reused for hours.
COMMAND_JIT = "-XX:TieredStopAtLevel=1"

# A long-lived driver (`runoff serve`, the test session) runs many commands' many small plans. With
# the JVM's default thresholds its optimizing tier still compiles some 40 Spark methods a second
# after ten minutes, most of them run a few thousand times in all: the compiler threads held a
# third of such a driver's CPU. It compiles a method once it ran 30 times as often as the defaults
# ask (the quick tier serves it until then). One session over the 50 tests of
# `tests/spark/jobs/silver` (`benchmarks/bench_long_lived_jit.py`): the machine spent 0.89x the CPU
# seconds of the defaults, in 1.03x the wall time (one run each); the driver JVM's own CPU was
# 0.72x in back-to-back runs (x3: 0.86x; x10: 0.76x). Where two jobs share the cores (`make test`,
# a busy server), CPU is what a run waits for.
LONG_LIVED_JIT = (
    "-XX:Tier4InvocationThreshold=150000 -XX:Tier4MinInvocationThreshold=18000 "
    "-XX:Tier4CompileThreshold=450000 -XX:Tier4BackEdgeThreshold=1200000"
)


# Outside whole-stage code, Spark generates Java source for every projection of every task, and
# compiles it (a cache spares the compile, not the generation), and the JIT compiles the classes
# again. Silver's micro-batches are such tasks: the state store's projections and those of the
# Delta log's actions, which the stream source, the MERGE and each new table snapshot read, run at
# every micro-batch over few rows. There interpreted projections cost less (`spark.sql.codegen.
# factoryMode`, whose other modes Spark's own tests run for the same results). In one warm
# session, silver of a 2,000-record increment took 15.1 s instead of 19.8 s, and silver over
# 300,000 records 24.2 s instead of 26.2 s (`benchmarks/bench_projections.py`). Whole-stage code
# (the aggregation's) stays generated.
INTERPRETED_PROJECTIONS = {"spark.sql.codegen.factoryMode": "NO_CODEGEN"}

# The backfill parses every line it reads in such projections. Over an hour's few hundred lines,
# where compiling them is most of the work, interpreted ones cost less (one warm session, hourly
# backfills of a 400-line day: medians 6.5 s and 6.8 s instead of 7.2 s and 8.5 s, two runs of
# `benchmarks/bench_small_inputs.py`); over 110,000 lines (3.8 MiB) they took 1.5-1.8x as long.
# So the backfill interprets an input of at most this many files and bytes, well below where the
# two kinds cost the same, and so does a bronze batch: over a 200-line increment interpreted
# projections took 0.94x and 0.97x the time (two runs), and in one warm driver a bronze run of
# such an increment cost 2.34 s of CPU (the driver JVM's and Python's, median of 6) instead of
# 2.62 s. Over 110,000 lines they took 1.5-1.7x as long.
SMALL_INPUT_FILES = 64
SMALL_INPUT_BYTES = 256 << 10


def projections_for(files: Sequence[Location]) -> dict[str, str]:
    """`INTERPRETED_PROJECTIONS` when `files` are a small input (at most `SMALL_INPUT_FILES`
    files of `SMALL_INPUT_BYTES` together), else no setting (Spark's generated projections)."""
    if len(files) > SMALL_INPUT_FILES:
        return {}
    total = 0
    for file in files:
        try:
            total += file.stat().st_size
        except FileNotFoundError:  # gone since it was listed: Spark reports it, not this
            continue
        if total > SMALL_INPUT_BYTES:
            return {}
    return dict(INTERPRETED_PROJECTIONS)


def driver_java_options(long_lived: bool = False) -> str:
    """The driver JVM's options: `JAVA_OPTIONS`, the quick JIT tier only (`COMMAND_JIT`) or, when
    `long_lived`, both tiers with fewer optimizing compiles (`LONG_LIVED_JIT`), and the class
    archive when `make install` made it."""
    options = [JAVA_OPTIONS, LONG_LIVED_JIT if long_lived else COMMAND_JIT]
    if CLASS_ARCHIVE.is_file():
        options.append(f"-XX:SharedArchiveFile={CLASS_ARCHIVE} {QUIET_SHARING}")
    return " ".join(options)


def master_conf(config: RunoffConfig, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """`spark.master` of the session: `RUNOFF_SPARK_MASTER` (`config.spark_master`), except in a
    driver spark-submit started (it sets PYSPARK_GATEWAY_PORT), such as an Airflow task's: there
    spark-submit's `--master` (the `spark_default` connection) stands."""
    env = os.environ if env is None else env
    return {} if "PYSPARK_GATEWAY_PORT" in env else {"spark.master": config.spark_master}


FILE_SYSTEM_CHECKPOINTS = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)


# A driver on a local master serves itself only: its RPC endpoint and block manager listen on
# loopback. (Spark's default is the machine's own address, where any host of the network could
# connect to them.) On a cluster the executors must reach the driver: Spark's default stands.
LOOPBACK_DRIVER = {"spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"}


def driver_address_conf(config: RunoffConfig) -> dict[str, str]:
    """`LOOPBACK_DRIVER` when the session's master is local: `RUNOFF_SPARK_MASTER`, or in a
    driver spark-submit started, its `--master` (read from the JVM spark-submit started)."""
    master = master_conf(config).get("spark.master")
    if master is None:
        from pyspark import SparkConf, SparkContext

        SparkContext._ensure_initialized()  # connects to spark-submit's JVM
        master = SparkConf().get("spark.master", "")
    return dict(LOOPBACK_DRIVER) if master.startswith("local") else {}


def get_spark(
    app_name: str = "runoff", config: RunoffConfig | None = None, *, long_lived: bool = False
) -> SparkSession:
    """Return the active runoff SparkSession, creating and configuring it if needed. A
    `long_lived` driver (a server's) keeps the JIT's optimizing tier (`driver_java_options`).
    A command `runoff serve` runs gets its own session of the server's driver (`core.caller`)."""
    served = current()
    if served is not None and served.session is not None:
        return served.session
    require_java()
    config = config or RunoffConfig.from_sources()
    jars = delta_jars()
    # Python workers must run this interpreter (the venv's), not whatever `python3` is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:  # pragma: no cover - a broken install
        raise ConfigError(f"PySpark is not installed ({exc}): run `make install`") from exc

    builder = (
        SparkSession.builder.appName(app_name)
        .config(map={**master_conf(config), **driver_address_conf(config)})
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", str(config.shuffle_partitions))
        .config("spark.default.parallelism", str(config.shuffle_partitions))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.streaming.metricsEnabled", "false")
        .config("spark.driver.extraJavaOptions", driver_java_options(long_lived))
        .config("spark.executor.extraJavaOptions", JAVA_OPTIONS)
        # Delta rebuilds a table's state from its log checkpoint in this many tasks (default 50:
        # tuned for large tables; runoff's state is small and read at every batch).
        .config("spark.databricks.delta.snapshotPartitions", str(config.shuffle_partitions))
        # File listings (VACUUM's among them) in this many tasks, not 10,000.
        .config(
            "spark.sql.sources.parallelPartitionDiscovery.parallelism",
            str(config.shuffle_partitions),
        )
        # Checkpoint files through Hadoop's FileSystem API (write a temporary file, rename it:
        # atomic on a local disk and on HDFS), not its FileContext API: on the local file system
        # FileContext's rename asks for each path's link status, which Hadoop answers by starting
        # a `readlink` process, some 40 a micro-batch, each about 5 ms of the driver's time. (Both
        # APIs start `chmod` for each file they create: Hadoop's local file system does.) Checksum
        # files (`.<name>.crc`) are written and checked as before.
        .config("spark.sql.streaming.checkpointFileManagerClass", FILE_SYSTEM_CHECKPOINTS)
        # Parquet timestamps as INT64 micros with statistics, readable by every Delta reader.
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        # PySpark otherwise records the Python call site of every Column and function call in
        # the JVM (for the "DataFrame" context of an error message): some six py4j round trips
        # and a walk of the Python stack each. runoff builds its plans from thousands of such
        # calls (an hourly backfill: 12,260 py4j calls with it, 4,120 without) and reports a
        # failed query in one line of its own.
        .config("spark.python.sql.dataFrameDebugging.enabled", "false")
    )
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    s3_jars = s3_classpath()
    if s3_jars is not None:
        builder = builder.config("spark.driver.extraClassPath", s3_jars)
        builder = builder.config("spark.executor.extraClassPath", s3_jars)
        for key, value in s3a_conf().items():
            builder = builder.config(key, value)
    for key, value in DELTA_CONF.items():
        builder = builder.config(key, value)
    for key, value in config.spark_conf.items():
        builder = builder.config(key, value)
    with driver_output(config):
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if not config.verbose:
        # A query whose batch failed (a critical expectation, `schema_evolution: fail`) is logged
        # with pages of JVM and Python stack; runoff reports the failure itself, in one line.
        log4j = spark.sparkContext._jvm.org.apache.logging.log4j  # type: ignore[union-attr]
        log4j.core.config.Configurator.setLevel(
            "org.apache.spark.sql.execution.streaming", log4j.Level.OFF
        )
    # py4j logs every gateway connection it opens and closes at INFO, the last ones during
    # interpreter shutdown (after logging's streams may be closed).
    logging.getLogger("py4j").setLevel(logging.WARNING)
    _require_delta(spark)
    return spark


@contextmanager
def driver_output(config: RunoffConfig) -> Iterator[None]:
    """While it runs, a driver JVM started now prints to `<home>/logs/runoff.log`: the JVM
    inherits this process's standard output and error and keeps them for its life, so what it
    prints itself (its start-up warnings, the stack a stream thread prints when a run is
    interrupted) stays off the terminal, where runoff says what happened in one line. With
    `--verbose`, without a home (a read-only command never makes one), or when the JVM runs
    already (a session of this process, or spark-submit's), nothing changes."""
    from pyspark import SparkContext

    started = SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ
    if config.verbose or started or not config.home.is_dir():
        yield
        return
    log = config.home / "logs" / "runoff.log"
    log.parent.mkdir(exist_ok=True)
    target = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    try:
        os.dup2(target, 1)
        os.dup2(target, 2)
        yield
    except Exception as exc:
        exc.add_note(f"the Spark driver's output: {log}")
        raise
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, target):
            os.close(fd)


def _require_delta(spark: SparkSession) -> None:
    """One clear line when the session cannot load delta-spark's classes."""
    from py4j.java_gateway import JavaClass

    jvm = spark.sparkContext._jvm
    # py4j answers an unknown class with a JavaPackage, not an error.
    if jvm is None or not isinstance(jvm.io.delta.tables.DeltaTable, JavaClass):
        raise ConfigError(
            "delta-spark's classes are not on this Spark session's classpath: run `make install`, "
            "or give spark-submit the jars of jvm/jars/ (`--jars`)"
        )


def dump_class_archive(timeout: float = 900.0) -> None:
    """Make `CLASS_ARCHIVE`: a driver in a child process does what runoff's drivers do (Delta
    writes and reads, a MERGE, an availableNow stream) and its JVM writes the classes it loaded
    as it exits. Without Java or delta-spark's jars there is nothing to archive."""
    import subprocess
    import tempfile

    CLASS_ARCHIVE.unlink(missing_ok=True)
    partial = CLASS_ARCHIVE.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as home:
        env = {
            **os.environ,
            "RUNOFF_HOME": home,
            "SPARK_SUBMIT_OPTS": f"-XX:ArchiveClassesAtExit={partial} {QUIET_SHARING}",
        }
        code = "from jobs.spark import _archive_workload; _archive_workload()"
        subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            cwd=Path(__file__).resolve().parents[1],
            check=True,
            timeout=timeout,
        )
    partial.rename(CLASS_ARCHIVE)


def _archive_workload() -> None:
    from delta.tables import DeltaTable

    spark = get_spark("runoff-class-archive")
    home = Path(os.environ["RUNOFF_HOME"])
    table, copy = str(home / "table"), str(home / "copy")
    spark.range(10).selectExpr("id", "cast(id as string) AS name").write.format("delta").save(table)
    (
        DeltaTable.forPath(spark, table)
        .alias("t")
        .merge(spark.range(5, 15).selectExpr("id", "'x' AS name").alias("s"), "t.id = s.id")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
    )
    (
        spark.readStream.format("delta")
        .load(table)
        .writeStream.format("delta")
        .option("checkpointLocation", str(home / "checkpoint"))
        .trigger(availableNow=True)
        .start(copy)
        .awaitTermination()
    )
    assert spark.read.format("delta").load(copy).count() == 15
    gateway = spark.sparkContext._gateway
    spark.stop()
    # The JVM writes the archive as it exits, which is after this process would: wait for it.
    process = getattr(gateway, "proc", None)
    if process is not None:
        process.stdin.close()
        process.wait(timeout=600)


if __name__ == "__main__":
    dump_class_archive()
