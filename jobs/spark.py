"""The SparkSession builder shared by the CLI, the Airflow tasks, tests and notebooks.

`get_spark()` returns a session on which `format("delta")` works: where delta-spark's JVM
classes are on the classpath they serve it; otherwise runoff's delta-rs Python data source is
registered under the same name (DESIGN.md, "The Delta engine").
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from typing import TYPE_CHECKING

from jobs.config import RunoffConfig
from jobs.errors import RunoffError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)


def require_java() -> None:
    """Fail early, with one clear line, when no Java runtime is installed."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.path.exists(os.path.join(java_home, "bin", "java")):
        return
    if shutil.which("java") is None:
        raise RunoffError(
            "Java 17+ is required (Spark runs on the JVM) but `java` is not on PATH: "
            "install a Java 17 runtime (apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
        )


def get_spark(app_name: str = "runoff", config: RunoffConfig | None = None) -> SparkSession:
    """Return the active runoff SparkSession, creating and configuring it if needed."""
    require_java()
    config = config or RunoffConfig.from_sources()
    # Python workers must run this interpreter (the venv's), not whatever `python3` is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.appName(app_name)
        .master(config.spark_master)
        # delta-rs rejects the Arrow time zone `Etc/UTC`: the session zone must be exactly UTC.
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", str(config.shuffle_partitions))
        .config("spark.default.parallelism", str(config.shuffle_partitions))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.streaming.metricsEnabled", "false")
        .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
        .config("spark.executor.extraJavaOptions", "-Duser.timezone=UTC")
    )
    for key, value in config.spark_conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    # py4j logs every gateway connection it opens and closes at INFO, the last ones during
    # interpreter shutdown (after logging's streams may be closed).
    logging.getLogger("py4j").setLevel(logging.WARNING)

    from delta_tables.spark_source import ensure_delta_format

    ensure_delta_format(spark)
    return spark
