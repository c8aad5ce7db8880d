"""Small inputs with interpreted projections against generated ones: the backfill's rule.

`jobs.spark.projections_for` gives the backfill interpreted projections when its input is at
most `SMALL_INPUT_FILES` files of `SMALL_INPUT_BYTES` together. One warm session (`local[2]`, as
`runoff serve` keeps one), two scratch homes under `benchmarks/work/small_inputs`, one per
setting, fed the same landing files; the homes take turns going first:
- hourly backfills: a day of `DAY_FILES` files of `SMALL_ROWS` records goes through bronze and
  silver in each home, then `HOURS` hourly backfills of that day run in each. Timed: each;
- small increments: `INCREMENTS` times, one `events` file of `SMALL_ROWS` records lands in each
  home and `runoff bronze` runs there (`run_bronze`). Timed: each bronze run, which parses as
  the backfill does (both apply the rule: see `jobs/spark.py`);
- a larger input: one file of `LARGE_ROWS` records (15 times `SMALL_INPUT_BYTES`) through bronze
  in a fresh pair of homes, where generated projections must win (target: above 1), which is why
  the rule interprets small inputs only.
"Generated" is Spark's default (`spark.sql.codegen.factoryMode` FALLBACK); "interpreted" is
`INTERPRETED_PROJECTIONS`, forced on both jobs whatever the input's size.

Reported: medians (the first `WARMUP` runs of each home left out), interpreted against generated.
The machine's load averages before and after are in `params`.
Writes `benchmarks/results/small_inputs.json`. Run:
`uv run --frozen python -m benchmarks.bench_small_inputs` (about 10 minutes on 2 idle cores).
"""

from __future__ import annotations

import shutil
import statistics
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from core.config import RunoffConfig

DATASET = "events"
INCREMENTS = 6
HOURS = 6
WARMUP = 1
SMALL_ROWS = 200
DAY_FILES = 2
LARGE_ROWS = 110_000
DAY = datetime(2024, 1, 1, tzinfo=UTC)
WORK = Path(__file__).resolve().parent / "work" / "small_inputs"


@contextmanager
def projections(spark: SparkSession, conf: Mapping[str, str]) -> Iterator[None]:
    """Bronze (through the session's setting) and the backfill (through its rule) run with
    `conf` as their projections setting."""
    import jobs.backfill.job
    from delta_tables.writes import session_conf

    saved = jobs.backfill.job.projections_for

    def fixed(_files: Any) -> dict[str, str]:
        return dict(conf)

    jobs.backfill.job.projections_for = fixed
    try:
        with session_conf(spark, conf):
            yield
    finally:
        jobs.backfill.job.projections_for = saved


def timed(run: Callable[[], Any]) -> float:
    started = time.perf_counter()
    run()
    return round(time.perf_counter() - started, 3)


def land(config: RunoffConfig, files: int, rows: int, start: datetime, seed: int) -> None:
    """`files` events files of `rows` records in the day folder of `start`."""
    from jobs.samples import generate

    folder = config.landing_dir(DATASET) / f"date={start.date().isoformat()}"
    generate(DATASET, folder, seed=seed, files=files, rows_per_file=rows, start=start)


def main() -> dict[str, Any]:
    from benchmarks.bench_projections import GENERATED
    from benchmarks.result import in_turns, load_average, metric, write_result
    from core.config import RunoffConfig
    from jobs.backfill.interval import Interval
    from jobs.backfill.job import run_backfill
    from jobs.bronze.job import run_bronze
    from jobs.silver import run_silver
    from jobs.spark import INTERPRETED_PROJECTIONS, get_spark

    load_before = load_average()
    shutil.rmtree(WORK, ignore_errors=True)
    settings = {"generated": GENERATED, "interpreted": INTERPRETED_PROJECTIONS}

    def homes(kind: str) -> dict[str, RunoffConfig]:
        return {
            name: RunoffConfig.from_sources(home=WORK / kind / name, env={}) for name in settings
        }

    def bronze(spark: SparkSession, config: RunoffConfig) -> None:
        assert run_bronze(spark, config, DATASET).status == "success"

    def backfill(spark: SparkSession, config: RunoffConfig, interval: Interval) -> None:
        result = run_backfill(spark, config, DATASET, interval, report=lambda _line: None)
        assert result.record.status == "success", result.record

    quiet = homes("increments")
    spark = get_spark(app_name="bench-small-inputs", config=next(iter(quiet.values())))
    seconds: dict[str, dict[str, list[float]]] = {
        part: {name: [] for name in settings} for part in ("bronze", "backfill")
    }
    large_seconds: dict[str, float] = {}
    try:
        for i in range(INCREMENTS):
            for name in in_turns(settings, i):
                config = quiet[name]
                land(config, 1, SMALL_ROWS, DAY + timedelta(hours=i), seed=i)
                with projections(spark, settings[name]):
                    seconds["bronze"][name].append(timed(partial(bronze, spark, config)))
                print(f"increment {i + 1}, {name}: bronze {seconds['bronze'][name][-1]} s")
        day = homes("backfill")
        for config in day.values():
            land(config, DAY_FILES, SMALL_ROWS, DAY, seed=7)
            bronze(spark, config)
            assert run_silver(spark, config, DATASET, report=lambda _l: None).status == "success"
        for hour in range(HOURS):
            interval = Interval(DAY + timedelta(hours=hour), DAY + timedelta(hours=hour + 1))
            for name in in_turns(settings, hour):
                with projections(spark, settings[name]):
                    seconds["backfill"][name].append(
                        timed(partial(backfill, spark, day[name], interval))
                    )
                print(f"hour {hour}, {name}: backfill {seconds['backfill'][name][-1]} s")
        large = homes("large")
        for name, config in large.items():
            land(config, 1, LARGE_ROWS, DAY, seed=11)
            with projections(spark, settings[name]):
                large_seconds[name] = timed(partial(bronze, spark, config))
            print(f"large, {name}: bronze {large_seconds[name]} s")
        size = sum(
            p.stat().st_size for p in large["generated"].landing_dir(DATASET).rglob("*.json")
        )
    finally:
        spark.stop()
    shutil.rmtree(WORK, ignore_errors=True)

    def median(part: str, name: str) -> float:
        return round(statistics.median(seconds[part][name][WARMUP:]), 3)

    def compared(label: str, interpreted: float, generated: float, target: str) -> dict[str, Any]:
        return metric(
            label,
            interpreted,
            unit="s",
            baseline=generated,
            baseline_label="generated projections (Spark's default)",
            target=target,
        )

    return write_result(
        "small_inputs",
        "Bronze of small increments and hourly backfills with interpreted projections against "
        "generated ones, one warm session (medians)",
        [
            compared(
                f"bronze run of a {SMALL_ROWS}-record increment",
                median("bronze", "interpreted"),
                median("bronze", "generated"),
                "< 1",
            ),
            compared(
                f"hourly backfill of a day of {DAY_FILES} x {SMALL_ROWS} records",
                median("backfill", "interpreted"),
                median("backfill", "generated"),
                "< 1",
            ),
            compared(
                f"bronze run of {LARGE_ROWS:,} records ({size / 2**20:.1f} MiB)",
                large_seconds["interpreted"],
                large_seconds["generated"],
                "> 1",
            ),
        ],
        rerun="uv run --frozen python -m benchmarks.bench_small_inputs",
        params={
            "dataset": DATASET,
            "increments": INCREMENTS,
            "hours": HOURS,
            "warmup": WARMUP,
            "small_rows": SMALL_ROWS,
            "day_files": DAY_FILES,
            "large_rows": LARGE_ROWS,
            "large_bytes": size,
            "spark_master": "local[2]",
            "seconds": seconds,
            "large_seconds": large_seconds,
            "load_before": load_before,
            "load_after": load_average(),
        },
    )


if __name__ == "__main__":
    main()
