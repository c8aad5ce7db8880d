"""Spark's `delta` format on delta-rs: a PySpark Python Data Source (batch/stream, read/write).

`ensure_delta_format(spark)` registers `DeltaDataSource` under the short name `delta` unless
delta-spark's JVM classes are on the classpath (then delta-spark serves `format("delta")`).

Read (`spark.read.format("delta").load(path)`, options `versionAsOf`, `timestampAsOf`): the
snapshot is planned on the driver through delta-rs (see `delta_tables.scan`), files are skipped
by partition values and min/max statistics of pushed-down filters, and executors read groups of
files in parallel. One task per file group; exact Delta types.

Stream read (`spark.readStream.format("delta")`): offsets are
`{"version": v, "index": i, "isStartingVersion": b}` = "all data files up to the i-th file of
version v consumed" (the snapshot at the start version first, unless `startingVersion` is
given, then the data files each later commit adds). `maxFilesPerTrigger` (default 1000) and
`maxBytesPerTrigger` limit a micro-batch, also under `trigger(availableNow=True)`; a commit
that removes data fails the stream unless `skipChangeCommits=true`.

Write (`df.write.format("delta").mode("append"|"overwrite")`, `writeStream.format("delta")`
with output mode append or complete): tasks write Parquet files with Delta statistics and the
driver commits them in one transaction per batch (`delta_tables.commit`), exactly once per
streaming batch id (query id read from `<checkpointLocation>/metadata`). Options: `partitionBy`
(comma-separated; `DataFrameWriter.partitionBy` is not available to Python data sources),
`mergeSchema`, `overwriteSchema`, `replaceWhere`, `txnAppId`/`txnVersion`, `userMetadata`.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from delta_tables.commit import (
    CommitResult,
    already_committed,
    commit_write,
    read_query_id,
    validate_replace_where,
)
from delta_tables.errors import (
    DeltaChangeCommitError,
    DeltaOptionError,
    DeltaSchemaMismatchError,
    DeltaTableNotFoundError,
    DeltaUnsupportedError,
)
from delta_tables.files import AddFile, FileWriter, WriteSpec, remove_files
from delta_tables.maintenance import DEFAULT_CHECKPOINT_INTERVAL
from delta_tables.predicate import Expr, conjunction, from_spark_filters
from delta_tables.scan import (
    FileTask,
    ScanPartition,
    TableLayout,
    commit_actions,
    file_task_from_add,
    is_delta_table,
    latest_version,
    layout_of,
    local_path,
    open_table,
    pack_files,
    read_partition,
    snapshot_files,
    unsupported_reader_features,
)
from delta_tables.schema import (
    align_write_schema,
    resolve_partitioning,
    strip_metadata,
    struct_from_delta_json,
    table_struct,
)
from delta_tables.stats import num_indexed_cols

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

FORMAT_NAME = "delta"
DELTA_SPARK_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DEFAULT_MAX_FILES_PER_TRIGGER = 1000


# -- session wiring ---------------------------------------------------------------------------
def delta_spark_available(spark: SparkSession) -> bool:
    """True when delta-spark's JVM classes are on the session's classpath."""
    from py4j.protocol import Py4JError

    try:
        jvm: Any = spark._jvm
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(DELTA_SPARK_EXTENSION, False, loader)
    except (Py4JError, AttributeError, TypeError):
        return False
    return True


def ensure_delta_format(spark: SparkSession) -> str:
    """Make `format("delta")` work on `spark`; returns the engine: "delta-spark" or "delta-rs"."""
    if delta_spark_available(spark):
        logger.info("delta-spark found on the classpath: it serves format('delta')")
        return "delta-spark"
    # The reader prunes files with pushed-down filters; Spark refuses such readers otherwise.
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    # Parquet timestamps as INT64 micros (with statistics) rather than legacy INT96.
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    spark.dataSource.register(DeltaDataSource)
    logger.info("format('delta') served by runoff's delta-rs Python data source")
    return "delta-rs"


# -- options ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Options:
    """Case-insensitive access to data source options with errors naming the option."""

    values: Mapping[str, str]

    def get(self, name: str) -> str | None:
        wanted = name.lower()
        for key, value in self.values.items():
            if key.lower() == wanted:
                return None if value is None else str(value)
        return None

    def path(self) -> str:
        raw = self.get("path")
        if not raw:
            raise DeltaOptionError(
                "option path is required: use .load(path) / .save(path) / .start(path)"
            )
        return local_path(raw)

    def boolean(self, name: str, default: bool = False) -> bool:
        raw = self.get(name)
        if raw is None or raw == "":
            return default
        if raw.strip().lower() in ("true", "1", "yes"):
            return True
        if raw.strip().lower() in ("false", "0", "no"):
            return False
        raise DeltaOptionError(f"option {name}={raw!r} is not a boolean (true/false)")

    def integer(self, name: str, minimum: int = 0) -> int | None:
        raw = self.get(name)
        if raw is None or raw == "":
            return None
        try:
            value = int(raw)
        except ValueError:
            raise DeltaOptionError(f"option {name}={raw!r} is not an integer") from None
        if value < minimum:
            raise DeltaOptionError(f"option {name}={raw!r} must be at least {minimum}")
        return value

    def byte_size(self, name: str) -> int | None:
        raw = self.get(name)
        if raw is None or raw == "":
            return None
        match = re.fullmatch(r"\s*(\d+)\s*([kmgt]?)i?b?\s*", raw.lower())
        if match is None:
            raise DeltaOptionError(
                f"option {name}={raw!r} is not a size in bytes (e.g. 1048576, 64m, 1g)"
            )
        scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[match.group(2)]
        value = int(match.group(1)) * scale
        if value < 1:
            raise DeltaOptionError(f"option {name}={raw!r} must be at least 1 byte")
        return value

    def columns(self, name: str) -> tuple[str, ...] | None:
        raw = self.get(name)
        if raw is None or raw.strip() == "":
            return None
        text = raw.strip()
        if text.startswith("["):
            try:
                parsed = json.loads(text)
            except ValueError:
                raise DeltaOptionError(
                    f"option {name}={raw!r} is not a JSON list of column names"
                ) from None
            return tuple(str(c) for c in parsed)
        return tuple(c.strip() for c in text.split(",") if c.strip())


# -- the data source --------------------------------------------------------------------------
class DeltaDataSource(DataSource):
    """`format("delta")` backed by delta-rs (see the module docstring for options)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def _options(self) -> Options:
        return Options(dict(self.options))

    def schema(self) -> StructType:
        options = self._options()
        version = options.integer("versionAsOf")
        timestamp = options.get("timestampAsOf")
        if version is not None and timestamp:
            raise DeltaOptionError("options versionAsOf and timestampAsOf cannot both be set")
        dt = open_table(options.path(), version, timestamp)
        # Pin the snapshot: Spark pickles this instance after schema() and reuses it to read.
        self.pinned_version = dt.version()
        self.pinned_schema_json = dt.schema().to_json()
        return strip_metadata(table_struct(dt))  # type: ignore[return-value]

    def reader(self, schema: StructType) -> DeltaBatchReader:
        return DeltaBatchReader(self._options(), getattr(self, "pinned_version", None))

    def streamReader(self, schema: StructType) -> DeltaStreamReader:
        return DeltaStreamReader(self._options(), getattr(self, "pinned_schema_json", None))

    def writer(self, schema: StructType, overwrite: bool) -> DeltaBatchWriter:
        return DeltaBatchWriter(self._options(), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DeltaStreamWriter:
        return DeltaStreamWriter(self._options(), schema, overwrite)


# -- batch read ---------------------------------------------------------------------------------
class DeltaInputPartition(InputPartition):
    """A Spark input partition wrapping a ScanPartition (files of one task)."""

    def __init__(self, scan: ScanPartition) -> None:
        super().__init__(None)
        self.scan = scan


def scan_partitions(dt: Any, predicate: Expr | None) -> list[DeltaInputPartition]:
    layout = layout_of(dt)
    unsupported = unsupported_reader_features(dt)
    if unsupported:
        logger.info(
            "table %s has reader features %s: reading through QueryBuilder",
            layout.table_path,
            unsupported,
        )
        return [DeltaInputPartition(ScanPartition(layout, query_builder=True))]
    groups = pack_files(snapshot_files(dt, predicate))
    if not groups:
        return [DeltaInputPartition(ScanPartition(layout))]
    return [DeltaInputPartition(ScanPartition(layout, files=group)) for group in groups]


class DeltaBatchReader(DataSourceReader):
    """Plans the snapshot's files (after filter pushdown) and reads them on executors."""

    def __init__(self, options: Options, pinned_version: int | None) -> None:
        self.path = options.path()
        version = options.integer("versionAsOf")
        self.version = version if version is not None else pinned_version
        self.timestamp = None if self.version is not None else options.get("timestampAsOf")
        self.predicates: list[Expr] = []

    def pushFilters(self, filters: list[Any]) -> Iterable[Any]:
        # Files are pruned with these; Spark still evaluates every filter on the rows read.
        self.predicates.extend(expr for _, expr in from_spark_filters(filters))
        return filters

    def partitions(self) -> Sequence[InputPartition]:
        dt = open_table(self.path, self.version, self.timestamp)
        return scan_partitions(dt, conjunction(self.predicates))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, DeltaInputPartition)
        yield from read_partition(partition.scan)


# -- stream read --------------------------------------------------------------------------------
class DeltaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of a Delta table's data files, in commit order, with admission control."""

    def __init__(self, options: Options, schema_json: str | None) -> None:
        self.path = options.path()
        if not is_delta_table(self.path):
            raise DeltaTableNotFoundError(f"{self.path} is not a Delta table (no _delta_log)")
        dt = open_table(self.path)
        unsupported = unsupported_reader_features(dt)
        if unsupported:
            raise DeltaUnsupportedError(
                f"Delta table {self.path} has reader features {unsupported} that streaming reads "
                "do not support"
            )
        self.schema_json = schema_json or dt.schema().to_json()
        self.partition_columns = tuple(dt.metadata().partition_columns)
        self.skip_change_commits = options.boolean("skipChangeCommits")
        self.max_files = options.integer("maxFilesPerTrigger", minimum=1)
        self.max_bytes = options.byte_size("maxBytesPerTrigger")
        self.starting_version = self._starting_version(options.get("startingVersion"), dt.version())
        self.target_version: int | None = None
        self._cache: dict[tuple[int, bool], list[FileTask]] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_cache"] = {}
        return state

    def _starting_version(self, raw: str | None, latest: int) -> int | None:
        if raw is None or raw.strip() == "":
            return None
        if raw.strip().lower() == "latest":
            return latest + 1
        try:
            version = int(raw)
        except ValueError:
            raise DeltaOptionError(
                f"option startingVersion={raw!r} is not a version number or 'latest'"
            ) from None
        if version < 0 or version > latest:
            raise DeltaOptionError(
                f"option startingVersion={raw!r} is not a version of Delta table {self.path} "
                f"(0..{latest})"
            )
        return version

    @property
    def layout(self) -> TableLayout:
        return TableLayout(self.path, -1, self.schema_json, self.partition_columns)

    # offsets ------------------------------------------------------------------------------
    def initialOffset(self) -> dict[str, Any]:
        if self.starting_version is not None:
            return {"version": self.starting_version, "index": 0, "isStartingVersion": False}
        return {"version": open_table(self.path).version(), "index": 0, "isStartingVersion": True}

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.max_files is not None:
            return ReadMaxFiles(self.max_files)
        if self.max_bytes is not None:
            return ReadMaxBytes(self.max_bytes)
        return ReadMaxFiles(DEFAULT_MAX_FILES_PER_TRIGGER)

    def prepareForTriggerAvailableNow(self) -> None:
        self.target_version = latest_version(self.path)
        logger.info("availableNow: reading %s up to version %s", self.path, self.target_version)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        upper = (
            self.target_version if self.target_version is not None else latest_version(self.path)
        )
        max_files: int | None = None
        max_bytes: int | None = None
        if isinstance(limit, ReadMaxFiles):
            max_files = limit.max_files
            max_bytes = self.max_bytes
        elif isinstance(limit, ReadMaxBytes):
            max_bytes = limit.max_bytes
        elif not isinstance(limit, ReadAllAvailable):
            raise DeltaUnsupportedError(
                f"read limit {limit!r} is not supported by the delta source"
            )
        version = int(start["version"])
        index = int(start["index"])
        starting = bool(start.get("isStartingVersion", False))
        taken = 0
        taken_bytes = 0
        while starting or version <= upper:
            files = self._files(version, starting)
            while index < len(files):
                size = files[index].size
                if max_files is not None and taken >= max_files:
                    return _offset(version, index, starting)
                if max_bytes is not None and taken and taken_bytes + size > max_bytes:
                    return _offset(version, index, starting)
                taken += 1
                taken_bytes += size
                index += 1
            version, index, starting = version + 1, 0, False
        return _offset(version, index, starting)

    def _files(self, version: int, starting: bool) -> list[FileTask]:
        key = (version, starting)
        if key not in self._cache:
            self._cache[key] = self._snapshot(version) if starting else self._commit_files(version)
            if len(self._cache) > 64:
                self._cache.pop(next(iter(self._cache)))
        return self._cache[key]

    def _snapshot(self, version: int) -> list[FileTask]:
        dt = open_table(self.path, version)
        return sorted(snapshot_files(dt), key=lambda t: (t.modification_time, t.path))

    def _commit_files(self, version: int) -> list[FileTask]:
        actions = commit_actions(self.path, version)
        operation = next(
            (a["commitInfo"].get("operation") for a in actions if "commitInfo" in a), "?"
        )
        removes = [
            a["remove"] for a in actions if "remove" in a and a["remove"].get("dataChange", True)
        ]
        if removes:
            if self.skip_change_commits:
                logger.info("skipping change commit %s (%s) of %s", version, operation, self.path)
                return []
            raise DeltaChangeCommitError(
                f"Delta table {self.path} changed existing data at version {version} "
                f"({operation}: {len(removes)} file(s) removed or rewritten); a streaming read "
                "only follows appends: set option skipChangeCommits=true to ignore such commits, "
                "or restart the stream (new checkpoint) from a later startingVersion"
            )
        for action in actions:
            metadata = action.get("metaData")
            if metadata and _schema_shape(metadata.get("schemaString")) != _schema_shape(
                self.schema_json
            ):
                raise DeltaSchemaMismatchError(
                    f"the schema of Delta table {self.path} changed at version {version}; restart "
                    "the streaming query to read with the new schema"
                )
        struct = struct_from_delta_json(self.schema_json)
        tasks = []
        for action in actions:
            add = action.get("add")
            if not add or not add.get("dataChange", True):
                continue
            if add.get("deletionVector"):
                raise DeltaUnsupportedError(
                    f"Delta table {self.path} version {version} adds a file with a deletion "
                    "vector; streaming such commits is not supported (use skipChangeCommits=true)"
                )
            tasks.append(file_task_from_add(self.path, add, struct))
        return tasks

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        tasks: list[FileTask] = []
        version = int(start["version"])
        starting = bool(start.get("isStartingVersion", False))
        end_version = int(end["version"])
        end_starting = bool(end.get("isStartingVersion", False))
        while version < end_version or (version == end_version and starting == end_starting):
            if version == end_version and starting == end_starting and int(end["index"]) == 0:
                break  # nothing of the end version is read (it need not exist yet)
            files = self._files(version, starting)
            low = (
                int(start["index"])
                if version == int(start["version"])
                and starting == bool(start.get("isStartingVersion", False))
                else 0
            )
            high = (
                int(end["index"])
                if version == end_version and starting == end_starting
                else len(files)
            )
            tasks.extend(files[low:high])
            if version == end_version and starting == end_starting:
                break
            version, starting = version + 1, False
        layout = self.layout
        return [DeltaInputPartition(ScanPartition(layout, files=g)) for g in pack_files(tasks)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, DeltaInputPartition)
        yield from read_partition(partition.scan)

    def commit(self, end: dict[str, Any]) -> None:
        return None


def _offset(version: int, index: int, starting: bool) -> dict[str, Any]:
    return {"version": version, "index": index, "isStartingVersion": starting}


def _schema_shape(schema_json: str | None) -> Any:
    if not schema_json:
        return None
    from delta_tables.schema import type_shape

    return type_shape(strip_metadata(struct_from_delta_json(schema_json)))


# -- write ----------------------------------------------------------------------------------------
@dataclass
class DeltaCommitMessage(WriterCommitMessage):
    """The files one write task produced (sent back to the driver to be committed)."""

    files: list[AddFile] = field(default_factory=list)


@dataclass(frozen=True)
class WritePlan:
    """A write validated on the driver: the file layout for tasks plus commit settings."""

    spec: WriteSpec
    schema_json: str
    partition_by: tuple[str, ...]
    mode: str
    replace_where: str | None
    merge_schema: bool
    overwrite_schema: bool
    user_metadata: str | None
    checkpoint_interval: int


def plan_write(options: Options, data_schema: StructType, overwrite: bool) -> WritePlan:
    """Validate a write against the table (schema enforcement, options) before any task runs."""
    path = options.path()
    merge_schema = options.boolean("mergeSchema")
    overwrite_schema = options.boolean("overwriteSchema")
    replace_where = options.get("replaceWhere") or None
    if overwrite_schema and not overwrite:
        raise DeltaOptionError("option overwriteSchema=true needs mode overwrite")
    if replace_where and not overwrite:
        raise DeltaOptionError(f"option replaceWhere={replace_where!r} needs mode overwrite")
    if replace_where and overwrite_schema:
        raise DeltaOptionError("options replaceWhere and overwriteSchema cannot be combined")
    exists = is_delta_table(path)
    dt = open_table(path) if exists else None
    current = table_struct(dt) if dt is not None else None
    layout = align_write_schema(
        current,
        data_schema,
        table_name=path,
        merge_schema=merge_schema,
        overwrite_schema=overwrite_schema and overwrite,
    )
    requested = options.columns("partitionBy")
    partition_by = resolve_partitioning(
        requested,
        tuple(dt.metadata().partition_columns) if dt is not None else None,
        layout.target,
        replaces_schema=overwrite and overwrite_schema,
        table_name=path,
    )
    if replace_where:
        validate_replace_where(replace_where, layout.target, path)
    configuration = dict(dt.metadata().configuration) if dt is not None else {}
    interval = options.integer("checkpointInterval", minimum=0)
    spec = WriteSpec(
        table_path=path,
        schema_json=layout.target.json(),
        sources=layout.sources,
        partition_by=partition_by,
        num_indexed_cols=num_indexed_cols(configuration),
        replace_where=replace_where,
        table_name=path,
    )
    return WritePlan(
        spec=spec,
        schema_json=layout.target.json(),
        partition_by=partition_by,
        mode="overwrite" if overwrite else "append",
        replace_where=replace_where,
        merge_schema=merge_schema,
        overwrite_schema=overwrite_schema,
        user_metadata=options.get("userMetadata") or None,
        checkpoint_interval=DEFAULT_CHECKPOINT_INTERVAL if interval is None else interval,
    )


def write_task(plan: WritePlan, batches: Iterator[pa.RecordBatch]) -> DeltaCommitMessage:
    writer = FileWriter(plan.spec)
    try:
        files = writer.write_all(batches)
    except BaseException:
        writer.abort()
        raise
    return DeltaCommitMessage(files=files)


def commit_plan(
    plan: WritePlan,
    messages: Sequence[WriterCommitMessage | None],
    app_id: str | None,
    txn_version: int | None,
) -> CommitResult:
    files = [f for m in messages if isinstance(m, DeltaCommitMessage) for f in m.files]
    result = commit_write(
        plan.spec.table_path,
        files,
        schema=struct_from_delta_json(plan.schema_json),
        partition_by=plan.partition_by,
        mode="overwrite" if plan.mode == "overwrite" else "append",
        replace_where=plan.replace_where,
        merge_schema=plan.merge_schema,
        overwrite_schema=plan.overwrite_schema,
        app_id=app_id,
        txn_version=txn_version,
        user_metadata=plan.user_metadata,
        checkpoint_interval=plan.checkpoint_interval,
    )
    logger.info("delta commit: %s", result.line())
    return result


def abort_plan(plan: WritePlan, messages: Sequence[WriterCommitMessage | None]) -> None:
    files = [f.path for m in messages if isinstance(m, DeltaCommitMessage) for f in m.files]
    remove_files(plan.spec.table_path, files)


class DeltaBatchWriter(DataSourceArrowWriter):
    """`df.write.format("delta")`: files from every task, one commit on the driver."""

    def __init__(self, options: Options, schema: StructType, overwrite: bool) -> None:
        self.plan = plan_write(options, schema, overwrite)
        app_id = options.get("txnAppId") or None
        txn_version = options.integer("txnVersion")
        if (app_id is None) != (txn_version is None):
            raise DeltaOptionError("options txnAppId and txnVersion must be set together")
        self.app_id = app_id
        self.txn_version = txn_version
        self.skip = False
        if app_id is not None and is_delta_table(self.plan.spec.table_path):
            self.skip = already_committed(
                open_table(self.plan.spec.table_path), app_id, txn_version
            )

    def write(self, iterator: Iterator[pa.RecordBatch]) -> DeltaCommitMessage:
        if self.skip:  # this (txnAppId, txnVersion) is already in the table: write nothing
            for _ in iterator:
                pass
            return DeltaCommitMessage()
        return write_task(self.plan, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.skip:
            logger.info(
                "txnAppId=%s txnVersion=%s already committed: skipped",
                self.app_id,
                self.txn_version,
            )
            return
        commit_plan(self.plan, messages, self.app_id, self.txn_version)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        abort_plan(self.plan, messages)


class DeltaStreamWriter(DataSourceStreamArrowWriter):
    """`writeStream.format("delta")`: one commit per micro-batch (Transaction(query id, batch))."""

    def __init__(self, options: Options, schema: StructType, overwrite: bool) -> None:
        checkpoint = options.get("checkpointLocation")
        if not checkpoint:
            raise DeltaOptionError(
                "option checkpointLocation is required for streaming writes to Delta: the "
                "query id stored there makes each micro-batch commit exactly once"
            )
        if options.get("replaceWhere"):
            raise DeltaOptionError("option replaceWhere is not supported by streaming writes")
        self.checkpoint_location = checkpoint
        # Complete output mode arrives as overwrite=True: each batch replaces the table.
        self.plan = plan_write(options, schema, overwrite)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> DeltaCommitMessage:
        return write_task(self.plan, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        query_id = read_query_id(self.checkpoint_location)
        commit_plan(self.plan, messages, query_id, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        abort_plan(self.plan, messages)


def unsupported_update_mode(table: str) -> DeltaUnsupportedError:
    """The error for output mode "update" (Spark itself rejects it for this sink)."""
    return DeltaUnsupportedError(
        f"the Delta sink for {table} does not support output mode 'update' (same as "
        "delta-spark): use foreachBatch and upsert each micro-batch with "
        "delta_tables.merge_into(batch_df, path, keys=..., app_id=..., version=batch_id) (MERGE)"
    )
