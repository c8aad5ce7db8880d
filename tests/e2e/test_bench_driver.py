"""The benchmark driver (`python -m benchmarks`) runs each benchmark in its own process and writes
the README table: driven for real on fake benchmark packages (tests/unit/benchmarks/test_driver.py
has the pure parts)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from benchmarks import __main__ as driver
from benchmarks.readme_table import (
    render_table,
)
from benchmarks.result import (
    RESULTS_ENV,
    metric,
    write_result,
)
from tests.unit.benchmarks.test_driver import (
    CRASHES,
    ONLY_RETURNS,
    README_TEXT,
    WRITES_ITSELF,
    fake_package,
    sink_result,
    write_json,
)


def test_write_result_honours_the_results_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(RESULTS_ENV, str(tmp_path / "out"))

    document = write_result("tiny", "A tiny one.", [metric("t", 1.0)], params={"n": 1})

    on_disk = json.loads((tmp_path / "out" / "tiny.json").read_text())
    assert on_disk == document
    assert on_disk["rerun"] == "uv run --frozen python -m benchmarks.bench_tiny"
    assert on_disk["machine"]["cpus"] == os.cpu_count()


def test_driver_runs_each_benchmark_in_its_own_process_and_writes_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    package = fake_package(
        tmp_path, {"bench_alpha": WRITES_ITSELF, "bench_beta": ONLY_RETURNS, "bench_crash": CRASHES}
    )
    readme = tmp_path / "README.md"
    readme.write_text(README_TEXT)
    results = tmp_path / "results"

    code = driver.main([], package_dir=package, readme=readme, results_dir=results)

    out = capsys.readouterr().out
    assert code == 1  # bench_crash failed
    assert "== crash: FAILED (exit 1)" in out
    alpha = json.loads((results / "alpha.json").read_text())
    beta = json.loads((results / "beta.json").read_text())  # written by the driver
    assert alpha["params"]["pid"] != os.getpid()
    assert (beta["metrics"][0]["ratio"], beta["metrics"][0]["met"]) == (0.5, False)
    expected_block = render_table([alpha, beta])
    assert readme.read_text() == README_TEXT.replace("old table", expected_block)
    rows = [line for line in readme.read_text().splitlines() if line.startswith("| `")]
    assert [row.split(" | ")[0] for row in rows] == ["| `alpha`", "| `beta`"]


def test_driver_only_and_table_only(tmp_path: Path) -> None:
    package = fake_package(tmp_path, {"bench_alpha": WRITES_ITSELF, "bench_crash": CRASHES})
    readme = tmp_path / "README.md"
    readme.write_text(README_TEXT)
    results = tmp_path / "results"

    assert driver.main(["--only", "alpha"], package, readme, results) == 0
    assert sorted(p.name for p in results.iterdir()) == ["alpha.json"]

    (results / "alpha.json").unlink()
    write_json(results, "bronze_sink", sink_result())
    assert driver.main(["--table-only"], package, readme, results) == 0
    assert readme.read_text() == README_TEXT.replace("old table", render_table([sink_result()]))
