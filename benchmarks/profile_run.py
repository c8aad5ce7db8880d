"""Where an hourly `runoff run` spends its time: one warm driver, `events`, one file per run.

Not part of `make bench` (it measures stages, not a ratio): run it to see what a change did to
each stage, on this checkout and on another side by side.

    uv run --frozen python -m benchmarks.profile_run [--runs 3] [--rows 2000] [--jfr FILE]

A SparkSession is started once (its start is not counted); each run lands one generated file
of `--rows` records and calls the CLI in-process (`runoff run events`: bronze, silver, validate).
For every run after the first (the first warms the JVM) it prints the run's seconds and Spark
jobs, then per stage the calls, Spark jobs and seconds: bronze's batch function, silver's
`merge_batch` and, inside it, the window range (`batch_profile`), the quality gate
(`Gate.check`, bronze's and silver's) and the MERGE. Spark jobs are counted from the driver's
status store, whatever thread runs them (foreachBatch functions run on Spark's threads).

With `--jfr FILE` the driver JVM also records a Java Flight Recording (the JDK's `jcmd`, settings
`profile`) over the runs after the first, dumps it to FILE and prints where its CPU samples are:
the share of samples whose stack holds each of `JVM_PARTS` (a sample can count in several), and
the operators that generated Java code in tasks. Needs the JDK's `jcmd` and `jfr`.
"""

from __future__ import annotations

import argparse
import functools
import os
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# (part, a frame name that marks it) for the JFR summary
JVM_PARTS: list[tuple[str, str]] = [
    ("tasks (executor threads)", "Executor$TaskRunner.run"),
    ("generating Java source (codegen)", "expressions.codegen."),
    ("compiling it (Janino)", "org.codehaus.janino"),
    ("Delta", "org.apache.spark.sql.delta."),
    ("query analysis", "analysis.Analyzer"),
    ("rule executors (analysis, optimization)", "rules.RuleExecutor.execute"),
    ("streaming micro-batch planning", "MicroBatchExecution"),
    ("py4j calls from Python", "py4j."),
    ("task (de)serialization", "JavaSerializerInstance"),
    ("class loading", "java.lang.ClassLoader.loadClass"),
]
# frames of the code generator itself, skipped when naming who asked for code
GENERATOR_WORDS = ("codegen", "projection", "lambda", "adapted", "evaluator")

STAGES: list[tuple[str, str, str]] = [
    ("bronze batch", "jobs.bronze.job", "BronzeBatch.__call__"),
    ("silver merge_batch", "jobs.silver", "merge_batch"),
    ("  window range", "jobs.silver", "batch_profile"),
    ("  quality gate", "quality.gate", "Gate.check"),
    ("  MERGE", "jobs.silver", "merge"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--jfr", type=Path, help="record the driver JVM (JFR) into this file")
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="runoff-profile-"))
    os.environ["RUNOFF_HOME"] = str(home)
    import importlib

    from core.config import RunoffConfig
    from jobs.cli import main as cli
    from jobs.spark import get_spark

    spark = get_spark("runoff-profile", RunoffConfig.from_sources(home=home))
    store = spark.sparkContext._jsc.sc().statusStore()  # type: ignore[union-attr]

    def jobs() -> int:
        return int(store.jobsList(None).size())

    totals: dict[str, list[float]] = {}
    lock = threading.Lock()

    def timed(label: str, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def wrapper(*a: Any, **k: Any) -> Any:
            started_jobs, started = jobs(), time.perf_counter()
            try:
                return function(*a, **k)
            finally:
                with lock:
                    entry = totals.setdefault(label, [0, 0, 0.0])
                    entry[0] += 1
                    entry[1] += jobs() - started_jobs
                    entry[2] += time.perf_counter() - started

        return wrapper

    for label, module_name, name in STAGES:
        owner: Any = importlib.import_module(module_name)
        *path, attribute = name.split(".")
        for part in path:
            owner = getattr(owner, part)
        setattr(owner, attribute, timed(label, getattr(owner, attribute)))

    load = os.getloadavg()
    print(f"load averages at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    for run in range(args.runs):
        day = f"2024-01-{run + 1:02d}T00:00:00+00:00"
        sample = ["--files", "1", "--rows-per-file", str(args.rows), "--seed", str(run)]
        cli.main(["generate", "events", *sample, "--start", day, "--malformed-rate", "0.01"])
        totals.clear()
        started_jobs, started = jobs(), time.perf_counter()
        code = cli.main(["run", "events"])
        seconds, spark_jobs = time.perf_counter() - started, jobs() - started_jobs
        if run == 0:
            print(f"run 0 (warm-up): exit {code}, {seconds:.1f} s, {spark_jobs} Spark jobs")
            if args.jfr:
                jcmd(spark, "JFR.start", "settings=profile", "name=runoff-profile")
            continue
        print(f"run {run}: exit {code}, {seconds:.1f} s, {spark_jobs} Spark jobs")
        for label, _, _ in STAGES:
            calls, stage_jobs, stage_seconds = totals.get(label, [0, 0, 0.0])
            print(
                f"  {label:20} {int(calls):3} calls {int(stage_jobs):4} jobs {stage_seconds:7.2f} s"
            )
    load = os.getloadavg()
    print(f"load averages at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if args.jfr:
        jcmd(spark, "JFR.dump", "name=runoff-profile", f"filename={args.jfr.resolve()}")
        print_jvm_parts(args.jfr)
    spark.stop()


def jcmd(spark: Any, *command: str) -> None:
    """Run a `jcmd` command against the session's driver JVM."""
    import subprocess

    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    subprocess.run(["jcmd", str(pid), *command], check=True, capture_output=True)


def print_jvm_parts(recording: Path) -> None:
    """The share of the recording's CPU samples in each of `JVM_PARTS`, and which operators
    generated Java code in tasks (the outermost Spark frame above the code generator)."""
    import collections
    import json
    import subprocess

    samples = ("--events", "jdk.ExecutionSample", str(recording))
    printed = subprocess.run(
        ["jfr", "print", "--json", "--stack-depth", "64", *samples],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    stacks = [
        [
            f"{f['method']['type']['name']}.{f['method']['name']}".replace("/", ".")
            for f in event["values"]["stackTrace"]["frames"]
        ]
        for event in json.loads(printed)["recording"]["events"]
    ]
    print(f"driver JVM: {len(stacks)} CPU samples")
    for part, marker in JVM_PARTS:
        share = sum(any(marker in frame for frame in stack) for stack in stacks) / len(stacks)
        print(f"  {share:6.1%}  {part}")
    generators: collections.Counter[str] = collections.Counter()
    for stack in stacks:
        inner = [i for i, frame in enumerate(stack) if "expressions.codegen." in frame]
        if inner:
            callers = (f for f in stack[max(inner) + 1 :] if f.startswith("org.apache.spark"))
            plain = (f for f in callers if not any(w in f.lower() for w in GENERATOR_WORDS))
            caller = next(plain, "?")
            generators[".".join(caller.rsplit(".", 2)[-2:])] += 1
    print("  code generated for (samples):")
    for caller, count in generators.most_common(8):
        print(f"    {count:5}  {caller}")


if __name__ == "__main__":
    main()
