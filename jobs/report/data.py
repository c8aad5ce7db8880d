"""What `runoff report` shows, read from the home directory and shaped for the charts and page.

Readers (delta-rs, no Spark, no Great Expectations import): the dataset's tables with their
freshness, the silver columns the charts need, the run ledger, the quality results history, the
quarantine's `_error` column and the Data Docs pages of each validate run. Everything else here
is pure pandas: the series of a windowed chart on the spec's window grid (a missing window is a
NaN row, so the line breaks there), the windows the watermark has not closed yet, runs and
validations against their start times, the quality gate's totals and the quarantine's reasons.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from core.config import Location, RunoffConfig
from core.specs import HISTORY, SilverSpec, interval_seconds
from delta_tables.catalog import Catalog
from delta_tables.ledger import RUNS_SCHEMA, read_runs
from delta_tables.writes import table_columns

MAX_LINES = 8  # key combinations drawn per line chart (the largest totals)
LAST_RUNS_SHOWN = 15  # runs, and validate runs, listed on the page (with their Data Docs pages)
TOP_BARS = 20  # key combinations drawn per bar chart
WINDOW_START = "window_start"
# The Data Docs site of `<home>/quality` (`quality.project.data_docs_index` is its index.html;
# that module imports Great Expectations, which a report does not need).
DATA_DOCS_SITE = Path("gx", "uncommitted", "data_docs", "local_site")
# A history expectation's results row (`quality.gate.Gate.check_history`, named as
# `quality.runner.describe_expectation` names it), and its metric.
HISTORY_RESULT = f"{HISTORY.removeprefix('expect_')}(metric="
HISTORY_METRIC = rf"^{re.escape(HISTORY_RESULT)}([^,)]+)"


# -- the data a report is made of ----------------------------------------------------------------
@dataclass(frozen=True)
class TableInfo:
    """One Delta table of the dataset: its version and row count, or None when absent."""

    name: str
    path: Location
    version: int | None
    rows: int | None
    newest_event: datetime | None = None  # freshness, as `runoff status` shows it
    last_commit: datetime | None = None
    layer: str = ""


@dataclass(frozen=True)
class DocsPage:
    """One Data Docs validation-result page: the suite it shows and the HTML file."""

    suite: str
    path: Path
    failed: bool = False  # an expectation of the suite failed in that run


@dataclass(frozen=True)
class ReportData:
    """Everything the page shows, already read from the home directory."""

    dataset: str
    description: str
    home: Path
    generated_at: datetime
    tables: list[TableInfo]
    silver_specs: tuple[SilverSpec, ...]
    silver: dict[str, pd.DataFrame | None]  # by table: the columns its charts need
    runs: pd.DataFrame
    quality: pd.DataFrame | None
    quality_path: Location
    watermark: str = "10 minutes"  # the spec's delay
    newest_event: datetime | None = None  # bronze's newest event time: the watermark's base
    quarantine: pd.DataFrame | None = None  # `quarantine_reasons`; None: no quarantine table
    docs_index: Path | None = None  # the Data Docs index, when it exists
    docs_pages: Mapping[str, list[DocsPage]] = field(default_factory=dict)  # by validate run_id
    report_path: Path | None = None  # where the page goes: links are relative to its folder
    metrics: pd.DataFrame | None = None  # `read_metrics_frame`: bronze batches' metrics
    metrics_path: Location | None = None

    @property
    def bronze_table(self) -> str:
        return next((t.name for t in self.tables if t.layer == "bronze"), f"bronze_{self.dataset}")

    @property
    def quarantine_table(self) -> str:
        return next(
            (t.name for t in self.tables if t.layer == "quarantine"), f"quarantine_{self.dataset}"
        )


# -- pure shaping ---------------------------------------------------------------------------------
def naive_utc(values: Any) -> Any:
    """Timestamps (a Series or one value) as naive UTC: matplotlib's date axis wants one clock."""
    if isinstance(values, pd.Series):
        return pd.to_datetime(values, utc=True).dt.tz_convert(None)
    if values is None or pd.isna(values):
        return None
    return pd.Timestamp(values).tz_convert(UTC).tz_localize(None)


def series_by_key(frame: pd.DataFrame, time_col: str, key_col: str, value_col: str) -> pd.DataFrame:
    """One row per time, one column per key (sorted), cells = sum of `value_col`; NaN where the
    key has no value at that time (a gap in its line, not a zero)."""
    if frame.empty:
        return pd.DataFrame()
    data = frame.assign(**{time_col: naive_utc(frame[time_col])})
    sums = data.groupby([time_col, key_col])[value_col].sum(min_count=1)
    pivot = sums.unstack(key_col).sort_index()
    return pivot[sorted(pivot.columns, key=str)]


def _text(value: object) -> str:
    # NaN and NaT are the only values unequal to themselves.
    return "null" if value is None or value != value else str(value)


def key_labels(frame: pd.DataFrame, keys: Sequence[str], default: str) -> pd.Series:
    """One label per row, "k1=v1, k2=v2" (`default` when there are no keys)."""
    if not keys:
        return pd.Series(default, index=frame.index, dtype="object")
    labels = f"{keys[0]}=" + frame[keys[0]].map(_text)
    for key in keys[1:]:
        labels = labels + f", {key}=" + frame[key].map(_text)
    return labels


def numeric(values: pd.Series) -> pd.Series | None:
    """The values as floats; None when some are not numbers (text, timestamps, arrays)."""
    if not (pd.api.types.is_numeric_dtype(values) or pd.api.types.is_object_dtype(values)):
        return None
    converted = pd.to_numeric(values, errors="coerce")
    if converted.notna().sum() != values.notna().sum():
        return None
    return converted.astype("float64")


def top_keys(labels: pd.Series, values: pd.Series, n: int) -> pd.Series:
    """The `n` labels with the largest total of `values` (ties: by label), largest first."""
    data = pd.DataFrame({"label": labels.to_numpy(), "total": values.to_numpy()})
    totals = data.groupby("label")["total"].sum().reset_index()
    top = totals.sort_values(["total", "label"], ascending=[False, True], kind="stable").head(n)
    return pd.Series(top["total"].to_numpy(), index=top["label"].to_numpy(), name="total")


def window_length(spec: SilverSpec) -> pd.Timedelta:
    """The length of the table's windows (`window` of the spec)."""
    assert spec.window is not None, f"{spec.table} has no window"
    return _micros(interval_seconds(spec.window))


def _micros(seconds: int) -> pd.Timedelta:
    """A duration in microseconds, the unit of the tables' times: arithmetic with a nanosecond
    duration would turn times into nanoseconds, which end in 2262 (bronze accepts times up to
    9999-12-30)."""
    return pd.Timedelta(seconds=seconds).as_unit("us")


def window_step(spec: SilverSpec) -> pd.Timedelta:
    """The distance between consecutive window starts: the slide, or the window (tumbling)."""
    return _micros(interval_seconds(spec.slide)) if spec.slide else window_length(spec)


def break_at_gaps(pivot: pd.DataFrame, step: pd.Timedelta) -> pd.DataFrame:
    """`pivot` (index: window starts) on the window grid: after every window followed by a missing
    one, the missing window's start is added as a row of NaN, so that no line joins the windows
    on either side of a gap. (The first missing window of a gap suffices to break the lines; the
    full grid could be millions of rows for a sparse table of short windows.)"""
    if len(pivot.index) < 2:
        return pivot
    starts = pd.DatetimeIndex(pivot.index)
    after = starts[:-1][(starts[1:] - starts[:-1]) > step]
    return pivot.reindex(starts.union(after + step))


def watermark_time(newest_event: Any, watermark: str) -> pd.Timestamp | None:
    """The watermark once the newest event time has been seen (naive UTC): newest - delay."""
    newest = naive_utc(newest_event)
    if newest is None:
        return None
    return pd.Timestamp(newest) - _micros(interval_seconds(watermark))


def open_windows(starts: Any, length: pd.Timedelta, watermark: Any) -> pd.DatetimeIndex:
    """The window starts (naive UTC) whose window has not been closed by the watermark: its end
    (start + length) is after the watermark. None for the watermark: none is known open."""
    index = pd.DatetimeIndex(starts)
    if watermark is None:
        return index[:0]
    return index[index + length > pd.Timestamp(watermark)]


def window_series(frame: pd.DataFrame, spec: SilverSpec, measure: str) -> tuple[pd.DataFrame, int]:
    """The lines of a windowed chart (`series_by_key` of the MAX_LINES key combinations with the
    largest total, `break_at_gaps` on the spec's window grid) and how many key combinations were
    left out."""
    labels = key_labels(frame, spec.keys, measure)
    data = pd.DataFrame({WINDOW_START: frame[WINDOW_START], "key": labels, measure: frame[measure]})
    pivot = series_by_key(data, WINDOW_START, "key", measure)
    shown = set(top_keys(labels, frame[measure], MAX_LINES).index)
    pivot = pivot[[c for c in pivot.columns if c in shown]]
    return break_at_gaps(pivot, window_step(spec)), labels.nunique() - len(shown)


def total_bars(frame: pd.DataFrame, spec: SilverSpec, measure: str) -> tuple[pd.Series, int]:
    """The bars of a running-total chart (the TOP_BARS key combinations with the largest total of
    the measure, largest first) and how many key combinations were left out."""
    labels = key_labels(frame, spec.keys, measure)
    totals = top_keys(labels, frame[measure], TOP_BARS)
    return totals, labels.nunique() - len(totals)


def axis_columns(spec: SilverSpec) -> tuple[str, ...]:
    return (WINDOW_START, *spec.keys) if spec.window else spec.keys


def silver_columns(spec: SilverSpec) -> tuple[str, ...]:
    """The columns the charts of a silver table read: window start (if windowed), keys, measures."""
    return (*axis_columns(spec), *spec.measure_names)


def runs_frame(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """Ledger rows, oldest first; `started_at` (naive UTC) is the x axis of the run charts."""
    frame = pd.DataFrame(list(rows), columns=RUNS_SCHEMA.names)
    frame["started_at"] = naive_utc(frame["started_at"])
    frame = frame.sort_values("started_at", kind="stable").reset_index(drop=True)
    for column in ("rows", "late_rows", "quarantined"):
        frame[column] = frame[column].fillna(0).astype("int64")
    frame["seconds"] = frame["seconds"].fillna(0.0).astype("float64")
    return frame


_TIME_COLUMNS = ("run_time", "validated_at", "started_at", "ended_at", "checked_at", "timestamp")


def quality_pass_rate(results: pd.DataFrame, dataset: str) -> pd.DataFrame:
    """Share of expectations that succeeded, per validation run, oldest run first.

    `results` is the quality results history: either one row per expectation (`run_id`,
    `success`) or one row per validation (`run_id`, `evaluated_expectations`,
    `successful_expectations`); a `dataset` column, when present, selects the dataset.
    Returns columns run_id, at (first time seen, or None), evaluated, passed, pass_rate (0..1).
    """
    columns = ["run_id", "at", "evaluated", "passed", "pass_rate"]
    if "run_id" not in results.columns:
        raise ValueError("quality results have no run_id column")
    data = results
    if "dataset" in data.columns:
        data = data[data["dataset"] == dataset]
    if "evaluated_expectations" in data.columns and "successful_expectations" in data.columns:
        evaluated = data["evaluated_expectations"].fillna(0).astype("int64")
        passed = data["successful_expectations"].fillna(0).astype("int64")
    elif "success" in data.columns:
        evaluated = pd.Series(1, index=data.index, dtype="int64")
        passed = data["success"].fillna(False).astype(bool).astype("int64")
    else:
        raise ValueError(
            "quality results have neither a success column nor "
            "evaluated_expectations/successful_expectations"
        )
    if data.empty:
        return pd.DataFrame(columns=columns)
    time_col = next((c for c in _TIME_COLUMNS if c in data.columns), None)
    at = naive_utc(data[time_col]) if time_col else pd.Series(pd.NaT, index=data.index)
    frame = pd.DataFrame(
        {"run_id": data["run_id"], "at": at, "evaluated": evaluated, "passed": passed}
    )
    order = {run_id: i for i, run_id in enumerate(dict.fromkeys(frame["run_id"]))}
    grouped = frame.groupby("run_id", as_index=False, sort=False).agg(
        at=("at", "min"), evaluated=("evaluated", "sum"), passed=("passed", "sum")
    )
    grouped["first"] = grouped["run_id"].map(order)
    grouped = grouped.sort_values(["at", "first"], na_position="last", kind="stable")
    rates = grouped["passed"] / grouped["evaluated"].where(grouped["evaluated"] > 0)
    grouped["pass_rate"] = rates.fillna(0.0)
    return grouped[columns].reset_index(drop=True)


def validations_of(quality: pd.DataFrame) -> pd.DataFrame:
    """The rows of `validate` runs (the gate's per-batch rows have a `batch_id`)."""
    if "batch_id" not in quality.columns:
        return quality
    return quality[quality["batch_id"].isna()]


def validation_runs(quality: pd.DataFrame, runs: pd.DataFrame, dataset: str) -> pd.DataFrame:
    """One row per validate run of `dataset`, oldest first: run_id, started_at (the ledger's start
    of the run; the first validation time when the ledger has no such run), status ("" without a
    ledger row), evaluated, passed, pass_rate (0..1)."""
    rates = quality_pass_rate(validations_of(quality), dataset)
    ledger = runs.drop_duplicates("run_id").set_index("run_id")
    started = rates["run_id"].map(ledger["started_at"])
    frame = rates.assign(
        started_at=pd.to_datetime(started).fillna(rates["at"]),
        status=rates["run_id"].map(ledger["status"]).fillna(""),
    )
    frame = frame.sort_values("started_at", kind="stable", na_position="last")
    columns = ["run_id", "started_at", "status", "evaluated", "passed", "pass_rate"]
    return frame[columns].reset_index(drop=True)


def gate_totals(results: pd.DataFrame) -> pd.DataFrame:
    """The quality gate's checks (history rows with a `batch_id`) per table and expectation:
    action, batches, rows evaluated, failed and quarantined, and the last batch that failed it.
    Quarantine rules are the breakdown of the quarantine's reasons. Most failed first."""
    columns = ["table", "expectation", "severity", "batches", "evaluated", "failed"]
    columns += ["quarantined", "last_failed_at"]
    if "batch_id" not in results.columns:
        return pd.DataFrame(columns=columns)
    checks = results[results["batch_id"].notna()].copy()
    if checks.empty:
        return pd.DataFrame(columns=columns)
    for column in ("evaluated", "failed", "quarantined"):
        checks[column] = checks[column].fillna(0).astype("int64")
    checks["failed_at"] = checks["validated_at"].where(checks["failed"] > 0)
    totals = (
        checks.groupby(["table", "expectation", "severity"], as_index=False)
        .agg(
            batches=("batch_id", "size"),
            evaluated=("evaluated", "sum"),
            failed=("failed", "sum"),
            quarantined=("quarantined", "sum"),
            last_failed_at=("failed_at", "max"),
        )
        .sort_values(["failed", "table", "expectation"], ascending=[False, True, True])
    )
    return totals[columns].reset_index(drop=True)


NO_REASON = "(no _error)"


def quarantine_reasons(errors: pd.Series) -> pd.DataFrame:
    """Quarantined rows per `_error` text (reason, rows, share of all quarantined rows), most rows
    first, ties by reason."""
    reasons = errors.astype("object").where(errors.notna(), NO_REASON)
    counts = reasons.value_counts(sort=False).rename_axis("reason").reset_index(name="rows")
    counts["rows"] = counts["rows"].astype("int64")
    counts = counts.sort_values(["rows", "reason"], ascending=[False, True], kind="stable")
    total = int(counts["rows"].sum())
    counts["share"] = counts["rows"] / total if total else 0.0
    return counts.reset_index(drop=True)


def docs_run_name(dataset: str, run_id: str) -> str:
    """The Great Expectations run name of a validate run (`quality.runner._run_suites`): it names
    the folder of the run's pages, `validations/<suite>/<run name>/<run time>/<batch>.html`."""
    return f"{dataset}-{run_id[:8]}"


def validation_pages(
    site: Path, dataset: str, suites_by_run: Mapping[str, Mapping[str, bool]]
) -> dict[str, list[DocsPage]]:
    """The Data Docs page of each suite of each validate run that still has one (`runoff
    maintain` prunes old ones): {run_id: pages by suite}. `suites_by_run`: {run_id: {suite:
    failed}}. A suite named `a.b` is GX's folder `a/b`."""
    pages: dict[str, list[DocsPage]] = {}
    for run_id, suites in suites_by_run.items():
        found = []
        for suite, failed in sorted(suites.items()):
            folder = site.joinpath("validations", *suite.split("."), docs_run_name(dataset, run_id))
            found += [DocsPage(suite, page, failed) for page in sorted(folder.glob("*/*.html"))]
        if found:
            pages[run_id] = found
    return pages


def suites_by_run(
    quality: pd.DataFrame | None, newest: int | None = None
) -> dict[str, dict[str, bool]]:
    """{run_id: {suite: an expectation failed}} of the validate rows of the results history; of
    the `newest` validate runs only (by validation time) when given."""
    if quality is None or "suite" not in quality.columns:
        return {}
    rows = validations_of(quality)
    rows = rows.assign(failed=~rows["success"].fillna(False).astype(bool))
    if newest is not None:
        recent = rows.groupby("run_id")["validated_at"].min().nlargest(newest).index
        rows = rows[rows["run_id"].isin(recent)]
    grouped = rows.groupby(["run_id", "suite"], as_index=False).agg(failed=("failed", "any"))
    out: dict[str, dict[str, bool]] = {}
    for run_id, suite, failed in grouped.itertuples(index=False):
        out.setdefault(str(run_id), {})[str(suite)] = bool(failed)
    return out


# -- reading the home directory ------------------------------------------------------------------
def _is_delta(path: Location) -> bool:
    return (path / "_delta_log").is_dir()


def read_delta(path: Location, columns: Sequence[str] | None = None) -> pd.DataFrame | None:
    """A Delta table (or some of its columns) as pandas; None when there is no table at `path`.

    Reads through delta-rs's DataFusion engine, which honours deletion vectors and column mapping.
    """
    from delta_tables.arrow import read_arrow

    if not _is_delta(path):
        return None
    frame: pd.DataFrame = read_arrow(str(path), columns).to_pandas()
    return frame


def table_info(name: str, path: Location) -> TableInfo:
    from deltalake import DeltaTable

    from delta_tables.arrow import count_rows

    if not _is_delta(path):
        return TableInfo(name, path, None, None)
    table = DeltaTable(str(path))
    return TableInfo(name, path, table.version(), count_rows(table))


def read_silver(path: Location, spec: SilverSpec) -> pd.DataFrame | None:
    """The columns of `silver_columns(spec)` the table has; None when there is no table."""
    if not _is_delta(path):
        return None
    names = set(table_columns(path))
    columns = [c for c in silver_columns(spec) if c in names]
    return read_delta(path, columns) if columns else pd.DataFrame()


def read_quality(path: Location, dataset: str) -> pd.DataFrame | None:
    """The dataset's rows of the quality results history, parked rows included (the columns
    `validation_runs`, `suites_by_run` and `gate_totals` use); None when there is no history."""
    from delta_tables.ops import read_rows
    from quality.history import RESULT_KEY, RESULTS_SCHEMA

    if not path.exists():
        return None
    columns = [
        *("run_id", "dataset", "success", "validated_at", "table", "suite", "expectation"),
        *("severity", "batch_id", "evaluated", "failed", "quarantined"),
    ]
    rows = read_rows(path, RESULTS_SCHEMA, RESULT_KEY, columns, {"dataset": dataset})
    frame: pd.DataFrame = rows.to_pandas()
    return frame


def read_metrics_frame(path: Location, dataset: str) -> pd.DataFrame | None:
    """The dataset's batch metrics (table, run_id, batch_id, metric, value, batch_time: naive
    UTC, in microseconds like the tables, so that any year of the calendar is kept); None when
    there are none."""
    from delta_tables.ops import read_rows
    from quality.history import METRIC_KEY, METRICS_SCHEMA

    if not path.exists():
        return None
    columns = ["table", "run_id", "batch_id", "metric", "value", "batch_time"]
    rows = read_rows(path, METRICS_SCHEMA, METRIC_KEY, columns, {"dataset": dataset})
    if not rows.num_rows:
        return None
    frame: pd.DataFrame = rows.to_pandas()
    frame["batch_time"] = naive_utc(frame["batch_time"])
    return frame.sort_values(["batch_time", "batch_id"], kind="stable").reset_index(drop=True)


def metric_pivot(metrics: pd.DataFrame, names: Sequence[str]) -> pd.DataFrame:
    """One row per batch (index: its time; ties kept, in batch order), one column per metric of
    `names` that some batch has, in name order (NaN where a batch lacks it)."""
    wanted = metrics[metrics["metric"].isin(names)]
    if wanted.empty:
        return pd.DataFrame(index=pd.DatetimeIndex([], name="batch_time"))
    pivot = wanted.pivot_table(
        index=["batch_time", "run_id", "batch_id"], columns="metric", values="value"
    )
    pivot = pivot.reset_index(level=["run_id", "batch_id"], drop=True)
    present = sorted(n for n in names if n in pivot.columns)
    return pivot[present].rename_axis(columns=None)


def flagged_batches(quality: pd.DataFrame | None, metrics: pd.DataFrame) -> pd.DataFrame:
    """The committed batches a history expectation found outside their history: batch_time
    and metric (from the gate's results rows, matched to the metrics by run and batch)."""
    columns = ["batch_time", "metric"]
    if quality is None or quality.empty:
        return pd.DataFrame(columns=columns)
    failed = quality[
        quality["expectation"].str.startswith(HISTORY_RESULT) & (quality["failed"].fillna(0) > 0)
    ]
    failed = failed.assign(metric=failed["expectation"].str.extract(HISTORY_METRIC, expand=False))
    times = metrics.drop_duplicates(["run_id", "batch_id"])[["run_id", "batch_id", "batch_time"]]
    joined = failed.merge(times, on=["run_id", "batch_id"])
    return joined[columns].drop_duplicates().reset_index(drop=True)


def read_quarantine_reasons(path: Location) -> pd.DataFrame | None:
    """`quarantine_reasons` of the quarantine table at `path`; None when there is no table."""
    frame = read_delta(path, ["_error"])
    return None if frame is None else quarantine_reasons(frame["_error"])


def load_report_data(config: RunoffConfig, dataset: str) -> ReportData:
    """Read what the report of `dataset` shows from the home directory (no Spark)."""
    from jobs.ops.status import freshness_facts, spec_key

    catalog = Catalog.load(config)
    spec = catalog.spec(dataset)
    refs = catalog.tables(dataset)
    tables = [
        replace(
            table_info(t.name, t.path),
            newest_event=facts["newest_event_time"],
            last_commit=facts["last_commit_at"],
            layer=t.layer,
        )
        for t in refs
        for facts in [freshness_facts(t, spec.newest_event_column(spec_key(t)))]
    ]
    silver = {s.table: read_silver(catalog.silver_table(s.table).path, s) for s in spec.silver}
    quality_path = catalog.quality_results.path
    quality = read_quality(quality_path, dataset)
    site = config.quality_dir / DATA_DOCS_SITE
    index = site / "index.html"
    return ReportData(
        dataset=dataset,
        description=spec.description,
        home=config.home,
        generated_at=datetime.now(UTC),
        tables=tables,
        silver_specs=spec.silver,
        silver=silver,
        runs=runs_frame(read_runs(config.runs_path, dataset)),
        quality=quality,
        quality_path=quality_path,
        watermark=spec.watermark,
        newest_event=next((t.newest_event for t in tables if t.layer == "bronze"), None),
        quarantine=read_quarantine_reasons(refs.quarantine.path),
        docs_index=index if index.is_file() else None,
        docs_pages=validation_pages(site, dataset, suites_by_run(quality, LAST_RUNS_SHOWN)),
        report_path=report_path(config, dataset),
        metrics=read_metrics_frame(catalog.quality_metrics.path, dataset),
        metrics_path=catalog.quality_metrics.path,
    )


def report_path(config: RunoffConfig, dataset: str) -> Path:
    return config.home / "reports" / f"{dataset}.html"
