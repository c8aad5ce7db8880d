"""The `runoff` command line: exit codes and one clear line on stderr for every failure.

Driven through `jobs.cli.main.main([...])` with `--home <tmp>`; the `generate` command stands in for
the rest (no Spark), and `status` (Spark-free) shows which datasets the catalog found
(`--datasets DIR`, `RUNOFF_DATASETS`).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from core import console as console_module
from core import interrupts
from core.config import RunoffConfig
from core.errors import ConfigError, LockHeldError, RunoffError
from jobs.cli import main as cli
from jobs.cli.main import main
from tests import expected

UNKNOWN_DATASET = (
    "runoff: error: unknown dataset 'nosuch': choose one of activity, events, lines, sensors"
)


class CurrentStdout:
    """Whatever `sys.stdout` is when written to (capsys swaps it in only during the test)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(sys.stdout, name)


@pytest.fixture
def stdout_console(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Progress lines go to the stdout that capsys captures."""
    # `_file`, not the `file` property: undoing a patch of `file` would pin the console to
    # this test's (then closed) capture stream for every later test.
    monkeypatch.setattr(console_module.console, "_file", CurrentStdout())


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `runoff argv...`; usage errors exit through SystemExit."""
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_help_lists_generate_and_check(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--help")
    assert (code, err) == (0, "")
    assert "generate" in out
    assert "write sample landing files for a dataset" in out
    assert "check" in out
    assert "dry run: check every dataset spec" in out
    assert "--datasets DIR" in out


def test_generate_prints_one_summary_line(
    home: Path, capsys: pytest.CaptureFixture[str], stdout_console: None
) -> None:
    argv = (
        *("--home", str(home), "generate", "activity", "--files", "3", "--rows-per-file", "200"),
        *("--start", "2024-02-03T04:05:06Z", "--seed", "11"),
        *("--malformed-rate", "0.05", "--late-rate", "0.1"),
    )
    code, out, err = run(capsys, *argv)
    landing = home / "landing" / "activity"
    files = expected.read_landing("activity", landing)

    assert (code, err) == (0, "")
    assert out == (
        f"generated 3 activity files: 600 records, 30 malformed lines, 60 late records "
        f"in {landing}\n"
    )
    assert expected.counts(files) == (600, 30, 2)
    assert sum(expected.late_counts(files)) == 60
    first = min(r["event_time"] for f in files for r in f.records)
    start = datetime(2024, 2, 3, 4, 5, 6, tzinfo=UTC)
    assert start <= first < start + timedelta(seconds=2)
    assert {f.date for f in files} == {date(2024, 2, 3)}

    # The same call again writes nothing new, and says so.
    assert run(capsys, *argv) == (
        0,
        f"generated 0 activity files: 0 records, 0 malformed lines, 0 late records in {landing} "
        "(3 identical files were already there: left alone)\n",
        "",
    )
    assert expected.counts(expected.read_landing("activity", landing)) == (600, 30, 2)


def test_generate_uses_runoff_home_from_the_environment(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    stdout_console: None,
) -> None:
    monkeypatch.setenv("RUNOFF_HOME", str(tmp_path / "from-env"))
    code, _, err = run(capsys, "generate", "lines", "--files", "1", "--rows-per-file", "5")
    assert (code, err) == (0, "")
    assert len(expected.landing_files(tmp_path / "from-env" / "landing" / "lines")) == 1
    # --home wins over RUNOFF_HOME
    code, _, _ = run(capsys, "--home", str(tmp_path / "flag"), "generate", "lines", "--files", "1")
    assert code == 0
    assert len(expected.landing_files(tmp_path / "flag" / "landing" / "lines")) == 1
    assert len(expected.landing_files(tmp_path / "from-env" / "landing" / "lines")) == 1


USAGE_ERRORS = [
    # Datasets are the catalog's (not argparse choices): refused before the command runs.
    (["generate", "nosuch"], UNKNOWN_DATASET),
    (["generate", "nosuch", "--files", "2"], UNKNOWN_DATASET),
    (["bronze", "nosuch"], UNKNOWN_DATASET),
    (["silver", "nosuch"], UNKNOWN_DATASET),
    (["reset", "nosuch", "--layer", "all", "--yes"], UNKNOWN_DATASET),
    (["status", "nosuch"], UNKNOWN_DATASET),
    (["backfill", "nosuch", "--start", "2024-01-01", "--end", "2024-01-02"], UNKNOWN_DATASET),
    (
        ["generate", "nosuch", "--files", "0"],
        "runoff generate: error: argument --files: '0' must be at least 1",
    ),
    (
        ["generate", "events", "--start", "notadate"],
        "runoff generate: error: argument --start: 'notadate' is not an ISO-8601 date or time "
        "(e.g. 2024-01-01 or 2024-01-01T00:00:00Z)",
    ),
    (
        ["generate", "events", "--files", "0"],
        "runoff generate: error: argument --files: '0' must be at least 1",
    ),
    (
        ["generate", "events", "--rows-per-file", "many"],
        "runoff generate: error: argument --rows-per-file: 'many' is not a whole number",
    ),
    (
        ["generate", "events", "--malformed-rate", "2"],
        "runoff generate: error: argument --malformed-rate: '2' must be between 0 and 1",
    ),
    (
        ["generate", "events", "--late-rate", "x"],
        "runoff generate: error: argument --late-rate: 'x' is not a number",
    ),
    (
        ["generate", "events", "--seed", "1.5"],
        "runoff generate: error: argument --seed: invalid int value: '1.5'",
    ),
    (["generate"], "runoff generate: error: the following arguments are required: dataset"),
    ([], "runoff: error: the following arguments are required: command"),
    (["nosuch"], "runoff: error: argument command: invalid choice: 'nosuch'"),
    (
        ["generate", "events", "--datasets"],
        "runoff generate: error: argument --datasets: expected one argument",
    ),
]


@pytest.mark.parametrize(("argv", "message"), USAGE_ERRORS)
def test_usage_errors_are_one_line(
    home: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, "--home", str(home), *argv)
    assert code == 2
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1
    assert err.startswith(message)
    if message == UNKNOWN_DATASET:
        assert err == message + "\n"
    assert list(home.iterdir()) == []  # nothing written


def test_home_that_is_a_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    not_a_dir = tmp_path / "home"
    not_a_dir.write_text("a file")
    code, out, err = run(capsys, "--home", str(not_a_dir), "generate", "events")
    assert (code, out) == (2, "")
    assert err == f"runoff: error: home {str(not_a_dir)!r} exists and is not a directory\n"


@pytest.mark.parametrize("command", [["bronze", "events"], ["maintain", "events"]])
def test_home_that_cannot_be_created_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where a folder of the home belongs")
    home = blocker / "home"
    code, out, err = run(capsys, "--home", str(home), *command)
    assert (code, out) == (2, "")
    assert err == (
        f"runoff: error: home {str(home)!r} cannot be created (Not a directory): choose another "
        "with --home or RUNOFF_HOME\n"
    )


def test_status_of_a_missing_home_is_refused_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "nowhere"
    code, out, err = run(capsys, "--home", str(home), "status", "events", "--json")
    assert (code, out) == (2, "")
    assert err == (
        f"runoff: error: runoff home {str(home)!r} does not exist: check --home or RUNOFF_HOME "
        "(commands that write, such as `runoff generate` or `runoff bronze`, create it)\n"
    )
    assert not home.exists()


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"runoff {version('runoff')}\n"


def test_every_option_of_every_command_has_help() -> None:
    from jobs.cli.main import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = [
        f"{name} {'/'.join(action.option_strings) or action.dest}"
        for name, command in commands.choices.items()
        for action in command._actions
        if not action.help and not isinstance(action, argparse._HelpAction)
    ]
    assert missing == []


def test_landing_that_cannot_be_written_is_one_line(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (home / "landing").write_text("a file where the landing folder belongs")
    code, out, err = run(capsys, "--home", str(home), "generate", "events", "--files", "1")
    folder = home / "landing" / "events" / "date=2024-01-01"
    assert (code, out) == (1, "")
    assert err == f"runoff: error: cannot write landing file under {folder}: Not a directory\n"


def test_impossible_late_rate_is_one_line(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "--home", str(home), "generate", "events", "--files", "2", "--late-rate", "0.9"
    )
    assert (code, out) == (2, "")
    assert err.startswith("runoff: error: late rate 0.9 asks for 3600 late records but only ")
    assert err.endswith(
        " records are close enough to a later file on the same day: lower the "
        "late rate or add files\n"
    )
    assert expected.landing_files(home) == []


def test_late_rate_for_lines_is_one_line(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--home", str(home), "generate", "lines", "--late-rate", "0.1")
    assert (code, out) == (2, "")
    assert err == (
        "runoff: error: dataset 'lines' has no event time in its records: late records do not "
        "apply (use a late rate of 0)\n"
    )


def fake_command(error: Exception) -> cli.Handler:
    def handler(config: RunoffConfig, args: argparse.Namespace) -> int:
        raise error

    return handler


@pytest.mark.parametrize(
    ("error", "code", "line"),
    [
        (RunoffError("table 'x' is broken"), 1, "runoff: error: table 'x' is broken"),
        (ConfigError("RUNOFF_X='y' is bad"), 2, "runoff: error: RUNOFF_X='y' is bad"),
        (LockHeldError("held by pid 42"), 3, "runoff: error: held by pid 42"),
        (ValueError("boom\nsecond line"), 1, "runoff: error: ValueError: boom"),
        (
            KeyboardInterrupt(),
            130,
            "runoff: interrupted; the next run resumes from the checkpoint",
        ),
    ],
)
def test_errors_become_one_line_and_an_exit_code(
    home: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    error: BaseException,
    code: int,
    line: str,
) -> None:
    monkeypatch.setattr(cli, "handler_for", lambda command: fake_command(error))  # type: ignore[arg-type]
    assert run(capsys, "--home", str(home), "generate", "events") == (code, "", line + "\n")


def sigterm_command(wrap: bool) -> Callable[[object, object], int]:
    """A command that receives SIGTERM; with `wrap`, the interrupt is re-raised as another error
    (as py4j does when the signal arrives while the driver waits for the JVM)."""

    def handler(config: object, args: object) -> int:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises before this returns
        except interrupts.Terminated as exc:
            if wrap:
                raise RuntimeError("Answer from Java side is empty") from exc
            raise
        return 0

    return handler


@pytest.mark.parametrize("wrap", [False, True])
def test_sigterm_is_one_line_and_exit_143(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, wrap: bool
) -> None:
    monkeypatch.setattr(cli, "handler_for", lambda command: sigterm_command(wrap))
    assert run(capsys, "--home", str(home), "generate", "events") == (
        143,
        "",
        "runoff: terminated (SIGTERM); the next run resumes from the checkpoint\n",
    )


def test_sigterm_handler_is_installed_only_while_main_runs(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[object] = []

    def handler(config: object, args: object) -> int:
        seen.append(signal.getsignal(signal.SIGTERM))
        return 0

    monkeypatch.setattr(cli, "handler_for", lambda command: handler)
    before = signal.getsignal(signal.SIGTERM)
    assert run(capsys, "--home", str(home), "generate", "events")[0] == 0
    assert seen == [interrupts._on_sigterm]
    assert signal.getsignal(signal.SIGTERM) is before


def test_verbose_adds_the_traceback(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "handler_for", lambda command: fake_command(RunoffError("bad")))
    code, _, err = run(capsys, "--home", str(home), "--verbose", "generate", "events")
    assert code == 1
    assert err.startswith("Traceback (most recent call last):")
    assert err.endswith("core.errors.RunoffError: bad\nrunoff: error: bad\n")


def test_verbose_after_the_command_adds_the_traceback(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "handler_for", lambda command: fake_command(RunoffError("bad")))
    code, _, err = run(capsys, "generate", "events", "--home", str(home), "--verbose")
    assert code == 1
    assert err.startswith("Traceback (most recent call last):")
    assert err.endswith("core.errors.RunoffError: bad\nrunoff: error: bad\n")


def test_home_after_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stdout_console: None
) -> None:
    home = tmp_path / "after"
    code, _, err = run(capsys, "generate", "lines", "--files", "1", "--home", str(home))
    assert (code, err) == (0, "")
    assert len(expected.landing_files(home / "landing" / "lines")) == 1


# -- declared datasets: --datasets DIR and RUNOFF_DATASETS ------------------------------------
MINE_SPEC = """\
name: mine
source: {format: json, path: inbox/mine}
schema: "id BIGINT, ts TIMESTAMP"
event_time: "ts"
required: [id, ts]
silver:
  - table: mine_per_minute
    window: "1 minute"
    keys: [id]
    measures: {n: "count(*)"}
"""
# A second dataset, in its own landing folder (two datasets never share one).
OTHER_SPEC = (
    MINE_SPEC.replace("name: mine", "name: other")
    .replace("mine_per", "other_per")
    .replace("inbox/mine", "inbox/other")
)


def spec_folder(path: Path, **files: str) -> Path:
    path.mkdir()
    for name, text in files.items():
        (path / f"{name}.yaml").write_text(text)
    return path


def status_of(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = run(capsys, *argv)
    assert (code, err) == (0, ""), err
    doc: dict[str, Any] = json.loads(out)
    return doc


MINE_TABLES = [
    ("bronze_mine", "bronze"),
    ("quarantine_mine", "quarantine"),
    ("mine_per_minute", "silver"),
]


@pytest.mark.parametrize("where", ["before", "after"])
def test_datasets_folder_adds_its_datasets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    folder = spec_folder(tmp_path / "specs", mine=MINE_SPEC)
    home = tmp_path / "home"
    home.mkdir()
    option = ["--datasets", str(folder)]
    argv = (
        [*option, "--home", str(home), "status", "mine", "--json"]
        if where == "before"
        else ["status", "mine", "--json", "--home", str(home), *option]
    )
    doc = status_of(capsys, *argv)
    assert doc["dataset"] == "mine"
    assert [(t["table"], t["layer"]) for t in doc["tables"]] == MINE_TABLES
    assert [t["version"] for t in doc["tables"]] == [None] * 3
    assert doc["landing"]["path"] == str(home / "inbox" / "mine")  # the spec's source.path
    assert list(home.iterdir()) == []  # status only reads
    # The seed datasets stay: the unknown-dataset message lists both.
    code, out, err = run(capsys, *option, "--home", str(home), "status", "nosuch")
    assert (code, out) == (2, "")
    assert err == (
        "runoff: error: unknown dataset 'nosuch': choose one of activity, events, lines, mine, "
        "sensors\n"
    )


def test_datasets_from_the_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    first = spec_folder(tmp_path / "a", mine=MINE_SPEC)
    second = spec_folder(tmp_path / "b", other=OTHER_SPEC)
    home = str(tmp_path / "home")
    Path(home).mkdir()
    # Without them, `mine` is unknown.
    code, _, err = run(capsys, "--home", home, "status", "mine")
    assert code == 2
    assert err.startswith("runoff: error: unknown dataset 'mine': choose one of activity, ")
    monkeypatch.setenv("RUNOFF_DATASETS", f"{first}:{second}")
    assert status_of(capsys, "--home", home, "status", "mine", "--json")["dataset"] == "mine"
    assert status_of(capsys, "--home", home, "status", "other", "--json")["dataset"] == "other"


def test_datasets_is_repeatable_before_and_after_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = spec_folder(tmp_path / "a", mine=MINE_SPEC)
    second = spec_folder(tmp_path / "b", other=OTHER_SPEC)
    home = str(tmp_path / "home")
    Path(home).mkdir()
    for argv in (
        ["--datasets", str(first), "--datasets", str(second), "status"],
        ["status", "--datasets", str(first), "--datasets", str(second)],
        ["--datasets", str(first), "status", "--datasets", str(second)],
    ):
        for name in ("mine", "other"):
            doc = status_of(capsys, "--home", home, *argv, name, "--json")
            assert doc["dataset"] == name, argv


def test_datasets_folder_that_is_not_a_directory_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere"
    code, out, err = run(
        capsys, "--home", str(tmp_path / "h"), "--datasets", str(missing), "status", "events"
    )
    assert (code, out) == (2, "")
    assert err == f"runoff: error: datasets folder {str(missing)!r} is not a directory\n"


def test_a_refused_spec_is_named_and_hides_no_other_dataset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = MINE_SPEC.replace("name: mine", "name: other")  # file broken.yaml
    # A second `events` is refused: the seed dataset stays what it was.
    events_again = MINE_SPEC.replace("name: mine", "name: events").replace("mine_per", "events_per")
    folder = spec_folder(tmp_path / "specs", mine=MINE_SPEC, broken=broken, events=events_again)
    home = str(tmp_path / "home")
    Path(home).mkdir()
    code, out, err = run(capsys, "--home", home, "--datasets", str(folder), "status", "broken")
    assert (code, out) == (2, "")
    assert err == (
        f"runoff: error: {folder / 'broken.yaml'}: name: 'other' differs from the file name "
        "'broken'\n"
    )
    doc = status_of(capsys, "--home", home, "--datasets", str(folder), "status", "mine", "--json")
    assert [(t["table"], t["layer"]) for t in doc["tables"]] == MINE_TABLES
    events = status_of(
        capsys, "--home", home, "--datasets", str(folder), "status", "events", "--json"
    )
    assert [t["table"] for t in events["tables"]] == [
        "bronze_events",
        "quarantine_events",
        "events_action_hourly",
        "events_action_sliding",
    ]
    assert events["landing"]["path"] == str(tmp_path / "home" / "landing" / "events")


def test_generate_refuses_a_dataset_without_a_generator(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = spec_folder(tmp_path / "specs", mine=MINE_SPEC)
    home = tmp_path / "home"
    code, out, err = run(capsys, "--home", str(home), "--datasets", str(folder), "generate", "mine")
    assert (code, out) == (2, "")
    assert err == (
        "runoff: error: dataset 'mine' has no sample-data generator (generators exist for: "
        "activity, events, lines, sensors)\n"
    )
    assert expected.landing_files(home) == []


def test_a_served_command_has_one_lineage_listener_and_the_server_none(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`runoff serve` records no run of its own: the commands it serves run `main` with their
    client's environment, and each has the one listener its events come from (a listener of
    the server too would send every event twice)."""
    from delta_tables import ledger

    monkeypatch.setenv("OPENLINEAGE_URL", "http://127.0.0.1:5000")
    monkeypatch.chdir(tmp_path)
    seen: dict[str, int] = {}

    def handler(command: str) -> Callable[[object, object], int]:
        def count(config: object, args: object) -> int:
            seen[command] = len(ledger._listeners)
            if command == "serve":  # what the server does for a client's `runoff bronze`
                return main(["--home", str(home), "bronze", "events"], served=True)
            return 0

        return count

    monkeypatch.setattr(cli, "handler_for", handler)
    assert main(["--home", str(home), "serve"]) == 0
    assert seen == {"serve": 0, "bronze": 1}
