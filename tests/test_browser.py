"""reports/comparison.html in a real browser: Debian's headless Chromium, driven by Playwright.

Opens the report of the session's smoke pipeline run (tests/conftest.py) and checks
what a reader sees: no console or page errors, every embedded figure decodes, every
in-page link has its target, and the tables are there for every workload. A full-page
screenshot is saved under the test's output directory. CI installs the browser
(.ci/setup_browser.sh); without it this test fails and says how to install it.
"""

from __future__ import annotations

import os
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


# --------------------------------------------------------------------------- layout at two screen sizes

#: A laptop screen and a narrow window.
VIEWPORTS = ({"width": 1280, "height": 800}, {"width": 900, "height": 700})

#: Runs in the page: where the answer is, how wide the page is, row heights and text-column widths.
_LAYOUT = """() => {
  const box = (el) => el.getBoundingClientRect();
  const rows = (sel) => Array.from(document.querySelectorAll(sel)).map((tr) => Math.round(box(tr).height));
  const words = Array.from(document.querySelectorAll('td.words')).map((td) => Math.round(box(td).width));
  const sections = Array.from(document.querySelectorAll('main > section')).map((s) => s.id);
  const headline = document.querySelector('#headline table');
  const ratio = document.querySelector('#headline h3 + p + table');
  const visible = (el) => { const b = box(el); return b.right <= innerWidth && b.bottom <= innerHeight && b.left >= 0; };
  // every headline number: its text, whether it carries its spread, whether it is on the first screen
  const numbers = headline ? Array.from(headline.querySelectorAll('tbody td.rate')).map((td) => ({
    text: td.innerText.replace(/\\s+/g, ' ').trim(), spread: /±/.test(td.innerText) && /CV|no spread/.test(td.innerText),
    visible: visible(td)})) : [];
  const notes = headline ? Array.from(headline.querySelectorAll('tbody td.notes')).map((td) => ({
    text: td.innerText.replace(/\\s+/g, ' ').trim(), visible: visible(td)})) : [];
  const ratios = ratio ? Array.from(ratio.querySelectorAll('tbody td.rate')).map((td) => ({
    text: td.innerText.replace(/\\s+/g, ' ').trim(), interval: /\\[/.test(td.innerText),
    verdict: /resolved/.test(td.innerText)})) : [];
  return {pageWidth: document.documentElement.scrollWidth, viewport: innerWidth, sections,
          headlineTableBottom: headline ? Math.round(box(headline).bottom + scrollY) : null,
          headlineScrolls: headline ? headline.scrollWidth > headline.clientWidth + 1 : null,
          numbers, notes, ratios,
          ratioTableTop: ratio ? Math.round(box(ratio).top + scrollY) : null,
          trialRows: rows('#trials tbody tr'), activityRows: rows('#activity tbody tr'),
          efficiencyRows: rows('#infrastructure h3 + p + table tbody tr'), words};
}"""


def _layout_problems(found: dict, viewport: dict, *, two_backends: bool) -> list[str]:
    problems = []
    if found["pageWidth"] > found["viewport"]:
        problems.append(f"page {found['pageWidth']} px wide in a {found['viewport']} px window")
    if found["sections"][:1] != ["headline"]:
        problems.append(f"the report does not lead with the headline: {found['sections'][:3]}")
    if found["headlineTableBottom"] is None or found["headlineTableBottom"] > viewport["height"]:
        problems.append(f"headline table ends at {found['headlineTableBottom']} px, below the first screen")
    if found["headlineScrolls"]:
        problems.append("the headline table scrolls sideways")
    if not found["numbers"]:
        problems.append("no headline numbers")
    problems += [f"headline number without its spread: {n['text']}" for n in found["numbers"] if not n["spread"]]
    problems += [f"headline number off the first screen: {n['text']}" for n in found["numbers"] if not n["visible"]]
    problems += [f"notes off the first screen: {n['text']}" for n in found["notes"] if not n["visible"]]
    if two_backends and found["ratioTableTop"] is None:
        problems.append("no ratio table in the headline section")
    problems += [f"ratio without interval and verdict: {r['text']}" for r in found["ratios"]
                 if not (r["interval"] and r["verdict"])]
    for name in ("trialRows", "activityRows", "efficiencyRows"):
        tall = [h for h in found[name] if h > 150]
        if tall:
            problems.append(f"{name}: rows {tall} px tall")
    narrow = [w for w in found["words"] if w < 200]
    if narrow:
        problems.append(f"text columns squeezed to {narrow} px")
    return problems


def _layout(context, html: Path, viewport: dict, shot: Path | None = None) -> dict:
    """The layout facts of `html` at `viewport`; with `shot`, the first screen saved there as PNG
    (and copied to $RL_BENCH_SCREENSHOTS, when set, for the docs)."""
    page = context.new_page()
    page.set_viewport_size(viewport)
    page.goto(html.as_uri(), wait_until="load")
    found = page.evaluate(_LAYOUT)
    if shot is not None:
        page.screenshot(path=str(shot))  # the viewport: what a reader sees before scrolling
        png = shot.read_bytes()
        assert png.startswith(b"\x89PNG") and int.from_bytes(png[16:20], "big") == viewport["width"]
        if os.environ.get("RL_BENCH_SCREENSHOTS"):
            dest = Path(os.environ["RL_BENCH_SCREENSHOTS"])
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(shot, dest / shot.name)
    page.close()
    return found


@pytest.fixture(scope="module")
def two_trial_report(tmp_path_factory, fresh_config):
    """A report of two backends x two workloads x two trials (TEST FIXTURE evidence through the real
    EvidenceWriter and contract code): noise warnings in every row, ratios with intervals."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from test_report import BACKENDS, _plans, _spec, trial_summaries

    from rl_pipeline_bench.evidence.attempts import seed_index
    from rl_pipeline_bench.report import render_report

    ws = tmp_path_factory.mktemp("two_trials")
    suite, ev = "fixture2", ws / "results" / "evidence"
    spec = _spec(fresh_config(), suite, BACKENDS)
    summaries = trial_summaries(ws, spec, (1, 2), 0.08)
    index = ws / "results" / "attempts.jsonl"
    seed_index(ev, index)
    reports = ws / "reports"
    render_report(summaries, _plans(ws, spec), ev, reports / "comparison.html", reports / "tables",
                  reports / "figures", suite, spec, attempts_index=index)
    return reports / "comparison.html"


@pytest.mark.parametrize("viewport", VIEWPORTS, ids=lambda v: f"{v['width']}x{v['height']}")
def test_two_trial_report_layout(two_trial_report, browser_context, viewport, tmp_path):
    """The answer on the first screen (every headline number with its spread, the notes beside
    it, then the ratio with its interval and verdict); noise warnings readable (no word-per-line
    column, no 400 px rows); the page no wider than the window."""
    found = _layout(browser_context, two_trial_report, viewport, tmp_path / f"two-trials-{viewport['width']}.png")
    assert _layout_problems(found, viewport, two_backends=True) == [], found
    assert len(found["numbers"]) == 3 * 4 and all("2 trials (< 3): spread unreliable" in n["text"]
                                                  for n in found["notes"]), found["notes"]
    assert all("not resolved" in r["text"] for r in found["ratios"]), found["ratios"]


@pytest.mark.parametrize("viewport", VIEWPORTS, ids=lambda v: f"{v['width']}x{v['height']}")
def test_smoke_report_layout(smoke_workdir, browser_context, viewport, tmp_path):
    """The smoke run's report (one backend, one trial, Infrastructure section): the same layout rules,
    each number saying it has no spread, and the trainer FLOPs caveats said once under their table."""
    html = smoke_workdir / "reports" / "comparison.html"
    found = _layout(browser_context, html, viewport, tmp_path / f"report-first-screen-{viewport['width']}.png")
    assert _layout_problems(found, viewport, two_backends=False) == [], found
    assert len(found["numbers"]) == 3 * len(WORKLOADS) and all("± ?" in n["text"] for n in found["numbers"])
    assert all("1 trial (< 3): no spread" in n["text"] for n in found["notes"]), found["notes"]
    text = html.read_text(encoding="utf-8")
    assert text.count("LoRA: frozen base weights cost") == 1 and text.count("Every estimate above:") == 1
    assert "paper: " not in text  # no LIBERO/RoboTwin reference rows without such an evaluation
    assert "This suite runs it at scale 0.02" in text
