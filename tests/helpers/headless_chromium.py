"""A real headless Chromium (Debian's ``chromium``) for page tests: what a page measures once rendered, and screenshots.

No driver library: Chromium runs a copy of the page with a measuring script appended and prints the DOM after load
(``--dump-dom``); the script writes its measurements into the DOM as JSON. The page itself stays script-free.
Every run gets a fresh profile and no network: the flags below.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
         "--force-device-scale-factor=1"]
TIMEOUT_S = 120

# Every element with its own text, and every SVG <text>, at the size it is drawn: an SVG scaled down to fit draws
# its text smaller than its font-size says, so that size is multiplied by the SVG's drawn width over its viewBox.
MEASURE = r"""
<script>
(function () {
  var sizes = [];
  document.querySelectorAll('body *').forEach(function (el) {
    var own = Array.prototype.some.call(el.childNodes,
                                        function (n) { return n.nodeType === 3 && n.textContent.trim(); });
    if (!own || el.closest('title') || el.tagName === 'SCRIPT' || el.tagName === 'STYLE') return;
    var rect = el.getBoundingClientRect();
    if (!rect.width && !rect.height && el.tagName !== 'text') return;  // not drawn (closed <details>, hidden)
    var size = parseFloat(getComputedStyle(el).fontSize);
    var svg = el.closest('svg');
    if (svg && svg.viewBox && svg.viewBox.baseVal && svg.viewBox.baseVal.width) {
      size = size * svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
    }
    sizes.push({size: Math.round(size * 100) / 100, tag: el.tagName.toLowerCase(),
                text: el.textContent.trim().slice(0, 60)});
  });
  var out = document.createElement('pre');
  out.id = 'pinbench-measure';
  out.textContent = JSON.stringify({sizes: sizes, scroll_width: document.documentElement.scrollWidth,
                                     viewport_width: window.innerWidth, height: document.documentElement.scrollHeight,
                                     svgs: document.querySelectorAll('svg').length});
  document.body.appendChild(out);
})();
</script>
"""


def chromium() -> str | None:
    """Debian's chromium (.ci/run installs it), else a Chrome already on the machine (GitHub's Ubuntu runners)."""
    return next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)


CHROMEDRIVER = shutil.which("chromedriver")


@contextmanager
def driven(*flags: str) -> Iterator[Any]:
    """A selenium driver of this Chromium (chromedriver on PATH), with a fresh profile and no network; quit after."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium()
    for flag in (*FLAGS, *flags, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _run(args: list[str], profile: Path) -> subprocess.CompletedProcess[str]:
    binary = chromium()
    assert binary, "no chromium on PATH"
    return subprocess.run([binary, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True,
                          timeout=TIMEOUT_S, check=False)


def measure(page: Path, width: int = 1280, height: int = 900) -> dict[str, Any]:
    """Rendered text sizes, page width and height of ``page`` in a ``width`` x ``height`` window."""
    probe = page.with_name(f".measure-{page.name}")
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    try:
        with tempfile.TemporaryDirectory() as profile:
            done = _run([f"--window-size={width},{height}", "--dump-dom", probe.as_uri()], Path(profile))
    finally:
        probe.unlink()
    found = re.search(r'<pre id="pinbench-measure">(.*?)</pre>', done.stdout, re.S)
    assert found, done.stderr[-2000:]
    return json.loads(found.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
                      .replace("&amp;", "&"))


def screenshot(page: Path, dest: Path, *, fragment: str = "", width: int = 1280, height: int = 1400) -> Path:
    """A ``width`` x ``height`` PNG of ``page`` from its top, or from the element ``#fragment``.

    Headless Chromium paints a page scrolled to a fragment blank, so a copy of the page moves its body up instead
    (a transform at load) and the screenshot is of that copy's top."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    shown = page
    if fragment:
        shown = page.with_name(f".shot-{page.name}")
        shift = (f"<script>(function () {{ var el = document.getElementById({json.dumps(fragment)}); "
                 "var y = el.getBoundingClientRect().top + window.scrollY - 8; "
                 "document.body.style.transform = 'translateY(' + (-y) + 'px)'; })();</script>")
        shown.write_text(page.read_text(encoding="utf-8").replace("</body>", shift + "</body>"), encoding="utf-8")
    try:
        with tempfile.TemporaryDirectory() as profile:
            done = _run([f"--window-size={width},{height}", f"--screenshot={dest}", shown.as_uri()], Path(profile))
    finally:
        if shown != page:
            shown.unlink()
    assert dest.is_file() and dest.stat().st_size > 0, done.stderr[-2000:]
    return dest
