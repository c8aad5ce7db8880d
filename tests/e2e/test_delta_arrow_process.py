"""A process that read a Delta table with delta-rs (`delta_tables.arrow`) exits cleanly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT
from tests.unit.delta_tables.test_arrow import make_table


def test_a_process_that_read_a_table_exits_cleanly(tmp_path: Path) -> None:
    """No Arrow I/O thread may outlive the interpreter (that aborts with status 134)."""
    make_table(tmp_path / "t")
    code = (
        "from delta_tables.arrow import read_arrow\n"
        f"print(read_arrow({str(tmp_path / 't')!r}).num_rows)\n"
    )
    for _ in range(5):
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
        )
        assert (done.returncode, done.stdout, done.stderr) == (0, "5\n", "")
