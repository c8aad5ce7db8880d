"""`delta_tables.writes.app_transactions` on every shape of Delta log delta-spark 4.4 writes.

Each table is written by delta-spark with app transactions (`txnAppId`/`txnVersion`), so the
expected app id -> version maps follow from the writes alone. The logs are then reshaped as a
log cleanup would leave them (JSON commits covered by a checkpoint deleted) so that the
transactions live only in a classic checkpoint, in a V2 checkpoint with sidecars, or are also
covered by a log compaction. `replayed_by_hand` is the JSON-and-classic-checkpoint scan the
module used before, kept here only to show the logs it misread.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from delta_tables.writes import app_transactions, committed_version

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

TOP_LEVEL_FORMAT = "spark.databricks.delta.checkpointV2.topLevelFileFormat"


def write(spark: SparkSession, path: Path, app_id: str, version: int) -> None:
    """One append commit carrying the app transaction (app_id, version)."""
    (
        spark.range(1)
        .write.format("delta")
        .mode("append")
        .option("txnAppId", app_id)
        .option("txnVersion", str(version))
        .save(str(path))
    )


def set_properties(spark: SparkSession, path: Path, **properties: str) -> None:
    pairs = ", ".join(f"'{k}' = '{v}'" for k, v in properties.items())
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({pairs})")


def write_history(spark: SparkSession, path: Path, **properties: str) -> None:
    """Versions 0..5: a=0, the properties, b=0, a=1, b=1, c=0. With a checkpoint interval of 2
    delta-spark checkpoints versions 2 and 4, so a and b are last set at or before 4."""
    write(spark, path, "a", 0)
    set_properties(spark, path, **properties)
    for app_id, version in [("b", 0), ("a", 1), ("b", 1), ("c", 0)]:
        write(spark, path, app_id, version)


def clean_log_up_to(path: Path, version: int) -> None:
    """Delete the JSON commits (and their checksum files) up to `version`, as Delta's log cleanup
    does once a checkpoint covers them."""
    log = path / "_delta_log"
    for v in range(version + 1):
        for name in (f"{v:020d}.json", f"{v:020d}.crc"):
            (log / name).unlink(missing_ok=True)
            (log / f".{name}.crc").unlink(missing_ok=True)
    commits = [int(p.name[:20]) for p in log.iterdir() if re.fullmatch(r"\d{20}\.json", p.name)]
    assert min(commits) == version + 1


def expected_everywhere(spark: SparkSession, path: Path, expected: dict[str, int]) -> None:
    """`app_transactions` gives exactly `expected`, delta-rs agrees app id by app id, and
    delta-spark still reads the (cleaned) table."""
    assert app_transactions(path) == expected
    assert {app: committed_version(path, app) for app in expected} == expected
    assert spark.read.format("delta").load(str(path)).count() == 5


def replayed_by_hand(path: Path) -> dict[str, int]:
    """The former implementation: `_last_checkpoint`'s classic parquet checkpoint, then the JSON
    files after it."""
    import pyarrow.parquet as pq

    log = path / "_delta_log"
    found: dict[str, int] = {}
    after = -1
    last = log / "_last_checkpoint"
    if last.is_file():
        after = int(json.loads(last.read_text())["version"])
        for part in sorted(log.glob(f"{after:020d}.checkpoint*.parquet")):
            for txn in pq.read_table(part, columns=["txn"]).column("txn").to_pylist():
                if txn and txn.get("appId") is not None:
                    found[txn["appId"]] = int(txn["version"])
    commits = sorted((int(p.name[:20]), p) for p in log.glob("*.json") if p.name[:20].isdigit())
    for version, commit in commits:
        if version <= after:
            continue
        for line in commit.read_text().splitlines():
            txn = json.loads(line).get("txn") if '"txn"' in line else None
            if txn and txn.get("appId") is not None:
                found[txn["appId"]] = int(txn["version"])
    return found


@pytest.fixture
def top_level_format(spark: SparkSession) -> Iterator[None]:
    """Leaves the shared session's V2 checkpoint format as it found it."""
    yield
    spark.conf.unset(TOP_LEVEL_FORMAT)


EXPECTED = {"a": 1, "b": 1, "c": 0}


def test_transactions_only_in_a_classic_checkpoint(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "classic"
    write_history(spark, path, **{"delta.checkpointInterval": "2"})
    log = path / "_delta_log"
    assert (log / f"{4:020d}.checkpoint.parquet").is_file()
    clean_log_up_to(path, 4)

    expected_everywhere(spark, path, EXPECTED)
    assert replayed_by_hand(path) == EXPECTED

    # `_last_checkpoint` is only a hint: readers list the log when it is missing.
    (log / "_last_checkpoint").unlink()
    (log / "._last_checkpoint.crc").unlink(missing_ok=True)
    expected_everywhere(spark, path, EXPECTED)
    assert replayed_by_hand(path) == {"c": 0}


@pytest.mark.parametrize("top_level", ["json", "parquet"])
@pytest.mark.usefixtures("top_level_format")
def test_transactions_only_in_a_v2_checkpoint_with_sidecars(
    spark: SparkSession, tmp_path: Path, top_level: str
) -> None:
    spark.conf.set(TOP_LEVEL_FORMAT, top_level)
    path = tmp_path / f"v2-{top_level}"
    write_history(spark, path, **{"delta.checkpointPolicy": "v2", "delta.checkpointInterval": "2"})
    log = path / "_delta_log"
    hint = json.loads((log / "_last_checkpoint").read_text())
    assert hint["version"] == 4
    top = log / hint["v2Checkpoint"]["path"]
    assert top.is_file() and top.name.endswith(f".{top_level}")
    assert list((log / "_sidecars").glob("*.parquet"))
    assert not (log / f"{4:020d}.checkpoint.parquet").exists()
    clean_log_up_to(path, 4)

    expected_everywhere(spark, path, EXPECTED)
    if top_level == "json":  # the hand-written scan read only parquet checkpoints
        assert replayed_by_hand(path) == {"c": 0}


def test_transactions_covered_by_a_log_compaction(spark: SparkSession, tmp_path: Path) -> None:
    from deltalake import DeltaTable

    path = tmp_path / "compacted"
    write_history(spark, path, **{"delta.checkpointInterval": "100"})
    DeltaTable(str(path)).compact_logs(1, 5)
    compaction = path / "_delta_log" / f"{1:020d}.{5:020d}.compacted.json"
    assert '"appId":"a"' in compaction.read_text()

    expected_everywhere(spark, path, EXPECTED)


def test_no_table_or_no_app_transaction(spark: SparkSession, tmp_path: Path) -> None:
    assert app_transactions(tmp_path / "missing") == {}
    path = tmp_path / "plain"
    spark.range(1).write.format("delta").save(str(path))
    assert app_transactions(path) == {}


def test_a_log_delta_rs_cannot_read_raises_value_error(tmp_path: Path) -> None:
    log = tmp_path / "broken" / "_delta_log"
    log.mkdir(parents=True)
    txn = {"txn": {"appId": "a", "version": 0, "lastUpdated": 0}}
    (log / f"{0:020d}.json").write_text(json.dumps(txn) + "\n")  # no protocol, no metadata
    with pytest.raises(ValueError, match=r"cannot read the Delta log .*_delta_log: \S"):
        app_transactions(tmp_path / "broken")
