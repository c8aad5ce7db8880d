"""The README's "Add your own dataset" walkthrough, typed verbatim into a fresh shell.

A fresh `bash` (tests/readme.py: HOME and the system's default PATH, nothing else) gets the
walkthrough's blocks in order, as a user types them: the exports, the spec written to the file
the README names, the landing file, each `$ command` of its transcripts, the second file, and
the Python that reads the tables. Only the README's placeholder folders are replaced (the
repository's path, and /tmp/shop by a folder of the test). Each command must exit 0 and print
every line its transcript shows, in order (durations, the time of a run and table padding
aside); the Python block must print exactly the output shown after it.

Not typed here, each for a reason the test states (`SKIPPED`): the transcript of a delivery
that breaks a critical expectation (its file is described in prose only; the behaviour is
tests/spark/quality/test_gate.py's), and `make airflow` (a server: tests/e2e/test_airflow_e2e.py
runs what it runs, with a user's `orders` spec, and the README's backfill recipe verbatim). The
second file is ingested by `runoff run orders` in place of the Airflow run the README unpauses:
its lines must be those the README shows for the bronze task's log ("the same lines as the CLI").
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from core.config import RunoffConfig
from tests.conftest import REPO_ROOT
from tests.readme import (
    SHOP_PLACEHOLDER,
    Block,
    blocks,
    commands,
    fresh_shell,
    readme_blocks,
    section,
    shown_in_order,
    typist,
    verbatim,
)
from tests.spark.jobs.bronze.test_job import assert_tables_hold_exactly, land

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# The transcripts not typed, by their first command.
SKIPPED = {
    "runoff bronze orders": "needs the bad delivery the README describes in prose only",
    "cd /path/to/runoff && make airflow": "starts Airflow: tests/e2e/test_airflow_e2e.py",
}
# What the test types for the Airflow run the README unpauses after the second file.
INSTEAD_OF_AIRFLOW = "runoff run orders"
MARK = "@@ exit "
TIMEOUT = 900.0


def walkthrough() -> list[Block]:
    text = section("Add your own dataset")
    return blocks(text[: text.index("\n### ")])  # the numbered steps, before "A refused spec"


def test_the_walkthrough_typed_into_a_fresh_shell_prints_what_the_readme_shows(
    tmp_path: Path,
) -> None:
    steps = walkthrough()
    assert [b.lang for b in steps] == [
        "bash", "yaml", "bash", "", "", "", "", "", "bash", "", "python", "",
    ]  # fmt: skip
    shop = tmp_path / "shop"
    script: list[str] = []
    # (command, the lines its transcript shows), in the order typed
    expected: list[tuple[str, list[str]]] = []

    def type_command(command: str, shown: list[str]) -> None:
        script.append(f'{verbatim(command, shop)}\necho "{MARK}$?"')
        expected.append((command, [verbatim(line, shop) for line in shown]))

    spec_file = re.search(rf"`({re.escape(SHOP_PLACEHOLDER)}/[^`]+\.yaml)`", steps[1].before)
    assert spec_file, steps[1].before
    script.append(verbatim(steps[0].text, shop))
    script.append(f"cat > {verbatim(spec_file.group(1), shop)} <<'YAML'\n{steps[1].text}YAML")
    script.append(verbatim(steps[2].text, shop))
    for block in steps[3:8]:
        typed = commands(block)
        if typed[0][0] in SKIPPED:
            continue
        for command, shown in typed:
            type_command(command, shown)
    script.append(verbatim(steps[8].text, shop))
    type_command(INSTEAD_OF_AIRFLOW, steps[9].text.splitlines())
    script.append(f"python - <<'PY'\n{steps[10].text}PY\necho \"{MARK}$?\"")
    expected.append(("python", steps[11].text.splitlines()))

    printed = fresh_shell("\n".join(script), home=tmp_path, cwd=tmp_path, timeout=TIMEOUT)

    outputs = re.split(rf"^{MARK}(\d+)\n", printed, flags=re.M)
    codes = outputs[1::2]
    assert len(codes) == len(expected), printed[-5000:]
    for (command, shown), output, code in zip(expected, outputs[0::2], codes, strict=False):
        assert code == "0", f"`{command}` exited {code}:\n{output[-5000:]}"
        lines = output.splitlines()
        if command == "python":
            assert [line.rstrip() for line in lines] == shown, output
        else:
            missing = shown_in_order(shown, lines)
            assert not missing, (
                f"`{command}` did not print, in order:\n"
                + "\n".join(missing)
                + f"\n--- it printed:\n{output}"
            )


def test_the_serve_block_typed_into_a_shell_runs_bronze_in_the_warm_driver(tmp_path: Path) -> None:
    """The README's `runoff serve` block, typed line by line into a fresh shell in a folder whose
    default home (`./.runoff`) has two landed `events` files, after the walkthrough's `export
    PATH`. The user waits for the line the block's comment shows before typing on; bronze then
    runs in the server and its tables hold exactly the landed lines. `kill %1` (SIGTERM) stops
    the server: "runoff: server stopped"."""
    (block,) = [b for b in readme_blocks() if b.text.startswith("runoff serve &")]
    serve, *rest = block.text.splitlines()
    work = tmp_path / "work"
    config = RunoffConfig.from_sources(home=work / ".runoff", env={})
    files = land(config, "events", files=2, seed=31)
    (user := tmp_path / "user").mkdir()
    with typist(home=user, cwd=work) as shell:
        shell.type(f"export PATH={REPO_ROOT}/.venv/bin:$PATH")
        shell.type(serve)
        shown = re.search(r'# "(.*)\(\.\.\.\)"', serve)
        assert shown, serve
        shell.wait_for(shown.group(1).replace("$PWD", str(work)) + "(", timeout=TIMEOUT)
        for line in rest:
            shell.type(line)
        shell.type(f'echo "{MARK}$?"')
        printed = shell.wait_for(MARK, timeout=TIMEOUT)
        assert f"{MARK}0\n" in printed, printed
        assert "bronze events: success" in printed, printed
        assert_tables_hold_exactly(config, "events", files)
        shell.type("kill %1")
        shell.wait_for("runoff: server stopped", timeout=120)
