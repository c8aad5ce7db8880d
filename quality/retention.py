"""Retention of a dataset's Great Expectations validation results (part of `runoff maintain`).

Every `runoff validate` run stores one validation result per suite in GX's validations store
(`<home>/quality/gx/uncommitted/validations/<suite>/<run name>/<run time>/<batch>.json`) and
renders one Data Docs page for it (`.../uncommitted/data_docs/local_site/validations/...html`).
GX never deletes either, and every docs build lists the whole store, so validate runs get slower
as results pile up. The trends live in the results history table (`quality.history`), so the
per-run results can go: `prune_validation_results` removes the results of one dataset's suites
that are older than the retention, always keeping the newest result of each suite, removes the
Data Docs pages of those results, and then rebuilds the Data Docs index so that it links no
removed page. Results of other datasets, and of suites the expectations store does not know,
are never touched.

The retention is maintain's vacuum retention (`RunoffConfig.vacuum_retention_hours`,
`RUNOFF_VACUUM_RETENTION_HOURS`, 168 h by default): a result describes table versions, and the
files of versions older than that are vacuumed, so a result outlives the data it checked by no
more than a vacuum does. (`quality.docs.INDEX_RESULTS_LIMIT` only bounds what the index lists.)

The suites of a dataset: every suite names its table in its meta (`quality.suites` writes
`{"table": ...}` into each one), and the caller passes the dataset's table names (from the
catalog). The suites are read back from GX's expectations store, so results of suites no longer
declared are pruned too.

Listing and removing go through GX's store API (`ValidationResultIdentifier` keys of the
validations store and of the site's HTML store) and the index is written by GX's own index
builder. Paths are walked in one place only: GX's file store backend means to remove the
directories a removal leaves empty but never does (`TupleFilesystemStoreBackend.rrmdir` tests
`not Path(...).iterdir()`, which is always false), so `remove_empty_dirs` removes the
`<run time>` and `<run name>` directories left behind, which would otherwise pile up instead of
the files.

The pruning holds the lock validate runs hold on the quality project, so no docs build runs
meanwhile. A pruning that stops half-way leaves the index as it was until the next docs build
(GX's index builder lists only results that still have their JSON and their page, and deletes
pages left without a result); the next `maintain` removes what is left.

Great Expectations is imported only when the project exists (a home that never validated
anything costs nothing). Importing GX imports pyspark's Python modules when they are installed
(its Spark compatibility layer); it starts no JVM.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from great_expectations.data_context import FileDataContext
    from great_expectations.data_context.types.resource_identifiers import (
        ValidationResultIdentifier,
    )
    from great_expectations.render.renderer.site_builder import SiteBuilder

# GX's project config file under `<home>/quality/gx`: present once a validate run ran a suite.
PROJECT_CONFIG = Path("gx") / "great_expectations.yml"


@dataclass(frozen=True)
class ResultsPruning:
    """What one pruning did to a dataset's validation results."""

    dataset: str
    exists: bool
    retention_hours: float
    removed: int = 0
    pages_removed: int = 0
    kept: int = 0
    index_rebuilt: bool = False

    def line(self) -> str:
        if not self.exists:
            return "maintain quality results: no validation results yet, nothing to do"
        noun = "result" if self.removed == 1 else "results"
        return (
            f"maintain quality results: {self.removed} old validation {noun} removed "
            f"(kept {self.kept})"
        )


def dataset_suites(
    suite_tables: Mapping[str, str | None], tables: Collection[str]
) -> frozenset[str]:
    """The suites (name -> the table its meta names) that check one of `tables`."""
    return frozenset(suite for suite, table in suite_tables.items() if table in tables)


def _run_time(key: ValidationResultIdentifier) -> datetime:
    when: datetime = key.run_id.run_time
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _newest_first(key: ValidationResultIdentifier) -> tuple[datetime, str, str]:
    return (_run_time(key), str(key.run_id.run_name or ""), str(key.batch_identifier))


def expired_results(
    keys: Iterable[ValidationResultIdentifier], suites: Collection[str], cutoff: datetime
) -> list[ValidationResultIdentifier]:
    """Results of `suites` that ran before `cutoff`, except the newest result of each suite.

    Oldest first. Keys of other suites are never returned.
    """
    by_suite: dict[str, list[ValidationResultIdentifier]] = {}
    for key in keys:
        suite = key.expectation_suite_identifier.name
        if suite in suites:
            by_suite.setdefault(suite, []).append(key)
    expired: list[ValidationResultIdentifier] = []
    for results in by_suite.values():
        results.sort(key=_newest_first, reverse=True)
        expired.extend(k for k in results[1:] if _run_time(k) < cutoff)
    return sorted(expired, key=_newest_first)


def remove_empty_dirs(base: Path, relative_dir: Iterable[str]) -> None:
    """Remove `base/<relative_dir>` and its parents up to (not including) `base` while empty."""
    base = base.resolve()
    path = base.joinpath(*relative_dir).resolve()
    while path != base and base in path.parents:
        try:
            path.rmdir()  # only ever removes an empty directory
        except OSError:
            return
        path = path.parent


def prune_validation_results(
    quality_dir: Path,
    dataset: str,
    tables: Collection[str],
    retention_hours: float,
    now: datetime | None = None,
) -> ResultsPruning:
    """Remove the validation results (and pages) of `dataset`'s `tables` older than the
    retention; see above."""
    if not (quality_dir / PROJECT_CONFIG).is_file():
        return ResultsPruning(dataset, exists=False, retention_hours=retention_hours)
    from quality.project import project_lock

    cutoff = (now or datetime.now(UTC)) - timedelta(hours=retention_hours)
    with project_lock(quality_dir):
        return _prune(quality_dir, dataset, tables, retention_hours, cutoff)


def _prune(
    quality_dir: Path,
    dataset: str,
    tables: Collection[str],
    retention_hours: float,
    cutoff: datetime,
) -> ResultsPruning:
    from great_expectations.data_context.types.resource_identifiers import (
        ValidationResultIdentifier,
    )

    from quality import project

    context = project.open_context(quality_dir)
    suites = dataset_suites(
        {suite.name: (suite.meta or {}).get("table") for suite in context.suites.all()}, tables
    )
    store = context.validation_results_store
    keys = [k for k in store.list_keys() if isinstance(k, ValidationResultIdentifier)]
    expired = expired_results(keys, suites, cutoff)
    kept = sum(1 for k in keys if k.expectation_suite_identifier.name in suites) - len(expired)
    if not expired:
        return ResultsPruning(dataset, exists=True, retention_hours=retention_hours, kept=kept)

    site = _site_builder(context)
    pages = site.target_store.store_backends[ValidationResultIdentifier]
    pages_removed = removed = 0
    for key in expired:
        run_dir = key.to_tuple()[:-1]  # <suite>/<run name>/<run time>; the file is the batch
        if pages.remove_key(key):
            pages_removed += 1
            remove_empty_dirs(_keys_root(pages), run_dir)
        if store.remove_key(key):
            removed += 1
            remove_empty_dirs(_keys_root(store.store_backend), run_dir)
    # The index lists the newest results that have both a result and a page.
    site.site_index_builder.build()
    return ResultsPruning(
        dataset,
        exists=True,
        retention_hours=retention_hours,
        removed=removed,
        pages_removed=pages_removed,
        kept=kept,
        index_rebuilt=True,
    )


def _keys_root(backend: Any) -> Path:
    """The directory a GX file store backend keeps its keys under (its base and prefix)."""
    return Path(backend.full_base_directory, backend.filepath_prefix or "")


def _site_builder(context: FileDataContext) -> SiteBuilder:
    """GX's builder of the local Data Docs site, configured as GX itself configures it."""
    from great_expectations.data_context.util import instantiate_class_from_config

    from quality.project import SITE

    sites: dict[str, Any] = dict(context.variables.data_docs_sites or {})
    builder: SiteBuilder = instantiate_class_from_config(
        config=dict(sites[SITE]),
        runtime_environment={"data_context": context, "root_directory": context.root_directory},
        config_defaults={"module_name": "great_expectations.render.renderer.site_builder"},
    )
    return builder
