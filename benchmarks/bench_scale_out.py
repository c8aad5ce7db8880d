"""Bronze ingest of the same 1,000,000 events on three setups: local files, S3, a Spark cluster.

Input: `FILES` x `ROWS_PER_FILE` `events` records (`jobs.samples.generate`, seed `SEED`, no
malformed lines), generated once into `benchmarks/work/scale_out/source`. Each run is a fresh
runoff home in which the real CLI ingests them, `python -m jobs.cli bronze events` as its own
process (`RUNOFF_HOME`, `RUNOFF_SPARK_MASTER`), on one of three setups:
- `local`: the files in the home's landing folder, `local[2]` (the baseline);
- `s3`: the same files uploaded (not timed) to moto's S3 server on loopback
  (tests/s3_server.py), `RUNOFF_DATA=s3a://<bucket>/runoff` and the server's `AWS_*` variables,
  so landing files, archive, table and checkpoint are on S3; `local[2]`;
- `cluster`: local files, a Spark standalone master and one worker (2 cores, 2g) on loopback
  (tests/spark_cluster.py); the driver runs in the CLI process (client mode), its one executor on
  the worker.
Each server (S3, cluster) is started for its run only and stopped after it, by its process
group. The setups run one after the other in rounds (interleaved; each round starts with the
next setup, so no setup always runs first): at least one, at most `MAX_REPETITIONS`, another
only while the elapsed time plus the last round's stays within `BUDGET_SECONDS`. After each
run, the bronze table must hold exactly the generated records (counted with delta-rs), else the
benchmark fails.

Reported, medians, S3 vs local and cluster vs local[2], no targets:
- the bronze run's seconds from the run ledger (`delta_tables.ledger.read_runs`): lock to ledger
  row, which includes the SparkSession start (the CLI builds it inside the run; on the cluster
  also the executor's launch), not the interpreter's start and imports;
- the micro-batches' seconds (the CLI's `bronze events batch N: ..., S s` lines): the ingest
  itself, without the SparkSession start or the query's start;
- the process wall time, spawn to exit.
`params` has every run and the machine's load averages (1/5/15 min) before and after each.
Writes `benchmarks/results/scale_out.json`. Run:
`uv run --frozen python -m benchmarks.bench_scale_out` (about 5-10 minutes on 2 cores).
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.result import load_average, metric, runoff_environment, write_result

if TYPE_CHECKING:
    from tests.s3_server import S3Server

DATASET = "events"
FILES = 20
ROWS_PER_FILE = 50_000
EVENTS = FILES * ROWS_PER_FILE
SEED = 1
# Rounds (each: local, s3, cluster): at least 1, at most MAX_REPETITIONS, and another only while
# the elapsed time plus the last round's stays within BUDGET_SECONDS (the load decides).
MAX_REPETITIONS = 3
BUDGET_SECONDS = 600.0
SPARK_MASTER = "local[2]"
SETUPS = ("local", "s3", "cluster")
LABELS = {
    "local": "local files, local[2]",
    "s3": "S3 (moto's server on loopback), local[2]",
    "cluster": "local files, standalone cluster (1 worker, 2 cores)",
}
# The driver listens on loopback, where the worker's executor reaches it
# (tests/e2e/test_spark_cluster.py).
CLUSTER_CONF = "spark.driver.host=127.0.0.1,spark.driver.bindAddress=127.0.0.1"
RUN_TIMEOUT = 1800
REPO_ROOT = Path(__file__).resolve().parents[1]
WORK = Path(__file__).resolve().parent / "work" / "scale_out"
KINDS = {
    "ledger": "bronze run (ledger seconds)",
    "batch": "bronze micro-batches",
    "wall": "bronze process wall time",
}
COMMAND = [sys.executable, "-m", "jobs.cli", "bronze", DATASET]
# The CLI's line per micro-batch (jobs.streaming.query.batch_line): `bronze events batch 0:
# 20 files, 1000000 rows in, 1000000 written, 0 quarantined, 12.3 s`.
BATCH_LINE = re.compile(rf"^bronze {DATASET} batch \d+: .*, (\d+(?:\.\d+)?) s$")


def base_environment(spark_master: str, spark_conf: str | None = None) -> dict[str, str]:
    """`runoff_environment` without Spark, Airflow or AWS settings of this process."""
    env = {
        k: v
        for k, v in runoff_environment(spark_master, spark_conf).items()
        if not k.startswith(("AIRFLOW", "PYSPARK_GATEWAY", "SPARK_", "AWS_"))
    }
    env["PYTHONPATH"] = str(REPO_ROOT)
    return env


@contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """`values` in os.environ (delta-rs in this process reads the AWS variables)."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def source_files(source: Path) -> list[Path]:
    return sorted(p for p in source.rglob("*") if p.is_file())


def land(source: Path, landing: Path) -> None:
    """Copy every generated file below the local `landing` folder, keeping its `date=.../`."""
    for path in source_files(source):
        target = landing / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)


def upload(source: Path, s3: S3Server, landing: str) -> None:
    """Put every generated file below the `s3a://<bucket>/<key>` landing URI, keeping its
    `date=.../` folder; boto3 with the server's endpoint and credentials (s3fs would reuse a
    cached client of an earlier round's server)."""
    import boto3

    bucket, _, prefix = landing.removeprefix("s3a://").partition("/")
    client = boto3.client(
        "s3",
        endpoint_url=s3.endpoint,
        region_name=s3.env["AWS_REGION"],
        aws_access_key_id=s3.env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=s3.env["AWS_SECRET_ACCESS_KEY"],
    )
    for path in source_files(source):
        key = f"{prefix}/{path.relative_to(source).as_posix()}"
        client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())


def log_tail(home: Path, lines: int = 40) -> str:
    log = home / "logs" / "runoff.log"
    if not log.is_file():
        return f"(no {log})"
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def run_bronze(setup: str, rep: int, source: Path) -> dict[str, Any]:
    """One fresh home, its landing files, `runoff bronze events` timed; the ledger's seconds and
    the bronze table's row count, which must equal the generated records."""
    from core.config import RunoffConfig
    from delta_tables.arrow import count_rows
    from delta_tables.ledger import read_runs

    root = WORK / f"{setup}-{rep}"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    home = root / "home"
    with ExitStack() as stack:
        aws: dict[str, str] = {}
        if setup == "s3":
            from tests.s3_server import s3_server

            s3 = stack.enter_context(s3_server(root / "s3.log"))
            aws = s3.env
            env = {**base_environment(SPARK_MASTER), **aws, "RUNOFF_DATA": s3.uri("runoff")}
        elif setup == "cluster":
            from tests.spark_cluster import spark_cluster

            cluster = stack.enter_context(spark_cluster(root / "spark"))
            env = base_environment(cluster.master_url, CLUSTER_CONF)
            scratch = root / "driver-scratch"
            scratch.mkdir()
            env["SPARK_LOCAL_DIRS"] = str(scratch)
        else:
            env = base_environment(SPARK_MASTER)
        env["RUNOFF_HOME"] = str(home)
        stack.enter_context(environment(aws))  # delta-rs reads the bronze table with them
        config = RunoffConfig.from_sources(env=env)
        landing = config.landing_dir(DATASET)  # the seed spec's source.path: landing/events
        if setup == "s3":
            upload(source, s3, str(landing))
        else:
            land(source, Path(str(landing)))

        before = load_average()
        started = time.perf_counter()
        done = subprocess.run(
            COMMAND,
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            check=False,
        )
        wall = time.perf_counter() - started
        after = load_average()
        if done.returncode != 0:
            output = "\n".join((done.stdout + done.stderr).strip().splitlines()[-20:])
            raise RuntimeError(
                f"{setup} run {rep}: runoff bronze {DATASET} exited {done.returncode}:\n{output}\n"
                f"--- {home}/logs/runoff.log:\n{log_tail(home)}"
            )
        batch_seconds = [
            float(m.group(1)) for m in map(BATCH_LINE.match, done.stdout.splitlines()) if m
        ]
        if not batch_seconds:
            raise RuntimeError(f"{setup} run {rep}: no batch line in the output:\n{done.stdout}")
        runs = [r for r in read_runs(config.runs_path, DATASET) if r["layer"] == "bronze"]
        if len(runs) != 1 or runs[0]["status"] != "success":
            raise RuntimeError(f"{setup} run {rep}: expected one successful bronze run, got {runs}")
        rows = count_rows(str(config.bronze_path(DATASET)))
        if rows != EVENTS:
            raise RuntimeError(
                f"{setup} run {rep}: bronze holds {rows} rows, expected {EVENTS} (generated)"
            )
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    step = {
        "ledger_seconds": round(float(runs[0]["seconds"]), 3),
        "batch_seconds": round(sum(batch_seconds), 3),
        "wall_seconds": round(wall, 3),
        "bronze_rows": rows,
        "ledger_rows": runs[0]["rows"],
        "batches": runs[0]["batches"],
        "output": lines[-1] if lines else "",
        "load_before": before,
        "load_after": after,
    }
    print(
        f"{setup:>8} run {rep}: ledger {step['ledger_seconds']:.2f} s, batches "
        f"{step['batch_seconds']:.1f} s, wall {wall:.2f} s, "
        f"{rows} rows, load {before} -> {after}",
        flush=True,
    )
    shutil.rmtree(root, ignore_errors=True)
    return step


def median(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def main() -> dict[str, Any]:
    from jobs.samples import generate

    load_start = load_average()
    started_all = time.perf_counter()
    shutil.rmtree(WORK, ignore_errors=True)
    source = WORK / "source"
    generated = generate(DATASET, source, files=FILES, rows_per_file=ROWS_PER_FILE, seed=SEED)
    records = sum(f.records for f in generated)
    if records != EVENTS or any(f.malformed or f.blank for f in generated):
        raise RuntimeError(f"generated {records} records (and malformed lines), want {EVENTS}")
    landed_bytes = sum(p.stat().st_size for p in source_files(source))

    runs: dict[str, list[dict[str, Any]]] = {setup: [] for setup in SETUPS}
    rounds_s: list[float] = []
    orders: list[list[str]] = []
    while len(rounds_s) < MAX_REPETITIONS and (
        not rounds_s or time.perf_counter() - started_all + rounds_s[-1] <= BUDGET_SECONDS
    ):
        round_started = time.perf_counter()
        rep = len(rounds_s)
        order = SETUPS[rep % len(SETUPS) :] + SETUPS[: rep % len(SETUPS)]
        orders.append(list(order))
        for setup in order:
            runs[setup].append(run_bronze(setup, rep, source))
        rounds_s.append(time.perf_counter() - round_started)
    repetitions = len(rounds_s)
    total_seconds = time.perf_counter() - started_all
    load_end = load_average()
    shutil.rmtree(WORK, ignore_errors=True)

    medians = {
        kind: {setup: median([r[f"{kind}_seconds"] for r in runs[setup]]) for setup in SETUPS}
        for kind in KINDS
    }
    metrics = []
    for kind, what in KINDS.items():
        for setup in ("s3", "cluster"):
            metrics.append(
                metric(
                    f"{what}, {LABELS[setup]}",
                    medians[kind][setup],
                    unit="s",
                    baseline=medians[kind]["local"],
                    baseline_label=LABELS["local"],
                )
            )
    for kind in KINDS:
        print(
            f"{kind}: "
            + ", ".join(f"{setup} {medians[kind][setup]:.2f} s" for setup in SETUPS)
            + f"; s3/local {medians[kind]['s3'] / medians[kind]['local']:.2f}, "
            f"cluster/local {medians[kind]['cluster'] / medians[kind]['local']:.2f}",
            flush=True,
        )
    return write_result(
        "scale_out",
        f"Bronze ingest of the same {EVENTS:,} `{DATASET}` records by `runoff bronze` (its own "
        "process, a fresh home each run) with the data on S3 (moto's server on loopback) and on "
        "a 1-worker Spark standalone cluster, against local files with local[2]. "
        + (
            f"Medians of {repetitions} interleaved runs per setup"
            if repetitions > 1
            else f"One run per setup (a second round would have passed {BUDGET_SECONDS:.0f} s)"
        )
        + "; every run's load averages in params.",
        metrics,
        params={
            "dataset": DATASET,
            "events": EVENTS,
            "files": FILES,
            "rows_per_file": ROWS_PER_FILE,
            "seed": SEED,
            "landed_bytes": landed_bytes,
            "repetitions": repetitions,
            "repetition_rule": f"rounds of the three setups: at least 1, at most "
            f"{MAX_REPETITIONS}, another only while elapsed + last round <= {BUDGET_SECONDS:.0f} s",
            "round_seconds": [round(v, 1) for v in rounds_s],
            "statistic": "median",
            "order": "round r starts with setup r mod 3 (local, s3, cluster), so no setup "
            "always runs first",
            "orders": orders,
            "setups": LABELS,
            "command": f"python -m jobs.cli bronze {DATASET}",
            "spark_master": SPARK_MASTER,
            "cluster_spark_conf": CLUSTER_CONF,
            "timed": "ledger: the bronze run's seconds in the run ledger (includes the "
            "SparkSession start, excludes the interpreter's start and imports); batch: the sum "
            "of the micro-batches' seconds printed by the CLI; wall: process spawn to exit. Not "
            "timed: generating, copying or uploading the files, starting the S3 server or the "
            "cluster",
            "memory": "local[2]: one driver JVM, Spark's default 1g; cluster: the driver (1g) "
            "and one executor (Spark's default 1g) on a 2-core, 2g worker",
            "median_seconds": medians,
            # Setups of one round run minutes apart, but closer in time than across rounds.
            "ratio_per_round": {
                kind: {
                    setup: [
                        round(r[f"{kind}_seconds"] / b[f"{kind}_seconds"], 3)
                        for r, b in zip(runs[setup], runs["local"], strict=True)
                    ]
                    for setup in ("s3", "cluster")
                }
                for kind in KINDS
            },
            "runs": runs,
            "total_seconds": round(total_seconds, 1),
            "load_before": load_start,
            "load_after": load_end,
        },
    )


if __name__ == "__main__":
    main()
