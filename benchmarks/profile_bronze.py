"""Where a large bronze batch spends its time: the parse, the cache, the count, the rows.

Not part of `make bench` (it measures stages, not a ratio): run it to see what a change to
`jobs.bronze.parse` does to each stage.

    uv run --frozen python -m benchmarks.profile_bronze [--rows 1000000] [--files 20]

One SparkSession (`local[2]`; its start is not counted) reads `--rows` generated `events` lines
in `--files` files (benchmarks/bench_delta_sink.py's lines) as bronze's stream reads them: text
lines with their file. Each stage runs into Spark's `noop` sink (every row computed, nothing
written) after one warm-up run; the best of `--repeat` runs is printed. Stages: the text read
alone; `from_json` with the record's schema alone (what the hand-written query's reader does);
`parse_lines` whole, and without its line checks that are regular expressions or a Variant
parse (to price them); then as a batch runs them: `kept` and `count_lines` (the cache is built
there), `count_lines` again (from the cache), and `good_rows` from the cache. The Delta write
itself is in `runoff --verbose bronze` (its `bronze written at` line).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.bench_delta_sink import generate
from benchmarks.result import load_average

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import DataFrame

# The checks of `parse_lines` priced by leaving them out (each made a constant false).
LINE_CHECKS = ("_more_after_the_object", "_lone_surrogate", "_non_string_pattern")
VARIANT_CHECK = "_not_a_json_string"


def best(run: Callable[[], Any], repeat: int) -> float:
    seconds = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - started)
    return min(seconds)


def into_noop(frame: DataFrame) -> Callable[[], None]:
    return lambda: frame.write.format("noop").mode("overwrite").save()


@contextmanager
def without(names: tuple[str, ...]) -> Iterator[None]:
    """`jobs.bronze.parse`'s functions `names` return a constant false inside the block."""
    from pyspark.sql import functions as F

    from jobs.bronze import parse

    saved = {name: getattr(parse, name) for name in names}
    for name in names:
        setattr(parse, name, lambda *args, **kwargs: F.lit(False))
    try:
        yield
    finally:
        for name, function in saved.items():
            setattr(parse, name, function)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    from pyspark.sql import functions as F

    from core.config import RunoffConfig
    from delta_tables.catalog import Catalog
    from jobs.bronze.long_lines import READER_OPTIONS, lines_read
    from jobs.bronze.parse import count_lines, good_rows, kept, parse_lines
    from jobs.spark import get_spark
    from jobs.streaming.dataset import load_dataset

    work = Path(tempfile.mkdtemp(prefix="runoff-profile-bronze-"))
    landing = work / "landing"
    generate(landing, events=args.rows, files=args.files)
    config = RunoffConfig.from_sources(home=work / "home", spark_master="local[2]", env={})
    spark = get_spark("runoff-profile-bronze", config)
    dataset = load_dataset(Catalog.load(config), "events")

    def lines() -> DataFrame:
        reader = spark.read.format("text").option("recursiveFileLookup", "true")
        text = reader.option("lineSep", "\n").options(**READER_OPTIONS).load(str(landing))
        return lines_read(
            text.select(
                F.col("value"),
                F.col("_metadata.file_path").alias("_source_file"),
                F.col("_metadata.file_block_start").alias("_block_start"),
            )
        )

    print(f"{args.rows:,} events lines in {args.files} files; load before {load_average()}")
    into_noop(parse_lines(lines(), dataset))()  # the warm-up
    schema = dataset.record_schema
    assert schema is not None  # events is a JSON dataset
    stages: list[tuple[str, Callable[[], Any]]] = [
        ("text read", into_noop(lines())),
        ("from_json alone", into_noop(lines().select(F.from_json("value", schema)))),
        ("parse_lines", into_noop(parse_lines(lines(), dataset))),
    ]
    for label, seconds in stages:
        print(f"{label:45s} {best(seconds, args.repeat):6.2f} s", flush=True)
    for names in (LINE_CHECKS, (VARIANT_CHECK,)):
        with without(names):
            frame = parse_lines(lines(), dataset)
        label = f"parse_lines without {', '.join(names)}"
        print(f"{label:45s} {best(into_noop(frame), args.repeat):6.2f} s", flush=True)
    for _ in range(args.repeat):
        cached = kept(parse_lines(lines(), dataset))
        built = best(lambda: count_lines(cached), 1)  # noqa: B023 - called at once
        again = best(lambda: count_lines(cached), 1)  # noqa: B023
        rows = good_rows(cached, dataset, 0, datetime.now(UTC))
        good = best(into_noop(rows), 1)
        print(f"{'kept + count_lines (builds the cache)':45s} {built:6.2f} s")
        print(f"{'count_lines again (from the cache)':45s} {again:6.2f} s")
        print(f"{'good_rows from the cache':45s} {good:6.2f} s", flush=True)
        cached.unpersist(blocking=True)
    print(f"load after {load_average()}")
    spark.stop()


if __name__ == "__main__":
    main()
