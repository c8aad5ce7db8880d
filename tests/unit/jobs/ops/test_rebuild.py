"""`runoff rebuild`: which tables the arguments name (no Spark: a refused call stops first)."""

from __future__ import annotations

import pytest

from core.config import RunoffConfig
from jobs.cli.main import main
from jobs.ops.rebuild import table_names


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["events_action_hourly"], ["events_action_hourly"]),
        (["a", "b"], ["a", "b"]),
        # the Airflow param `rebuild_silver` passes its list as one argument
        (
            ["events_action_hourly,events_action_sliding"],
            ["events_action_hourly", "events_action_sliding"],
        ),
        (["a, b,", "c"], ["a", "b", "c"]),
        ([","], []),
    ],
)
def test_tables_are_named_by_spaces_or_commas(args: list[str], names: list[str]) -> None:
    assert table_names(args) == names


def test_no_table_and_an_unknown_table_are_refused_before_anything_runs(
    config: RunoffConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--home", str(config.home), "rebuild", ","]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "runoff: error: name the tables to rebuild (e.g. events_action_hourly, bronze_events)"
    )
    assert main(["--home", str(config.home), "rebuild", "events_action_hourly,nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(
        "runoff: error: no bronze or silver table 'nope' is declared (tables: bronze_activity, "
    )
