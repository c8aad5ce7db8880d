"""Data Docs views: an index page that reads offline, and compiled templates kept between runs.

Great Expectations' index page ships its tables as JSON that bootstrap-table (loaded from CDNs)
turns into rows in the browser; without network access the page is empty. `StaticIndexPageView`
is GX's index view with one template replaced (`quality/templates/bootstrap_table.j2`): the same
columns and rows, written out as a plain HTML table. Validation and suite pages keep GX's
templates (GX already renders them server-side).

Every docs build creates new views, and each compiled GX's Jinja templates from scratch (about a
second per validate run); the views here share Jinja's file bytecode cache (a private directory
under the system temp dir), so templates are compiled once per machine. `quality.project`
configures the site with these views.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from great_expectations.render.view import DefaultJinjaIndexPageView, DefaultJinjaPageView
from jinja2 import (
    BaseLoader,
    BytecodeCache,
    ChoiceLoader,
    FileSystemBytecodeCache,
    FileSystemLoader,
)

TEMPLATES = Path(__file__).resolve().parent / "templates"


def _view(class_name: str) -> dict[str, str]:
    return {"module_name": "quality.docs", "class_name": class_name}


# The index lists the latest results only; the trends live in the results history table.
INDEX_RESULTS_LIMIT = 500
SITE_INDEX_BUILDER: dict[str, Any] = {
    "class_name": "DefaultSiteIndexBuilder",
    "view": _view("StaticIndexPageView"),
    "validation_results_limit": INDEX_RESULTS_LIMIT,
}
SITE_SECTION_BUILDERS: dict[str, Any] = {
    "expectations": {"view": _view("CachedPageView")},
    "validations": {"view": _view("CachedPageView")},
}


@cache
def bytecode_cache() -> BytecodeCache:
    """Jinja's per-user cache directory under the system temp dir (created 0700 by Jinja)."""
    return FileSystemBytecodeCache()


class CachedPageView(DefaultJinjaPageView):
    """GX's page view; compiled templates come from the bytecode cache."""

    def __init__(
        self, custom_styles_directory: str | None = None, custom_views_directory: str | None = None
    ) -> None:
        super().__init__(
            custom_styles_directory=custom_styles_directory,
            custom_views_directory=custom_views_directory,
        )
        self.env.bytecode_cache = bytecode_cache()


class StaticIndexPageView(DefaultJinjaIndexPageView):
    """GX's index page view, looking up templates in `quality/templates` first."""

    def __init__(
        self, custom_styles_directory: str | None = None, custom_views_directory: str | None = None
    ) -> None:
        super().__init__(
            custom_styles_directory=custom_styles_directory,
            custom_views_directory=custom_views_directory,
        )
        loaders: list[BaseLoader] = [FileSystemLoader(str(TEMPLATES))]
        if self.env.loader is not None:
            loaders.append(self.env.loader)
        self.env.loader = ChoiceLoader(loaders)
        self.env.bytecode_cache = bytecode_cache()
