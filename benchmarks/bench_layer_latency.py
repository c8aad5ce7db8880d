"""Wall time of each layer as a scheduler runs it: one `runoff` process per layer task.

An Airflow task of a `runoff_<dataset>` DAG starts one process per layer (`spark-submit` of
`jobs/cli/submit.py`, which calls the same `jobs.cli.main.main`); so does this benchmark, with the
venv's `runoff` script: `runoff --home H bronze events`, then `silver events`, then
`validate events`, each a fresh interpreter (and a fresh JVM for the Spark layers), timed from
spawn to exit.

In a scratch home (`benchmarks/work/layer_latency`): a small history first (`runoff generate
events --files 10 --rows-per-file 200 --seed 1`, then `runoff run events`). Then, `REPETITIONS`
times:
- the same-run baseline: the bare cost of a SparkSession in a new process
  (`python -c "from jobs.spark import get_spark; get_spark()"`, delta-spark's jars included);
- a no-op run: bronze, silver, validate with nothing new landed;
- a 1-file increment: `runoff generate events --files 1` (an hour after the previous file, a
  new seed), then bronze, silver, validate.
Reported: the median seconds of each layer, and of the three together, for the no-op run and
the 1-file increment, each against the median SparkSession start (ratio = layer / start: how
many bare Spark starts a layer costs). No targets. `params` has every timing, the last output
line of each command (what it did) and the machine's load averages (1/5/15 min) before and
after each step. Writes `benchmarks/results/layer_latency.json`. Run:
`uv run --frozen python -m benchmarks.bench_layer_latency` (about 4-6 minutes on 2 cores).
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks.result import load_average, metric, runoff_command, runoff_environment, write_result

DATASET = "events"
HISTORY_FILES = 10
ROWS_PER_FILE = 200
REPETITIONS = 3
LAYERS = ("bronze", "silver", "validate")
PHASES = ("no-op", "1-file increment")
START = datetime(2024, 1, 1, tzinfo=UTC)
FILE_SPAN = timedelta(hours=1)  # the events generator writes one hour of events per file
SPARK_MASTER = "local[2]"
REPO_ROOT = Path(__file__).resolve().parents[1]
WORK = Path(__file__).resolve().parent / "work" / "layer_latency"
SPARK_START = "from jobs.spark import get_spark; get_spark()"


def timed(command: list[str], label: str) -> dict[str, Any]:
    """Run `command` to completion; its wall time, last output line and the load around it."""
    before = load_average()
    started = time.perf_counter()
    done = subprocess.run(
        command,
        cwd=WORK,
        env=runoff_environment(SPARK_MASTER),
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-20:])
        raise RuntimeError(f"{label} exited with {done.returncode}:\n{tail}")
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    step = {
        "seconds": round(seconds, 3),
        "output": lines[-1] if lines else "",
        "load_before": before,
        "load_after": load_average(),
    }
    print(f"{label}: {seconds:.2f} s  {step['output']}", flush=True)
    return step


def runoff(home: Path, *args: str) -> dict[str, Any]:
    return timed([*runoff_command(), "--home", str(home), *args], f"runoff {' '.join(args)}")


def spark_start() -> dict[str, Any]:
    return timed([sys.executable, "-c", SPARK_START], "SparkSession start")


def generate(home: Path, files: int, start: datetime, seed: int) -> dict[str, Any]:
    return runoff(
        home,
        "generate",
        DATASET,
        "--files",
        str(files),
        "--rows-per-file",
        str(ROWS_PER_FILE),
        "--start",
        start.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "--seed",
        str(seed),
    )


def median(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def main() -> dict[str, Any]:
    load_before = load_average()
    started_all = time.perf_counter()
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    home = WORK / "home"

    setup = {
        "generate": generate(home, HISTORY_FILES, START, seed=1),
        "run": runoff(home, "run", DATASET),
    }
    baseline_runs: list[dict[str, Any]] = []
    runs: dict[str, list[dict[str, dict[str, Any]]]] = {phase: [] for phase in PHASES}
    landed: list[dict[str, Any]] = []
    for rep in range(REPETITIONS):
        baseline_runs.append(spark_start())
        runs["no-op"].append({layer: runoff(home, layer, DATASET) for layer in LAYERS})
        start = START + (HISTORY_FILES + rep) * FILE_SPAN
        landed.append(generate(home, 1, start, seed=2 + rep))
        runs["1-file increment"].append({layer: runoff(home, layer, DATASET) for layer in LAYERS})
    total_seconds = time.perf_counter() - started_all
    load_after = load_average()

    baseline = median([b["seconds"] for b in baseline_runs])
    label = "SparkSession start, new process"
    metrics = []
    summary: dict[str, dict[str, float]] = {}
    for phase in PHASES:
        summary[phase] = {}
        for layer in (*LAYERS, "total"):
            if layer == "total":
                values = [sum(r[name]["seconds"] for name in LAYERS) for r in runs[phase]]
                name = f"{phase}: bronze + silver + validate"
            else:
                values = [r[layer]["seconds"] for r in runs[phase]]
                name = f"{phase}: {layer}"
            summary[phase][layer] = median(values)
            metrics.append(
                metric(name, median(values), unit="s", baseline=baseline, baseline_label=label)
            )
    return write_result(
        "layer_latency",
        f"Wall time of each layer of `{DATASET}` run as its own `runoff` process (as an Airflow "
        f"task runs it), with nothing new landed and after one new {ROWS_PER_FILE}-row file, on "
        f"a {HISTORY_FILES}-file history; against the bare start of a SparkSession in a new "
        f"process. Medians of {REPETITIONS}; load averages in params.",
        metrics,
        params={
            "dataset": DATASET,
            "history_files": HISTORY_FILES,
            "rows_per_file": ROWS_PER_FILE,
            "repetitions": REPETITIONS,
            "statistic": "median",
            "spark_master": SPARK_MASTER,
            "command": " ".join(runoff_command()) + " --home H <layer> " + DATASET,
            "baseline_command": f'{sys.executable} -c "{SPARK_START}"',
            "median_seconds": {"spark_start": baseline, **summary},
            "spark_start_runs": baseline_runs,
            "setup": setup,
            "landed": landed,
            "runs": runs,
            "total_seconds": round(total_seconds, 1),
            "load_average_before": load_before,
            "load_average_after": load_after,
        },
    )


if __name__ == "__main__":
    main()
