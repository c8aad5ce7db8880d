"""Silver with interpreted projections against generated ones (`INTERPRETED_PROJECTIONS`).

`jobs.spark.INTERPRETED_PROJECTIONS` is what silver runs with. One warm session (`local[2]`, as
`runoff serve` keeps one), two scratch homes under `benchmarks/work/projections`, one per
setting, fed the same landing files:
- small increments: `INCREMENTS` times, one `events` file of `SMALL_ROWS` records lands in each
  home and `runoff bronze`, then `runoff silver` runs there (`run_bronze`, `run_silver`); the two
  homes take turns going first. Timed: each silver run (`RunRecord.seconds`);
- one large run: `LARGE_FILES` files of `LARGE_ROWS` records land in a fresh pair of homes, bronze
  ingests them, and silver reads all of them in one run.
"Generated" runs silver with Spark's default (`spark.sql.codegen.factoryMode` FALLBACK: generated
code, interpreted only when compiling fails); "interpreted" with runoff's setting.

Reported: the median silver run of the small increments (the first `WARMUP` of each home left
out), interpreted against generated (target: below 1); the large run's silver, interpreted
against generated (target: at most 1.1: the setting must not cost large runs). The machine's load
averages before and after are in `params`.
Writes `benchmarks/results/projections.json`. Run:
`uv run --frozen python -m benchmarks.bench_projections` (about 10 minutes on 2 idle cores).
"""

from __future__ import annotations

import shutil
import statistics
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from core.config import RunoffConfig

DATASET = "events"
INCREMENTS = 8
WARMUP = 2
SMALL_ROWS = 2_000
LARGE_FILES = 10
LARGE_ROWS = 30_000
START = datetime(2024, 5, 1, tzinfo=UTC)
WORK = Path(__file__).resolve().parent / "work" / "projections"
GENERATED = {"spark.sql.codegen.factoryMode": "FALLBACK"}


def silver_seconds(
    spark: SparkSession, config: RunoffConfig, conf: Mapping[str, str]
) -> tuple[float, int]:
    """One `runoff silver` with `conf` as its projections setting: (seconds, rows merged)."""
    import jobs.silver
    from jobs.bronze.job import run_bronze

    bronze = run_bronze(spark, config, DATASET)
    assert bronze.status == "success", bronze
    saved = jobs.silver.INTERPRETED_PROJECTIONS
    jobs.silver.INTERPRETED_PROJECTIONS = dict(conf)
    try:
        record = jobs.silver.run_silver(spark, config, DATASET, report=lambda _line: None)
    finally:
        jobs.silver.INTERPRETED_PROJECTIONS = saved
    assert record.status == "success", record
    return record.seconds, record.rows


def main() -> dict[str, Any]:
    from benchmarks.result import in_turns, load_average, metric, write_result
    from core.config import RunoffConfig
    from jobs.samples import generate_dataset
    from jobs.spark import INTERPRETED_PROJECTIONS, get_spark

    load_before = load_average()
    shutil.rmtree(WORK, ignore_errors=True)
    settings = {"generated": GENERATED, "interpreted": INTERPRETED_PROJECTIONS}

    def homes(kind: str) -> dict[str, RunoffConfig]:
        return {
            name: RunoffConfig.from_sources(home=WORK / kind / name, env={}) for name in settings
        }

    small = homes("small")
    spark = get_spark(app_name="bench-projections", config=next(iter(small.values())))
    runs: dict[str, list[float]] = {name: [] for name in settings}
    rows: dict[str, list[int]] = {name: [] for name in settings}
    try:
        for i in range(INCREMENTS):
            for name in in_turns(settings, i):
                config = small[name]
                start = START + timedelta(hours=i)
                generate_dataset(
                    config, DATASET, files=1, rows_per_file=SMALL_ROWS, start=start, seed=i
                )
                seconds, merged = silver_seconds(spark, config, settings[name])
                runs[name].append(round(seconds, 3))
                rows[name].append(merged)
                print(f"increment {i + 1}, {name}: silver {seconds:.2f} s", flush=True)
        assert rows["generated"] == rows["interpreted"], rows
        large = homes("large")
        large_seconds: dict[str, float] = {}
        for name, config in large.items():
            generate_dataset(
                config, DATASET, files=LARGE_FILES, rows_per_file=LARGE_ROWS, start=START, seed=1
            )
            seconds, _ = silver_seconds(spark, config, settings[name])
            large_seconds[name] = round(seconds, 3)
            print(f"large, {name}: silver {seconds:.2f} s", flush=True)
    finally:
        spark.stop()
    shutil.rmtree(WORK, ignore_errors=True)

    def median(name: str) -> float:
        return round(statistics.median(runs[name][WARMUP:]), 3)

    return write_result(
        "projections",
        "Silver with interpreted projections against generated ones, one warm session: "
        f"{SMALL_ROWS:,}-record increments (medians) and one run over "
        f"{LARGE_FILES * LARGE_ROWS:,} records",
        [
            metric(
                f"silver run of a {SMALL_ROWS:,}-record increment",
                median("interpreted"),
                unit="s",
                baseline=median("generated"),
                baseline_label="generated projections (Spark's default)",
                target="< 1",
            ),
            metric(
                f"silver run over {LARGE_FILES * LARGE_ROWS:,} records",
                large_seconds["interpreted"],
                unit="s",
                baseline=large_seconds["generated"],
                baseline_label="generated projections (Spark's default)",
                target="<= 1.1",
            ),
        ],
        rerun="uv run --frozen python -m benchmarks.bench_projections",
        params={
            "dataset": DATASET,
            "increments": INCREMENTS,
            "warmup": WARMUP,
            "small_rows": SMALL_ROWS,
            "large": {"files": LARGE_FILES, "rows_per_file": LARGE_ROWS},
            "spark_master": "local[2]",
            "silver_seconds": runs,
            "large_silver_seconds": large_seconds,
            "load_before": load_before,
            "load_after": load_average(),
        },
    )


if __name__ == "__main__":
    main()
