"""Headless Chromium for browser tests: screenshot a page, dump its rendered DOM, judge a PNG.

Used by tests marked `@pytest.mark.browser` (the run report, Data Docs, the Airflow UI). A
missing Chromium FAILS the test with the command that installs it (`make browser`): these tests
prove that pages render, so they are never skipped. Every call starts a fresh browser with a
throw-away profile and no background networking, so pages must be self-contained or served
locally.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

Page = TypeVar("Page", bound="DevTools")

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome")
WINDOW = (1280, 2000)
INSTALL_HINT = "install it with `make browser` (apt-get install chromium)"
# Headless, and quiet on a closed network: no background connections, updates or sync.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def find_chromium() -> str:
    """The Chromium executable; fails the calling test when there is none."""
    override = os.environ.get("RUNOFF_CHROMIUM")
    for candidate in ((override,) if override else ()) + CHROMIUM_CANDIDATES:
        found = shutil.which(candidate)
        if found:
            return found
    pytest.fail(f"browser tests need headless Chromium, which was not found: {INSTALL_HINT}")


def chromium_command(profile: str | Path, *extra: str) -> list[str]:
    """The command line of a headless Chromium with its own profile directory."""
    return [find_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra]


def _target(page: str | Path) -> str:
    if isinstance(page, Path):
        return page.resolve().as_uri()
    return page


def _run_chromium(
    page: str | Path, extra: list[str], timeout: float, virtual_time_budget_ms: int | None
) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="runoff-chromium-") as profile:
        command = chromium_command(profile, *extra)
        if virtual_time_budget_ms is not None:
            command.append(f"--virtual-time-budget={virtual_time_budget_ms}")
        command.append(_target(page))
        try:
            return subprocess.run(
                command, capture_output=True, text=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"Chromium did not finish rendering {_target(page)} within {timeout:.0f} s")


def screenshot(
    page: str | Path,
    png: Path,
    window: tuple[int, int] = WINDOW,
    timeout: float = 90.0,
    virtual_time_budget_ms: int | None = None,
) -> Path:
    """Render `page` (a file path or a URL) and save a `window`-sized PNG to `png`.

    `virtual_time_budget_ms` lets script-driven pages (the Airflow UI) settle before the shot.
    """
    png.parent.mkdir(parents=True, exist_ok=True)
    png.unlink(missing_ok=True)
    result = _run_chromium(
        page,
        [f"--screenshot={png}", f"--window-size={window[0]},{window[1]}"],
        timeout,
        virtual_time_budget_ms,
    )
    if not png.is_file() or png.stat().st_size == 0:
        pytest.fail(
            f"Chromium wrote no screenshot of {_target(page)} (exit {result.returncode}): "
            f"{result.stderr.strip()[-800:]}"
        )
    return png


def dump_dom(
    page: str | Path, timeout: float = 90.0, virtual_time_budget_ms: int | None = None
) -> str:
    """The page's DOM as Chromium serialises it after loading (scripts included)."""
    result = _run_chromium(page, ["--dump-dom"], timeout, virtual_time_budget_ms)
    if result.returncode != 0 or not result.stdout.strip():
        pytest.fail(
            f"Chromium could not dump the DOM of {_target(page)} (exit {result.returncode}): "
            f"{result.stderr.strip()[-800:]}"
        )
    return result.stdout


@dataclass(frozen=True)
class PngStats:
    """What a screenshot looks like, in numbers a test can assert on."""

    width: int
    height: int
    colours: int  # distinct colours (capped by the sample)
    ink: float  # share of pixels that are not (near-)white


def png_stats(png: Path) -> PngStats:
    """Size, colour count and share of non-white pixels of a PNG (Pillow)."""
    from PIL import Image

    with Image.open(png) as image:
        rgb = image.convert("RGB")
        width, height = rgb.size
        # Nearest-neighbour sampling keeps real pixel colours (no blended ones).
        sample = rgb.resize((max(1, width // 4), max(1, height // 4)), Image.Resampling.NEAREST)
        pixels = list(sample.getdata())
    colours = len(set(pixels))
    ink = sum(1 for r, g, b in pixels if min(r, g, b) < 235) / len(pixels)
    return PngStats(width=width, height=height, colours=colours, ink=ink)


def assert_not_blank(png: Path, min_colours: int = 8, min_ink: float = 0.02) -> PngStats:
    """Fail unless the screenshot shows something: several colours and some ink."""
    stats = png_stats(png)
    assert stats.colours >= min_colours and stats.ink >= min_ink, (
        f"screenshot {png} looks blank: {stats.colours} colours, {stats.ink:.1%} non-white"
    )
    return stats


# -- a page driven through the Chrome DevTools protocol ------------------------------------------
class DevTools:
    """One page of headless Chromium over the DevTools protocol: one call at a time; the events
    that arrive meanwhile are kept in `events` (domains send them once enabled)."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.last_id = 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.last_id += 1
        self.ws.send(json.dumps({"id": self.last_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=30))
            if message.get("id") == self.last_id:
                if "error" in message:
                    raise AssertionError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            if "method" in message:
                self.events.append(message)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression (a promise is awaited)."""
        result = self.call(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression[:80]}...: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")

    def screenshot(self, png: Path) -> Path:
        shot = self.call("Page.captureScreenshot", format="png")
        png.write_bytes(base64.b64decode(shot["data"]))
        return png


@contextmanager
def devtools_page(
    client: Callable[[Any], Page],
    *flags: str,
    window: tuple[int, int] = (1280, 1000),
    timeout: float = 60.0,
) -> Iterator[Page]:
    """Headless Chromium (extra `flags`) on about:blank, its page as `client(websocket)`; the
    browser's process group is stopped on the way out."""
    from websockets.sync.client import connect

    with tempfile.TemporaryDirectory(prefix="runoff-chromium-") as profile:
        process = subprocess.Popen(
            chromium_command(
                profile,
                *flags,
                f"--window-size={window[0]},{window[1]}",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                "about:blank",
            ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            # Chromium writes its DevTools port into <profile>/DevToolsActivePort.
            marker = Path(profile) / "DevToolsActivePort"
            deadline = time.monotonic() + timeout
            while not (marker.is_file() and marker.read_text().strip()):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"Chromium wrote no {marker} (exit {process.poll()})")
                time.sleep(0.2)
            port = int(marker.read_text().split()[0])
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
                targets = json.loads(r.read())
            page = next(t for t in targets if t["type"] == "page")
            with connect(page["webSocketDebuggerUrl"], max_size=None) as ws:
                yield client(ws)
        finally:
            _stop_group(process)


def _stop_group(process: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """SIGTERM the browser's process group (SIGKILL after `timeout`)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=timeout)
