"""Several datasets in one `runoff run` against one dataset alone, in one warm driver.

`runoff run A B C D E` runs the datasets side by side (`jobs.ops.pipeline.run_datasets`, at most
`--parallel` at once: the default, half the cores and at least 2). Five declared datasets
(`feed1` ... `feed5`: the `events` spec under other names, each with its own landing folder and
silver tables) live in a scratch home under `benchmarks/work/several_datasets`. One warm session
(`local[2]`, as `runoff serve` keeps one) runs everything in process, as a server runs its
clients' commands.

Each of `ROUNDS` rounds: one file of `ROWS` records lands for `feed1` and `runoff run feed1` is
timed (alone); then one file lands for each of the five and `runoff run feed1 ... feed5` is
timed (together). The first `WARMUP` rounds are left out. After the last round every bronze table
holds exactly the records landed for it. Reported: the median together over the median alone
(target: at most 2.5, the five in less than two and a half times one). Load averages before and
after are in `params`. Writes `benchmarks/results/several_datasets.json`. Run:
`uv run --frozen python -m benchmarks.bench_several_datasets` (about 10 minutes on 2 idle cores).
"""

from __future__ import annotations

import shutil
import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

FEEDS = tuple(f"feed{i}" for i in range(1, 6))
ROUNDS = 4
WARMUP = 1
ROWS = 2_000
START = datetime(2024, 5, 1, tzinfo=UTC)
WORK = Path(__file__).resolve().parent / "work" / "several_datasets"
SPECS = Path(__file__).resolve().parent.parent / "jobs" / "datasets"


def declare(folder: Path, feeds: tuple[str, ...] = FEEDS) -> None:
    """The `events` spec as each feed: its own name, landing folder and silver tables."""
    events = yaml.safe_load((SPECS / "events.yaml").read_text())
    folder.mkdir(parents=True)
    for feed in feeds:
        spec = yaml.safe_load(yaml.safe_dump(events))
        spec["name"] = feed
        spec["source"]["path"] = f"landing/{feed}"
        renamed = {s["table"]: s["table"].replace("events", feed) for s in spec["silver"]}
        for silver in spec["silver"]:
            silver["table"] = renamed[silver["table"]]
        spec["expectations"] = {renamed.get(k, k): v for k, v in spec["expectations"].items()}
        (folder / f"{feed}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))


class Feeds:
    """The feeds' landing folders under `home`: each `land` writes one `ROWS`-record file per
    feed named, each an hour of events later than the last, and counts what landed."""

    def __init__(self, home: Path, feeds: tuple[str, ...] = FEEDS) -> None:
        self.home = home
        self.landed = dict.fromkeys(feeds, 0)
        self.hour = 0

    def land(self, feeds: tuple[str, ...]) -> None:
        from jobs.samples import generate

        for feed in feeds:
            generate(
                "events",
                self.home / "landing" / feed,
                files=1,
                rows_per_file=ROWS,
                start=START + timedelta(hours=self.hour),
                seed=self.hour,
                malformed_rate=0.0,
                late_rate=0.0,
            )
            self.landed[feed] += ROWS
            self.hour += 1


def together_against_alone(
    name: str,
    description: str,
    measured: str,
    alone_label: str,
    alone: list[float],
    together: list[float],
    params: dict[str, Any],
) -> dict[str, Any]:
    """The result: the median of the five together over the median of one alone (rounds after
    the warm-up), with the rounds' seconds and the common parameters."""
    from benchmarks.result import metric, write_result

    return write_result(
        name,
        description,
        [
            metric(
                measured,
                statistics.median(together[WARMUP:]),
                unit="s",
                baseline=statistics.median(alone[WARMUP:]),
                baseline_label=alone_label,
                target="<= 2.5",
            )
        ],
        rerun=f"uv run --frozen python -m benchmarks.bench_{name}",
        params={
            "datasets": list(FEEDS),
            "rows_per_file": ROWS,
            "rounds": ROUNDS,
            "warmup": WARMUP,
            "spark_master": "local[2]",
            **params,
            "alone_seconds": alone,
            "together_seconds": together,
        },
    )


def main() -> dict[str, Any]:
    from benchmarks.result import load_average
    from core.config import RunoffConfig
    from delta_tables.arrow import read_arrow
    from jobs.cli.main import main as cli
    from jobs.spark import get_spark

    load_before = load_average()
    shutil.rmtree(WORK, ignore_errors=True)
    home, specs = WORK / "home", WORK / "datasets"
    declare(specs)
    config = RunoffConfig.from_sources(home=home, spark_master="local[2]", env={}, datasets=[specs])
    spark = get_spark("bench-several-datasets", config, long_lived=True)
    feeds = Feeds(home)

    def timed(names: tuple[str, ...]) -> float:
        started = time.perf_counter()
        code = cli(["--home", str(home), "--datasets", str(specs), "run", *names])
        if code != 0:
            raise SystemExit(f"runoff run {' '.join(names)} exited {code}")
        return round(time.perf_counter() - started, 2)

    alone: list[float] = []
    together: list[float] = []
    try:
        for round_ in range(ROUNDS):
            feeds.land(FEEDS[:1])
            alone.append(timed(FEEDS[:1]))
            feeds.land(FEEDS)
            together.append(timed(FEEDS))
            print(
                f"round {round_}: alone {alone[-1]} s, five together {together[-1]} s", flush=True
            )
        rows = {feed: read_arrow(str(config.bronze_path(feed))).num_rows for feed in FEEDS}
        assert rows == feeds.landed, (rows, feeds.landed)
    finally:
        spark.stop()
    shutil.rmtree(WORK, ignore_errors=True)
    return together_against_alone(
        "several_datasets",
        f"`runoff run` of {len(FEEDS)} datasets, one new {ROWS:,}-record file each, against one "
        "dataset alone, in one warm driver (medians)",
        f"{len(FEEDS)} datasets in one `runoff run`",
        "one dataset alone",
        alone,
        together,
        {
            "parallel": "default (half the cores, at least 2)",
            "load_before": load_before,
            "load_after": load_average(),
        },
    )


if __name__ == "__main__":
    main()
