"""Data Docs views: an index page that reads offline, and compiled templates kept between runs.

Great Expectations' index page ships its tables as JSON that bootstrap-table (loaded from CDNs)
turns into rows in the browser; without network access the page is empty. `StaticIndexPageView`
is GX's index view with one template replaced (`quality/templates/bootstrap_table.j2`): the same
columns and rows, written out as a plain HTML table. Validation and suite pages keep GX's
templates (GX already renders them server-side).

GX's page templates load Bootstrap, bootstrap-table, jQuery, Font Awesome, Vega and friends from
CDNs, so read offline a page has no styles, no status icons and no working filters. Both views
look up templates in `quality/templates` first (GX's own `custom_views_directory` only adds
templates, it cannot replace one), where `page.j2`, `index_page.j2` and `js_script_imports.j2`
point at the same files under the site's `static/vendor/`. Those come from npm packages pinned in
`quality/vendor/package.json` (its lockfile; `make install` runs `npm ci` there) and
`copy_vendor_assets` copies them, their licences and package.json into every site.

Every docs build creates new views, and each compiled GX's Jinja templates from scratch (about a
second per validate run); the views here share Jinja's file bytecode cache (a private directory
under the system temp dir), so templates are compiled once per machine. `quality.project`
configures the site with these views.

Values from the data are text, never markup. GX's Jinja templates do not autoescape (`.j2` is
not among `select_autoescape`'s extensions) and GX escapes only the string parameters of its
string templates: an unexpected value, a cell of an unexpected-values table, an observed value or
a graph's data reach the page as they are, so a landing value `<script>...</script>` would run
in the reader's browser. `EscapingView` (a base of both views) HTML-escapes every value a page
prints that is not renderer markup: plain strings and the elements of value lists in content
blocks, string-template parameters of any type (GX's trusted icon and `<pre>` parameters aside),
and writes graph specs as JSON whose `<`, `>` and `&` are `\\u` escapes (they sit in a
`<script>`).
"""

from __future__ import annotations

import html
import json
import shutil
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from great_expectations.render.components import RenderedComponentContent
from great_expectations.render.view import DefaultJinjaIndexPageView, DefaultJinjaPageView
from great_expectations.render.view.view import DefaultJinjaView
from jinja2 import (
    BaseLoader,
    BytecodeCache,
    ChoiceLoader,
    FileSystemBytecodeCache,
    FileSystemLoader,
    pass_context,
)

from quality.suites import SUITE_PARAMETER

TEMPLATES = Path(__file__).resolve().parent / "templates"
VENDOR = Path(__file__).resolve().parent / "vendor"
VENDOR_MODULES = VENDOR / "node_modules"
VENDOR_LOCK = "package-lock.json"
# Every file GX's templates load from a CDN, per npm package (the same versions; the templates in
# `quality/templates` refer to them as static/vendor/<package>/<path>). A directory is copied whole.
VENDOR_ASSETS: dict[str, tuple[str, ...]] = {
    "@forevolve/bootstrap-dark": ("dist/css/bootstrap-prefers-dark.css",),
    "@fortawesome/fontawesome-free": ("css/all.min.css", "webfonts"),
    "bootstrap": ("dist/css/bootstrap.min.css", "dist/js/bootstrap.min.js"),
    "bootstrap-datepicker": (
        "dist/css/bootstrap-datepicker.min.css",
        "dist/js/bootstrap-datepicker.min.js",
    ),
    "bootstrap-table": (
        "dist/bootstrap-table.min.css",
        "dist/bootstrap-table.min.js",
        "dist/extensions/filter-control/bootstrap-table-filter-control.css",
        "dist/extensions/filter-control/bootstrap-table-filter-control.min.js",
    ),
    "jquery": ("dist/jquery.min.js",),
    "popper.js": ("dist/umd/popper.min.js",),
    "vega": ("build/vega.min.js",),
    "vega-embed": ("build/vega-embed.min.js",),
    "vega-lite": ("build/vega-lite.min.js",),
}
# Licence and provenance files that go along with each package's assets.
VENDOR_NOTICES = ("package.json", "LICENSE", "LICENSE.txt", "LICENSE.md")


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


def copy_vendor_assets(site_dir: Path) -> Path:
    """Copy the vendored assets (and their licences) into `<site_dir>/static/vendor/`, returned.

    A no-op when the site already holds every file from the same lockfile (the copy is written
    last, so an interrupted copy is redone). Fails when `make install` has not fetched them.
    """
    target = site_dir / "static" / "vendor"
    lock = (VENDOR / VENDOR_LOCK).read_bytes()
    files: list[tuple[str, str]] = []
    for package, paths in VENDOR_ASSETS.items():
        notices = [n for n in VENDOR_NOTICES if (VENDOR_MODULES / package / n).is_file()]
        files += [(package, path) for path in (*paths, *notices)]
    missing = [f"{p}/{f}" for p, f in files if not (VENDOR_MODULES / p / f).exists()]
    if missing:
        raise FileNotFoundError(
            f"Data Docs assets missing from {VENDOR_MODULES} ({', '.join(missing[:3])}...): "
            f"run `make install` (npm ci in {VENDOR})"
        )
    stamp = target / VENDOR_LOCK
    current = stamp.is_file() and stamp.read_bytes() == lock
    if current and all((target / p / f).exists() for p, f in files):
        return target
    stamp.unlink(missing_ok=True)
    for package, path in files:
        source, copy = VENDOR_MODULES / package / path, target / package / path
        copy.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, copy, dirs_exist_ok=True)
        else:
            shutil.copyfile(source, copy)
    stamp.write_bytes(lock)
    return target


@cache
def bytecode_cache() -> BytecodeCache:
    """Jinja's per-user cache directory under the system temp dir (created 0700 by Jinja)."""
    return FileSystemBytecodeCache()


def _runoff_templates_first(view: DefaultJinjaPageView) -> None:
    """Look up templates in `quality/templates` before GX's; compile them once per machine."""
    loaders: list[BaseLoader] = [FileSystemLoader(str(TEMPLATES))]
    if view.env.loader is not None:
        loaders.append(view.env.loader)
    view.env.loader = ChoiceLoader(loaders)
    view.env.bytecode_cache = bytecode_cache()


def script_json(value: Any) -> str:
    """`value` as JSON that can sit inside a `<script>` element: `<`, `>` and `&` (which can
    only occur inside JSON strings) are written as `\\u` escapes, so no value can close the
    element or open a comment. A string is taken to be JSON already."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _is_content_block(value: Any) -> bool:
    return isinstance(value, RenderedComponentContent) or (
        isinstance(value, dict) and "content_block_type" in value
    )


def param_text(value: Any) -> str:
    """A string template parameter as a page prints it: a suite parameter by its name and who
    sets it (`min_rows (set by each run)`), anything else as `str` writes it."""
    if isinstance(value, Mapping) and set(value) == {SUITE_PARAMETER}:
        return f"{value[SUITE_PARAMETER]} (set by each run)"
    return str(value)


class EscapingView(DefaultJinjaView):
    """GX's view with every data value HTML-escaped where GX writes it raw (module docstring).

    Renderer markup (the templates, string templates' `template`, styling, the trusted icon and
    `<pre>` parameters) is left as GX writes it: it carries no data values.
    """

    @pass_context
    def render_content_block(
        self,
        jinja_context: Any,
        content_block: Any,
        index: Any = None,
        content_block_id: Any = None,
        render_to_markdown: bool = False,
    ) -> Any:
        if not render_to_markdown:
            if isinstance(content_block, str):
                return html.escape(content_block)
            if isinstance(content_block, list):
                content_block = [
                    el if _is_content_block(el) else html.escape(str(el)) for el in content_block
                ]
            elif isinstance(content_block, dict):
                kind = content_block.get("content_block_type")
                if kind is None:
                    return html.escape(str(content_block))
                if kind == "graph" and "graph" in content_block:
                    content_block = {**content_block, "graph": script_json(content_block["graph"])}
            elif content_block is not None and not isinstance(
                content_block, RenderedComponentContent
            ):
                return html.escape(str(content_block))  # numbers, booleans, dates...
        return super().render_content_block(
            jinja_context,
            content_block,
            index=index,
            content_block_id=content_block_id,
            render_to_markdown=render_to_markdown,
        )

    def render_string_template(self, template: Any) -> Any:
        """GX escapes string parameters only: other values (lists, dicts, numbers) are turned
        into the same text `string.Template` would write, so that GX escapes them too; a suite
        parameter (`{"$PARAMETER": name}`, which GX would print as that dict) into its name."""
        if isinstance(template, Mapping) and isinstance(template.get("params"), Mapping):
            trusted: frozenset[str] = getattr(self, "_TRUSTED_HTML_PARAMS", frozenset())
            params = {
                name: value if name in trusted or isinstance(value, str) else param_text(value)
                for name, value in template["params"].items()
            }
            template = {**template, "params": params}
        return super().render_string_template(template)


class CachedPageView(EscapingView, DefaultJinjaPageView):
    """GX's page view, looking up templates in `quality/templates` first (assets served
    locally); compiled templates come from the bytecode cache."""

    def __init__(
        self, custom_styles_directory: str | None = None, custom_views_directory: str | None = None
    ) -> None:
        super().__init__(
            custom_styles_directory=custom_styles_directory,
            custom_views_directory=custom_views_directory,
        )
        _runoff_templates_first(self)


class StaticIndexPageView(EscapingView, DefaultJinjaIndexPageView):
    """GX's index page view, looking up templates in `quality/templates` first."""

    def __init__(
        self, custom_styles_directory: str | None = None, custom_views_directory: str | None = None
    ) -> None:
        super().__init__(
            custom_styles_directory=custom_styles_directory,
            custom_views_directory=custom_views_directory,
        )
        _runoff_templates_first(self)
