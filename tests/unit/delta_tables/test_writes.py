"""`delta_tables.writes.is_delta_table`: a table is there once its log holds a commit."""

from __future__ import annotations

from pathlib import Path

from delta_tables.writes import is_delta_table, table_version


def test_a_log_without_a_commit_is_no_table(tmp_path: Path) -> None:
    """What a creation killed before its first commit leaves: readers would refuse it (delta-rs:
    `No files in log segment`), so it counts as no table, and the next run creates it."""
    log = tmp_path / "t" / "_delta_log"
    assert not is_delta_table(tmp_path / "t")
    log.mkdir(parents=True)
    (log / ".00000000000000000000.json.tmp").write_text("{}")  # a commit being written
    assert (is_delta_table(tmp_path / "t"), table_version(tmp_path / "t")) == (False, -1)
    (log / "00000000000000000000.json").write_text("{}")
    assert is_delta_table(tmp_path / "t")
    checkpointed = tmp_path / "c" / "_delta_log"
    checkpointed.mkdir(parents=True)
    (checkpointed / "00000000000000000010.checkpoint.parquet").write_bytes(b"")
    assert is_delta_table(tmp_path / "c")
