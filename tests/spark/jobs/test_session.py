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


def test_a_spec_check_leaves_pyspark_able_to_report_analysis_errors(
    spark: Any, tmp_path: Any
) -> None:
    """`runoff check` quiets PySpark's query-context loggers while it resolves a spec; PySpark
    logs through them with arguments only its own logger class takes, so they must stay of it
    (an analysis error after a check once raised TypeError instead)."""
    from core.specs import load_spec
    from jobs.streaming.resolve import QUERY_CONTEXT_LOGGERS, _Resolver

    path = tmp_path / "shop.yaml"
    path.write_text(
        'name: shop\nsource: {format: json}\nschema: "a INT"\nevent_time: "current_timestamp()"\n'
    )
    check = _Resolver(load_spec(path))
    frame = spark.createDataFrame([(1,)], "a INT")
    assert check.attempt("key", ["a"], lambda: frame.select(F.col("b"))) is None
    assert check.problems == [f"{path}: key: unknown column 'b' (columns: a)"]
    assert set(QUERY_CONTEXT_LOGGERS) == {"SQLQueryContextLogger", "DataFrameQueryContextLogger"}
    with pytest.raises(AnalysisException):  # logged with a DataFrame's query context
        frame.select(F.col("c") + 1).collect()
    frame.createOrReplaceTempView("shop")
    with pytest.raises(AnalysisException):  # with a SQL text's
        spark.sql("SELECT c FROM shop").collect()
