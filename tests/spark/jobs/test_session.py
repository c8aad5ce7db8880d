"""The driver's session as `jobs.spark.get_spark` configures it."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.errors import AnalysisException
from pyspark.errors.utils import is_debugging_enabled
from pyspark.sql import functions as F

pytestmark = pytest.mark.spark


def test_no_python_call_site_is_recorded_and_errors_still_name_the_column(spark: Any) -> None:
    """PySpark's DataFrame debugging (a Python stack walk and py4j round trips per Column call)
    is off in the driver's sessions, served ones included; a failed analysis still says what
    failed."""
    assert is_debugging_enabled() is False
    for session in (spark, spark.newSession()):
        assert session.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"
    frame = spark.createDataFrame([(1,)], "a INT")
    with pytest.raises(AnalysisException) as failed:
        frame.select(F.col("b") + 1).collect()
    assert failed.value.getCondition() == "UNRESOLVED_COLUMN.WITH_SUGGESTION"
    assert "`b`" in str(failed.value)
