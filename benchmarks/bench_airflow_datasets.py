"""Twenty declared hourly datasets in `make airflow`, triggered together, against one alone.

`make airflow`'s Airflow with its `runoff serve` server (`python -m dags.standalone`, sqlite,
LocalExecutor, the `spark` pool's 2 slots, the server's default `--parallel`), as
benchmarks/bench_airflow_run.py starts it, in a scratch home under `benchmarks/work/`. Its
`RUNOFF_DATASETS` folder declares `feed01` ... `feed20` (the `events` spec under other names:
benchmarks/bench_several_datasets.py's `declare`), each an hourly DAG.

First, one file lands for each feed and the twenty DAGs are triggered together through the REST
API (the warm-up: tables created, the server's code compiled). Then `ALONE` times: one file lands
for `feed01` and its DAG is triggered alone. Last, one file lands for each feed and the twenty
are triggered together again. Every run must succeed, and every bronze table then holds exactly
the records landed for it. Timed by Airflow itself: a run's `queued_at` to its `end_date`; twenty
together, the first `queued_at` to the last `end_date`. Reported: twenty together over the
median of one alone (the issue's target: at most 3), the median run among the twenty (the
pool's slots go to the steps furthest along: `weight_rule` upstream, dags/factory.py), and how
long the API took to answer `/api/v2/monitor/health` while the twenty ran (sampled every 2 s: a
machine that stays responsive). Load averages before and after are in `params`. Writes
`benchmarks/results/airflow_datasets.json`. Run: `uv run --frozen python -m
benchmarks.bench_airflow_datasets` (about 15 minutes on 2 idle cores).
"""

from __future__ import annotations

import shutil
import signal
import statistics
import sys
import threading
import time
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.bench_airflow_run import Airflow, airflow
from benchmarks.bench_several_datasets import ROWS, Feeds, declare

FEEDS = tuple(f"feed{i:02d}" for i in range(1, 21))
ALONE = 3
WORK = Path(__file__).resolve().parent / "work" / "airflow_datasets"


def together(af: Airflow, feeds: tuple[str, ...]) -> dict[str, Any]:
    """Trigger each feed's DAG at once and wait for every run to succeed: the first queued_at to
    the last end_date, and each run's own seconds."""
    runs = {feed: af.trigger(f"runoff_{feed}") for feed in feeds}
    ended = {feed: af.wait(run_id, f"runoff_{feed}") for feed, run_id in runs.items()}
    first = min(datetime.fromisoformat(r["queued_at"]) for r in ended.values())
    last = max(datetime.fromisoformat(r["end_date"]) for r in ended.values())
    return {
        "seconds": round((last - first).total_seconds(), 2),
        "runs": {feed: r["seconds"] for feed, r in ended.items()},
    }


class HealthProbe(threading.Thread):
    """Times GET /api/v2/monitor/health every 2 s until stopped."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = f"{url}/api/v2/monitor/health"
        self.seconds: list[float] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(2.0):
            started = time.perf_counter()
            try:
                with urllib.request.urlopen(self.url, timeout=60) as response:
                    response.read()
            except OSError as exc:  # refused or timed out: the time it took is kept, and said
                print(f"health check: {exc}", flush=True)
            self.seconds.append(round(time.perf_counter() - started, 3))


def main() -> dict[str, Any]:
    from benchmarks.result import load_average, metric, write_result
    from core.config import RunoffConfig
    from delta_tables.arrow import read_arrow

    # SIGTERM unwinds through `airflow()`, which stops Airflow.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    load_before = load_average()
    shutil.rmtree(WORK, ignore_errors=True)
    home, specs = WORK / "home", WORK / "datasets"
    declare(specs, FEEDS)
    home.mkdir(parents=True)
    feeds = Feeds(home, FEEDS)
    env = {"RUNOFF_DATASETS": str(specs)}
    with airflow(home, server=True, env=env, dag_ids=[f"runoff_{f}" for f in FEEDS]) as af:
        feeds.land(FEEDS)
        warmup = together(af, FEEDS)
        print(f"warm-up: {len(FEEDS)} together {warmup['seconds']} s", flush=True)
        alone = []
        for _ in range(ALONE):
            feeds.land(FEEDS[:1])
            alone.append(af.wait(af.trigger(f"runoff_{FEEDS[0]}"), f"runoff_{FEEDS[0]}"))
            print(f"{FEEDS[0]} alone: {alone[-1]['seconds']} s", flush=True)
        feeds.land(FEEDS)
        probe = HealthProbe(af.url)
        probe.start()
        measured = together(af, FEEDS)
        probe.stopped.set()
        probe.join()
        print(f"{len(FEEDS)} together: {measured['seconds']} s", flush=True)
    config = RunoffConfig.from_sources(home=home, env={}, datasets=[specs])
    rows = {feed: read_arrow(str(config.bronze_path(feed))).num_rows for feed in FEEDS}
    assert rows == feeds.landed, (rows, feeds.landed)
    one = statistics.median(r["seconds"] for r in alone)
    result = write_result(
        "airflow_datasets",
        f"{len(FEEDS)} declared hourly datasets in `make airflow` (with `runoff serve`), one new "
        "file each, triggered together through the REST API, against one alone (Airflow's "
        "queued_at to end_date)",
        [
            metric(
                f"{len(FEEDS)} DAG runs triggered together: first queued to last ended",
                measured["seconds"],
                unit="s",
                baseline=one,
                baseline_label=f"one run alone (median of {ALONE})",
                target="<= 3",
            ),
            metric(
                f"a run's trigger to success among the {len(FEEDS)} (median)",
                round(statistics.median(measured["runs"].values()), 2),
                unit="s",
                baseline=one,
                baseline_label=f"one run alone (median of {ALONE})",
            ),
            metric(
                f"API answer time while the {len(FEEDS)} ran, slowest",
                max(probe.seconds),
                unit="s",
            ),
        ],
        params={
            "datasets": list(FEEDS),
            "rows_per_file": ROWS,
            "spark_pool_slots": 2,
            "server_parallel": "the server's default (half the cores, at least 2)",
            "spark_master": "local[2]",
            "load_before": load_before,
            "load_after": load_average(),
            "warmup": warmup,
            "alone": alone,
            "together": measured,
            "api_answer_seconds": {
                "median": statistics.median(probe.seconds),
                "max": max(probe.seconds),
                "samples": len(probe.seconds),
            },
        },
    )
    shutil.rmtree(WORK, ignore_errors=True)
    return result


if __name__ == "__main__":
    main()
