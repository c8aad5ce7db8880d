"""`runoff quarantine replay <dataset> [--reason R] [--file F] [--since T]`: quarantined lines
parsed again with the current spec; those that now pass are published to bronze, exactly once.

For lines quarantined by a cause since fixed in the spec (a row rule, a type, a required field).
Input: the dataset's quarantine rows, chosen as `runoff quarantine list` chooses them (`--reason`,
`--since`; `--file`: a landing file's URI, path or name), their `_raw` parsed by bronze's own
parser (`jobs.bronze.parse`) under the spec as it is now. Lines quarantined as `invalid UTF-8` or
`line too long` are never replayed: their `_raw` is not the landed line (bytes replaced by U+FFFD;
the line's start only); `runoff backfill` re-reads their landing files.

Output: the lines that now pass, and the bronze gate (`quality.gate`), are appended to bronze as
a backfill's rows are (`_source_file` their landing file, `_ingested_at` the replay's start,
`_batch_id` the last micro-batch the bronze stream had committed) and deleted from quarantine; the
others stay as they are. Silver reads the new bronze rows on its next run (an append, which the
silver streams read like any other), `runoff validate` on its next. One ledger row, layer
"replay": `rows` published, `quarantined` lines that stay.

Exactly once. Before writing either table, a replay stages what it publishes: the bronze rows
with their quarantine line (`_source_file`, line number) in a Delta table beside the bronze
checkpoint (`<checkpoint>/replay`), with the replay's number n (one more than the last replay
bronze holds). Then:
1. bronze: one append carrying the app transaction (`REPLAY_APP`, n): skipped when bronze holds it;
2. quarantine: one MERGE deleting the staged lines, carrying the same app transaction;
3. the staged table is deleted.
A replay stopped at any point leaves the staged table; the next replay finishes it first (the
same rows, whatever the spec says by then), then replays anew. Lines published are gone from
quarantine, and lines that fail again are left, so a second replay changes nothing.

Concurrency: the replay holds the bronze checkpoint lock: a bronze run or a backfill of the
dataset fails at once naming the replay, and a replay during one fails naming it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from core.config import Location, RunoffConfig, remove_tree
from core.console import say
from delta_tables import definitions
from delta_tables.catalog import Catalog, Table
from delta_tables.ledger import RunRecord, recorded_run
from delta_tables.writes import (
    already_committed,
    app_transaction,
    committed_version,
    is_delta_table,
    table_version,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from jobs.streaming.dataset import Dataset
    from quality.gate import Gate

LAYER = "replay"
# The app id of every replay's commits (bronze's append, quarantine's delete).
REPLAY_APP = "runoff-quarantine-replay"
# Quarantine reasons whose `_raw` is not the landed line (`jobs.bronze.parse`): never replayed.
NOT_REPLAYED = ("invalid UTF-8", "line too long")
STAGED = "replay"  # the staged table, in the bronze checkpoint
LINE = "_line_number"


def n_lines(count: int) -> str:
    return f"{count} line" if count == 1 else f"{count} lines"


@dataclass(frozen=True)
class Choice:
    """Which quarantined lines a replay reads (None: any)."""

    reason: str | None = None
    file: str | None = None
    since: datetime | None = None

    def describe(self) -> str:
        parts = [
            f"reason {self.reason!r}" if self.reason else "",
            f"file {self.file}" if self.file else "",
            f"ingested since {self.since.isoformat()}" if self.since else "",
        ]
        return ", ".join(p for p in parts if p) or "every line"


def chosen(choice: Choice) -> Column:
    """The quarantine rows `choice` reads, replayable reasons only (the file as
    `jobs.ops.quarantine.file_matches` matches it)."""
    from pyspark.sql import functions as F

    reason = F.split(F.col("_error"), ": ", 2).getItem(0)
    where = ~reason.isin(*NOT_REPLAYED)
    if choice.reason is not None:
        where &= reason == choice.reason
    if choice.since is not None:
        where &= F.col("_ingested_at") >= F.lit(choice.since)
    if choice.file is not None:
        wanted = choice.file.strip()
        where &= (F.col("_source_file") == wanted) | F.col("_source_file").endswith(
            "/" + wanted.lstrip("/")
        )
    return where


@dataclass
class Replay:
    """One replay's tables and what it found."""

    dataset: Dataset
    bronze: Table
    quarantine: Table
    staged: Location
    record: RunRecord

    def stage(self, spark: SparkSession, choice: Choice, gate: Gate) -> int:
        """Parse the chosen lines, check the passing ones with the gate and stage them; the
        number of lines staged (0: nothing staged)."""
        from pyspark.sql import functions as F

        from jobs.bronze.parse import count_lines, good_rows, parse_lines
        from jobs.checkpoints.files import last_committed

        lines = (
            spark.read.format("delta")
            .load(str(self.quarantine.path))
            .where(chosen(choice))
            .select(
                F.col("_raw").alias("value"),
                "_source_file",
                # A file's lines in order: the line number (`parse_lines`' `_block_start`).
                F.col(LINE).cast("long").alias("_block_start"),
            )
        )
        parsed = parse_lines(lines, self.dataset).persist()
        try:
            counts = count_lines(parsed)  # one job: the lines read and those that pass
            total, passing = counts.rows_in, counts.good
            batch_id = max(last_committed(self.bronze.checkpoint) or 0, 0)
            ingested_at = datetime.now(UTC)
            rows = good_rows(parsed, self.dataset, batch_id, ingested_at, keep=["_block_start"])
            rows = rows.withColumnRenamed("_block_start", LINE).persist()
            try:
                self.record.quarantined = total - passing
                say(
                    f"replay {self.dataset.name}: {n_lines(total)} read from quarantine "
                    f"({choice.describe()}); the spec now passes {passing}"
                )
                if passing:
                    gate.check(rows.drop(LINE), batch_id, passing)
                    last = committed_version(self.bronze.path, REPLAY_APP)
                    number = 0 if last is None else last + 1
                    staged = rows.withColumn("_replay", F.lit(number))
                    staged.write.format("delta").mode("overwrite").save(str(self.staged))
                return passing
            finally:
                rows.unpersist()
        finally:
            parsed.unpersist()

    def publish(self, spark: SparkSession) -> None:
        """Write the staged lines to bronze, delete them from quarantine, drop the stage; each
        step is skipped when a stopped replay had done it."""
        from pyspark.sql import functions as F

        from delta_tables.writes import append

        staged = spark.read.format("delta").load(str(self.staged))
        number, rows = staged.agg(F.max("_replay"), F.count("*")).first()  # type: ignore[misc]
        if number is not None:
            if not already_committed(self.bronze.path, REPLAY_APP, number):
                append(
                    staged.drop(LINE, "_replay"),
                    self.bronze.path,
                    partition_by=["event_date"],
                    app_id=REPLAY_APP,
                    version=number,
                )
            if not already_committed(self.quarantine.path, REPLAY_APP, number):
                self.delete_lines(staged, number)
            self.record.rows += rows
            say(
                f"replay {self.dataset.name}: {n_lines(rows)} published to bronze (replay {number})"
            )
        self.drop_stage()

    def delete_lines(self, staged: DataFrame, number: int) -> None:
        """Delete the staged lines from quarantine, in one commit of replay `number`."""
        from delta.tables import DeltaTable

        spark = staged.sparkSession
        lines = staged.select("_source_file", LINE).alias("s")
        target = DeltaTable.forPath(spark, str(self.quarantine.path)).alias("t")
        match = f"t._source_file = s._source_file AND t.{LINE} = s.{LINE}"
        with app_transaction(spark, REPLAY_APP, number):
            target.merge(lines, match).whenMatchedDelete().execute()

    def drop_stage(self) -> None:
        remove_tree(self.staged)


def run_replay(
    spark: SparkSession | None, config: RunoffConfig, dataset_name: str, choice: Choice
) -> RunRecord:
    """Replay the chosen quarantined lines (module doc); returns the run's ledger record."""
    from jobs.streaming.dataset import load_dataset
    from jobs.streaming.query import checkpoint_locks, error_line
    from quality.gate import Gate, record_checks, say_problems
    from quality.suites import checked_tables

    catalog = Catalog.load(config)
    dataset = load_dataset(catalog, dataset_name)
    name = dataset.name
    tables = catalog.tables(name)
    bronze, quarantine = tables.bronze, tables.quarantine
    assert bronze.checkpoint is not None, "the catalog gives bronze its checkpoint"
    gate = Gate(
        next(t for t in checked_tables(catalog, name) if t.name == bronze.name),
        f"fix the lines or the expectation in {dataset.spec.file} and replay again",
    )
    record = RunRecord(dataset=name, layer=LAYER, trigger=choice.describe())
    replay = Replay(dataset, bronze, quarantine, bronze.checkpoint / STAGED, record)
    started = time.perf_counter()
    paths = {t.name: t.path for t in (bronze, quarantine)}
    with recorded_run(config.runs_path, record, describe=error_line):
        record.versions_before = {t: table_version(p) for t, p in paths.items()}
        try:
            with checkpoint_locks(config, [bronze.checkpoint], f"runoff quarantine replay {name}"):
                if not is_delta_table(quarantine.path):
                    say(f"replay {name}: no quarantine table yet ({quarantine.path})")
                    return record
                # Lines parsed by a spec that changed what bronze's rows mean: refused.
                definitions.refuse_changed_bronze(bronze, dataset.spec)
                if spark is None:
                    from jobs.spark import get_spark

                    spark = get_spark(app_name=f"runoff-replay-{name}", config=config)
                if is_delta_table(replay.staged):
                    say(f"replay {name}: finishing the replay a stopped run had staged")
                    replay.publish(spark)
                else:
                    remove_tree(replay.staged)  # a stage never committed holds nothing
                if replay.stage(spark, choice, gate):
                    replay.publish(spark)
        finally:
            record.versions_after = {t: table_version(p) for t, p in paths.items()}
            record_checks(catalog.quality_results.path, record, [gate])
    say_problems(record, [gate])
    say(
        f"replay {name}: {record.status} in {time.perf_counter() - started:.1f} s: "
        f"{n_lines(record.rows)} published to bronze, {record.quarantined} left in quarantine"
    )
    return record
