"""`delta_tables.maintenance.maintain`: OPTIMIZE, VACUUM and a checkpoint through delta-spark.

The table is a few one-row appends in `tmp_path`; what maintenance must do is computed here from
the files on disk and the table's snapshot (read by delta-rs) before and after it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from deltalake import DeltaTable

from delta_tables.arrow import read_arrow
from delta_tables.maintenance import SESSION_CONF, Maintained, last_checkpoint_version, maintain
from delta_tables.writes import table_version

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

APPENDS = [[(1, "a")], [(2, "b")], [(3, "c")]]


@pytest.fixture(autouse=True)
def session_conf(spark: SparkSession) -> Iterator[None]:
    """`maintain` sets SESSION_CONF in the shared session: put the previous values back."""
    before = {key: spark.conf.get(key, None) for key in SESSION_CONF}
    yield
    for key, value in before.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)


def snapshot_files(path: Path) -> set[Path]:
    """The data files of the current snapshot (delta-rs)."""
    return {Path(uri.removeprefix("file://")) for uri in DeltaTable(str(path)).file_uris()}


def parquet_on_disk(path: Path) -> dict[Path, int]:
    return {p: p.stat().st_size for p in path.rglob("*.parquet") if "_delta_log" not in p.parts}


def rows(spark: SparkSession, path: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The table's rows read by delta-spark and by delta-rs."""
    by_spark = sorted(tuple(r) for r in spark.read.format("delta").load(str(path)).collect())
    by_rs = sorted(tuple(r.values()) for r in read_arrow(str(path), ["id", "name"]).to_pylist())
    return by_spark, by_rs


def test_maintain_compacts_vacuums_and_checkpoints(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "t"
    for batch in APPENDS:
        data = spark.createDataFrame(batch, "id BIGINT, name STRING").coalesce(1)
        data.write.format("delta").mode("append").save(str(path))
    want = sorted(row for batch in APPENDS for row in batch)
    assert rows(spark, path) == (want, want)
    assert table_version(path) == len(APPENDS) - 1
    assert last_checkpoint_version(path) is None

    before = snapshot_files(path)
    on_disk = parquet_on_disk(path)
    assert len(before) == len(APPENDS)  # one row per append: one file each
    assert set(on_disk) == before

    done = maintain(spark, path, retention_hours=0)

    after = snapshot_files(path)
    assert len(after) == 1  # OPTIMIZE bins every small file into one
    assert after.isdisjoint(before)
    gone = {f for f in on_disk if not f.exists()}
    assert gone == before  # retention 0: every replaced file is vacuumed
    assert set(parquet_on_disk(path)) == after
    assert done == Maintained(
        files_before=len(before),
        files_after=1,
        version_before=len(APPENDS) - 1,
        version=len(APPENDS),  # the OPTIMIZE commit; VACUUM commits nothing
        checkpoint=True,
        files_removed=len(gone),
        bytes_removed=sum(on_disk[f] for f in gone),
    )
    assert done.bytes_removed > 0
    assert table_version(path) == len(APPENDS)
    assert last_checkpoint_version(path) == len(APPENDS)
    assert (path / "_delta_log" / f"{len(APPENDS):020d}.checkpoint.parquet").is_file()
    assert rows(spark, path) == (want, want)
    for key, value in SESSION_CONF.items():
        assert spark.conf.get(key) == value

    # right after: nothing to compact, nothing to vacuum, the checkpoint is there
    again = maintain(spark, path, retention_hours=0)
    assert again == Maintained(
        files_before=1,
        files_after=1,
        version_before=len(APPENDS),
        version=len(APPENDS),
        checkpoint=False,
        files_removed=0,
        bytes_removed=0,
    )
    assert table_version(path) == len(APPENDS)
    assert snapshot_files(path) == after
    assert set(parquet_on_disk(path)) == after
    assert rows(spark, path) == (want, want)


def test_maintain_keeps_files_within_the_retention(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "t"
    for batch in APPENDS[:2]:
        data = spark.createDataFrame(batch, "id BIGINT, name STRING").coalesce(1)
        data.write.format("delta").mode("append").save(str(path))
    before = snapshot_files(path)

    done = maintain(spark, path, retention_hours=24)

    # compacted, but the replaced files are younger than the retention: all kept on disk
    assert (done.files_before, done.files_after) == (2, 1)
    assert (done.files_removed, done.bytes_removed) == (0, 0)
    assert all(f.exists() for f in before)
    assert set(parquet_on_disk(path)) == before | snapshot_files(path)
    assert done.checkpoint is True
    assert last_checkpoint_version(path) == table_version(path) == done.version == 2


def test_maintain_refuses_a_missing_table(spark: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"^no Delta table at .*missing$"):
        maintain(spark, tmp_path / "missing", retention_hours=0)
    assert last_checkpoint_version(tmp_path / "missing") is None
