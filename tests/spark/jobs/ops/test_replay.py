"""`runoff quarantine replay`: quarantined lines parsed again with the current spec.

The declared `orders` dataset (tests/spark/jobs/test_declared_dataset.py) quarantines orders of a
store its row rule does not know; the spec then learns the store. A replay publishes exactly
those lines to bronze and deletes them from quarantine, the other malformed lines stay, a second
replay changes nothing, and silver then holds the aggregates of every published line. A replay
stopped after any of its steps is finished by the next one, exactly. Tables are compared with
the plain-Python computation of test_declared_dataset.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from core.config import RunoffConfig
from delta_tables.ledger import read_runs
from delta_tables.writes import table_version
from tests.spark.jobs.test_declared_dataset import (
    BAD_LINES,
    BAD_REASONS,
    SPEC,
    START,
    assert_tables,
    land,
    order_lines,
    orders_config,
    runoff,
    specs,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.slow]
__all__ = ["orders_config", "specs"]  # fixtures, imported for pytest

KNOWN = "store IN ('berlin', 'lisbon', 'porto')"
# The malformed lines that no spec change below lets through (bad-5 is a `paris` order too, but
# without items: it is left out, so that every paris order is a whole record).
STAYING = [line for line in BAD_LINES if '"bad-5"' not in line]
STAYING_REASONS = [r for r, line in zip(BAD_REASONS, BAD_LINES, strict=True) if line in STAYING]


def paris(lines: list[str], every: int) -> list[str]:
    """`lines` with every `every`-th order moved to the store `paris`."""
    out = []
    for i, line in enumerate(lines):
        record = json.loads(line)
        if i % every == 0:
            record["store"] = "paris"
        out.append(json.dumps(record))
    return out


def learn_paris(specs: Path) -> None:
    """The spec's row rule now knows the store `paris`."""
    assert KNOWN in SPEC
    (specs / "orders.yaml").write_text(SPEC.replace(KNOWN, KNOWN[:-1] + ", 'paris')"))


def is_paris(line: str) -> bool:
    return json.loads(line).get("store") == "paris"


def versions(home: Path) -> dict[str, int]:
    return {t: table_version(home / "delta" / t / "orders") for t in ("bronze", "quarantine")}


def replay_runs(config: RunoffConfig) -> list[dict[str, Any]]:
    runs = read_runs(config.runs_path, "orders")
    return [
        {k: r[k] for k in ("status", "trigger", "rows", "quarantined")}
        for r in runs
        if r["layer"] == "replay"
    ]


def landed(home: Path) -> tuple[list[str], list[str]]:
    """Two deliveries with paris orders among valid ones and the staying malformed lines; the
    lines of each file."""
    first = paris(order_lines(0, 24, START), every=5)
    second = paris(order_lines(24, 12, START + timedelta(minutes=7 * 24)), every=4)
    land(home, "part-0001.json", [*first[:10], *STAYING, *first[10:]])
    land(home, "part-0002.json", second)
    return first, second


def test_replay_publishes_what_the_spec_now_passes_exactly_once(
    spark: SparkSession,
    orders_config: RunoffConfig,
    specs: Path,
    home: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    first, second = landed(home)
    every = first + second
    kept = [line for line in every if not is_paris(line)]
    assert runoff("bronze", "orders") == 0
    quarantined = [line for line in every if is_paris(line)]
    paris_reasons = ["rule failed: known_store"] * len(quarantined)
    reasons = dict(zip(quarantined + STAYING, paris_reasons + STAYING_REASONS, strict=True))
    capsys.readouterr()

    # With the spec as it is, nothing passes: nothing is written.
    before = versions(home)
    assert runoff("quarantine", "replay", "orders") == 0
    assert versions(home) == before
    held = len(quarantined) + len(STAYING)
    out = capsys.readouterr().out
    assert f": 0 lines published to bronze, {held} left in quarantine" in out

    learn_paris(specs)
    # One file first: only its paris orders leave quarantine.
    assert runoff("quarantine", "replay", "orders", "--file", "part-0002.json") == 0
    published = [line for line in second if is_paris(line)]
    staying = [line for line in quarantined if line not in published] + STAYING
    assert_bronze_and_quarantine(home, kept + published, staying, reasons)
    out = capsys.readouterr().out
    assert f"{len(published)} lines published to bronze" in out

    # Then by reason: the other file's paris orders; the other malformed lines stay.
    assert runoff("quarantine", "replay", "orders", "--reason", "rule failed") == 0
    assert_bronze_and_quarantine(home, every, STAYING, reasons)
    after = versions(home)

    # A second replay of everything changes nothing.
    assert runoff("quarantine", "replay", "orders") == 0
    assert versions(home) == after
    assert_bronze_and_quarantine(home, every, STAYING, reasons)

    # Silver, which had not run, takes every published line.
    assert runoff("silver", "orders") == 0
    assert_tables(home, every, STAYING, STAYING_REASONS)
    assert replay_runs(orders_config) == [
        {"status": "success", "trigger": "every line", "rows": 0, "quarantined": held},
        {
            "status": "success",
            "trigger": "file part-0002.json",
            "rows": len(published),
            "quarantined": 0,
        },
        {
            "status": "success",
            "trigger": "reason 'rule failed'",
            "rows": len(quarantined) - len(published),
            "quarantined": 0,
        },
        {"status": "success", "trigger": "every line", "rows": 0, "quarantined": len(STAYING)},
    ]


def assert_bronze_and_quarantine(
    home: Path, valid: list[str], bad: list[str], reasons: dict[str, str]
) -> None:
    """Bronze holds exactly the records of `valid`, quarantine exactly the lines of `bad`."""
    from tests.spark.jobs.test_declared_dataset import FIELDS, expected_bronze, table

    columns = [*FIELDS, "event_time", "event_date", "_rescued_data"]
    assert table(home / "delta/bronze/orders", columns, ["order_id"]) == expected_bronze(valid)
    quarantine = table(home / "delta/quarantine/orders", ["_raw", "_error"], ["_raw"])
    assert quarantine == sorted(
        ({"_raw": line, "_error": reasons[line]} for line in bad), key=lambda r: r["_raw"]
    )


def test_a_replay_stopped_after_any_step_is_finished_exactly_by_the_next(
    spark: SparkSession,
    orders_config: RunoffConfig,
    specs: Path,
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Stopped after staging, after writing bronze, after deleting from quarantine: each file's
    replay is stopped at one of these steps, and the next replay of the file finishes it."""
    import jobs.ops.replay as replay

    first, second = landed(home)
    third = paris(order_lines(36, 8, START + timedelta(minutes=7 * 36)), every=2)
    land(home, "part-0003.json", third)
    assert runoff("bronze", "orders") == 0
    every = first + second + third
    quarantined = [line for line in every if is_paris(line)]
    reasons = dict.fromkeys(quarantined, "rule failed: known_store")
    reasons.update(zip(STAYING, STAYING_REASONS, strict=True))
    stage = home / "checkpoints" / "bronze" / "orders" / replay.STAGED
    learn_paris(specs)

    def stopped(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the machine went away")

    published = [line for line in every if not is_paris(line)]
    steps = ("publish", "delete_lines", "drop_stage")
    files = {"part-0001.json": first, "part-0002.json": second, "part-0003.json": third}
    for step, (name, lines) in zip(steps, files.items(), strict=True):
        with monkeypatch.context() as patch:
            patch.setattr(replay.Replay, step, stopped)
            assert runoff("quarantine", "replay", "orders", "--file", name) == 1, step
        assert (stage / "_delta_log").is_dir(), step
        if step == "publish":
            # Nothing written yet; the next replay publishes what was staged, whatever the
            # spec says by then.
            (specs / "orders.yaml").write_text(SPEC)
        assert runoff("quarantine", "replay", "orders", "--file", name) == 0, step
        learn_paris(specs)
        assert not stage.exists(), step
        published += [line for line in lines if is_paris(line)]
        staying = [line for line in quarantined if line not in published] + STAYING
        assert_bronze_and_quarantine(home, published, staying, reasons)
    assert [r["status"] for r in replay_runs(orders_config)] == ["failed", "success"] * 3
