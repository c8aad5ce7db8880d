"""`runoff status` in a fresh interpreter never imports Spark."""

from __future__ import annotations

import json
import subprocess
import sys

from core.config import RunoffConfig
from tests.conftest import REPO_ROOT
from tests.unit.jobs.ops.test_status import build_home


def test_status_never_imports_spark(config: RunoffConfig) -> None:
    build_home(config)
    code = (
        "import sys\n"
        "from jobs.cli.main import main\n"
        f"rc = main(['--home', {str(config.home)!r}, 'status', 'events', '--json'])\n"
        "assert rc == 0\n"
        "assert not [m for m in sys.modules if m.startswith('pyspark')], 'pyspark imported'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["tables"][0]["rows"] == 15
