"""Five clients of one `runoff serve`, all at once, against one client alone.

A `runoff serve` process (started as `make airflow` starts it: `dags.standalone.start_server`,
`local[2]`, its default `--parallel`) serves the five declared datasets of
`benchmarks/bench_several_datasets.py` (`feed1` ... `feed5`, the `events` spec under other names)
from a scratch home under `benchmarks/work/served_datasets`. Each client is a `runoff run feedN`
process with `RUNOFF_SERVER` set, as an Airflow task of the dataset's DAG would be.

Each of `ROUNDS` rounds: one file of `ROWS` records lands for `feed1` and its client is timed
alone; then one file lands for each feed and the five clients are started together and timed
until the last one ends. The first `WARMUP` rounds are left out. Every client must exit 0, and
after the last round every bronze table holds exactly the records landed for it. Reported: the
median of five together over the median of one alone (the issue's target: at most 2.5). Load
averages before and after are in `params`. Writes `benchmarks/results/served_datasets.json`.
Run: `uv run --frozen python -m benchmarks.bench_served_datasets` (about 5 minutes on 2 idle
cores).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_several_datasets import (
    FEEDS,
    ROUNDS,
    ROWS,
    Feeds,
    declare,
    together_against_alone,
)

WORK = Path(__file__).resolve().parent / "work" / "served_datasets"
RUN_TIMEOUT = 900


def main() -> dict[str, Any]:
    from benchmarks.result import load_average
    from core.config import RunoffConfig
    from dags import standalone
    from delta_tables.arrow import read_arrow

    load_before = load_average()
    shutil.rmtree(WORK, ignore_errors=True)
    home, specs = WORK / "home", WORK / "datasets"
    declare(specs)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNOFF_")}
    env.update({"RUNOFF_HOME": str(home), "RUNOFF_DATASETS": str(specs)})
    config = RunoffConfig.from_sources(env=env)
    feeds = Feeds(home)

    def timed(names: tuple[str, ...], client: dict[str, str]) -> float:
        started = time.perf_counter()
        runs = [
            subprocess.Popen(
                [sys.executable, "-m", "jobs.cli", "run", name],
                env=client,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for name in names
        ]
        for name, run in zip(names, runs, strict=True):
            _, err = run.communicate(timeout=RUN_TIMEOUT)
            if run.returncode != 0:
                raise SystemExit(f"runoff run {name} exited {run.returncode}: {err[-2000:]}")
        return round(time.perf_counter() - started, 2)

    home.mkdir(parents=True)
    spark_default = json.dumps({"conn_type": "spark", "host": "local[2]"})
    server = standalone.start_server({**env, "AIRFLOW_CONN_SPARK_DEFAULT": spark_default}, home)
    alone: list[float] = []
    together: list[float] = []
    try:
        client = {**env, "RUNOFF_SERVER": str(standalone.server_socket(home))}
        for round_ in range(ROUNDS):
            feeds.land(FEEDS[:1])
            alone.append(timed(FEEDS[:1], client))
            feeds.land(FEEDS)
            together.append(timed(FEEDS, client))
            print(
                f"round {round_}: one client {alone[-1]} s, five together {together[-1]} s",
                flush=True,
            )
    finally:
        standalone.stop(server, timeout=120)
    rows = {feed: read_arrow(str(config.bronze_path(feed))).num_rows for feed in FEEDS}
    assert rows == feeds.landed, (rows, feeds.landed)
    shutil.rmtree(WORK, ignore_errors=True)
    return together_against_alone(
        "served_datasets",
        f"{len(FEEDS)} `runoff run` clients of one `runoff serve`, started together, one new "
        f"{ROWS:,}-record file each, against one client alone (medians)",
        f"{len(FEEDS)} clients at once",
        "one client alone",
        alone,
        together,
        {
            "parallel": "the server's default (half the cores, at least 2)",
            "cores": os.cpu_count(),
            "load_before": load_before,
            "load_after": load_average(),
        },
    )


if __name__ == "__main__":
    main()
