"""report.html in headless Chromium: the headline says what the gate run decided, every criterion row links a
file inside the bundle, nothing visible is wider than the page; a screenshot is left for a person.

Rendered from a rehearsal's run folders captured in tests/fixtures/report/rehearsal/ (see capture.py there).
Chromium is Debian's `chromium` (scripts/setup installs it); FXPROBE_REQUIRE_LAB=1 makes its absence fail.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest

from fxprobe.report.build import build_report

FIXTURE = Path(__file__).parent / "fixtures" / "report" / "rehearsal"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars"]
# narrower than the report's own 1180 px: nothing may be wider than the page (the captured rehearsal's Thresholds
# table names the rehearsal's copy of gates-lab.toml by its whole path: that heading wraps, th.source)
WIDTH = 1000
DECISION = {"pass": "ACCEPTED", "fail": "NOT ACCEPTED", "not run": "INCOMPLETE", "error": "INCOMPLETE"}
LAB_PASS = "PASSED AT LAB SCALE"     # a gate run that passed with lab-scaled thresholds: never ACCEPTED

# Appended to a copy of the page (never to the report): every visible element's right edge against the page
# width, written into the DOM that --dump-dom prints. The planted line (the probe's fail twin) must be caught;
# it is measured, then removed before the page's own width is read.
PLANTED = '<pre id="planted" style="white-space:pre;overflow-wrap:normal">' + "x" * 400 + "</pre>"
LAYOUT_PROBE = """<script>
window.addEventListener("load", () => {
  const width = document.documentElement.clientWidth;
  const right = (el) => {            // the box, or its content when that spills out unclipped
    const box = el.getBoundingClientRect();
    const spill = getComputedStyle(el).overflowX === "visible" ? box.left + el.scrollWidth : box.right;
    return box.width > 0 ? Math.max(box.right, spill) : 0;
  };
  const wide = (root) => [...root.querySelectorAll("*")].filter((el) => el.checkVisibility() && right(el) > width + 1)
    .map((el) => `${el.tagName}.${el.className} right ${Math.round(right(el))}`);
  const planted = document.getElementById("planted");
  const caught = right(planted) > width + 1;
  planted.remove();
  const out = document.createElement("pre");
  out.id = "layout-probe";
  out.textContent = JSON.stringify({width, scroll: document.documentElement.scrollWidth, planted: caught,
                                    wide: wide(document.body).slice(0, 20)});
  document.body.appendChild(out);
});
</script>"""


def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["chromium", *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                          text=True, timeout=60)


class Page(HTMLParser):
    """The parts of the dumped DOM the test reads: decisions, criterion rows' links, the layout probe."""

    def __init__(self):
        super().__init__()
        self.decisions: list[tuple[str, str]] = []
        self.rows: list[list[str]] = []
        self.probe = ""
        self._in_row = self._in_probe = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        if tag == "section" and "decision" in classes:
            self.decisions.append((attrs.get("data-decision", ""), attrs.get("data-gate-run", "")))
        elif tag == "tr" and "criterion" in classes:
            self.rows.append([])
            self._in_row = True
        elif tag == "a" and self._in_row:
            self.rows[-1].append(attrs.get("href", ""))
        elif tag == "pre" and attrs.get("id") == "layout-probe":
            self._in_probe = True

    def handle_endtag(self, tag):
        if tag == "tr":
            self._in_row = False
        elif tag == "pre":
            self._in_probe = False

    def handle_data(self, data):
        if self._in_probe:
            self.probe += data


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    if shutil.which("chromium") is None:
        if os.environ.get("FXPROBE_REQUIRE_LAB") == "1":
            pytest.fail("chromium is not installed (scripts/setup installs it)")
        pytest.skip("chromium is not installed (scripts/setup installs it)")
    base = tmp_path_factory.mktemp("chromium")
    out = base / "bundle"
    build_report(sorted(p for p in FIXTURE.iterdir() if p.is_dir()), out, title="fxprobe rehearsal (captured)")
    html = (out / "report.html").read_text()
    probe_page = base / "probe.html"            # outside the bundle; <base> resolves its links into the bundle
    probe_page.write_text(html.replace("<head>", f'<head><base href="{out.as_uri()}/">', 1)
                          .replace("</body>", PLANTED + LAYOUT_PROBE + "</body>", 1))
    screenshot = base / "report-screenshot.png"    # the page as rendered (the probe removes its planted line)
    dom = chromium(base / "profile", f"--window-size={WIDTH},4000", "--virtual-time-budget=5000",
                   f"--screenshot={screenshot}", "--dump-dom", probe_page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    page = Page()
    page.feed(dom.stdout)
    print(f"screenshot: {screenshot}")
    return out, page, screenshot


def test_headline_outcome_is_the_gate_runs(rendered):
    out, page, _ = rendered
    assert page.decisions, "no decision section in the rendered page"
    for decision, gate_run in page.decisions:
        results = json.loads((out / "evidence" / gate_run / "results.json").read_text())
        lab_scaled = (results.get("thresholds") or {}).get("lab_scaled") is True
        expected = LAB_PASS if lab_scaled and results["outcome"] == "pass" else DECISION[results["outcome"]]
        assert decision == expected, (decision, results["outcome"], lab_scaled)
    # the captured rehearsal: the buyer's thresholds fail, the lab-scaled pass
    assert sorted(d for d, _ in page.decisions) == ["NOT ACCEPTED", LAB_PASS], page.decisions


def test_every_criterion_row_links_a_file_inside_the_bundle(rendered):
    out, page, _ = rendered
    assert len(page.rows) >= 14
    for links in page.rows:
        assert links, "a criterion row without a link"
        for href in links:
            target = (out / unquote(href)).resolve()
            assert target.is_file() and out.resolve() in target.parents, href


def test_no_visible_line_is_wider_than_the_page_and_a_screenshot_is_written(rendered):
    _, page, screenshot = rendered
    probe = json.loads(page.probe)
    assert probe["planted"], "the probe missed a planted 400-character line"
    assert probe["width"] <= WIDTH and probe["scroll"] <= probe["width"], probe
    assert probe["wide"] == [], probe["wide"]
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and screenshot.stat().st_size > 20_000
