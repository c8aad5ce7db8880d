"""The benchmark result convention: one JSON file per benchmark in `benchmarks/results/`.

Input: what a `benchmarks/bench_<name>.py` module measured. Output: `results/<name>.json`
(format in benchmarks/README.md), from which `readme_table` renders the README's table.
Benchmark modules build metrics with `metric()` and save with `write_result()`; `load_results()`
reads and checks every file, naming the file and the key at fault.
"""

from __future__ import annotations

import json
import math
import operator
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"
# `make bench` (benchmarks/__main__.py) points every benchmark at one results directory.
RESULTS_ENV = "RUNOFF_BENCH_RESULTS"
PACKAGES = ("pyspark", "delta-spark", "deltalake", "pyarrow", "pandas", "duckdb", "polars")

_OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    "<": operator.lt,
    ">=": operator.ge,
    ">": operator.gt,
    "==": operator.eq,
}
_TARGET = re.compile(r"\s*(<=|>=|==|<|>)\s*(-?\d+(?:\.\d+)?)\s*")


class ResultError(ValueError):
    """A result file or metric that does not follow the convention."""


def parse_target(target: str) -> tuple[str, float]:
    """`"<= 1.10"` -> ("<=", 1.1)."""
    match = _TARGET.fullmatch(target)
    if not match:
        raise ResultError(
            f"target {target!r} is not of the form '<op> <number>' (op: <=, <, >=, >, ==)"
        )
    return match.group(1), float(match.group(2))


def target_met(target: str, measured: float) -> bool:
    op, bound = parse_target(target)
    return _OPERATORS[op](measured, bound)


def metric(
    name: str,
    value: float,
    *,
    unit: str = "",
    baseline: float | None = None,
    baseline_label: str = "",
    target: str | None = None,
) -> dict[str, Any]:
    """One measured quantity. With a baseline, `ratio` = value / baseline and `target` applies to
    the ratio; without one, `target` applies to the value itself."""
    ratio = value / baseline if baseline not in (None, 0) else None
    checked = ratio if ratio is not None else value
    return {
        "metric": name,
        "unit": unit,
        "baseline": baseline,
        "baseline_label": baseline_label,
        "value": value,
        "ratio": round(ratio, 4) if ratio is not None else None,
        "target": target,
        "met": target_met(target, checked) if target else None,
    }


def _java_version() -> str:
    try:
        out = subprocess.run(
            ["java", "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    first = (out.stderr or out.stdout).strip().splitlines()
    return first[0] if first else "unknown"


def _memory_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        return None
    return None


def machine_info() -> dict[str, Any]:
    """Where a result was measured: enough to judge whether two results are comparable."""
    versions = {}
    for package in PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return {
        "cpus": os.cpu_count(),
        "memory_gb": _memory_gb(),
        "platform": f"{platform.system()} {platform.machine()}",
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "java": _java_version(),
        "packages": versions,
    }


def load_average() -> list[float]:
    """The machine's load averages over 1, 5 and 15 minutes (record them before and after a
    benchmark in its `params`: other work on the machine inflates every number alike)."""
    return [round(x, 2) for x in os.getloadavg()]


def in_turns(names: Iterable[str], round_number: int) -> list[str]:
    """The order of a benchmark's settings in round `round_number`: as given in even rounds,
    reversed in odd ones, so that no setting always runs first (on a warmer or quieter machine)."""
    order = list(names)
    return order if round_number % 2 == 0 else order[::-1]


def busy_cpu_seconds() -> float:
    """CPU seconds the machine has spent outside idle and iowait since boot (`/proc/stat`)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(f) for f in fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def timed_command(command: list[str], env: dict[str, str], label: str) -> dict[str, Any]:
    """Run `command` to its end: its wall seconds, the CPU seconds the whole machine spent
    meanwhile (all processes: run it on an otherwise quiet machine) and the load averages before
    and after. A failed command raises `RuntimeError` with its stderr."""
    load_before = load_average()
    cpu, started = busy_cpu_seconds(), time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    seconds, cpu = time.perf_counter() - started, busy_cpu_seconds() - cpu
    if done.returncode != 0:
        raise RuntimeError(f"{label} exited {done.returncode}:\n{done.stderr}")
    print(f"{label}: {seconds:.1f} s wall, {cpu:.1f} CPU s", flush=True)
    return {
        "seconds": round(seconds, 2),
        "cpu_seconds": round(cpu, 2),
        "load_before": load_before,
        "load_after": load_average(),
    }


def wall_and_cpu(
    name: str,
    runs: Sequence[Mapping[str, Any]],
    baseline_runs: Sequence[Mapping[str, Any]],
    baseline_label: str,
) -> list[dict[str, Any]]:
    """Two metrics from `timed_command` results: the median wall seconds and the median CPU
    seconds of `runs` against those of `baseline_runs`, each with target `< 1`."""
    metrics = []
    for key, unit, what in (("seconds", "s", "wall"), ("cpu_seconds", "CPU s", "CPU")):
        value = statistics.median(r[key] for r in runs)
        baseline = statistics.median(r[key] for r in baseline_runs)
        metrics.append(
            metric(
                f"{name}: {what}",
                round(value, 2),
                unit=unit,
                baseline=round(baseline, 2),
                baseline_label=baseline_label,
                target="< 1",
            )
        )
    return metrics


# One pytest session over a workload, in a Python process of its own (`-c`), after `prelude`.
PYTEST_SESSION = (
    "import sys, pytest; "
    "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '-o', 'addopts=', {path!r}]))"
)


def compare_test_sessions(
    name: str,
    description: str,
    workload: str,
    settings: Mapping[str, str],
    repetitions: int,
    baseline_label: str,
) -> dict[str, Any]:
    """A benchmark of two settings of the test session: for each of `settings` (a name ->
    Python run before pytest starts, which sets it in that process; the first is measured, the
    second its baseline) `repetitions` pytest sessions over `workload` on `local[2]`, in turns,
    each timed by `timed_command`; the medians' wall and CPU ratios (`wall_and_cpu`) written as
    `results/<name>.json`, every run and the load averages in its `params`."""
    repo = Path(__file__).resolve().parents[1]
    env = {**runoff_environment("local[2]"), "PYTHONPATH": str(repo)}
    load_before = load_average()
    runs: dict[str, list[dict[str, Any]]] = {setting: [] for setting in settings}
    os.chdir(repo)
    for rep in range(repetitions):
        for setting in in_turns(settings, rep):
            code = settings[setting] + PYTEST_SESSION.format(path=workload)
            label = f"{workload} ({setting})"
            runs[setting].append(timed_command([sys.executable, "-c", code], env, label))
    measured, baseline = settings
    return write_result(
        name,
        description,
        wall_and_cpu(
            f"one session over `{workload}`", runs[measured], runs[baseline], baseline_label
        ),
        rerun=f"uv run --frozen python -m benchmarks.bench_{name}",
        params={
            "workload": workload,
            "repetitions": repetitions,
            "runs": runs,
            "load_before": load_before,
            "load_after": load_average(),
        },
    )


def runoff_command() -> list[str]:
    """The venv's `runoff` script (else `python -m jobs.cli`, the same entry point): benchmarks
    run each step as its own process, as an Airflow task does."""
    script = Path(sys.executable).parent / "runoff"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "jobs.cli"]


def runoff_environment(spark_master: str, spark_conf: str | None = None) -> dict[str, str]:
    """This environment without `RUNOFF_*` settings, with a fixed Spark master (and Spark
    properties, `RUNOFF_SPARK_CONF`) and unbuffered output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNOFF_")}
    env["RUNOFF_SPARK_MASTER"] = spark_master
    if spark_conf is not None:
        env["RUNOFF_SPARK_CONF"] = spark_conf
    env["PYTHONUNBUFFERED"] = "1"
    return env


def results_dir() -> Path:
    return Path(os.environ.get(RESULTS_ENV) or RESULTS_DIR)


def result(
    name: str,
    description: str,
    metrics: Sequence[Mapping[str, Any]],
    *,
    rerun: str | None = None,
    params: Mapping[str, Any] | None = None,
    machine: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A result document (checked), ready to be written."""
    document = {
        "name": name,
        "description": description,
        "metrics": [dict(m) for m in metrics],
        "rerun": rerun or f"uv run --frozen python -m benchmarks.bench_{name}",
        "params": dict(params or {}),
        "machine": dict(machine) if machine is not None else machine_info(),
        "measured_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return validate_result(document, f"result {name!r}")


def write_result(
    name: str,
    description: str,
    metrics: Sequence[Mapping[str, Any]],
    *,
    rerun: str | None = None,
    params: Mapping[str, Any] | None = None,
    directory: Path | None = None,
) -> dict[str, Any]:
    """Check and write `results/<name>.json` (atomically); returns the document."""
    document = result(name, description, metrics, rerun=rerun, params=params)
    save_result(document, directory)
    return document


def save_result(document: Mapping[str, Any], directory: Path | None = None) -> Path:
    target_dir = directory or results_dir()
    target_dir.mkdir(parents=True, exist_ok=True)
    path = target_dir / f"{document['name']}.json"
    partial = path.with_name(f".{path.name}.tmp")
    partial.write_text(json.dumps(document, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    partial.replace(path)
    return path


def _number(value: Any, where: str, key: str, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ResultError(f"{where}: {key} must be a finite number, got {value!r}")


def validate_result(data: Any, where: str) -> dict[str, Any]:
    """Check one result document against the convention; errors name `where` and the key."""
    if not isinstance(data, dict):
        raise ResultError(f"{where}: a result is a JSON object, got {type(data).__name__}")
    for key in ("name", "description", "rerun"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise ResultError(f"{where}: {key!r} must be a non-empty string")
    if not re.fullmatch(r"[a-z0-9_]+", data["name"]):
        raise ResultError(f"{where}: name {data['name']!r} must be lower_snake_case")
    metrics = data.get("metrics")
    if not isinstance(metrics, list) or not metrics:
        raise ResultError(f"{where}: 'metrics' must be a non-empty list")
    for i, item in enumerate(metrics):
        at = f"{where} metrics[{i}]"
        if not isinstance(item, dict):
            raise ResultError(f"{at}: a metric is an object")
        if not isinstance(item.get("metric"), str) or not item["metric"]:
            raise ResultError(f"{at}: 'metric' must be a non-empty string")
        _number(item.get("value"), at, "value")
        _number(item.get("baseline"), at, "baseline", optional=True)
        _number(item.get("ratio"), at, "ratio", optional=True)
        target = item.get("target")
        if target is not None:
            if not isinstance(target, str):
                raise ResultError(f"{at}: target must be a string like '<= 1.10'")
            try:
                parse_target(target)
            except ResultError as exc:
                raise ResultError(f"{at}: {exc}") from None
        met = item.get("met")
        if met is not None and not isinstance(met, bool):
            raise ResultError(f"{at}: met must be true, false or null, got {met!r}")
    if "machine" in data and not isinstance(data["machine"], dict):
        raise ResultError(f"{where}: 'machine' must be an object")
    return data


def load_results(directory: Path | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """Every `*.json` result in `directory`, sorted by name, and one error line per bad file."""
    folder = directory or results_dir()
    results: list[dict[str, Any]] = []
    errors: list[str] = []
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            results.append(validate_result(data, path.name))
        except json.JSONDecodeError as exc:
            errors.append(f"{path.name}: not valid JSON ({exc.msg} at line {exc.lineno})")
        except ResultError as exc:
            errors.append(str(exc))
    results.sort(key=lambda r: r["name"])
    return results, errors
