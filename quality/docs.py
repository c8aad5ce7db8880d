"""Data Docs that read offline: the index page's tables are rendered into the HTML.

Great Expectations' index page ships its tables as JSON that bootstrap-table (loaded from CDNs)
turns into rows in the browser; without network access the page is empty. `StaticIndexPageView`
is GX's index view with one template replaced (`quality/templates/bootstrap_table.j2`): the same
columns and rows, written out as a plain HTML table. Validation and suite pages are unchanged
(GX already renders them server-side). `quality.project` configures the site to use this view.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from great_expectations.render.view import DefaultJinjaIndexPageView
from jinja2 import ChoiceLoader, FileSystemLoader

TEMPLATES = Path(__file__).resolve().parent / "templates"

SITE_INDEX_BUILDER: dict[str, Any] = {
    "class_name": "DefaultSiteIndexBuilder",
    "view": {"module_name": "quality.docs", "class_name": "StaticIndexPageView"},
}


class StaticIndexPageView(DefaultJinjaIndexPageView):  # type: ignore[misc]
    """GX's index page view, looking up templates in `quality/templates` first."""

    def __init__(
        self, custom_styles_directory: str | None = None, custom_views_directory: str | None = None
    ) -> None:
        super().__init__(
            custom_styles_directory=custom_styles_directory,
            custom_views_directory=custom_views_directory,
        )
        self.env.loader = ChoiceLoader([FileSystemLoader(str(TEMPLATES)), self.env.loader])
