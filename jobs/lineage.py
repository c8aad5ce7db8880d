"""OpenLineage run events for runoff's runs: lineage into the catalog a team already runs.

Input: the runs the run ledger records (`delta_tables.ledger.recorded_run` tells its listeners
when a run starts and when it has ended), the dataset's spec and tables (`delta_tables.catalog`)
and the tables' Delta schemas and versions (delta-rs). Output: for every bronze, silver,
backfill, validate and quarantine replay run, a START event, then COMPLETE, FAIL or ABORT (a run
interrupted by a signal), sent by the official `openlineage-python` client.

Configured the standard way: `OPENLINEAGE_URL` (with `OPENLINEAGE_ENDPOINT`, `OPENLINEAGE_API_KEY`),
`OPENLINEAGE_CONFIG` or an `openlineage.yml` (working directory, `~/.openlineage/`), or
`OPENLINEAGE__TRANSPORT__*` variables. Nothing is emitted when none is set, or when
`OPENLINEAGE_DISABLED=true`. Lineage never fails a run: settings the client refuses, or a
server it cannot reach, cost one warning line (the client's own retries go to the log file).

What the events say:
- job: namespace `OPENLINEAGE_NAMESPACE` (default `default`, as Airflow's OpenLineage provider),
  name `runoff.<dataset>.<command>`, job type BATCH of integration RUNOFF.
- run: the run ledger's run id, as a UUID (one id for the run in `delta/ops/runs` and in the
  lineage graph); its parent when `OPENLINEAGE_PARENT_ID` is set (`<namespace>/<job>/<run id>`,
  what the provider's `lineage_parent_id` macro gives an Airflow task: the DAG hooks set it, and
  `OPENLINEAGE_ROOT_PARENT_ID` for the DAG run), so that the DAG and the Spark work join in one
  graph; a backfill's interval as its nominal time; the failed run's one line as error message.
- datasets, named by OpenLineage's conventions (`file` + absolute path; `s3://<bucket>` + key),
  each with a symlink to its table's name: bronze reads the landing folder and writes bronze and
  quarantine; silver reads bronze and writes each silver table; a backfill reads the landing
  folder and writes all of them; validate reads the tables it validated; a replay reads
  quarantine and writes bronze and quarantine (validate's START names the tables of the layers it
  checks, its end those it validated). The end event adds to each table its schema, its
  Delta version after the run, the quality checks of the run on it (the gate's per batch,
  validate's) as data quality assertions, the rows bronze and quarantine received, and column
  lineage derived from the spec: each bronze column from its landing field (`rename`, `select`,
  `event_time`), each silver key and measure from its bronze columns (the SQL of `select`, `keys`
  and `measures`, read by `openlineage-sql`), window bounds from `event_time`. A `transform:`
  table has no column lineage (its code is not read).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core import caller

if TYPE_CHECKING:
    from openlineage.client import OpenLineageClient
    from openlineage.client.event_v2 import InputDataset, OutputDataset, RunEvent

    from core.config import Location, RunoffConfig
    from core.specs import DatasetSpec, SilverSpec
    from delta_tables.catalog import Catalog, Table
    from delta_tables.ledger import RunRecord

logger = logging.getLogger(__name__)

PRODUCER = "urn:runoff"
NAMESPACE_ENV = "OPENLINEAGE_NAMESPACE"
PARENT_ENV = "OPENLINEAGE_PARENT_ID"
ROOT_PARENT_ENV = "OPENLINEAGE_ROOT_PARENT_ID"
# The commands whose runs move data (the others, reset and maintain, emit nothing).
COMMANDS = ("bronze", "silver", "backfill", "validate", "replay")
# The validate layer (`--layer`) of each kind of table.
LAYER_OF = {"bronze": "bronze", "quarantine": "bronze", "silver": "silver"}
# The end states of a ledger run, as OpenLineage event types.
END_STATES = {"success": "COMPLETE", "failed": "FAIL", "interrupted": "ABORT"}
# The variables openlineage-python reads (and writes, `new_client`).
LINEAGE_PREFIX = "OPENLINEAGE"
# Where openlineage-python looks for its file when OPENLINEAGE_CONFIG is not set.
CONFIG_FILE = "openlineage.yml"


def configured(env: Mapping[str, str], cwd: Path | None = None) -> bool:
    """Whether OpenLineage is set up in `env` (the client's sources, `cwd` for its file)."""
    if env.get("OPENLINEAGE_DISABLED", "").strip().lower() == "true":
        return False
    if env.get("OPENLINEAGE_URL") or env.get("OPENLINEAGE_CONFIG"):
        return True
    if any(key.startswith("OPENLINEAGE__TRANSPORT") for key in env):
        return True
    files = [(cwd or caller.cwd()) / CONFIG_FILE, Path("~/.openlineage").expanduser() / CONFIG_FILE]
    return any(f.is_file() for f in files)


@contextmanager
def emitting(config: RunoffConfig, env: Mapping[str, str] | None = None) -> Iterator[None]:
    """Runs recorded in the block emit their lineage, when OpenLineage is configured (the
    client is made at the first event: a command that records no run pays nothing). `env`:
    the caller's (`core.caller`) unless given."""
    env = caller.environ() if env is None else env
    if not configured(env):
        yield
        return
    from delta_tables.ledger import listening

    listener = LineageListener(config, None, env)
    try:
        with listening(listener):
            yield
    finally:
        listener.close()


# -- names -------------------------------------------------------------------------------------
def dataset_id(location: Location | str) -> tuple[str, str]:
    """OpenLineage's (namespace, name) of a folder: `file` and its absolute path, or
    `s3://<bucket>` and its key (an `s3a://` URI is an S3 one)."""
    text = str(location)
    if "://" not in text or text.startswith("file:"):
        return "file", str(Path(text.removeprefix("file://")).absolute())
    scheme, rest = text.split("://", 1)
    bucket, _, key = rest.partition("/")
    scheme = "s3" if scheme in ("s3a", "s3n") else scheme
    return f"{scheme}://{bucket}", key.rstrip("/")


def run_uuid(run_id: str) -> str:
    """The ledger's run id (32 hex digits) as the UUID OpenLineage wants."""
    return str(uuid.UUID(run_id))


def job_name(record: RunRecord) -> str:
    return f"runoff.{record.dataset}.{record.layer}"


@dataclass(frozen=True)
class RunReference:
    """A run of another job (`<namespace>/<job name>/<run id>`): a parent or root run."""

    namespace: str
    name: str
    run_id: str

    @classmethod
    def parse(cls, text: str) -> RunReference | None:
        namespace, _, rest = text.strip().partition("/")
        name, _, run_id = rest.rpartition("/")
        try:
            uuid.UUID(run_id)
        except ValueError:
            return None
        return cls(namespace, name, run_id) if namespace and name else None


# -- record fields and column lineage ---------------------------------------------------------
def record_fields(ddl: str) -> list[tuple[str, str]]:
    """The top-level (name, type) pairs of a Spark DDL column list, without Spark."""
    fields, depth, start = [], 0, 0
    for i, char in enumerate(ddl + ","):
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth -= 1
        elif char == "," and depth == 0:
            item, start = ddl[start:i].strip(), i + 1
            if not item:
                continue
            if item.startswith("`"):
                end = item.index("`", 1)
                name, rest = item[1:end], item[end + 1 :]
            else:
                name, _, rest = item.partition(" ")
            type_text = rest.strip().removeprefix(":").strip()
            fields.append((name, type_text.split(" COMMENT ")[0].split(" NOT NULL")[0].lower()))
    return fields


@dataclass(frozen=True)
class ColumnSource:
    """An output column's inputs: columns of one input dataset, and how they were used."""

    columns: tuple[str, ...]
    subtype: str  # IDENTITY, TRANSFORMATION or AGGREGATION


def _sql_lineage(sql: str, source: str) -> dict[str, tuple[str, ...]]:
    """Each output column of `sql` -> the columns of table `source` it is computed from."""
    import openlineage_sql

    try:
        meta = openlineage_sql.parse([sql], dialect="spark")
    except Exception as exc:  # noqa: BLE001 - SQL the parser cannot read: no column lineage
        logger.debug("no column lineage for %r: %s", sql, exc)
        return {}
    if meta is None:
        return {}
    found: dict[str, tuple[str, ...]] = {}
    for item in meta.column_lineage:
        inputs = sorted(
            {c.name for c in item.lineage if c.origin is not None and c.origin.name == source}
        )
        if inputs:
            found[item.descendant.name] = tuple(inputs)
    return found


def bronze_lineage(spec: DatasetSpec) -> dict[str, ColumnSource]:
    """Each bronze column -> the landing fields it comes from."""
    sources: dict[str, ColumnSource] = {}
    if spec.select:
        for column, inputs in _sql_lineage(
            f"SELECT {', '.join(spec.select)} FROM landing", "landing"
        ).items():
            sources[column] = ColumnSource(inputs, "TRANSFORMATION")
    else:
        renames = dict(spec.rename)
        for name, _ in record_fields(spec.schema):
            sources[renames.get(name, name)] = ColumnSource((name,), "IDENTITY")
    event_time = _sql_lineage(f"SELECT ({spec.event_time}) AS event_time FROM landing", "landing")
    if "event_time" in event_time:
        for column in ("event_time", "event_date"):
            sources[column] = ColumnSource(event_time["event_time"], "TRANSFORMATION")
    return sources


def silver_lineage(silver: SilverSpec) -> dict[str, ColumnSource]:
    """Each column of a silver table -> the bronze columns it comes from (none for a
    `transform:` table)."""
    if silver.transform:
        return {}
    rows = "bronze"
    if silver.select and not any(e.strip() == "*" for e in silver.select):
        carried = ["event_time"] if silver.window else []
        rows = f"(SELECT {', '.join([*carried, *silver.select])} FROM bronze) AS rows"
    keys = list(silver.keys)
    selected = [k if k == p else f"{p} AS {k}" for k, p in silver.key_sources]
    measures = [f"{sql} AS {name}" for name, sql in silver.measures]
    where = f" WHERE {silver.where}" if silver.where else ""
    paths = [p for _, p in silver.key_sources]
    group = f" GROUP BY {', '.join(paths)}" if keys else ""
    sql = f"SELECT {', '.join([*selected, *measures])} FROM {rows}{where}{group}"
    found = _sql_lineage(sql, "bronze")
    sources: dict[str, ColumnSource] = {}
    if silver.window:
        for column in ("window_start", "window_end"):
            sources[column] = ColumnSource(("event_time",), "TRANSFORMATION")
    for key in keys:
        if key in found:
            identity = found[key] == (key,) and not silver.select
            sources[key] = ColumnSource(found[key], "IDENTITY" if identity else "TRANSFORMATION")
    for name, _ in silver.measures:
        if name in found:
            sources[name] = ColumnSource(found[name], "AGGREGATION")
    return sources


# -- the events --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Node:
    """A dataset of a run: a table, or the landing folder."""

    namespace: str
    name: str
    table: Table | None = None  # None: the landing folder


_client_settings = threading.Lock()


def new_client(env: Mapping[str, str], cwd: Path) -> OpenLineageClient:
    """The client of `env`'s `OPENLINEAGE_*` settings (and `cwd`'s openlineage.yml). The client
    reads them from the process's environment (and folder), and copies `OPENLINEAGE_URL` into
    `OPENLINEAGE__TRANSPORT__*` variables of the process as it starts, where a later client
    would read them before a changed `OPENLINEAGE_URL` (the next command of `runoff serve`, or
    of a program calling the CLI): the process's are `env`'s while it is made (one client at a
    time), and taken back after."""
    from openlineage.client import OpenLineageClient

    ours = {k: v for k, v in env.items() if k.startswith(LINEAGE_PREFIX)}
    if "OPENLINEAGE_CONFIG" not in ours and (cwd / CONFIG_FILE).is_file():
        ours["OPENLINEAGE_CONFIG"] = str(cwd / CONFIG_FILE)
    with _client_settings:
        before = {k: v for k, v in os.environ.items() if k.startswith(LINEAGE_PREFIX)}
        for key in before:
            del os.environ[key]
        os.environ.update(ours)
        try:
            return OpenLineageClient()
        finally:
            for key in [k for k in os.environ if k.startswith(LINEAGE_PREFIX)]:
                del os.environ[key]
            os.environ.update(before)


class LineageListener:
    """A `delta_tables.ledger.RunListener` that emits each run's events through `client`."""

    def __init__(
        self, config: RunoffConfig, client: OpenLineageClient | None, env: Mapping[str, str]
    ) -> None:
        self.config, self._client = config, client
        self.env, self.cwd = env, caller.cwd()
        self._refused = False
        self.namespace = env.get(NAMESPACE_ENV) or "default"
        self.parent = RunReference.parse(env.get(PARENT_ENV, ""))
        self.root = RunReference.parse(env.get(ROOT_PARENT_ENV, ""))
        self._catalog: Catalog | None = None

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            from delta_tables.catalog import Catalog

            self._catalog = Catalog.load(self.config)
        return self._catalog

    @property
    def client(self) -> OpenLineageClient | None:
        """The client, made at the first event (its import takes most of a second); None when
        it refuses the settings (said once: lineage never fails a run)."""
        if self._client is None and not self._refused:
            try:
                self._client = new_client(self.env, self.cwd)
            except Exception as exc:  # noqa: BLE001 - a lineage setting at fault
                self._refused = True
                logger.warning("lineage: not sent, the OpenLineage settings are refused: %s", exc)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            with suppress(Exception):
                self._client.close(timeout=10)

    def run_started(self, record: RunRecord) -> None:
        if record.layer in COMMANDS and self.client is not None:
            self._emit(self.client, self.event(record, "START"))

    def run_ended(self, record: RunRecord) -> None:
        if record.layer in COMMANDS and self.client is not None:
            self._emit(self.client, self.event(record, END_STATES.get(record.status, "OTHER")))

    def _emit(self, client: OpenLineageClient, event: RunEvent) -> None:
        try:
            client.emit(event)
        except Exception as exc:  # noqa: BLE001 - lineage never fails a run
            logger.warning(
                "lineage: could not send the %s event of %s: %s",
                event.eventType.value if event.eventType else "",
                event.job.name,
                str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
            )

    # -- what a run reads and writes ----------------------------------------------------------
    def nodes(self, record: RunRecord) -> tuple[list[Node], list[Node]]:
        """The run's inputs and outputs."""
        tables = self.catalog.tables(record.dataset)
        landing = Node(*dataset_id(self.catalog.landing_dir(record.dataset)))

        def node(table: Table) -> Node:
            return Node(*dataset_id(table.path), table=table)

        bronze, quarantine, silver = node(tables.bronze), node(tables.quarantine), tables.silver
        if record.layer == "bronze":
            return [landing], [bronze, quarantine]
        if record.layer == "silver":
            return [bronze], [node(t) for t in silver]
        if record.layer == "backfill":
            return [landing], [bronze, quarantine, *(node(t) for t in silver)]
        if record.layer == "replay":
            return [quarantine], [bronze, quarantine]
        # validate: the tables it validated; at its start, those of the layers it checks
        if "tables" in record.details:
            validated = record.details["tables"]
            return [node(t) for t in tables if validated.get(t.name) == "validated"], []
        layers = record.details.get("layers") or ()
        return [node(t) for t in tables if LAYER_OF[t.layer] in layers], []

    def event(self, record: RunRecord, event_type: str) -> RunEvent:
        from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
        from openlineage.client.facet_v2 import job_type_job

        ended = event_type != "START"
        inputs, outputs = self.nodes(record)
        return RunEvent(
            eventType=RunState(event_type),
            eventTime=(record.ended_at if ended and record.ended_at else record.started_at)
            .isoformat()
            .replace("+00:00", "Z"),
            run=Run(runId=run_uuid(record.run_id), facets=self.run_facets(record, ended)),
            job=Job(
                namespace=self.namespace,
                name=job_name(record),
                facets={
                    "jobType": job_type_job.JobTypeJobFacet(
                        processingType="BATCH", integration="RUNOFF", jobType="JOB"
                    )
                },
            ),
            inputs=[self.input_dataset(n, record, ended) for n in inputs],
            outputs=[self.output_dataset(n, record, ended) for n in outputs],
            producer=PRODUCER,
        )

    def run_facets(self, record: RunRecord, ended: bool) -> dict[str, Any]:
        from importlib.metadata import version

        from openlineage.client.facet_v2 import (
            error_message_run,
            nominal_time_run,
            parent_run,
            processing_engine_run,
        )

        facets: dict[str, Any] = {
            "processing_engine": processing_engine_run.ProcessingEngineRunFacet(
                version=version("pyspark"),
                name="spark",
                openlineageAdapterVersion=version("runoff"),
            )
        }
        if self.parent is not None:
            root = None
            if self.root is not None:
                root = parent_run.Root(
                    run=parent_run.RootRun(runId=self.root.run_id),
                    job=parent_run.RootJob(namespace=self.root.namespace, name=self.root.name),
                )
            facets["parent"] = parent_run.ParentRunFacet(
                run=parent_run.Run(runId=self.parent.run_id),
                job=parent_run.Job(namespace=self.parent.namespace, name=self.parent.name),
                root=root,
            )
        if record.layer == "backfill" and "start" in record.details:
            facets["nominalTime"] = nominal_time_run.NominalTimeRunFacet(
                nominalStartTime=_utc_text(record.details["start"]),
                nominalEndTime=_utc_text(record.details["end"]),
            )
        if ended and record.status != "success" and record.error:
            facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
                message=record.error, programmingLanguage="PYTHON"
            )
        return facets

    # -- datasets -----------------------------------------------------------------------------
    def _common_facets(self, node: Node, spec: DatasetSpec, ended: bool) -> dict[str, Any]:
        """Symlink to the table's name and schema: the table's (at the end), or the record's."""
        from openlineage.client.facet_v2 import schema_dataset, symlinks_dataset

        facets: dict[str, Any] = {}
        fields: list[Any] | None
        if node.table is None:
            fields = [
                schema_dataset.SchemaDatasetFacetFields(name=n, type=t)
                for n, t in record_fields(spec.schema)
            ]
        else:
            facets["symlinks"] = symlinks_dataset.SymlinksDatasetFacet(
                identifiers=[
                    symlinks_dataset.Identifier(
                        namespace=node.namespace, name=node.table.name, type="TABLE"
                    )
                ]
            )
            fields = _delta_schema(node.table) if ended else []
        if fields:
            facets["schema"] = schema_dataset.SchemaDatasetFacet(fields=fields)
        return facets

    def input_dataset(self, node: Node, record: RunRecord, ended: bool) -> InputDataset:
        from openlineage.client.event_v2 import InputDataset

        spec = self.catalog.spec(record.dataset)
        assertions = _assertions(node, record) if ended else None
        return InputDataset(
            namespace=node.namespace,
            name=node.name,
            facets=self._common_facets(node, spec, ended),
            inputFacets={"dataQualityAssertions": assertions} if assertions else {},
        )

    def output_dataset(self, node: Node, record: RunRecord, ended: bool) -> OutputDataset:
        from openlineage.client.event_v2 import OutputDataset
        from openlineage.client.facet_v2 import (
            dataset_version_dataset,
            output_statistics_output_dataset,
        )

        table = node.table
        assert table is not None, "an output is a table"
        spec = self.catalog.spec(record.dataset)
        facets = self._common_facets(node, spec, ended)
        lineage = self.column_lineage(table, spec)
        if lineage is not None:
            facets["columnLineage"] = lineage
        output_facets: dict[str, Any] = {}
        if ended:
            version = record.versions_after.get(table.name, -1)
            if version >= 0:
                facets["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(
                    datasetVersion=str(version)
                )
            assertions = _assertions(node, record)
            if assertions is not None:
                facets["dataQualityAssertions"] = assertions
            rows = {"bronze": record.rows, "quarantine": record.quarantined}.get(table.layer)
            if rows is not None and record.layer in ("bronze", "backfill", "replay"):
                output_facets["outputStatistics"] = (
                    output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                        rowCount=rows
                    )
                )
        return OutputDataset(
            namespace=node.namespace, name=node.name, facets=facets, outputFacets=output_facets
        )

    def column_lineage(self, table: Table, spec: DatasetSpec) -> Any:
        """The column lineage facet of an output table, from the spec (None when unknown):
        bronze from the landing folder, silver from bronze."""
        from openlineage.client.facet_v2 import column_lineage_dataset as cl

        if table.layer == "bronze":
            source = dataset_id(self.catalog.landing_dir(spec.name))
            sources = bronze_lineage(spec)
        elif table.layer == "silver":
            source = dataset_id(self.catalog.tables(spec.name).bronze.path)
            sources = silver_lineage(spec.silver_spec(table.name))
        else:
            return None
        if not sources:
            return None
        return cl.ColumnLineageDatasetFacet(
            fields={
                column: cl.Fields(
                    inputFields=[
                        cl.InputField(
                            namespace=source[0],
                            name=source[1],
                            field=name,
                            transformations=[cl.Transformation(type="DIRECT", subtype=how.subtype)],
                        )
                        for name in how.columns
                    ]
                )
                for column, how in sources.items()
            }
        )


def _utc_text(iso: str) -> str:
    return iso.replace("+00:00", "Z")


def _delta_schema(table: Table) -> list[Any] | None:
    """The table's columns (delta-rs), as OpenLineage schema fields; None if no table."""
    from deltalake import DeltaTable

    if not table.exists:
        return None
    return _schema_fields(json.loads(DeltaTable(str(table.path)).schema().to_json())["fields"])


def _schema_fields(fields: Sequence[Mapping[str, Any]]) -> list[Any]:
    from openlineage.client.facet_v2 import schema_dataset

    found = []
    for f in fields:
        kind = f["type"]
        nested = kind.get("fields") if isinstance(kind, Mapping) else None
        found.append(
            schema_dataset.SchemaDatasetFacetFields(
                name=f["name"],
                type=_type_name(kind),
                fields=_schema_fields(nested) if nested else [],
            )
        )
    return found


def _type_name(kind: Any) -> str:
    """A Delta schema type (a name, or a struct/array/map object) as text."""
    if isinstance(kind, str):
        return kind
    if kind["type"] == "array":
        return f"array<{_type_name(kind['elementType'])}>"
    if kind["type"] == "map":
        return f"map<{_type_name(kind['keyType'])},{_type_name(kind['valueType'])}>"
    return str(kind["type"])


def _assertions(node: Node, record: RunRecord) -> Any:
    """The run's quality checks on `node`'s table as a data quality assertions facet."""
    from openlineage.client.facet_v2 import data_quality_assertions_dataset as dq

    if node.table is None:
        return None
    prefix = f"{node.table.name}: "
    found = []
    for key, entry in (record.details.get("expectations") or {}).items():
        if not key.startswith(prefix):
            continue
        name = key.removeprefix(prefix)
        success = entry["success"] if "success" in entry else not entry.get("failed")
        counted = f"{entry['failed']} of {entry['evaluated']} rows" if "failed" in entry else None
        found.append(
            dq.Assertion(
                assertion=entry.get("kind") or name,
                success=bool(success),
                column=entry.get("column"),
                severity=entry.get("severity"),
                name=name,
                actual=entry.get("observed") or counted,
            )
        )
    return dq.DataQualityAssertionsDatasetFacet(assertions=found) if found else None
