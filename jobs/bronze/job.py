"""`runoff bronze <dataset>`: landing files -> Delta bronze table and quarantine, exactly once.

Input: every file under `landing/<dataset>/` (recursive; hidden `.`/`_` files, such as files
still being placed, are skipped), read as lines of text (`\\n`-separated) by Structured
Streaming's file source, so that every line is accounted for.
Output:
- `delta/bronze/<dataset>`: one row per valid record: the dataset's bronze columns (the
  spec's record fields, renamed or selected: `Dataset.bronze_columns()`) plus `event_time`,
  `event_date`, `_source_file` (the landing file's URI), `_ingested_at`, `_batch_id`, and
  `_rescued_data` (the fields the schema does not declare, at every depth, as a JSON object by
  path; `schema_evolution: rescue`; a run names those it rescued); partitioned by
  `event_date`. With `add_columns` unknown top-level fields become STRING columns (Delta
  schema evolution); with `fail` (and `add_columns`, for a field below the top level) a batch
  holding one fails the run, naming it.
- `delta/quarantine/<dataset>`: one row per malformed line (`QUARANTINE_SCHEMA`): `_raw` (the
  line; invalid UTF-8 bytes replaced by U+FFFD), `_error` (why), `_source_file`, `_line_number`
  (1-based, counting every line of the file), `_ingested_at`, `_batch_id`; partitioned by
  `ingest_date`.
Blank lines (empty or whitespace only) are neither. For every landing file:
bronze rows + quarantined rows = its non-blank lines.
Which lines are valid records, and why the others are quarantined: `jobs.bronze.parse`.

Definition: the spec's definition of bronze is compared with the one the table keeps before
anything is read; a change of what its rows mean is refused (exit 2), one a run can apply is
applied to what it ingests and then kept (`delta_tables.definitions`).

Trigger: `availableNow` by default (everything that has landed, in micro-batches of at most
`--max-files-per-trigger` files / `--max-bytes-per-trigger` bytes) or `once` (one batch, rate
limits ignored). The checkpoint `checkpoints/bronze/<dataset>` remembers the files already
ingested; a run with nothing new adds nothing. One run per checkpoint at a time (a lock).

Exactly once: each micro-batch writes bronze, then quarantine, each commit carrying the app
transaction (query id, batch id). A batch replayed after a crash finds its commits and writes
nothing again; a table it had not reached yet is written. Empty outputs are not committed.

Archive: files of committed batches are moved out of the landing folder by Spark
(`cleanSource=archive`) so that listing the landing folder and the source's metadata stay small
however long the history grows. An archived file keeps its absolute path below
`archive_dir(config, dataset)` = `<data>/archive/bronze<absolute landing path>` (`<data>`: the home,
or `RUNOFF_DATA`; on object storage the landing key), so the landing
files of a date interval are under the same `date=YYYY-MM-DD/` folders of the two
`landing_dirs(config, dataset)` (what a backfill reads); bronze's `_source_file` keeps the landing
URI. Spark archives a batch's files when it starts the next batch, so the last batch's files
wait in landing for the next run that finds new files (they are never ingested twice: the
checkpoint lists them). `restore_archive()` moves everything back for a full refresh
(`runoff reset --layer bronze`). A landing path is ingested once: re-deliveries need new names; a
file changed after ingestion (appended to, or replaced under its name) is reported by every run
with the `runoff backfill` that re-reads it (`jobs.checkpoints.landing_changes`), never silently
skipped.
Files are never too old to be picked up (`maxFileAge` is set to 100 years: Spark's default
would silently skip a file landed with a modification time a week older than the newest).
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from core.config import Location, RunoffConfig, as_location
from core.console import live_status, say
from core.errors import ConfigError, RunoffError
from core.locking import checkpoint_lock
from core.specs import SEED_DIR
from delta_tables import definitions
from delta_tables.catalog import Catalog, ensure_table
from delta_tables.ledger import RunRecord, recorded_run
from delta_tables.writes import (
    already_committed,
    append,
    session_conf,
    table_columns,
    table_version,
)
from jobs.bronze.long_lines import READER_OPTIONS, lines_read, with_long_lines
from jobs.bronze.parse import (
    LineCounts,
    count_lines,
    good_rows,
    is_nested,
    kept,
    parse_lines,
    quarantine_rows,
    unknown_fields,
    unrepresentable,
)
from jobs.checkpoints.files import files_of_batch, read_query_id, spark_path
from jobs.checkpoints.guard import record_batch
from jobs.checkpoints.landing_changes import (
    FileState,
    check_landing,
    current_state,
    read_states,
    record_states,
    report_lines,
)
from jobs.spark import projections_for
from jobs.streaming.dataset import Dataset, load_dataset
from jobs.streaming.query import (
    BatchFunction,
    BatchProgress,
    RunProgress,
    elapsed,
    error_line,
    guard_checkpoint,
    run_query,
    summary_line,
    vanished_text,
)
from jobs.streaming.resolve import ensure_resolves
from quality.anomalies import MetricHistory
from quality.gate import record_checks, rule_checks, say_problems
from quality.history import append_metrics, metric_history, metric_rows
from quality.runner import QualityCheckFailed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

LAYER = "bronze"
Trigger = Literal["available-now", "once"]


# -- options and paths --------------------------------------------------------------------
@dataclass(frozen=True)
class BronzeOptions:
    """How a run reads the landing folder (CLI flags; defaults: availableNow, no limits)."""

    trigger: Trigger = "available-now"
    max_files_per_trigger: int | None = None
    max_bytes_per_trigger: int | None = None
    archive: bool = True  # move files of committed batches to `archive_dir()`

    def __post_init__(self) -> None:
        if self.trigger not in ("available-now", "once"):
            raise ConfigError(f"trigger {self.trigger!r} is not one of available-now, once")
        for key in ("max_files_per_trigger", "max_bytes_per_trigger"):
            value = getattr(self, key)
            if value is not None and (isinstance(value, bool) or value < 1):
                raise ConfigError(f"{key}={value!r} must be a whole number of at least 1")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> BronzeOptions:
        return cls(
            trigger=args.trigger,
            max_files_per_trigger=args.max_files_per_trigger,
            max_bytes_per_trigger=args.max_bytes_per_trigger,
        )


def landing_dir(config: RunoffConfig, dataset: str) -> Location:
    """The dataset's landing folder (its spec's `source.path`)."""
    return Catalog.load(config).landing_dir(dataset)


def archive_dir(config: RunoffConfig, dataset: str) -> Location:
    """Where Spark moves ingested landing files: the archive root plus their absolute path (on
    object storage, their key: the archive must be in the landing folder's bucket)."""
    return config.archived(landing_dir(config, dataset).absolute())


def landing_dirs(config: RunoffConfig, dataset: str) -> tuple[Location, Location]:
    """The folders holding a dataset's landing files: not yet ingested, and archived."""
    return landing_dir(config, dataset), archive_dir(config, dataset)


def restore_archive(config: RunoffConfig, dataset: str) -> int:
    """Move archived files back to their landing paths (a full refresh re-ingests them all).

    For `runoff reset --layer bronze`, with the bronze lock held. A file whose landing path is
    taken again (delivered anew) stays in the archive. Returns the number of files moved;
    their modification times are kept, so the new stream reads them in delivery order.
    """
    landing, archived = landing_dirs(config, dataset)
    if not archived.is_dir():
        return 0
    moved = 0
    for path in sorted(archived.rglob("*"), key=str):
        target = landing / path.relative_to(archived)
        if not path.is_file() or target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        path.rename(target)
        moved += 1
    return moved


# -- I/O ------------------------------------------------------------------------------------
def read_landing(
    spark: SparkSession, config: RunoffConfig, landing: Location, options: BronzeOptions
) -> DataFrame:
    """The landing folder as a stream of lines (`RAW_SCHEMA`)."""
    reader = (
        spark.readStream.format("text")
        # Recursive lookup also turns off partition discovery of `date=...` folders.
        .option("recursiveFileLookup", "true")
        .option("lineSep", "\n")
        .options(**READER_OPTIONS)  # a line too long to be a row is skipped, then found
        # Never too old to ingest (see the module docstring).
        .option("maxFileAge", "36500d")
    )
    if options.max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", str(options.max_files_per_trigger))
    if options.max_bytes_per_trigger:
        reader = reader.option("maxBytesPerTrigger", str(options.max_bytes_per_trigger))
    if options.archive:
        reader = reader.option("cleanSource", "archive").option(
            "sourceArchiveDir", str(config.archive_root / LAYER)
        )
    return lines_read(
        reader.load(str(landing)).select(
            F.col("value"),
            F.col("_metadata.file_path").alias("_source_file"),
            F.col("_metadata.file_block_start").alias("_block_start"),
        )
    )


def batch_files(checkpoint: Location, batch_id: int) -> list[str] | None:
    """The files of a micro-batch, from the checkpoint's logs (`files_of_batch`); None if they
    cannot tell."""
    try:
        return [f.path for f in files_of_batch(checkpoint, batch_id)]
    except (OSError, ValueError) as exc:
        logger.warning("cannot list the files of batch %s in %s: %s", batch_id, checkpoint, exc)
        return None


def batch_states(listed: list[str] | None) -> dict[str, FileState | None]:
    """Each of a batch's files as its batch reads it: size, modification time and, on object
    storage, ETag; None for a file that is gone."""
    states: dict[str, FileState | None] = {}
    for path in listed or ():
        found = current_state(as_location(path))
        states[path] = None if found is None else found[0]
    return states


def vanished_files(states: Mapping[str, FileState | None], parsed: DataFrame) -> tuple[str, ...]:
    """The batch's files that were gone when it read them (`states`, from `batch_states`). Spark
    skips a file deleted between its listing and the read without a word; such a file is
    missing now and none of the batch's lines came from it. (An empty file deleted after the
    read looks the same: nothing of it is missing from the tables either.)"""
    missing = [path for path, state in states.items() if state is None]
    if not missing:
        return ()
    read = {spark_path(row[0]) for row in parsed.select("_source_file").distinct().collect()}
    return tuple(path for path in missing if path not in read)


def rescued_text(fields: Mapping[str, int], spec_file: Path) -> str:
    """What a run says of the undeclared fields it kept in `_rescued_data`."""
    counted = ", ".join(
        f"{name} ({rows} record{'' if rows == 1 else 's'})" for name, rows in fields.items()
    )
    return (
        f"fields the schema does not declare, kept in _rescued_data: {counted} (declare them in "
        f"{spec_file} to give them columns)"
    )


def batch_metrics(counts: LineCounts, ingested_at: datetime) -> dict[str, float]:
    """What a batch was like (`quality.anomalies.metric_names`): its counts, its quarantined
    lines by rule, the null share of each bronze column and the lag of its newest event (the
    last two only when rows reached bronze)."""
    metrics: dict[str, float] = {
        "rows_in": counts.rows_in,
        "rows_written": counts.good,
        "rows_quarantined": counts.bad,
        "rows_malformed": sum(counts.malformed.values()),
        "rows_rescued": counts.rescued,
        **{f"quarantined:{rule}": rows for rule, rows in counts.broken.items()},
    }
    if counts.good:
        metrics.update({f"null_share:{c}": n / counts.good for c, n in counts.nulls.items()})
    if counts.newest is not None:
        metrics["event_lag_seconds"] = (ingested_at - counts.newest).total_seconds()
    return metrics


class BronzeBatch:
    """The `foreachBatch` function: parse, check both tables' rows (the quality gate), write
    bronze, write quarantine, report."""

    def __init__(
        self, catalog: Catalog, dataset: Dataset, checkpoint: Location, progress: RunProgress
    ) -> None:
        from quality.gate import Gate
        from quality.suites import bronze_table, quarantine_table  # GX: a heavy import

        tables = catalog.tables(dataset.name)
        self.dataset = dataset
        self.bronze = tables.bronze.path
        self.quarantine = tables.quarantine.path
        self.table_names = (tables.bronze.name, tables.quarantine.name)  # for record_batch
        remedy = (
            f"fix those landing files (or the expectation in {dataset.spec.file}) and run "
            f"`runoff bronze {dataset.name}` again: it reads the same files"
        )
        self.gates = (
            Gate(bronze_table(catalog, dataset.spec), remedy),
            Gate(quarantine_table(catalog, dataset.spec), remedy),
        )
        self.checkpoint = checkpoint
        self.progress = progress
        self.added_columns: list[str] = []  # schema_evolution add_columns: added by this run
        self.rescued_fields: dict[str, int] = {}  # undeclared fields: valid records with each
        self.widen: list[str] = []  # declared columns the table lacks (the spec gained fields)
        self.table_columns: list[str] = []  # the bronze table's columns when the run started
        self._app_id: str | None = None
        self.vanished: tuple[str, ...] = ()  # files gone before their batch read them
        self.recorded = read_states(checkpoint)  # the ingested files' states
        # Each committed batch's metrics (`batch_metrics`), and the history they are judged by.
        self.columns = dict(
            zip(dataset.bronze_schema.fieldNames(), dataset.bronze_columns(), strict=True)
        )
        self.measured: list[tuple[int, datetime, dict[str, float]]] = []
        self.history = (
            metric_history(catalog.quality_metrics.path, dataset.name, tables.bronze.name)
            if self.gates[0].table.history
            else MetricHistory()
        )

    @property
    def app_id(self) -> str:
        if self._app_id is None:
            self._app_id = read_query_id(self.checkpoint)
            if self._app_id is None:
                raise RunoffError(f"checkpoint {self.checkpoint} holds no query id")
        return self._app_id

    def _record(self, states: Mapping[str, FileState | None]) -> None:
        """Record the batch's files as read, before Spark moves them to the archive (a copy on
        object storage: a new modification time), so that a run killed after the move still
        knows them (`jobs.checkpoints.landing_changes`)."""
        new = {
            path: state
            for path, state in states.items()
            if state is not None and self.recorded.get(path) != state
        }
        record_states(self.checkpoint, new)
        self.recorded.update(new)

    def _done(self, path: Location, batch_id: int) -> bool:
        return already_committed(path, self.app_id, batch_id)

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        started = time.perf_counter()
        current = self.progress.current  # the live status line (on a terminal)
        current.start(batch_id, stage="reading the checkpoint")
        listed = batch_files(self.checkpoint, batch_id)
        files = None if listed is None else len(listed)
        current.update(files=files, stage="parsing")
        bronze_done = self._done(self.bronze, batch_id)
        quarantine_done = self._done(self.quarantine, batch_id)
        if bronze_done and quarantine_done:
            record_batch(self.checkpoint, batch_id, dict.fromkeys(self.table_names, True))
            self.progress.add(
                BatchProgress(batch_id, files or 0, 0, 0, 0, elapsed(started), replayed=True)
            )
            return
        # A small batch's lines are parsed in interpreted projections (`projections_for`).
        small = {} if listed is None else projections_for([as_location(f) for f in listed])
        with session_conf(batch.sparkSession, small):
            self._ingest(batch, batch_id, started, listed, (bronze_done, quarantine_done))

    def _ingest(
        self,
        batch: DataFrame,
        batch_id: int,
        started: float,
        listed: list[str] | None,
        done: tuple[bool, bool],
    ) -> None:
        """Parse, check and write a batch that one table or both do not hold yet."""
        current = self.progress.current
        files = None if listed is None else len(listed)
        bronze_done, quarantine_done = done
        ingested_at = datetime.now(UTC)
        rules = [rule.name for rule in self.dataset.rules]
        parsed = kept(parse_lines(batch, self.dataset))
        try:
            counts = count_lines(parsed, rules, self.columns)
            states = batch_states(listed)
            sizes = {p: st.size for p, st in states.items() if st and st.size is not None}
            batch, skipped = with_long_lines(batch.sparkSession, batch, parsed, counts.bytes, sizes)
            if skipped:  # lines the reader skipped: parsed again with them (quarantined)
                parsed.unpersist()
                parsed = kept(parse_lines(batch, self.dataset))
                counts = count_lines(parsed, rules, self.columns)
            vanished = vanished_files(states, parsed)
            self._record(states)
            logger.debug("batch %s: parsed and counted in %.2f s", batch_id, elapsed(started))
            current.update(rows=counts.rows_in, stage="checking")
            extra = self._extra_columns(parsed, counts) if counts.good and not bronze_done else []
            good = good_rows(parsed, self.dataset, batch_id, ingested_at, extra)
            bad = quarantine_rows(parsed, batch_id, ingested_at, skipped)
            # The gate: both tables' rows are checked before anything of the batch is written.
            gate, quarantine_gate = self.gates
            if not bronze_done:
                table = gate.table.name
                gate.record(rule_checks(table, batch_id, counts.rows_in, counts.malformed))
                gate.record(rule_checks(table, batch_id, counts.ruled, counts.broken))
                gate.check(good, batch_id, counts.good)
                at, metrics = counts.newest or ingested_at, batch_metrics(counts, ingested_at)
                gate.check_history(batch_id, at, metrics, self.history)
            if not quarantine_done:
                quarantine_gate.check(bad, batch_id, counts.bad)
            logger.debug("batch %s: checked at %.2f s", batch_id, elapsed(started))
            if counts.good and not bronze_done:
                current.update(stage="writing bronze")
                append(
                    good,
                    self.bronze,
                    partition_by=["event_date"],
                    app_id=self.app_id,
                    version=batch_id,
                    merge_schema=bool(extra or self.widen),
                )
                logger.debug("batch %s: bronze written at %.2f s", batch_id, elapsed(started))
            if counts.bad and not quarantine_done:
                current.update(stage="writing quarantine")
                append(
                    bad,
                    self.quarantine,
                    partition_by=["ingest_date"],
                    app_id=self.app_id,
                    version=batch_id,
                )
                logger.debug("batch %s: quarantine written at %.2f s", batch_id, elapsed(started))
            if not bronze_done:  # written: the batch's metrics join the history
                self.measured.append((batch_id, at, metrics))
                self.history.add(at, metrics)
        except (OverflowError, ValueError, QualityCheckFailed) as exc:
            # A value Python cannot hold (Great Expectations may report it as a failed check
            # without a cause): name its line.
            named = unrepresentable(parsed, self.dataset, batch_id, exc)
            if named is None:
                raise
            raise named from exc
        finally:
            parsed.unpersist()
        # Which tables hold the batch (empty outputs make no commit), before Spark's commit log.
        held = (bronze_done or counts.good > 0, quarantine_done or counts.bad > 0)
        record_batch(self.checkpoint, batch_id, dict(zip(self.table_names, held, strict=True)))
        if files is None:  # the logs could not tell: count the files the lines came from
            files = batch.select("_source_file").distinct().count()
        self.progress.add(
            BatchProgress(
                batch_id=batch_id,
                files=files,
                rows_in=counts.rows_in,
                rows_out=0 if bronze_done else counts.good,
                quarantined=0 if quarantine_done else counts.bad,
                seconds=elapsed(started),
                vanished=vanished,
            )
        )
        self.vanished += vanished

    def _extra_columns(self, parsed: DataFrame, counts: LineCounts) -> list[str]:
        """Bronze columns beyond the declared ones (`schema_evolution`): none for `rescue`
        (unknown fields stay in `_rescued_data`); for `add_columns` every field bronze has
        gained so far plus this batch's new top-level ones; `fail` refuses a batch with unknown
        fields, and `add_columns` one with unknown fields below the top level (before anything
        is written: the checkpoint stays where it was). Counts the batch's unknown fields."""
        found = unknown_fields(parsed) if counts.rescued else {}
        for name, rows in found.items():
            self.rescued_fields[name] = self.rescued_fields.get(name, 0) + rows
        mode = self.dataset.spec.schema_evolution
        if mode == "rescue" or self.dataset.record_format != "json":
            return []
        declared = set(self.dataset.full_bronze_schema.fieldNames())
        # the table's columns when the run started, plus those this run added (it holds the lock)
        known = [c for c in (*self.table_columns, *self.added_columns) if c not in declared]
        new = [f for f in found if f not in known]
        nested = [f for f in new if is_nested(f)]
        if (new and mode == "fail") or nested:
            adds = "" if mode == "fail" else ", which adds top-level fields only"
            raise RunoffError(
                f"{self.dataset.name}: records carry fields the schema does not declare: "
                f"{', '.join(nested if mode == 'add_columns' else new)} "
                f"(schema_evolution: {mode}{adds}): declare them in "
                f"{self.dataset.spec.file} or choose rescue"
                + (" or add_columns" if mode == "fail" else "")
            )
        self.added_columns.extend(new)
        return known + new


# -- the job --------------------------------------------------------------------------------
def run_bronze(
    spark: SparkSession | None,
    config: RunoffConfig,
    dataset_name: str,
    options: BronzeOptions | None = None,
) -> RunRecord:
    """Ingest what has landed since the last run; returns the run's ledger record.

    Takes the checkpoint lock first (a second run fails at once, naming the holder), then
    checks the landing folder and the checkpoint; `spark=None` builds the session only then
    (`jobs.spark.get_spark`), so a refused run costs no JVM start. Every run, failed or not,
    appends one row to the run ledger.
    """
    options = options or BronzeOptions()
    catalog = Catalog.load(config)
    spec = catalog.spec(dataset_name)
    name = spec.name
    job = f"bronze {name}"
    bronze, quarantine = catalog.tables(name).bronze, catalog.tables(name).quarantine
    assert bronze.checkpoint is not None
    checkpoint = bronze.checkpoint
    tables = {bronze.name: bronze.path, quarantine.name: quarantine.path}
    record = RunRecord(dataset=name, layer=LAYER, trigger=options.trigger)
    record.details = {
        "max_files_per_trigger": options.max_files_per_trigger,
        "max_bytes_per_trigger": options.max_bytes_per_trigger,
        "archive": options.archive,
    }
    progress = RunProgress(job, record)
    with (
        recorded_run(config.runs_path, record, describe=error_line),
        checkpoint_lock(checkpoint, f"runoff {job}", config.lock_path(checkpoint)),
    ):
        record.versions_before = {t: table_version(p) for t, p in tables.items()}
        record.versions_after = dict(record.versions_before)
        # A spec that changed what bronze's rows mean: refused before anything is written.
        change = definitions.refuse_changed_bronze(bronze, spec)
        record.details["definition"] = definitions.fingerprint(definitions.bronze_definition(spec))
        landing = catalog.landing_dir(name)
        if not landing.is_dir():  # the spec's source.path, or nothing landed yet: exit 2
            # Sample files exist for the built-in datasets only (jobs/samples).
            builtin = spec.file.resolve().parent == SEED_DIR  # SEED_DIR is resolved
            remedy = (
                f"land files there, or run `runoff generate {name}`"
                if builtin
                else f"land its files there, or set source.path in {spec.file} to their folder"
            )
            raise ConfigError(
                f"no landing directory for {name}: {landing} does not exist ({remedy})"
            )
        guard_checkpoint(
            checkpoint,
            owner={
                "dataset": name,
                "layer": LAYER,
                "table": str(bronze.path.relative_to(config.data)),
            },
            tables=tables,
            reset_command=f"runoff reset {name} --layer bronze --yes",
        )
        # Ingested landing files changed since (Spark will not read them again): reported.
        landing_check = check_landing(config, name)
        record_states(checkpoint, landing_check.new_states)
        record.details["changed_files"] = [c.to_json() for c in landing_check.changed]
        if options.trigger == "once" and (
            options.max_files_per_trigger or options.max_bytes_per_trigger
        ):
            say(f"{job}: --trigger once reads everything in one batch: rate limits ignored")
        if spark is None:
            from jobs.spark import get_spark

            spark = get_spark(app_name=f"runoff-bronze-{name}", config=config)
        ensure_resolves(spark, catalog, name)
        dataset = load_dataset(catalog, name)
        ensure_table(spark, bronze, dataset.full_bronze_schema)
        ensure_table(spark, quarantine)
        if change is not None:
            record.details["applied"] = change.what
            say(
                f"{job}: {spec.file} changed {bronze.name} ({'; '.join(change.what)}): applied "
                f"to the records this run ingests; `runoff rebuild {bronze.name}` applies it to "
                "every record"
            )
        batches = BronzeBatch(catalog, dataset, checkpoint, progress)
        # Fields declared since the table was created: the next append adds them.
        batches.table_columns = table_columns(bronze.path)
        batches.widen = [
            c for c in dataset.full_bronze_schema.fieldNames() if c not in batches.table_columns
        ]
        if batches.widen:
            record.details["declared_columns"] = batches.widen
            say(
                f"{job}: the spec declares new columns {', '.join(batches.widen)}: "
                "bronze gains them"
            )
        function = BatchFunction(batches)
        try:
            with live_status(progress.current.describe):  # a terminal's transient line
                run_query(
                    read_landing(spark, config, landing, options).writeStream,
                    function,
                    checkpoint,
                    options.trigger,
                    f"bronze_{name}",
                    tables=tables,
                    reset_command=f"runoff reset {name} --layer bronze --yes",
                )
            if change is not None or definitions.stored(bronze) is None:
                definitions.record(spark, bronze, spec)  # applied (or a table made before)
        finally:
            record.versions_after = {t: table_version(p) for t, p in tables.items()}
            record_checks(catalog.quality_results.path, record, batches.gates)
            append_metrics(
                catalog.quality_metrics.path,
                metric_rows(record.run_id, name, bronze.name, batches.measured),
            )
            record.details["rows_in"] = sum(b.rows_in for b in progress.batches)
            record.details["replayed_batches"] = sum(b.replayed for b in progress.batches)
            if batches.added_columns:
                record.details["added_columns"] = batches.added_columns
            if batches.rescued_fields and dataset.rescues:
                record.details["rescued_fields"] = batches.rescued_fields
            if batches.vanished:
                record.details["vanished_files"] = list(batches.vanished)
        # Ingested files no batch recorded (a batch whose files the checkpoint could not list).
        record_states(checkpoint, check_landing(config, name, only_new=True).new_states)
    say_problems(record, batches.gates)
    for line in report_lines(name, landing_check.changed, job):
        say(line)
    if batches.added_columns:
        say(
            f"{job}: bronze gained columns {', '.join(batches.added_columns)} "
            "(schema_evolution: add_columns; Delta schema evolution)"
        )
    if batches.rescued_fields and dataset.rescues:
        say(f"{job}: {rescued_text(batches.rescued_fields, spec.file)}")
    if batches.vanished:
        say(f"{job}: {vanished_text(batches.vanished)}")
    say(summary_line(job, record))
    return record


def cmd_bronze(config: RunoffConfig, args: argparse.Namespace) -> int:
    """`runoff bronze <dataset> [--trigger ...] [--max-files-per-trigger N] [...]`."""
    run_bronze(None, config, args.dataset, BronzeOptions.from_args(args))
    return 0
