"""reports/comparison.html in a real browser: Debian's headless Chromium, driven by Playwright.

Opens the report of the session's smoke pipeline run (tests/conftest.py) and checks
what a reader sees: no console or page errors, every embedded figure decodes, every
in-page link has its target, and the tables are there for every workload. A full-page
screenshot is saved under the test's output directory. CI installs the browser
(.ci/setup_browser.sh); without it this test fails and says how to install it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

# Slow tier (tests/conftest.py): the smoke pipeline's report in headless Chromium.
pytestmark = [pytest.mark.e2e, pytest.mark.browser]

WORKLOADS = ["multi_turn", "long_generation", "tool_history", "multi_turn_salted"]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
#: Headless, no sandbox (CI runs as root), and nothing that reaches the network.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

#: Runs in the page: every <img> decoded (or why not), every in-page link's target, the tables by section.
_INSPECT = """async () => {
  const images = await Promise.all(Array.from(document.images).map(async (img) => {
    try { await img.decode(); return {alt: img.alt, ok: img.naturalWidth > 0 && img.naturalHeight > 0,
                                      width: img.naturalWidth, height: img.naturalHeight}; }
    catch (e) { return {alt: img.alt, ok: false, error: String(e)}; }
  }));
  const links = Array.from(document.querySelectorAll('a[href^="#"]')).map((a) => {
    const id = decodeURIComponent(a.getAttribute('href').slice(1));
    return {href: a.getAttribute('href'), target: document.getElementById(id) !== null};
  });
  const rows = (sel) => Array.from(document.querySelectorAll(sel + ' table tbody tr')).map((tr) => tr.innerText);
  const offered = Array.from(document.querySelectorAll('#offered h3')).map((h) => {
    let el = h.nextElementSibling, tables = 0;
    while (el && el.tagName !== 'H3') { if (el.tagName === 'TABLE') tables += el.tBodies[0].rows.length; el = el.nextElementSibling; }
    return {workload: h.innerText, rows: tables};
  });
  return {images, links, headline: rows('#headline'), validation: rows('#validation'), offered};
}"""


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: install it with `sudo bash .ci/setup_browser.sh` "
                    "(Debian package chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            tmp_path_factory.mktemp("chromium-profile"), executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1280, "height": 900})
        try:
            yield context
        finally:
            context.close()


def test_report_in_headless_chromium(smoke_workdir, browser_context, tmp_path):
    html = smoke_workdir / "reports" / "comparison.html"
    page = browser_context.new_page()
    problems: list[str] = []
    page.on("console", lambda msg: problems.append(f"console {msg.type}: {msg.text}") if msg.type == "error" else None)
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.on("requestfailed", lambda req: problems.append(f"request failed: {req.url[:80]} {req.failure}"))
    response = page.goto(html.as_uri(), wait_until="load")
    assert response is not None and response.ok
    found = page.evaluate(_INSPECT)

    shot = tmp_path / "comparison.png"
    page.screenshot(path=str(shot), full_page=True)
    print(f"screenshot: {shot}")
    assert problems == []

    images = found["images"]
    # The timelines, one offered-length figure per workload, and the Infrastructure section's
    # all-reduce, storage and checkpoint figures.
    assert len(images) == 1 + len(WORKLOADS) + 3, [img["alt"] for img in images]
    assert {"all-reduce bandwidth vs message size", "storage throughput against the 500 MB/s target",
            "checkpoint save and load time against the 60 s target"} <= {img["alt"] for img in images}
    assert all(img["ok"] for img in images), images
    links = found["links"]
    assert links and all(link["target"] for link in links), [link for link in links if not link["target"]]
    for w in WORKLOADS:
        assert any(row.startswith(w) for row in found["headline"]), (w, found["headline"])
        assert any(row.startswith(w) for row in found["validation"]), (w, found["validation"])
    assert [(o["workload"], o["rows"]) for o in found["offered"]] == [(w, 4) for w in WORKLOADS]
    png = shot.read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert width == 1280 and height > 2000  # the whole page, not the viewport
