"""Every `runoff ...` line of the README's "Examples" block runs, in order, and succeeds.

The examples are read from README.md itself, so the documentation cannot drift from the CLI.
The end state is checked against an independent count of the landing files.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from jobs.cli.main import main
from tests import expected
from tests.conftest import REPO_ROOT

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def readme_examples() -> list[list[str]]:
    text = (REPO_ROOT / "README.md").read_text()
    block = re.search(r"Examples:\s*```bash\n(.*?)```", text, re.S)
    assert block, "README.md has no 'Examples:' bash block"
    commands = []
    for line in block.group(1).splitlines():
        command = line.split("#", 1)[0].strip()
        if command:
            argv = shlex.split(command)
            assert argv[0] == "runoff", line
            commands.append(argv[1:])
    return commands


def test_readme_examples_run_in_order(
    spark: SparkSession, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    examples = readme_examples()
    assert [argv[0] for argv in examples] == [
        "generate", "generate", "bronze", "bronze", "silver", "validate", "status",
    ]  # fmt: skip
    for argv in examples[:-1]:
        assert main(["--home", str(home), *argv]) == 0, argv
    capsys.readouterr()
    assert main(["--home", str(home), *examples[-1]]) == 0
    status = json.loads(capsys.readouterr().out)

    # Independently: every landing line, wherever the file is now (landing or archive).
    files = [
        expected.read_file("events", path)
        for path in sorted(home.rglob("*.json"))
        if "date=" in str(path) and "/delta/" not in str(path) and "/quality/" not in str(path)
    ]
    assert len(files) == 55  # 50 files of seed 7 + 5 of seed 8
    valid, malformed, _blank = expected.counts(files)
    assert valid == 100_000 + 5 * 2_000
    tables = {t["table"]: t for t in status["tables"]}
    assert tables["bronze_events"]["rows"] == valid
    assert tables["quarantine_events"]["rows"] == malformed
    assert status["landing"]["pending"] == 0
