"""The bronze quality gate at scale: one landing file of N rows, validated with 1 GB of driver.

`runoff bronze <dataset>` checks every micro-batch with Great Expectations on Spark before its
commit (quality/gate.py); the run's ledger record carries `details.gate_seconds` (time spent
validating over the run) and `details.expectations` (rows each expectation evaluated and failed).
Requirement: validating a 5,000,000-row increment with `spark.driver.memory=1g` succeeds; report
the validation time per million rows and its share of the run time for a 1-file increment.

In a scratch runoff home (`benchmarks/work/gate_scale`), each step one `runoff --home H bronze
events` process (a fresh interpreter and JVM, as an Airflow task runs it) with
`RUNOFF_SPARK_CONF=spark.driver.memory=1g` and `RUNOFF_SPARK_MASTER=local[2]`:
1. setup: one 1,000-row `events` file, ingested (creates the bronze and quarantine tables);
2. the large increment: ONE landing file of `rows` valid records (written here with plain
   Python in chunks: `{"time": <epoch s>, "action": "Open"|"Close"}` lines, one UTC day), then
   one bronze run;
3. `SMALL_REPETITIONS` small increments: one `SMALL_ROWS`-row file each, then one bronze run.
For every run: the ledger row (`delta_tables.ledger.read_runs`): status, `seconds`, rows, batches,
`gate_seconds`, each expectation's evaluated/failed counts; the process's wall time; the driver
JVM's `-Xmx` (read from its command line while it runs: proof that spark.driver.memory applied)
and its peak resident memory and peak heap use (`jstat -gc`, when available). After the large
run the bronze table (read with delta-rs) must hold exactly setup + `rows` rows whose `time`
sum matches the file's; every bronze expectation must have evaluated exactly `rows` rows.

Reported: validation seconds per million rows (large run), the gate's time against the run time
(ratio = share) for the large run and for the small increments (median), the large run's time and
the rows in bronze after it (target: == setup + rows). The machine's load averages (1/5/15 min)
are in `params` before and after every step.
Size: `--rows N` or `RUNOFF_BENCH_GATE_ROWS=N` (default `DEFAULT_ROWS`, small enough for
`make bench`). Writes `benchmarks/results/gate_scale.json`. Run:
`RUNOFF_BENCH_GATE_ROWS=5000000 uv run --frozen python -m benchmarks.bench_gate_scale` (about
5 minutes on 2 cores; the default size about 2 minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.result import (
    load_average,
    metric,
    runoff_command,
    runoff_environment,
    write_result,
)

DATASET = "events"
DEFAULT_ROWS = 5_000_000
ROWS_ENV = "RUNOFF_BENCH_GATE_ROWS"
SMALL_ROWS = 1_000
SMALL_REPETITIONS = 3
DRIVER_MEMORY = "1g"
SPARK_CONF = f"spark.driver.memory={DRIVER_MEMORY}"
SPARK_MASTER = "local[2]"
CHUNK_ROWS = 200_000
DAY = int(datetime(2024, 1, 1, tzinfo=UTC).timestamp())  # each file holds one UTC day
WORK = Path(__file__).resolve().parent / "work" / "gate_scale"
POLL_SECONDS = 1.0
SUBMIT_CLASS = "org.apache.spark.deploy.SparkSubmit"
LAUNCHER = "org.apache.spark.launcher.Main"  # spark-class: java -Xmx128m ... Main SparkSubmit ...


def land_file(landing: Path, rows: int, day: int, name: str) -> dict[str, Any]:
    """One landing file of `rows` valid events records on UTC day `day` (days after 2024-01-01),
    written under a hidden name and renamed (the file source skips hidden files); returns its
    path, rows, bytes and the sum of its `time` values (to check the table against)."""
    start = DAY + day * 86_400
    folder = landing / f"date={datetime.fromtimestamp(start, UTC).date().isoformat()}"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{name}.json"
    partial = folder / f".{name}.json.tmp"
    started = time.perf_counter()
    total = 0
    with partial.open("w", encoding="utf-8") as out:
        for first in range(0, rows, CHUNK_ROWS):
            lines = []
            for i in range(first, min(rows, first + CHUNK_ROWS)):
                when = start + i * 86_400 // rows
                total += when
                action = "Open" if i % 2 == 0 else "Close"
                lines.append(f'{{"time": {when}, "action": "{action}"}}\n')
            out.write("".join(lines))
    partial.replace(target)
    return {
        "path": str(target),
        "rows": rows,
        "bytes": target.stat().st_size,
        "time_sum": total,
        "seconds_to_write": round(time.perf_counter() - started, 2),
    }


class JvmWatch:
    """Polls the descendants of a process for the driver JVM (the `java ... SparkSubmit` that
    pyspark launches): its -Xmx, peak resident memory, and heap use over time (`jstat -gc`)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.java_pid: int | None = None
        self.xmx: str | None = None
        self.peak_rss_mb = 0.0
        self.heap: list[float] = []  # heap used (MB) per jstat sample
        self._jstat: subprocess.Popen[str] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> JvmWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        if self._jstat is not None:
            self._jstat.terminate()
            try:
                out, _ = self._jstat.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                self._jstat.kill()
                out, _ = self._jstat.communicate()
            self.heap = _heap_used_mb(out)

    def _run(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            if self.java_pid is None:
                self._find_java()
            if self.java_pid is not None:
                rss = _status_kb(self.java_pid, "VmHWM")
                if rss is not None:
                    self.peak_rss_mb = max(self.peak_rss_mb, rss / 1024)

    def _find_java(self) -> None:
        for pid in _descendants(self.pid):
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            args = [a.decode(errors="replace") for a in argv if a]
            # the driver, not spark-class's short-lived launcher JVM (-Xmx128m ...launcher.Main)
            if (
                args
                and Path(args[0]).name == "java"
                and SUBMIT_CLASS in args
                and LAUNCHER not in args
            ):
                self.java_pid = pid
                self.xmx = next((a[4:] for a in args if a.startswith("-Xmx")), "none")
                if shutil.which("jstat"):
                    self._jstat = subprocess.Popen(
                        ["jstat", "-gc", str(pid), "1000"],
                        stdout=subprocess.PIPE,
                        stderr=subprocess.DEVNULL,
                        text=True,
                    )
                return

    def summary(self) -> dict[str, Any]:
        return {
            "driver_jvm_xmx": self.xmx,
            "driver_jvm_peak_rss_mb": round(self.peak_rss_mb, 1),
            "driver_heap_peak_used_mb": round(max(self.heap), 1) if self.heap else None,
            "heap_samples": len(self.heap),
        }


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _status_kb(pid: int, key: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{key}:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _heap_used_mb(jstat_output: str) -> list[float]:
    """Heap used (survivors + eden + old, MB) per `jstat -gc` line."""
    lines = [line.split() for line in jstat_output.splitlines() if line.strip()]
    if not lines:
        return []
    header, used = lines[0], []
    columns = [c for c in ("S0U", "S1U", "EU", "OU") if c in header]
    for row in lines[1:]:
        if len(row) != len(header) or row == header:
            continue
        try:
            used.append(sum(float(row[header.index(c)]) for c in columns) / 1024)
        except ValueError:
            continue
    return used


def bronze(home: Path, label: str, log: Path) -> dict[str, Any]:
    """One `runoff bronze events` process: wall time, exit status, JVM memory, load around it;
    its output goes to `log`. Raises with the output's tail when it fails."""
    before = load_average()
    command = [*runoff_command(), "--home", str(home), "bronze", DATASET]
    started = time.perf_counter()
    with log.open("w", encoding="utf-8") as out:
        process = subprocess.Popen(
            command,
            cwd=WORK,
            env=runoff_environment(SPARK_MASTER, SPARK_CONF),
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
        with JvmWatch(process.pid) as watch:
            returncode = process.wait()
    wall = time.perf_counter() - started
    output = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    if returncode != 0:
        tail = "\n".join(output[-40:])
        raise RuntimeError(
            f"{label}: `{' '.join(command)}` exited with {returncode} after {wall:.1f} s "
            f"(driver JVM {watch.summary()}; full output in {log}):\n{tail}"
        )
    step = {
        "wall_seconds": round(wall, 3),
        "output": output[-1] if output else "",
        **watch.summary(),
        "load_before": before,
        "load_after": load_average(),
    }
    print(f"{label}: {wall:.1f} s  {step['output']}  (Xmx {watch.xmx})", flush=True)
    return step


def last_run(home: Path, seen: int) -> dict[str, Any]:
    """The ledger row the run just added (there must be exactly one more than `seen`)."""
    from core.config import RunoffConfig
    from delta_tables.ledger import read_runs

    config = RunoffConfig.from_sources(home=home, env={})
    runs = [r for r in read_runs(config.runs_path, DATASET) if r["layer"] == "bronze"]
    if len(runs) != seen + 1:
        raise RuntimeError(f"expected {seen + 1} bronze runs in the ledger, found {len(runs)}")
    row = runs[-1]
    details = json.loads(row["details"] or "{}")
    expectations = details.get("expectations", {})
    gate_seconds = float(details.get("gate_seconds", 0.0))
    return {
        "status": row["status"],
        "error": row["error"],
        "seconds": round(float(row["seconds"]), 3),
        "started_at": row["started_at"].isoformat(),
        "ended_at": row["ended_at"].isoformat() if row["ended_at"] else None,
        "batches": row["batches"],
        "files": row["files"],
        "rows": row["rows"],
        "quarantined": row["quarantined"],
        "gate_seconds": gate_seconds,
        "gate_share": round(gate_seconds / float(row["seconds"]), 4),
        "expectations": expectations,
    }


def check_run(run: dict[str, Any], rows: int, label: str) -> None:
    """The run succeeded, wrote `rows` rows from one file, and every bronze batch expectation
    evaluated them all and found nothing."""
    problems = []
    if run["status"] != "success":
        problems.append(f"status {run['status']} ({run['error']})")
    if (run["files"], run["rows"], run["quarantined"]) != (1, rows, 0):
        problems.append(
            f"files/rows/quarantined {run['files']}/{run['rows']}/{run['quarantined']}, "
            f"expected 1/{rows}/0"
        )
    bronze_checks = {
        k: v for k, v in run["expectations"].items() if v["severity"] in ("critical", "warning")
    }
    if not bronze_checks:
        problems.append("no batch expectation was checked (details.expectations is empty)")
    for name, entry in bronze_checks.items():
        if (entry["evaluated"], entry["failed"]) != (rows, 0):
            problems.append(
                f"{name}: evaluated {entry['evaluated']}, failed {entry['failed']}; "
                f"expected {rows}, 0"
            )
    if problems:
        raise RuntimeError(f"{label}: " + "; ".join(problems))


def bronze_table(home: Path) -> dict[str, int]:
    """Rows, `time` sum and version of the bronze table, read with delta-rs."""
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    from core.config import RunoffConfig
    from delta_tables.arrow import read_arrow

    table = DeltaTable(str(RunoffConfig.from_sources(home=home, env={}).bronze_path(DATASET)))
    times = read_arrow(table, ["time"]).column("time")
    return {
        "rows": len(times),
        "time_sum": int(pc.sum(times).as_py() or 0),
        "version": table.version(),
    }


def rows_from(argv: Sequence[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_gate_scale")
    parser.add_argument(
        "--rows",
        type=int,
        default=None,
        help=f"rows of the large increment (else ${ROWS_ENV}, else {DEFAULT_ROWS:,})",
    )
    args = parser.parse_args(argv)
    raw = args.rows if args.rows is not None else os.environ.get(ROWS_ENV) or DEFAULT_ROWS
    rows = int(str(raw).replace("_", ""))
    if rows < 1:
        raise SystemExit(f"--rows must be at least 1, got {rows}")
    return rows


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    rows = rows_from(argv or [])
    load_before = load_average()
    started_all = time.perf_counter()
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    home = WORK / "home"
    landing = home / "landing" / DATASET  # events.yaml: source.path landing/events

    runs: dict[str, Any] = {}
    landed: dict[str, Any] = {}
    steps: dict[str, Any] = {}

    def step(label: str, file_rows: int, day: int) -> dict[str, Any]:
        landed[label] = land_file(landing, file_rows, day, f"part-{label}")
        steps[label] = bronze(home, label, WORK / f"{label}.log")
        runs[label] = last_run(home, len(runs))
        check_run(runs[label], file_rows, label)
        print(
            f"{label}: run {runs[label]['seconds']:.2f} s, gate {runs[label]['gate_seconds']:.2f} s"
            f" ({100 * runs[label]['gate_share']:.1f} %), {runs[label]['rows']} rows, "
            f"{runs[label]['batches']} batches",
            flush=True,
        )
        return runs[label]

    step("setup", SMALL_ROWS, 0)
    large = step("large", rows, 1)
    table_after_large = bronze_table(home)
    expected = {
        "rows": SMALL_ROWS + rows,
        "time_sum": landed["setup"]["time_sum"] + landed["large"]["time_sum"],
    }
    if {k: table_after_large[k] for k in expected} != expected:
        raise RuntimeError(f"bronze after the large run: {table_after_large}, expected {expected}")
    small = [step(f"small_{i + 1}", SMALL_ROWS, 2 + i) for i in range(SMALL_REPETITIONS)]
    total_seconds = time.perf_counter() - started_all
    load_after = load_average()

    per_million = large["gate_seconds"] / (rows / 1_000_000)
    small_gate = statistics.median(r["gate_seconds"] for r in small)
    small_run = statistics.median(r["seconds"] for r in small)
    small_share = statistics.median(r["gate_share"] for r in small)
    rerun = f"{ROWS_ENV}={rows} uv run --frozen python -m benchmarks.bench_gate_scale"
    if rows == DEFAULT_ROWS:
        rerun = "uv run --frozen python -m benchmarks.bench_gate_scale"
    return write_result(
        "gate_scale",
        f"Bronze quality gate (GX on Spark, every micro-batch) with spark.driver.memory="
        f"{DRIVER_MEMORY}: validation time of a 1-file increment of {rows:,} events rows, and "
        f"the gate's share of the run time (`runoff bronze events`, one process per run) for it "
        f"and for {SMALL_ROWS:,}-row 1-file increments (median of {SMALL_REPETITIONS}). Load "
        "averages in params.",
        [
            metric("validation time per million rows", round(per_million, 3), unit="s"),
            metric(
                f"gate time, {rows:,}-row 1-file increment",
                round(large["gate_seconds"], 3),
                unit="s",
                baseline=large["seconds"],
                baseline_label="bronze run time (ratio = share)",
            ),
            metric(
                f"gate time, {SMALL_ROWS:,}-row 1-file increment",
                round(small_gate, 3),
                unit="s",
                baseline=round(small_run, 3),
                baseline_label="bronze run time (ratio = share)",
            ),
            metric(
                f"bronze rows after the {rows:,}-row run (driver {DRIVER_MEMORY})",
                table_after_large["rows"],
                unit="rows",
                target=f"== {SMALL_ROWS + rows}",
            ),
        ],
        rerun=rerun,
        params={
            "dataset": DATASET,
            "rows": rows,
            "small_rows": SMALL_ROWS,
            "small_repetitions": SMALL_REPETITIONS,
            "statistic": "median (small increments); one run (large)",
            "spark_master": SPARK_MASTER,
            "spark_conf": SPARK_CONF,
            "command": f"RUNOFF_SPARK_CONF={SPARK_CONF} RUNOFF_SPARK_MASTER={SPARK_MASTER} "
            + " ".join(runoff_command())
            + f" --home H bronze {DATASET}",
            "large_file_bytes": landed["large"]["bytes"],
            "large_run_seconds": large["seconds"],
            "large_gate_seconds": large["gate_seconds"],
            "large_gate_share": large["gate_share"],
            "small_run_seconds_median": round(small_run, 3),
            "small_gate_seconds_median": round(small_gate, 3),
            "small_gate_share_median": round(small_share, 4),
            "bronze_after_large": table_after_large,
            "runs": runs,
            "processes": steps,
            "landed": landed,
            "total_seconds": round(total_seconds, 1),
            "load_average_before": load_before,
            "load_average_after": load_after,
        },
    )


if __name__ == "__main__":
    main(sys.argv[1:])
