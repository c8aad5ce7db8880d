"""The Great Expectations file project under `<home>/quality` (created on first use).

One context per validate run (its start-up is the slow part). Everything here is idempotent: the
pandas data source `runoff`, one dataframe asset per suite (its batch is the frame the runner
builds), the suites themselves (as code, written on every run so the project always matches the
code) and one validation definition per suite. Progress bars and analytics are switched off, and
the Data Docs site gets its vendored assets (`quality.docs.copy_vendor_assets`): it reads offline.

A Checkpoint is not used to run them: it hands the same `batch_parameters` to every validation
definition, while every suite here validates its own frame. The runner runs each definition with
one shared `RunIdentifier` and rebuilds the Data Docs once for the new results.
"""

from __future__ import annotations

import copy
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

import great_expectations as gx
from great_expectations.data_context.types.base import ProgressBarsConfig

from core.locking import blocking_lock
from quality.docs import SITE_INDEX_BUILDER, SITE_SECTION_BUILDERS, copy_vendor_assets

if TYPE_CHECKING:
    from great_expectations.core.batch_definition import BatchDefinition
    from great_expectations.data_context import FileDataContext

DATASOURCE = "runoff"
BATCH_DEFINITION = "frame"
SITE = "local_site"  # GX's default site; views from `quality.docs`


def open_context(quality_dir: Path) -> FileDataContext:
    """The file project at `quality_dir` (created on first use), quiet and offline."""
    quality_dir.mkdir(parents=True, exist_ok=True)
    context = gx.get_context(mode="file", project_root_dir=str(quality_dir))
    variables = context.variables
    changed = False
    bars = variables.progress_bars
    if bars is None or bars.get("globally", True) or bars.get("metric_calculations", True):
        variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
        changed = True
    if variables.config_variables_file_path:
        # Nothing here uses config variables, and GX re-reads that YAML file on every lookup.
        variables.config_variables_file_path = None  # type: ignore[assignment]
        changed = True
    if variables.analytics_enabled is not False:
        variables.analytics_enabled = False
        changed = True
    sites = copy.deepcopy(variables.data_docs_sites or {})
    site = sites.get(SITE)
    wanted = {
        # The "how to" buttons point readers at GX tutorials, not at this project.
        "show_how_to_buttons": False,
        "site_index_builder": SITE_INDEX_BUILDER,
        "site_section_builders": SITE_SECTION_BUILDERS,
    }
    if isinstance(site, dict) and any(site.get(k) != v for k, v in wanted.items()):
        site.update(copy.deepcopy(wanted))
        variables.data_docs_sites = sites
        changed = True
    if changed:
        variables.save()
    # The pages load their CSS, fonts and scripts from the site itself (`quality.docs`).
    copy_vendor_assets(data_docs_index(quality_dir).parent)
    return context


def batch_definition(context: FileDataContext, asset_name: str) -> BatchDefinition:
    """The whole-dataframe batch definition of asset `asset_name` (added when missing)."""
    try:
        datasource = context.data_sources.get(DATASOURCE)
    except (KeyError, ValueError, gx.exceptions.DataContextError):
        datasource = context.data_sources.add_pandas(DATASOURCE)
    if asset_name in datasource.get_asset_names():
        asset = datasource.get_asset(asset_name)
    else:
        asset = datasource.add_dataframe_asset(asset_name)  # type: ignore[attr-defined]
    try:
        return asset.get_batch_definition(BATCH_DEFINITION)
    except KeyError:
        return asset.add_batch_definition_whole_dataframe(BATCH_DEFINITION)


def data_docs_index(quality_dir: Path) -> Path:
    """Path of the local Data Docs site's index.html (GX's default site layout)."""
    return quality_dir / "gx" / "uncommitted" / "data_docs" / SITE / "index.html"


def project_lock(quality_dir: Path) -> AbstractContextManager[None]:
    """Serialise the writers of the GX project (validate runs, results pruning): they share its
    files and the Data Docs index. Blocks until the holder is done."""
    return blocking_lock(quality_dir / ".validate.lock")
