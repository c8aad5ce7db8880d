"""`make bench`: run every `benchmarks/bench_*.py`, then regenerate the README's table.

Input: the benchmark modules (each exposes `main() -> dict` and writes `results/<name>.json`,
see benchmarks/README.md). Output: fresh result files and the table between the README's
`<!-- bench:start -->` / `<!-- bench:end -->` markers. Each benchmark runs in its own Python
process, one after the other, so Spark JVMs and memory never pile up and one crash cannot take
the others down. Exit status: 0 when every benchmark ran and every result file is valid.

    uv run --frozen python -m benchmarks [--only NAME ...] [--table-only] [--timeout SECONDS]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.readme_table import README, regenerate
from benchmarks.result import RESULTS_DIR, RESULTS_ENV, ResultError, save_result, validate_result

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent

# Runs in the child process: import the module, call main(); if main() returned a result but did
# not write it, write it (so a module that only returns its dict still lands in the table).
CHILD = """
import importlib, json, sys
sys.path.insert(0, {root!r})
from benchmarks.__main__ import finish_child
module = importlib.import_module({module!r})
if not callable(getattr(module, "main", None)):
    sys.exit(f"{module!r} has no main() function")
finish_child(module.main())
"""


@dataclass(frozen=True)
class Outcome:
    name: str
    returncode: int
    seconds: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def discover(package_dir: Path = PACKAGE_DIR) -> list[str]:
    """Module names (`bench_<name>`) of the benchmarks in `package_dir`, sorted."""
    return sorted(p.stem for p in package_dir.glob("bench_*.py") if p.is_file())


def select(available: Sequence[str], only: Sequence[str]) -> list[str]:
    """The benchmarks to run: all, or those named (with or without the `bench_` prefix)."""
    if not only:
        return list(available)
    wanted = [n if n.startswith("bench_") else f"bench_{n}" for n in only]
    unknown = [n for n in wanted if n not in available]
    if unknown:
        raise SystemExit(
            f"unknown benchmark(s) {', '.join(unknown)}; available: {', '.join(available)}"
        )
    return wanted


def finish_child(returned: object) -> None:
    """In the child: write the returned result unless the module already wrote the same one."""
    if not isinstance(returned, dict) or "name" not in returned:
        return
    try:
        document = validate_result(returned, f"main() of bench_{returned['name']}")
    except ResultError as exc:
        sys.exit(f"benchmark result not written: {exc}")
    directory = Path(os.environ.get(RESULTS_ENV) or RESULTS_DIR)
    path = directory / f"{document['name']}.json"
    try:
        on_disk = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        on_disk = None
    if on_disk != json.loads(json.dumps(document)):
        save_result(document, directory)


def run_benchmark(
    package: str,
    module: str,
    cwd: Path,
    results_dir: Path,
    timeout: float | None = None,
) -> Outcome:
    """Run `<package>.<module>` in a fresh interpreter; its output goes to this terminal."""
    code = CHILD.format(root=str(REPO_ROOT), module=f"{package}.{module}")
    env = {**os.environ, RESULTS_ENV: str(results_dir), "PYTHONUNBUFFERED": "1"}
    name = module.removeprefix("bench_")
    print(f"== {name}: running {package}.{module}", flush=True)
    started = time.monotonic()
    try:
        completed = subprocess.run(
            [sys.executable, "-c", code], cwd=cwd, env=env, timeout=timeout, check=False
        )
        returncode = completed.returncode
    except subprocess.TimeoutExpired:
        print(f"== {name}: timed out after {timeout:.0f} s", flush=True)
        returncode = -1
    seconds = time.monotonic() - started
    status = "ok" if returncode == 0 else f"FAILED (exit {returncode})"
    print(f"== {name}: {status} in {seconds:.1f} s", flush=True)
    return Outcome(name, returncode, seconds)


def run_all(
    modules: Sequence[str],
    package: str = "benchmarks",
    cwd: Path = REPO_ROOT,
    results_dir: Path = RESULTS_DIR,
    timeout: float | None = None,
) -> list[Outcome]:
    return [run_benchmark(package, m, cwd, results_dir, timeout) for m in modules]


def main(
    argv: Sequence[str] | None = None,
    package_dir: Path = PACKAGE_DIR,
    readme: Path = README,
    results_dir: Path = RESULTS_DIR,
) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description="Run the benchmarks and update README's table."
    )
    parser.add_argument("--only", nargs="+", default=(), metavar="NAME", help="run only these")
    parser.add_argument(
        "--table-only", action="store_true", help="regenerate the table from existing results"
    )
    parser.add_argument("--timeout", type=float, help="seconds allowed per benchmark")
    args = parser.parse_args(argv)

    outcomes: list[Outcome] = []
    if not args.table_only:
        modules = select(discover(package_dir), args.only)
        if not modules:
            print(f"no benchmarks found ({package_dir}/bench_*.py)")
        outcomes = run_all(
            modules,
            package=package_dir.name,
            cwd=package_dir.parent,
            results_dir=results_dir,
            timeout=args.timeout,
        )
    _written, errors = regenerate(readme, results_dir)

    failed = [o for o in outcomes if not o.ok]
    if outcomes:
        print("\nbenchmark          status   seconds")
        for o in outcomes:
            print(f"{o.name:<18} {'ok' if o.ok else 'FAILED':<8} {o.seconds:>7.1f}")
    for error in errors:
        print(f"error: invalid result file: {error}", file=sys.stderr)
    if failed:
        names = ", ".join(o.name for o in failed)
        print(f"error: {len(failed)} benchmark(s) failed: {names}", file=sys.stderr)
    return 1 if failed or errors else 0


if __name__ == "__main__":
    sys.exit(main())
