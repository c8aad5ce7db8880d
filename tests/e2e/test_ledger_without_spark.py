"""A process without Spark parks its ledger rows; the next Spark append commits them once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.ipc as ipc

from delta_tables.ops import read_rows
from delta_tables.writes import is_delta_table
from tests.conftest import REPO_ROOT

if TYPE_CHECKING:
    pass
from tests.spark.delta_tables.test_ops import CHILD, KEY, SCHEMA, parked, record, table, tuples


def test_append_rows_parks_in_a_process_without_spark(tmp_path: Path) -> None:
    path, source = tmp_path / "runs", tmp_path / "rows.arrow"
    rows = [record("r1"), record("r2", "sensors", rows=2)]
    with pa.OSFile(str(source), "wb") as sink, ipc.new_file(sink, SCHEMA) as writer:
        writer.write_table(table(*rows))

    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), str(source)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "parked\n", "")
    assert not is_delta_table(path)
    assert len(parked(path)) == 1
    assert tuples(read_rows(path, SCHEMA, KEY)) == sorted(rows)
