"""Hostile landing lines through `runoff bronze`, `runoff silver` and `runoff report`.

One landing file mixes every kind of line an attacker writes (non-JSON that Spark's reader would
take, lone surrogate escapes, event times beyond the calendar at both ends, a line over the
length limit) with valid lines at the very edges of what is accepted. Bronze must hold exactly
the valid lines and quarantine exactly the others, each with its reason; silver must run and no
window may end beyond the calendar; the report must render. The dataset is `events` without its
bronze expectation on `time` (which would refuse the edge times as a unit error) and with one
sliding window as long as `events`' longest: a user's spec whose lines tests/expected.py
classifies as `events`.
"""

from __future__ import annotations

import os
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

import pytest

from core.config import RunoffConfig
from delta_tables.arrow import read_arrow
from jobs.bronze.job import run_bronze
from jobs.bronze.parse import ERR_TOO_LONG, MAX_LINE_BYTES
from jobs.report.build import write_report
from jobs.silver import run_silver
from tests import expected
from tests.spark.jobs.bronze.test_parse import HOSTILE_EVENTS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SPEC = """\
name: hostile
description: events, as a user declares them, without a range expectation on time
source: {format: json, path: landing/hostile}
schema: "time BIGINT, action STRING"
event_time: "CAST(time AS TIMESTAMP)"
watermark: "1 hour"
required: [time, action]
silver:
  - table: hostile_action_sliding
    window: "1 hour"
    slide: "20 minutes"
    keys: [action]
    measures: {count: "count(*)"}
"""
WINDOW, SLIDE = timedelta(hours=1), timedelta(minutes=20)
START = 1704067200  # 2024-01-01T00:00:00Z
GOOD = [
    f'{{"time": {START + 37 * i}, "action": "{("Open", "Close")[i % 2]}"}}'.encode()
    for i in range(12)
]
TOO_LONG = b'{"time": 1704067200, "action": "Open", "pad": "' + b"x" * MAX_LINE_BYTES + b'"}'


@pytest.fixture
def hostile_config(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RunoffConfig:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "hostile.yaml").write_text(SPEC)
    monkeypatch.setenv("RUNOFF_DATASETS", str(specs))
    return RunoffConfig.from_sources(home=home, env=os.environ)


def local(uri: str) -> str:
    return unquote(urlparse(uri).path)


def naive(value: Any) -> Any:
    return value.astimezone(UTC).replace(tzinfo=None) if isinstance(value, datetime) else value


def test_every_hostile_line_is_quarantined_with_its_reason_and_the_rest_flows_on(
    spark: SparkSession, hostile_config: RunoffConfig
) -> None:
    config = hostile_config
    lines = [*GOOD[:6], b"", *(line for line, _ in HOSTILE_EVENTS), TOO_LONG, b"  ", *GOOD[6:]]
    reasons = {line: error for line, error in HOSTILE_EVENTS}
    reasons[TOO_LONG] = ERR_TOO_LONG
    path = config.landing_dir("hostile") / "date=2024-01-01" / "part-0.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\n".join(lines) + b"\n")
    landed = expected.read_file("events", path)  # the independent classification
    # It agrees with the reasons written down here, line by line.
    for line in landed.lines:
        want = reasons.get(line.raw)
        assert line.kind == ("blank" if not line.raw.strip() else "malformed" if want else "valid")

    record = run_bronze(spark, config, "hostile")
    assert record.status == "success"

    bronze = read_arrow(str(config.bronze_path("hostile"))).to_pylist()
    quarantine = read_arrow(str(config.quarantine_path("hostile"))).to_pylist()
    # Every non-blank line exactly once: in bronze if valid, else in quarantine with its reason.
    assert (record.rows, record.quarantined) == (landed.valid, landed.malformed)
    assert len(bronze) + len(quarantine) == len(lines) - landed.blank
    got_bronze = sorted(
        repr(
            sorted((k, naive(v)) for k, v in row.items() if k not in ("_ingested_at", "_batch_id"))
        )
        for row in ({**r, "_source_file": local(r["_source_file"])} for r in bronze)
    )
    want_bronze = sorted(
        repr(sorted((k, naive(v)) for k, v in {**r, "_source_file": str(path)}.items()))
        for r in landed.records
    )
    assert got_bronze == want_bronze
    got_quarantine = sorted(
        (local(r["_source_file"]), r["_line_number"], r["_raw"], r["_error"]) for r in quarantine
    )
    want_quarantine = sorted(
        (str(path), line.number, line.raw.decode()[: MAX_LINE_BYTES + 1], reasons[line.raw])
        for line in landed.lines
        if line.kind == "malformed"
    )
    assert got_quarantine == want_quarantine
    # The edges of the range are in bronze: the last and the first second of it.
    times = sorted(naive(r["event_time"]) for r in bronze)
    assert (times[0], times[-1]) == (datetime(1, 1, 2, 1), datetime(9999, 12, 30, 22, 59, 59))

    silver = run_silver(spark, config, "hostile")
    assert silver.status == "success"
    rows = read_arrow(str(config.silver_path("hostile_action_sliding"))).to_pylist()
    got = sorted(
        (naive(r["window_start"]), naive(r["window_end"]), r["action"], r["count"]) for r in rows
    )
    # Spark's watermark starts at the epoch: in a stream an event before 1970 is late (counted
    # as such; a backfill brings it), so the first-second edge has no window here.
    streamed = [r for r in landed.records if r["event_time"] >= expected.EPOCH]
    counts = Counter(
        (naive(start), naive(start + WINDOW), r["action"])
        for r in streamed
        for start in expected.windows(r["event_time"], WINDOW, SLIDE)
    )
    assert got == sorted((*key, n) for key, n in counts.items())
    assert silver.late_rows == 3  # the windows of the event of year 1
    # The last second's windows end on the last day the tables hold, not beyond.
    assert max(end for _, end, _, _ in got) == datetime(9999, 12, 30, 23, 40)

    report = write_report(config, "hostile")
    page = report.read_text(encoding="utf-8")
    assert "hostile_action_sliding" in page and 'data-chart="silver0"' in page
