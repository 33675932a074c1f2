"""The built documentation site in a real browser (Debian's Chromium, headless), as a reader opens it, offline: every
Mermaid diagram renders as SVG, search finds what it should, and no page reaches beyond the machine (a docs site in
a closed network must work). `make docs-check` builds the site, installs Chromium when missing and runs this; the
screenshots are its output, in $DOCS_CHECK.

Chromium is driven over its DevTools protocol on a pipe (--remote-debugging-pipe: JSON messages ending in NUL on
file descriptors 3 and 4), with the standard library only."""

from __future__ import annotations

import base64
import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("DOCS_SITE", ROOT / "build" / "docs"))
SHOTS = Path(os.environ.get("DOCS_CHECK", ROOT / "build" / "docs-check"))
# The flags a closed network needs (no background connections to Google's hosts), as root (no sandbox).
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--window-size=1280,2000", "--remote-debugging-pipe"]
BOUND_S = 30

pytestmark = pytest.mark.browser


class Browser:
    """One headless Chromium and one page of it, over the DevTools protocol."""

    def __init__(self, profile: Path) -> None:
        executable = shutil.which("chromium")
        assert executable, "Debian's chromium is not installed: `make docs-check` installs it"
        to_browser, self._to_browser = os.pipe()
        self._from_browser, from_browser = os.pipe()

        def descriptors() -> None:
            os.dup2(to_browser, 3)
            os.dup2(from_browser, 4)

        self.process = subprocess.Popen([executable, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                        preexec_fn=descriptors, close_fds=False,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Network"):
            self.call(f"{domain}.enable", session=True)

    def _read(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = os.read(self._from_browser, 1 << 16)
            assert chunk, "chromium closed its pipe"
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)  # type: ignore[no-any-return]

    def call(self, method: str, session: bool = False, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        request: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            request["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(request).encode() + b"\0")
        while True:
            message = self._read()
            if message.get("id") == self._next_id:
                assert "error" not in message, message
                return message.get("result", {})  # type: ignore[no-any-return]
            self.events.append(message)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        return result["result"].get("value")

    def open(self, url: str) -> None:
        self.events.clear()
        self.call("Page.navigate", session=True, url=url)
        self.until(lambda: self.evaluate("document.readyState") == "complete", "the page to load")

    def until(self, condition: Any, what: str) -> None:
        deadline = time.monotonic() + BOUND_S
        while not condition():
            assert time.monotonic() < deadline, f"waited {BOUND_S} s for {what}"
            time.sleep(0.1)

    def document(self) -> dict[str, Any]:
        # pierce: shadow roots too, closed ones included (Material renders each diagram into one).
        return self.call("DOM.getDocument", session=True, depth=-1, pierce=True)["root"]  # type: ignore[no-any-return]

    def screenshot(self, path: Path) -> None:
        shot = self.call("Page.captureScreenshot", session=True, format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(shot["data"]))

    def requested_urls(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=BOUND_S)
        os.close(self._to_browser)
        os.close(self._from_browser)


def _nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in (*node.get("children", ()), *node.get("shadowRoots", ()), node.get("contentDocument")):
        if child:
            yield from _nodes(child)


def _classes(node: dict[str, Any]) -> list[str]:
    attributes = node.get("attributes", [])
    pairs = dict(zip(attributes[::2], attributes[1::2], strict=True))
    return pairs.get("class", "").split()


def rendered_diagrams(document: dict[str, Any]) -> tuple[int, int]:
    """(Mermaid blocks on the page, those holding an SVG)."""
    hosts = [node for node in _nodes(document) if "mermaid" in _classes(node)]
    return len(hosts), sum(1 for host in hosts if any(n.get("nodeName") == "svg" for n in _nodes(host)))


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    assert (SITE / "index.html").is_file(), f"no site in {SITE}: run `make docs` first (make docs-check does)"
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(SITE))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    thread.join(BOUND_S)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    chromium = Browser(tmp_path_factory.mktemp("chromium-profile"))
    yield chromium
    chromium.close()


def _fences(page: str) -> int:
    source = ROOT / ("README.md" if page == "index" else f"docs/{page}.md")
    return len(re.findall(r"^ *```mermaid$", source.read_text(encoding="utf-8"), re.M))


@pytest.mark.parametrize("page", ["architecture", "guarantees", "index"])
def test_every_mermaid_diagram_renders_as_svg_offline(browser, site, page):
    expected = _fences(page)
    assert expected >= 1
    browser.open(site + ("" if page == "index" else f"{page}/"))
    browser.until(lambda: rendered_diagrams(browser.document()) == (expected, expected),
                  f"{expected} diagrams rendered as SVG on {page} (found {rendered_diagrams(browser.document())})")
    SHOTS.mkdir(parents=True, exist_ok=True)
    browser.screenshot(SHOTS / f"{page}.png")
    outside = [url for url in browser.requested_urls() if not url.startswith((site, "data:", "blob:"))]
    assert outside == [], "the site reached beyond the machine (a CDN?)"


def test_search_finds_send_at(browser, site):
    browser.open(site)
    browser.evaluate("""(() => { const input = document.querySelector('.md-search__input');
        input.focus(); input.value = 'sendAt';
        for (const kind of ['focus', 'input', 'keyup']) input.dispatchEvent(new Event(kind, {bubbles: true}));
    })()""")
    browser.until(lambda: (browser.evaluate("document.querySelectorAll('.md-search-result__item').length") or 0) > 0,
                  "search results for sendAt")
    titles = browser.evaluate("[...document.querySelectorAll('.md-search-result__item')].map(e => e.innerText)")
    assert any("sendAt" in title for title in titles)
    browser.screenshot(SHOTS / "search.png")
