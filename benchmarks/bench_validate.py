"""Validation cost follows the rows a run added, not the size of the table.

Builds an `events` bronze table with delta-rs (`write_deltalake`, one version per simulated run
of `ROWS_PER_VERSION` rows) in a temporary runoff home and times `validate_dataset`:
- on a small table (`SMALL_VERSIONS` versions): the first (whole-table) validation, then a
  one-file increment;
- after growing it to `LARGE_VERSIONS` versions: a one-file increment, then `--full`.
Writes `benchmarks/results/validate.json` and `validate.md`. Run:
`uv run --frozen python -m benchmarks.bench_validate` (about 1-3 minutes on 2 cores).
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from benchmarks.result import metric, results_dir, write_result

ROWS_PER_VERSION = 10_000
SMALL_VERSIONS = 15
LARGE_VERSIONS = 150
INCREMENT_REPEATS = 5
START = 1_709_251_200  # 2024-03-01T00:00:00Z


def bronze_batch(version: int, rows: int = ROWS_PER_VERSION) -> pa.Table:
    """`rows` bronze events one second apart, Open/Close alternating, continuing `version`."""
    first = START + version * rows
    seconds = np.arange(first, first + rows, dtype=np.int64)
    event_time = pa.array(seconds * 1_000_000, pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    return pa.table(
        {
            "time": pa.array(seconds),
            "action": pa.array(np.where(seconds % 2 == 0, "Open", "Close")),
            "event_time": event_time,
            "event_date": event_time.cast(pa.date32()),
            "_source_file": pa.array([f"landing/events/part-{version:05d}.json"] * rows),
            "_ingested_at": pa.array(
                [datetime(2024, 3, 1, tzinfo=UTC)] * rows, pa.timestamp("us", tz="UTC")
            ),
            "_batch_id": pa.array(np.full(rows, version, dtype=np.int64)),
        }
    )


def write_versions(path: Path, first: int, count: int) -> float:
    from deltalake import write_deltalake

    started = time.perf_counter()
    for version in range(first, first + count):
        write_deltalake(
            str(path), bronze_batch(version), mode="append", partition_by=["event_date"]
        )
    return time.perf_counter() - started


def timed_validation(config: Any, full: bool = False) -> dict[str, Any]:
    from quality.runner import validate_dataset

    started = time.perf_counter()
    report = validate_dataset(config, "events", layers=("bronze",), full=full)
    seconds = time.perf_counter() - started
    bronze = next(t for t in report.tables if t.table == "bronze_events")
    assert report.passed, report.failure_message()
    return {"seconds": round(seconds, 3), "rows": bronze.rows, "versions": bronze.versions}


def main() -> dict[str, Any]:
    from jobs.config import RunoffConfig

    started = time.perf_counter()
    import quality.suites  # noqa: F401 - importing Great Expectations is not what is measured

    import_seconds = time.perf_counter() - started

    with tempfile.TemporaryDirectory(prefix="bench-validate-") as tmp:
        config = RunoffConfig.from_sources(home=tmp, env={})
        path = config.bronze_path("events")
        path.parent.mkdir(parents=True, exist_ok=True)

        write_small = write_versions(path, 0, SMALL_VERSIONS)
        first_small = timed_validation(config)  # no history yet: the whole table (+ GX project)
        increments_small = []
        version = SMALL_VERSIONS
        for _ in range(INCREMENT_REPEATS):
            write_versions(path, version, 1)
            version += 1
            increments_small.append(timed_validation(config))

        grow = LARGE_VERSIONS - version
        write_large = write_versions(path, version, grow)
        version += grow
        catch_up = timed_validation(config)  # an increment of `grow` versions
        increments_large = []
        for _ in range(INCREMENT_REPEATS):
            write_versions(path, version, 1)
            version += 1
            increments_large.append(timed_validation(config))
        full_large = timed_validation(config, full=True)

    def median(runs: list[dict[str, Any]]) -> float:
        return round(statistics.median(r["seconds"] for r in runs), 3)

    small_inc = median(increments_small)
    large_inc = median(increments_large)
    details: dict[str, Any] = {
        "rows_per_version": ROWS_PER_VERSION,
        "import_seconds": round(import_seconds, 3),
        # Other work on the machine inflates every number alike; this says how busy it was.
        "load_average_1m_end": round(os.getloadavg()[0], 2),
        "small_table": {
            "versions": SMALL_VERSIONS + INCREMENT_REPEATS,
            "write_seconds": round(write_small, 3),
            "first_validation": first_small,
            "increments": increments_small,
            "increment_median_seconds": small_inc,
        },
        "large_table": {
            "versions": version,
            "rows": version * ROWS_PER_VERSION,
            "write_seconds": round(write_large, 3),
            "catch_up_increment": catch_up,
            "increments": increments_large,
            "increment_median_seconds": large_inc,
            "full": full_large,
        },
        "repetitions": INCREMENT_REPEATS,
    }
    document = write_result(
        "validate",
        "Validation of a 1-file increment vs the whole table (events bronze, delta-rs + GX).",
        [
            metric(
                f"1-file increment on a {version}-version table",
                large_inc,
                unit="s",
                baseline=small_inc,
                baseline_label=f"same on a {SMALL_VERSIONS + INCREMENT_REPEATS}-version table",
                target="<= 1.20",
            ),
            metric(
                f"--full on the {version}-version table",
                full_large["seconds"],
                unit="s",
                baseline=large_inc,
                baseline_label="1-file increment, same table",
            ),
        ],
        params=details,
    )
    (results_dir() / "validate.md").write_text(markdown(document))
    return document


def markdown(document: dict[str, Any]) -> str:
    result = document["params"]
    small, large = result["small_table"], result["large_table"]

    def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
        return sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]

    rows = [
        ("first validation: whole table (creates the GX project)", small["first_validation"]),
        (f"1-file increment, {small['versions']}-version table", median_run(small["increments"])),
        (f"catch-up increment to {large['versions']} versions", large["catch_up_increment"]),
        (f"1-file increment, {large['versions']}-version table", median_run(large["increments"])),
        (f"--full, {large['versions']}-version table", large["full"]),
    ]
    lines = [
        "# validate: increment vs whole table",
        "",
        f"events bronze, {result['rows_per_version']:,} rows per version (one file each), "
        f"{document['machine']['cpus']} CPUs, measured {document['measured_at']}; "
        "seconds of `validate_dataset(layers=('bronze',))` after imports "
        f"(increments: the median of {INCREMENT_REPEATS} runs).",
        "",
        "| step | versions validated | rows read | seconds |",
        "|---|---|---:|---:|",
        *(f"| {step} | {r['versions']} | {r['rows']:,} | {r['seconds']} |" for step, r in rows),
        "",
        f"Increment medians: {small['increment_median_seconds']} s on the small table, "
        f"{large['increment_median_seconds']} s on the large one "
        f"({document['metrics'][0]['ratio']}x); --full takes "
        f"{document['metrics'][1]['ratio']}x the increment on the large table.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
