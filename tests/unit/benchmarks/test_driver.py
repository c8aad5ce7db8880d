"""The `make bench` driver: discovery, one process per benchmark, the README table.

Runs fake benchmark packages and fake result files; no real benchmark is run.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from benchmarks import __main__ as driver
from benchmarks.readme_table import (
    END,
    START,
    format_number,
    regenerate,
    render_table,
    replace_between_markers,
    table_rows,
)
from benchmarks.result import (
    ResultError,
    in_turns,
    load_results,
    metric,
    result,
    target_met,
    validate_result,
)

MACHINE = {"cpus": 2, "python": "3.11.9", "packages": {"pyspark": "4.2.0"}}
README_TEXT = f"# project\n\nintro\n\n## Benchmarks\n\n{START}\nold table\n{END}\n\n## After\n"


def sink_result() -> dict[str, Any]:
    return result(
        "bronze_sink",
        "Bronze ingest of 1,000 events.",
        [
            metric(
                "ingest time",
                11.0,
                unit="s",
                baseline=10.0,
                baseline_label="Parquet sink",
                target="<= 1.10",
            ),
            metric("rows/s", 90.0, unit="rows/s", baseline=100.0, target=">= 0.95"),
        ],
        machine=MACHINE,
    )


def write_json(directory: Path, name: str, data: object) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# -- the convention -----------------------------------------------------------------------------
def test_metric_computes_ratio_and_met() -> None:
    item = metric("t", 11.0, baseline=10.0, target="<= 1.10")
    assert (item["ratio"], item["met"]) == (1.1, True)
    assert metric("t", 11.5, baseline=10.0, target="<= 1.10")["met"] is False
    # Without a baseline the target applies to the value.
    assert metric("open time", 0.4, unit="s", target="< 0.5")["met"] is True
    assert metric("x", 3.0)["met"] is None


def test_settings_take_turns_going_first() -> None:
    settings = {"a": 1, "b": 2, "c": 3}
    assert [in_turns(settings, n) for n in range(3)] == [
        ["a", "b", "c"],
        ["c", "b", "a"],
        ["a", "b", "c"],
    ]


@pytest.mark.parametrize(
    ("target", "value", "met"),
    [("<= 1.10", 1.1, True), ("< 1", 1.0, False), (">= 0.95", 0.96, True), ("== 0", 0.0, True)],
)
def test_target_met(target: str, value: float, met: bool) -> None:
    assert target_met(target, value) is met


def test_bad_target_is_named() -> None:
    with pytest.raises(ResultError, match=r"target 'about 1' is not of the form '<op> <number>'"):
        metric("t", 1.0, baseline=1.0, target="about 1")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"name": "Bronze Sink"}, r"x.json: name 'Bronze Sink' must be lower_snake_case"),
        ({"metrics": []}, r"x.json: 'metrics' must be a non-empty list"),
        ({"rerun": ""}, r"x.json: 'rerun' must be a non-empty string"),
        (
            {"metrics": [{"metric": "t", "value": "fast"}]},
            r"x.json metrics\[0\]: value must be a finite number, got 'fast'",
        ),
        (
            {"metrics": [{"metric": "t", "value": 1, "met": "yes"}]},
            r"x.json metrics\[0\]: met must be true, false or null, got 'yes'",
        ),
    ],
)
def test_validate_names_file_and_key(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ResultError, match=message):
        validate_result({**sink_result(), **change}, "x.json")


# -- the table ----------------------------------------------------------------------------------
def test_table_rows_one_per_metric() -> None:
    rows = table_rows([sink_result()])

    assert rows == [
        (
            "`bronze_sink`",
            "ingest time",
            "10.0 s (Parquet sink)",
            "11.0 s",
            "1.10",
            "`<= 1.10`",
            "yes",
        ),
        ("`bronze_sink`", "rows/s", "100 rows/s", "90.0 rows/s", "0.90", "`>= 0.95`", "**no**"),
    ]


def test_table_computes_missing_ratio_and_met() -> None:
    bare = {
        "name": "hand_written",
        "description": "d",
        "rerun": "r",
        "metrics": [{"metric": "m", "value": 5.0, "baseline": 4.0, "target": "<= 1.10"}],
    }
    assert table_rows([bare]) == [
        ("`hand_written`", "m", "4.00", "5.00", "1.25", "`<= 1.10`", "**no**")
    ]


@pytest.mark.parametrize(
    ("value", "text"),
    [(1234567.0, "1,234,567"), (10.55, "10.6"), (1.234, "1.23"), (0.04567, "0.0457"), (0, "0")],
)
def test_format_number(value: float, text: str) -> None:
    assert format_number(value) == text


def test_render_table_is_markdown_with_rerun_and_machine() -> None:
    block = render_table([sink_result()], ["broken.json: not valid JSON"])
    lines = block.splitlines()

    assert lines[0] == "| benchmark | metric | baseline | runoff | ratio | target | met? |"
    assert lines[1] == "|---|---|---|---|---|---|---|"
    assert len([line for line in lines if line.startswith("| `bronze_sink`")]) == 2
    assert (
        "- `bronze_sink`: Bronze ingest of 1,000 events. "
        "`uv run --frozen python -m benchmarks.bench_bronze_sink`"
    ) in lines
    assert "Measured on: 2 cores, python 3.11.9, pyspark 4.2.0." in lines
    assert lines[-1] == "- result not shown: broken.json: not valid JSON"


def test_replace_only_between_markers() -> None:
    updated = replace_between_markers(README_TEXT, "| new |")

    assert updated == README_TEXT.replace("old table", "| new |")
    assert replace_between_markers("# no markers\n", "x") is None


def test_regenerate_without_markers_prints_and_leaves_readme(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# no markers here\n")
    results = tmp_path / "results"
    write_json(results, "bronze_sink", sink_result())

    written, errors = regenerate(readme, results)

    out = capsys.readouterr().out
    assert (written, errors) == (False, [])
    assert readme.read_text() == "# no markers here\n"
    assert f"has no {START} ... {END} markers" in out
    assert "| `bronze_sink` | ingest time |" in out


def test_load_results_reports_bad_files(tmp_path: Path) -> None:
    write_json(tmp_path, "bronze_sink", sink_result())
    (tmp_path / "broken.json").write_text("{not json")
    write_json(tmp_path, "nameless", {"metrics": []})

    results, errors = load_results(tmp_path)

    assert [r["name"] for r in results] == ["bronze_sink"]
    assert errors == [
        "broken.json: not valid JSON (Expecting property name enclosed in double quotes at line 1)",
        "nameless.json: 'name' must be a non-empty string",
    ]


# -- the driver ---------------------------------------------------------------------------------
def fake_package(root: Path, modules: dict[str, str]) -> Path:
    package = root / "fakebench"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for name, body in modules.items():
        (package / f"{name}.py").write_text(textwrap.dedent(body))
    (package / "helper.py").write_text("raise RuntimeError('not a benchmark: never imported')\n")
    return package


WRITES_ITSELF = """
    import os
    from benchmarks.result import metric, write_result

    def main():
        return write_result("alpha", "Alpha.", [metric("t", 2.0, unit="s", baseline=4.0,
                                                       target="<= 1.0")],
                            params={"pid": os.getpid()})

    if __name__ == "__main__":
        main()
"""
ONLY_RETURNS = """
    from benchmarks.result import metric, result

    def main():
        return result("beta", "Beta.", [metric("rows/s", 50.0, baseline=100.0, target=">= 1")])
"""
CRASHES = """
    def main():
        raise RuntimeError("out of memory")
"""


def test_discover_finds_only_bench_modules(tmp_path: Path) -> None:
    package = fake_package(tmp_path, {"bench_b": CRASHES, "bench_a": CRASHES})
    (package / "bench_notes.txt").write_text("")

    assert driver.discover(package) == ["bench_a", "bench_b"]
    assert driver.select(["bench_a", "bench_b"], ["b"]) == ["bench_b"]
    with pytest.raises(SystemExit, match="unknown benchmark"):
        driver.select(["bench_a"], ["zeta"])


def test_driver_fails_on_an_invalid_result_file(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(README_TEXT)
    results = tmp_path / "results"
    write_json(results, "bad", {"name": "bad"})

    code = driver.main(["--table-only"], tmp_path, readme, results)

    assert code == 1
    assert "- result not shown: bad.json: 'description' must be a non-empty string" in (
        readme.read_text()
    )


def test_real_benchmarks_follow_the_convention() -> None:
    """Every committed result file is valid and every module has main()."""
    results, errors = load_results()
    assert errors == []
    package = Path(driver.__file__).parent
    for module in driver.discover(package):
        source = (package / f"{module}.py").read_text()
        assert "def main(" in source, f"{module}.py has no main()"
    # A result without its module is stale: nobody can re-run it.
    names = {m.removeprefix("bench_") for m in driver.discover(package)}
    assert {r["name"] for r in results} <= names


def test_wall_and_cpu_compares_medians() -> None:
    from benchmarks.result import wall_and_cpu

    runs = [{"seconds": s, "cpu_seconds": c} for s, c in ((9.0, 10.0), (12.0, 11.0), (10.0, 30.0))]
    base = [{"seconds": s, "cpu_seconds": c} for s, c in ((20.0, 22.0), (18.0, 21.0))]
    wall, cpu = wall_and_cpu("a step", runs, base, "the old way")
    assert (wall["metric"], wall["value"], wall["baseline"], wall["ratio"]) == (
        "a step: wall",
        10.0,
        19.0,
        round(10.0 / 19.0, 4),
    )
    assert (cpu["metric"], cpu["unit"], cpu["value"], cpu["baseline"]) == (
        "a step: CPU",
        "CPU s",
        11.0,
        21.5,
    )
    assert wall["met"] is True and cpu["baseline_label"] == "the old way"
