"""The `runoff` command line (README, "CLI reference").

Each command lives in its own module and exposes `cmd_<name>(config, args) -> int`; this module
parses arguments, builds the configuration once and turns errors into one line on stderr and a
non-zero exit code (`--verbose` adds the traceback). With `--outcome PATH` the end of every
command, success or error, is also written to PATH as JSON (`write_outcome`): what Airflow's
tasks read to publish asset events and to name the failed expectation in a notification.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

from core import caller, interrupts
from core.config import RunoffConfig
from core.errors import ConfigError, RunoffError
from jobs import lineage
from jobs.cli import logs

Handler = Callable[[RunoffConfig, argparse.Namespace], int]


# -- argument types: each rejects bad input with a message argparse prints as one line ------
def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must not be negative")
    return value


def rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} must be between 0 and 1")
    return value


def iso_datetime(text: str) -> datetime:
    """ISO-8601 date or date-time; naive values are taken as UTC."""
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ISO-8601 date or time (e.g. 2024-01-01 or 2024-01-01T00:00:00Z)"
        ) from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def duration(text: str) -> str:
    """A Spark interval such as "1 hour" or "10 minutes"."""
    from core.specs import parse_duration

    try:
        parse_duration(text)
    except ConfigError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration like '10 minutes' or '1 hour'"
        ) from None
    return text.strip()


def dataset_arg(parser: argparse.ArgumentParser) -> None:
    # Checked against the catalog once the configuration (and its --datasets) is known.
    parser.add_argument("dataset", help="a dataset's name (`runoff check` lists them)")


# -- commands -----------------------------------------------------------------------------
# name -> (module, help, add_arguments). A command is offered only when its module exists.
def _generate_args(p: argparse.ArgumentParser) -> None:
    dataset_arg(p)
    p.add_argument("--files", type=positive_int, help="number of files (dataset default)")
    p.add_argument("--rows-per-file", type=positive_int, help="records per file")
    p.add_argument("--start", type=iso_datetime, help="event time of the first record (ISO-8601)")
    p.add_argument("--seed", type=int, default=0, help="random seed: same seed, same bytes")
    p.add_argument(
        "--malformed-rate", type=rate, default=0.0, help="share of extra malformed lines (0..1)"
    )
    p.add_argument(
        "--late-rate",
        type=rate,
        default=0.0,
        help="share of records that land in a later file than their event time",
    )


def _bronze_args(p: argparse.ArgumentParser) -> None:
    dataset_arg(p)
    p.add_argument(
        "--trigger",
        choices=("available-now", "once"),
        default="available-now",
        help="available-now (default): every new file, in micro-batches of the limits below; "
        "once: every new file in one batch, limits ignored (e.g. --trigger once)",
    )
    p.add_argument(
        "--max-files-per-trigger",
        type=positive_int,
        metavar="N",
        help="landing files per micro-batch (default: all; e.g. --max-files-per-trigger 10)",
    )
    p.add_argument(
        "--max-bytes-per-trigger",
        type=positive_int,
        metavar="BYTES",
        help="bytes of landing files per micro-batch, soft limit (e.g. 134217728 for 128 MiB)",
    )


def _silver_args(p: argparse.ArgumentParser) -> None:
    dataset_arg(p)
    p.add_argument("--watermark", type=duration, help="override the dataset's watermark")
    p.add_argument(
        "--max-files-per-trigger",
        type=positive_int,
        help="bronze files per micro-batch (default: all available)",
    )


def _validate_args(p: argparse.ArgumentParser) -> None:
    dataset_arg(p)
    p.add_argument(
        "--layer",
        choices=("bronze", "silver", "all"),
        default="all",
        help="the tables to validate (default all; e.g. --layer silver)",
    )
    p.add_argument(
        "--full",
        action="store_true",
        help="validate whole tables, not only what changed since the last validation",
    )


def _dataset_only(p: argparse.ArgumentParser) -> None:
    dataset_arg(p)


def _run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("dataset", nargs="?", help="a dataset's name (`runoff check` lists them)")
    p.add_argument(
        "more",
        nargs="*",
        metavar="DATASET",
        help="more datasets, run side by side in one driver (e.g. `runoff run events sensors`)",
    )
    p.add_argument("--all", action="store_true", help="run every declared dataset")
    p.add_argument(
        "--parallel",
        type=positive_int,
        metavar="N",
        help="datasets run at once (default: half the cores, at least 2; e.g. --parallel 4)",
    )


def _backfill_args(p: argparse.ArgumentParser) -> None:
    dataset_arg(p)
    # A date is midnight UTC, so dates give whole days; times give any interval.
    p.add_argument(
        "--start",
        type=iso_datetime,
        required=True,
        help="start of the interval, inclusive: a date (midnight UTC) or an ISO-8601 time, naive "
        "= UTC (e.g. 2024-01-02 or 2024-01-02T05:00:00Z)",
    )
    p.add_argument(
        "--end",
        type=iso_datetime,
        required=True,
        help="end of the interval, exclusive (e.g. 2024-01-03 or 2024-01-02T06:00:00+00:00)",
    )


def _status_args(p: argparse.ArgumentParser) -> None:
    dataset_arg(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")


def _quarantine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "action",
        choices=("list", "replay"),
        help="list: the lines held, by reason and file; replay: parse them again with the "
        "current spec and publish those that now pass to bronze",
    )
    dataset_arg(p)
    p.add_argument(
        "--reason",
        help="only lines of this reason (e.g. 'unparseable JSON', 'rule failed')",
    )
    p.add_argument(
        "--file",
        help="only lines of this landing file: its URI as `list` shows it, its path or its name "
        "(e.g. part-0001.json)",
    )
    p.add_argument(
        "--since",
        type=iso_datetime,
        help="only lines ingested at or after this date or ISO-8601 time (e.g. 2024-01-02)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output (list only)")


def _reset_args(p: argparse.ArgumentParser) -> None:
    dataset_arg(p)
    p.add_argument(
        "--layer",
        choices=("bronze", "silver", "all"),
        required=True,
        help="what to delete: bronze (and quarantine, and silver, which depends on it), silver, "
        "or all (e.g. --layer silver)",
    )
    p.add_argument("--yes", action="store_true", help="confirm: tables and checkpoints are deleted")


def _check_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "names",
        nargs="*",
        metavar="DATASET",
        help="check only these datasets (default: every spec found; e.g. events orders)",
    )
    p.add_argument(
        "--no-spark",
        action="store_true",
        help="check the specs' format and print what they declare, without starting Spark (in "
        "well under a second); their SQL is not resolved",
    )


def _rebuild_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "table",
        nargs="+",
        help="tables to recompute, separated by spaces or commas: a silver table from the whole "
        "of bronze (e.g. events_action_hourly), a bronze table from the landing files, with its "
        "dataset's silver tables (e.g. bronze_events)",
    )


def _no_args(p: argparse.ArgumentParser) -> None:
    return None


def _serve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--socket",
        metavar="PATH",
        help="the Unix socket to listen on (default <home>/run/runoff.sock; clients set "
        "RUNOFF_SERVER to it, e.g. --socket /tmp/runoff.sock)",
    )
    p.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="also listen on this TCP address (PORT alone: loopback), for clients that set "
        "RUNOFF_SERVER=tcp://HOST:PORT and the server's RUNOFF_SERVER_SECRET (e.g. --listen "
        "127.0.0.1:7079)",
    )
    p.add_argument(
        "--parallel",
        type=positive_int,
        metavar="N",
        help="commands run at once, each in its own Spark session (default: half the cores, at "
        "least 2); more wait for a free slot and say so (e.g. --parallel 4)",
    )


COMMANDS: dict[str, tuple[str, str, Callable[[argparse.ArgumentParser], None]]] = {
    "check": (
        "jobs.ops.check",
        "dry run: check every dataset spec, or those named (SQL resolved by Spark, no data read)",
        _check_args,
    ),
    "generate": ("jobs.samples", "write sample landing files for a dataset", _generate_args),
    "bronze": (
        "jobs.bronze.job",
        "ingest new landing files into bronze (and quarantine)",
        _bronze_args,
    ),
    "silver": ("jobs.silver", "update the silver aggregates from bronze", _silver_args),
    "validate": ("jobs.ops.validate", "check tables with Great Expectations", _validate_args),
    "run": (
        "jobs.ops.pipeline",
        "bronze, silver and validate in one go, of one dataset or several side by side",
        _run_args,
    ),
    "backfill": (
        "jobs.backfill.job",
        "idempotent re-run of the interval [start, end): dates or ISO times",
        _backfill_args,
    ),
    "status": (
        "jobs.ops.status",
        "table versions, row counts, checkpoints and last runs",
        _status_args,
    ),
    "quarantine": (
        "jobs.ops.quarantine",
        "the malformed lines quarantine holds (list), or those the current spec passes, "
        "published to bronze (replay)",
        _quarantine_args,
    ),
    "maintain": (
        "jobs.ops.maintain",
        "compact, checkpoint and vacuum every table; prune old quality results",
        _dataset_only,
    ),
    "reset": (
        "jobs.ops.reset",
        "full refresh: delete a layer's tables and checkpoints",
        _reset_args,
    ),
    "rebuild": (
        "jobs.ops.rebuild",
        "recompute tables under the spec as it is now (after a change of their definition)",
        _rebuild_args,
    ),
    "report": (
        "jobs.report.build",
        "write a self-contained HTML report with charts",
        _dataset_only,
    ),
    "demo": ("jobs.samples.demo", "sample data for every dataset, full run, summary", _no_args),
    "serve": (
        "jobs.cli.server",
        "keep one Spark driver warm and run the Spark commands of clients that set RUNOFF_SERVER",
        _serve_args,
    ),
}

# Commands that run in a `runoff serve` server when the client names one (the others need no
# Spark: they run where they are called).
SERVED_COMMANDS = frozenset(
    {
        "check",
        "bronze",
        "silver",
        "validate",
        "run",
        "backfill",
        "maintain",
        "reset",
        "rebuild",
        "demo",
    }
)

# Commands that never start Spark: they read and write with delta-rs, Great Expectations (on
# pandas) and the file system. An Airflow task runs them as a plain process (dags.hooks), never
# as a spark-submit, which would start a JVM for nothing.
SPARK_FREE_COMMANDS = frozenset({"validate", "reset"})


def available_commands() -> list[str]:
    return [name for name, (module, _, _) in COMMANDS.items() if importlib.util.find_spec(module)]


def version() -> str:
    """The installed package's version (the repository's pyproject.toml)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("runoff")
    except PackageNotFoundError:
        return "unknown (not installed: run `make install`)"


class OneLineErrorParser(argparse.ArgumentParser):
    """Usage errors as one line on stderr (the CLI contract) and exit code 2; `-h` shows usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


# Commands that never create the home (`status` and `quarantine` refuse a missing one, `check`
# needs none).
READ_ONLY_COMMANDS = frozenset({"status", "check", "quarantine"})


def _global_options(parser: argparse.ArgumentParser, default: object) -> None:
    """--home, --datasets, --outcome, --verbose: accepted before or after the command (`default`
    is SUPPRESS after it, so that a value given before is kept)."""
    parser.add_argument(
        "--home", default=default, help="runoff home (else $RUNOFF_HOME, else ./.runoff)"
    )
    parser.add_argument(
        "--outcome",
        default=default,
        metavar="PATH",
        help="when the command ends, write its exit code, error line and summary to PATH (JSON)",
    )
    parser.add_argument(
        "--datasets",
        action="append",
        # After the command: a list of its own, joined in main (a subcommand's namespace
        # would replace the list given before the command instead of extending it).
        dest="datasets" if default is None else "datasets_after_command",
        default=default,
        metavar="DIR",
        help="a folder of dataset specs, besides the built-in ones and $RUNOFF_DATASETS "
        "(repeatable)",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        default=default,
        help="show tracebacks and debug logs",
    )
    parser.add_argument(
        "--server",
        default=default,
        metavar="SOCKET",
        help="run Spark commands in the `runoff serve` server listening on SOCKET, or on "
        "tcp://HOST:PORT with $RUNOFF_SERVER_SECRET (else $RUNOFF_SERVER; e.g. --server "
        ".runoff/run/runoff.sock)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="runoff",
        description="Incremental lakehouse pipelines: landing JSON -> Delta bronze -> silver.",
    )
    _global_options(parser, None)
    parser.add_argument("--version", action="version", version=f"runoff {version()}")
    sub = parser.add_subparsers(dest="command", metavar="command", required=True)
    for name in available_commands():
        _module, help_text, add_args = COMMANDS[name]
        command = sub.add_parser(name, help=help_text, description=help_text)
        add_args(command)
        _global_options(command, argparse.SUPPRESS)
    return parser


def handler_for(command: str) -> Handler:
    module = importlib.import_module(COMMANDS[command][0])
    handler: Handler = getattr(module, f"cmd_{command}")
    return handler


def is_served(args: argparse.Namespace) -> bool:
    """Whether a server runs this command: a command of `SERVED_COMMANDS` (but `check
    --no-spark`), or `quarantine replay` (its `list` needs no Spark)."""
    if args.command == "check":
        return not args.no_spark
    return args.command in SERVED_COMMANDS or (
        args.command == "quarantine" and getattr(args, "action", None) == "replay"
    )


def server_socket(args: argparse.Namespace, env: Mapping[str, str]) -> Path | str | None:
    """The server to run this command in (`--server`, else `RUNOFF_SERVER`), if any: a Unix
    socket's path, or a `tcp://host:port` address."""
    from jobs.cli.client import NETWORK_SCHEMES, SERVER_ENV

    raw = args.server or env.get(SERVER_ENV)
    if not raw or not is_served(args):
        return None
    return raw if raw.startswith(NETWORK_SCHEMES) else Path(raw).expanduser().absolute()


def main(argv: Sequence[str] | None = None, served: bool = False) -> int:
    """Run one command; `served`: inside `runoff serve`, for a client (never forwarded)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if served and not is_served(args):
        # `serve` inside the server would hold a slot for good; the others need no Spark.
        command = f"{args.command} {getattr(args, 'action', '')}".strip()
        return _say(
            f"runoff: error: `runoff {command}` is not run by a server (it serves "
            f"{', '.join(sorted(SERVED_COMMANDS))} and quarantine replay): run it where you are",
            2,
        )[0]
    server = None if served else server_socket(args, os.environ)
    if server is not None:
        from jobs.cli.client import run_remote

        try:
            return run_remote(server, argv)
        except RunoffError as exc:
            return _say(f"runoff: error: {exc}", exc.exit_code)[0]
    library = _served_log(bool(args.verbose)) if served else logs.configure(bool(args.verbose))
    previous = None if served else interrupts.install()
    error: str | None = None
    error_type: str | None = None
    try:
        config = RunoffConfig.from_sources(
            home=args.home,
            verbose=bool(args.verbose),
            datasets=[*(args.datasets or ()), *getattr(args, "datasets_after_command", ())],
        )
        if getattr(args, "dataset", None) is not None:
            from delta_tables.catalog import Catalog

            Catalog.load(config).spec(args.dataset)  # unknown or refused: one error, exit 2
        if args.command not in READ_ONLY_COMMANDS:
            config.ensure_home()
        if library is not None and config.home.is_dir():
            library.path = config.home / "logs" / "runoff.log"
        elif args.command in ("status", "quarantine") and not config.home.is_dir():
            # A misspelt --home would otherwise show empty tables and succeed.
            raise ConfigError(
                f"runoff home {str(config.home)!r} does not exist: check --home or RUNOFF_HOME "
                "(commands that write, such as `runoff generate` or `runoff bronze`, create it)"
            )
        # The runs it records emit lineage, when OpenLineage is configured; not the server's
        # own: each command it serves runs `main` with its client's environment.
        with nullcontext() if args.command == "serve" else lineage.emitting(config):
            code = handler_for(args.command)(config, args)
    except (KeyboardInterrupt, Exception) as exc:  # noqa: BLE001 - one clear line, an exit code
        code, error = _report(exc, args.verbose, library)
        error_type = type(exc).__name__
    finally:
        interrupts.restore(previous)
    if args.outcome:
        outcome = command_outcome(args, code, error, error_type)
        try:
            write_outcome(caller.absolute(args.outcome), outcome)
        except OSError as exc:
            print(
                f"runoff: error: cannot write the outcome file {args.outcome}: {exc}",
                file=sys.stderr,
            )
            return code or 1
    return code


def _served_log(verbose: bool) -> logs.LibraryLog | None:
    """A served command's log (`logs.CallerLog` routes its records): the libraries' records in
    its home's log, as `logs.configure` sets up for a command of its own process."""
    served = caller.current()
    library = None if verbose else logs.LibraryLog()
    if served is not None:
        served.verbose, served.library = verbose, library
        if verbose:  # until the command ends (`jobs.cli.server.Server.execute`)
            logs.verbose_commands.started()
    return library


# -- the outcome file ------------------------------------------------------------------------
def command_outcome(
    args: argparse.Namespace, exit_code: int, error: str | None, error_type: str | None = None
) -> dict[str, Any]:
    """What `--outcome` records: the command, its dataset, exit code, the one error line printed
    on stderr (None on success), the error's class name and the summary the command's handler
    left in `args.summary` (a JSON-able dict, e.g. `runoff validate`'s; None otherwise)."""
    summary = getattr(args, "summary", None)
    return {
        "command": args.command,
        "dataset": getattr(args, "dataset", None),
        "exit_code": exit_code,
        "error": error,
        "error_type": error_type,
        "summary": dict(summary) if isinstance(summary, Mapping) else None,
    }


def write_outcome(path: Path, outcome: Mapping[str, Any]) -> None:
    """Write `outcome` to `path` as JSON, atomically: a reader sees the old file or the new one."""
    path = path.expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        temporary.write_text(json.dumps(outcome, indent=2, default=str) + "\n", encoding="utf-8")
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def _report(
    exc: BaseException, verbose: bool, library: logs.LibraryLog | None = None
) -> tuple[int, str]:
    """The CLI's last line of defence: one clear line on stderr; the exit code and that line."""
    resume = "the next run resumes from the checkpoint"
    if library is not None and library.written:
        resume += f" (Spark's messages: {library.path})"
    # SIGTERM first, whatever py4j made of the interrupt it raised.
    code = interrupts.exit_code(exc)
    if code == 128 + signal.SIGTERM:
        return _say(f"runoff: terminated (SIGTERM); {resume}", code)
    if code == 130:
        return _say(f"runoff: interrupted; {resume}", code)
    if verbose:
        traceback.print_exception(exc)
    if isinstance(exc, RunoffError):
        return _say(f"runoff: error: {exc}", code)
    from jobs.streaming.failures import explain  # a full disk, named, rather than py4j's first line

    known = explain(exc)
    if known:
        return _say(f"runoff: error: {known}", 1)
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return _say(f"runoff: error: {type(exc).__name__}: {detail}", 1)


def _say(line: str, code: int) -> tuple[int, str]:
    print(line, file=sys.stderr)
    return code, line


if __name__ == "__main__":
    sys.exit(main())
