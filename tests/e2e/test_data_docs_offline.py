"""Data Docs offline: every page loads only local files, shows its icons and filters its tables.

Chromium runs with every host name unresolvable (`--host-resolver-rules`), driven over the
DevTools protocol with the Network domain on: each request the page makes is recorded, and the
test fails on any request to a URL that is not a local file (or an inline `data:` URL) and on
any request that failed. A control page that loads a CDN stylesheet proves the recorder sees
such a request. Needs Chromium (`make browser`) and the vendored assets (`make install`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from core.config import RunoffConfig
from quality.docs import VENDOR_ASSETS
from tests.browser import DevTools, assert_not_blank, devtools_page
from tests.e2e.test_data_docs import _validate_twice

OFFLINE = "--host-resolver-rules=MAP * ~NOTFOUND"
LOCAL_SCHEMES = ("file:", "data:")
FA_FAMILY = "Font Awesome 6 Free"


@dataclass
class Load:
    """What one page load requested, and which of the requests failed."""

    urls: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # "url: error"
    exceptions: list[str] = field(default_factory=list)  # uncaught script errors

    @property
    def remote(self) -> list[str]:
        return [u for u in self.urls if not u.startswith(LOCAL_SCHEMES)]


class Browser(DevTools):
    """The page of an offline Chromium, with its network events recorded."""

    def drain(self, seconds: float) -> None:
        """Collect events for `seconds` (requests a page makes after its load event)."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                message = json.loads(self.ws.recv(timeout=left))
            except TimeoutError:
                return
            if "method" in message:
                self.events.append(message)

    def open(self, url: str, timeout: float = 60.0) -> Load:
        """Navigate to `url`, wait for its load event, fonts and late requests; what it loaded."""
        self.events.clear()
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        while not any(e["method"] == "Page.loadEventFired" for e in self.events):
            if time.monotonic() > deadline:
                raise AssertionError(f"{url} did not finish loading within {timeout:.0f} s")
            self.drain(0.2)
        self.evaluate("document.fonts.ready.then(() => true)")
        self.drain(1.0)
        load = Load()
        urls: dict[str, str] = {}
        for event in self.events:
            params = event.get("params", {})
            if event["method"] == "Network.requestWillBeSent":
                urls[params["requestId"]] = params["request"]["url"]
                load.urls.append(params["request"]["url"])
            elif event["method"] == "Network.loadingFailed":
                url = urls.get(params["requestId"], params["requestId"])
                load.failed.append(f"{url}: {params.get('errorText')}")
            elif event["method"] == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                load.exceptions.append(str(details.get("exception", {}).get("description")))
        return load


@contextmanager
def offline_browser(window: tuple[int, int] = (1280, 1000)) -> Iterator[Browser]:
    """Headless Chromium that resolves no host name, its page ready with Network events on."""
    with devtools_page(Browser, OFFLINE, window=window) as browser:
        for domain in ("Network", "Page", "Runtime"):
            browser.call(f"{domain}.enable")
        yield browser


def assert_local_only(load: Load, page: Path) -> None:
    assert load.urls, f"no request recorded for {page}"
    assert load.urls[0] == page.as_uri()
    assert load.remote == [], f"{page.name} requested non-local URLs: {load.remote}"
    assert load.failed == [], f"{page.name}: requests failed: {load.failed}"
    assert load.exceptions == [], f"{page.name}: script errors: {load.exceptions}"


# The icons: Font Awesome's solid face loaded from the site, and every status icon drawn with it
# (an <i> whose ::before glyph has Font Awesome's font and a non-zero width).
ICONS_JS = f"""(() => {{
  const faces = [...document.fonts].filter(f => f.family.replace(/"/g, '') === '{FA_FAMILY}');
  const icons = [...document.querySelectorAll('i.fas, i.far, i.fa')];
  return {{
    loaded: faces.filter(f => f.status === 'loaded').map(f => f.weight),
    icons: icons.length,
    drawn: icons.filter(i =>
      getComputedStyle(i, '::before').fontFamily.includes('{FA_FAMILY}')
      && getComputedStyle(i, '::before').content !== 'none'
      && i.getBoundingClientRect().width > 8).length,
    check: document.querySelectorAll('i.fa-check-circle').length,
    times: document.querySelectorAll('i.fa-times').length,
  }};
}})()"""

VISIBLE_STATUS_JS = """(() => {
  const shown = sel => [...document.querySelectorAll(sel)]
    .filter(e => e.offsetParent !== null && getComputedStyle(e).opacity === '1').length;
  return {check: shown('i.fa-check-circle'), times: shown('i.fa-times')};
})()"""

# bootstrap-table's search box of the searchable table with the most rows: the rows before a
# search, then the rows shown after typing the first row's expectation text into the box.
SEARCH_TABLE_JS = """(() => {
  const boxes = [...document.querySelectorAll('.bootstrap-table')]
    .filter(b => b.querySelector('.search input'));
  const rows = b => [...b.querySelector('.fixed-table-body > table').tBodies[0].rows]
    .filter(r => !r.classList.contains('no-records-found'));
  boxes.sort((a, b) => rows(b).length - rows(a).length);
  window.__runoffBox = boxes[0];
  return {tables: boxes.length, rows: boxes.length ? rows(boxes[0]).map(r => r.innerText) : []};
})()"""

SEARCH_JS = """(async term => {
  const box = window.__runoffBox;
  const input = box.querySelector('.search input');
  input.value = term;
  input.dispatchEvent(new KeyboardEvent('keyup', {bubbles: true, key: 'a'}));
  await new Promise(done => setTimeout(done, 1500));  // bootstrap-table waits 500 ms to search
  return [...box.querySelector('.fixed-table-body > table').tBodies[0].rows]
    .map(r => r.innerText);
})"""


# The page looked at: the failed validation of the second run (two expectations, both failed).
SUITE = "quarantine_events_share"


@pytest.mark.browser
@pytest.mark.e2e
def test_data_docs_pages_load_only_local_files(config: RunoffConfig, tmp_path: Path) -> None:
    _, report = _validate_twice(config)
    index = report.data_docs_path
    assert index is not None and index.is_file()
    site = index.parent
    validation = next(
        p
        for p in (site / "validations" / SUITE).rglob("*.html")
        if f"events-{report.run_id[:8]}" in p.parts
    )
    suite_page = site / "expectations" / f"{SUITE}.html"
    control = tmp_path / "control.html"
    control.write_text(
        '<!DOCTYPE html><link rel="stylesheet" '
        'href="https://cdn.jsdelivr.net/npm/bootstrap@4.3.1/dist/css/bootstrap.min.css">'
        "<p>control</p>"
    )

    with offline_browser() as browser:
        # The recorder sees a CDN request, and it fails: the browser really is offline.
        load = browser.open(control.as_uri())
        assert load.remote == [
            "https://cdn.jsdelivr.net/npm/bootstrap@4.3.1/dist/css/bootstrap.min.css"
        ]
        assert load.failed == [f"{load.remote[0]}: net::ERR_NAME_NOT_RESOLVED"]

        load = browser.open(validation.as_uri())
        assert_local_only(load, validation)
        # Every stylesheet and script GX's templates name, and Font Awesome's solid font.
        vendor = (site / "static" / "vendor").as_uri() + "/"
        assert sorted(u.removeprefix(vendor) for u in load.urls if u.startswith(vendor)) == sorted(
            [
                f"{package}/{path}"
                for package, paths in VENDOR_ASSETS.items()
                for path in paths
                if path != "webfonts"
            ]
            + ["@fortawesome/fontawesome-free/webfonts/fa-solid-900.woff2"]
        )
        icons = browser.evaluate(ICONS_JS)
        assert icons["loaded"] == ["900"], icons
        assert icons["icons"] > 0 and icons["drawn"] == icons["icons"], icons
        failed = [e for e in report.expectations if e.suite == SUITE and not e.success]
        succeeded = [e for e in report.expectations if e.suite == SUITE and e.success]
        # One icon per expectation, plus the page's overall status in the overview.
        assert icons["check"] == len(succeeded) and icons["times"] == len(failed) + 1, icons
        before = assert_not_blank(browser.screenshot(tmp_path / "validation.png"))

        # bootstrap-table's search filters the rows of its table.
        table = browser.evaluate(SEARCH_TABLE_JS)
        assert table["tables"] > 0 and len(table["rows"]) >= 2, table
        # A word of the first row's expectation that some other row lacks (the search box
        # matches cell values, markup included, so a phrase across a badge would not match).
        # (Punctuation stripped: the cell's markup may separate a number from its full stop.)
        words = [w.strip(".,;:") for w in table["rows"][0].split("\t")[1].split()]
        rows = table["rows"]
        term = next(w for w in words if len(w) > 3 and not all(w in r.lower() for r in rows))
        matching = [r for r in table["rows"] if term.lower() in r.lower()]
        assert 1 <= len(matching) < len(table["rows"]), (term, table)
        assert browser.evaluate(f"({SEARCH_JS})({json.dumps(term)})") == matching
        assert browser.evaluate(f"({SEARCH_JS})('no such expectation')") == [
            "No matching records found"
        ]
        assert browser.evaluate(f"({SEARCH_JS})('')") == table["rows"]

        # The "Failed Only" validation filter hides every succeeded expectation.
        shown = browser.evaluate(VISIBLE_STATUS_JS)
        assert shown == {"check": len(succeeded), "times": len(failed) + 1}, shown
        browser.evaluate(
            "[...document.querySelectorAll('label.btn')]"
            ".find(l => l.innerText.trim() === 'Failed Only').click()"
        )
        browser.drain(1.5)  # jQuery fades them out in 400 ms
        shown = browser.evaluate(VISIBLE_STATUS_JS)
        assert shown == {"check": 0, "times": len(failed) + 1}, shown
        browser.screenshot(tmp_path / "validation-failed-only.png")

        load = browser.open(suite_page.as_uri())
        assert_local_only(load, suite_page)
        assert browser.evaluate("getComputedStyle(document.body).fontFamily") != ""
        load = browser.open(index.as_uri())
        assert_local_only(load, index)
        icons = browser.evaluate(ICONS_JS)
        assert icons["loaded"] == ["900"] and icons["drawn"] == icons["icons"] > 0, icons
        index_stats = assert_not_blank(browser.screenshot(tmp_path / "index.png"))
    assert before.colours >= 16 and index_stats.colours >= 16
