"""`merge_into`: upserts of micro-batches by key, exactly once (Arrow input, no Spark)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from delta_tables.arrow import read_arrow
from delta_tables.errors import DeltaOptionError, DeltaSchemaMismatchError
from delta_tables.merge import merge_into

KEYS = ["window_start", "action"]


def window(hour: int) -> datetime:
    return datetime(2024, 1, 1, hour, tzinfo=UTC)


def counts(rows: list[tuple[int, str | None, int]]) -> pa.Table:
    return pa.table(
        {
            "window_start": pa.array([window(h) for h, _, _ in rows], pa.timestamp("us", tz="UTC")),
            "action": pa.array([a for _, a, _ in rows], pa.string()),
            "count": pa.array([c for _, _, c in rows], pa.int64()),
        }
    )


def table_rows(path: Path) -> dict[tuple[Any, Any], int]:
    return {
        (r["window_start"].hour, r["action"]): r["count"] for r in read_arrow(str(path)).to_pylist()
    }


def test_merge_creates_updates_inserts_and_skips_replays(tmp_path: Path) -> None:
    table = tmp_path / "silver"
    created = merge_into(
        counts([(0, "Open", 1), (0, "Close", 2)]), table, KEYS, app_id="q", version=0
    )
    assert created.created and created.version == 0
    second = merge_into(
        counts([(0, "Open", 5), (1, "Open", 1), (1, None, 3)]), table, KEYS, app_id="q", version=1
    )
    assert (second.rows_updated, second.rows_inserted) == (1, 2)
    assert table_rows(table) == {(0, "Open"): 5, (0, "Close"): 2, (1, "Open"): 1, (1, None): 3}
    # Null keys match null-safely: updated, not duplicated.
    merge_into(counts([(1, None, 4)]), table, KEYS, app_id="q", version=2)
    assert table_rows(table)[(1, None)] == 4
    assert len(read_arrow(str(table))) == 4
    version = DeltaTable(str(table)).version()
    replay = merge_into(counts([(0, "Open", 99)]), table, KEYS, app_id="q", version=2)
    assert replay.skipped
    assert DeltaTable(str(table)).version() == version
    assert table_rows(table)[(0, "Open")] == 5
    assert DeltaTable(str(table)).transaction_version("q") == 2


def test_merge_errors_name_the_column(tmp_path: Path) -> None:
    table = tmp_path / "silver"
    merge_into(counts([(0, "Open", 1)]), table, KEYS)
    with pytest.raises(
        DeltaOptionError, match=r"key column\(s\) \['window'\] are not in the batch"
    ):
        merge_into(counts([(0, "Open", 1)]), table, ["window"])
    extra = counts([(0, "Open", 1)]).append_column("late", pa.array([1], pa.int64()))
    with pytest.raises(
        DeltaSchemaMismatchError, match=r"column `late` of the batch is not in the table"
    ):
        merge_into(extra, table, KEYS)
    wrong = counts([(0, "Open", 1)]).set_column(2, "count", pa.array(["1"]))
    with pytest.raises(
        DeltaSchemaMismatchError, match=r"column `count` is string in the batch but bigint"
    ):
        merge_into(wrong, table, KEYS)
    merged = merge_into(extra, table, KEYS, merge_schema=True)
    assert merged.rows_updated == 1
    assert "late" in DeltaTable(str(table)).schema().to_arrow().names
