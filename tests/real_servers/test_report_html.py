"""specbench report --format html: one self-contained page whose figures render, checked in headless Chromium.

The run is ``tests/data/report_run_a`` (the demo's shape: an AR baseline, DFlash and DDTree over budgets and TPs,
two DDTree configurations crashed, one skipped, an empty answer, a partial cell), plus a small load sweep built
here. Chromium is Debian's (``apt-get install -y chromium``) driven by the ``playwright`` package of the test
extra with ``executable_path``: nothing is downloaded. Without either the browser test skips with that command,
or fails with ``SPECBENCH_REQUIRE_CHROMIUM=1`` (CI).

The screenshot test keeps a small reference image (``tests/golden/report_run_a_html.png``, a downscaled full-page
shot) and compares what survives a font change: the page's width, its height within a margin, and that every
figure's region of the new shot holds a drawing (not a blank box). ``SPECBENCH_UPDATE_GOLDEN=1`` rewrites it.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from repo_paths import TESTS
from specbench_tui.core.analysis import analyse
from specbench_tui.core.load import LoadSpec, Slo, point_item
from specbench_tui.core.records import Measurement
from specbench_tui.report.formats import render
from specbench_tui.report.html import render_html
from specbench_tui.report.load import LoadedRun, load_run

INSTALL = "apt-get install -y chromium && pip install playwright (or bash tools/setup_test_deps.sh)"
RUN_A = TESTS / "data" / "report_run_a"
REFERENCE = TESTS / "golden" / "report_run_a_html.png"
UPDATE = os.environ.get("SPECBENCH_UPDATE_GOLDEN") == "1"
VIEWPORT = (1280, 900)
CHECK_PAGE = """() => {
  const width = document.documentElement.clientWidth;
  const wide = [];
  for (const el of document.body.querySelectorAll('*')) {
    if (el.parentElement && el.parentElement.closest('div.scroll')) continue;  // in a box that scrolls sideways
    const r = el.getBoundingClientRect();
    if (r.width > 0 && (r.right > width + 1 || r.left < -1)) wide.push(el.tagName + ' ' + Math.round(r.right));
  }
  const figures = [...document.querySelectorAll('figure img')].map(img => {
    const r = img.getBoundingClientRect();
    return {name: img.closest('figure').dataset.figure, complete: img.complete, natural: img.naturalWidth,
            width: r.width, height: r.height, top: r.top + window.scrollY, left: r.left};
  });
  return {wide, figures, scroll: document.documentElement.scrollWidth, width,
          height: document.documentElement.scrollHeight};
}"""


BROKEN_HEADER_WORDS = """() => {
  const broken = [];
  let words = 0;
  for (const cell of document.querySelectorAll('th, td')) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const m of node.data.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const lines = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
        words += 1;
        if (lines.size > 1) broken.push(m[0]);
      }
    }
  }
  const boxes = [...document.querySelectorAll('div.scroll')];
  return {broken, words, tables: document.querySelectorAll('table').length, boxes: boxes.length,
          scrolling: boxes.filter(b => getComputedStyle(b).overflowX === 'auto').length};
}"""
"""Every word of every table header or cell whose glyphs sit on more than one line (``T P``, ``budge t``,
``ddtree-b16-`` over ``tp1``), how many words were checked, and the scrolling boxes the tables sit in."""


def _ms(cid: str, name: str, label: str, tps: float, n: int, cap: int | None = None) -> list[Measurement]:
    return [Measurement(config_id=cid, config=name, workload="w", item=point_item(["a"], j)[1], repeat=r,
                        status="ok", decode_tps=tps, ttft_s=0.01 * n, itl_p99_s=0.01, e2e_s=0.1, completion_tokens=13,
                        started_at=1.0 + j * 0.01, load=label, running_cap=cap) for r in (1, 2, 3) for j in range(n)]


def load_run_fixture(tmp_path: Path) -> LoadedRun:
    """A load sweep: ar and spec at concurrency 1, 4, 16; spec's speedup crosses 1 between 4 and 16, and its
    server runs at most 8 requests (the point at 16 is capped)."""
    configs = [{"id": "a0", "name": "ar", "algorithm": "autoregressive", "argv": [], "params": {}, "baseline": None},
               {"id": "s1", "name": "spec", "algorithm": "eagle3", "argv": ["--speculative-algorithm", "EAGLE3"],
                "params": {}, "baseline": "ar"}]
    load = LoadSpec(concurrency=(1, 4, 16), waves=1, slo=Slo(ttft_ms=50))
    plan = {"sweep": "html", "configs": configs, "workloads": [{"name": "w", "kind": "code", "temperature": 0.0,
                                                                 "repeats": 3, "load": load.to_json()}]}
    ms = []
    for b, (ar, sp) in {1: (100.0, 180.0), 4: (90.0, 120.0), 16: (70.0, 60.0)}.items():
        ms += _ms("a0", "ar", f"c{b}", ar, b) + _ms("s1", "spec", f"c{b}", sp, b, cap=8)
    return LoadedRun(path=tmp_path, env=None, analysis=analyse(plan, ms, []))


@pytest.fixture(scope="module")
def page_a() -> str:
    return render(load_run(RUN_A), "html")


def _figures(html: str) -> dict[str, bytes]:
    return {name: base64.b64decode(data) for name, data in
            re.findall(r'data-figure="([^"]+)"><img[^>]*src="data:image/svg\+xml;base64,([^"]+)"', html)}


def test_the_page_is_self_contained_and_holds_the_figures(page_a: str) -> None:
    figures = _figures(page_a)
    assert {"speedup", "acceptance-vs-budget", "decode-tps-vs-tp", "pareto-ttft-vs-tps"} <= set(figures)
    assert all(svg.lstrip().startswith(b"<?xml") and b"<svg" in svg for svg in figures.values())
    assert "<script" not in page_a and "<link" not in page_a and "@import" not in page_a
    assert all(v.startswith("data:image/svg+xml;base64,") for v in re.findall(r'src="([^"]*)"', page_a))
    assert all(v.startswith("#figure-") for v in re.findall(r'href="([^"]*)"', page_a))  # links within the page
    assert "<pre>" in page_a.split("Plain-text report")[0]  # crash excerpts, not the whole report, outside <details>
    assert "Results: code (code, greedy, 3 repeats)</h3>" in page_a
    assert '<td class="l"><span class="w">ddtree-b8-tp1</span></td>' in page_a  # the name kept whole (issue 46)


def test_the_speedup_figure_marks_crashed_skipped_and_empty_answers(page_a: str) -> None:
    svg = _figures(page_a)["speedup"].decode()
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", svg)  # svg.fonttype none: the text stays text
    assert texts.count("× crashed") >= 4 and texts.count("× skipped") == 3  # b8 on 3 workloads, b12 on 2
    assert any("zero output 1/6" in t for t in texts) and any("partial, crashed" in t for t in texts)


def test_a_load_sweep_gets_load_curves_with_the_crossover_and_the_capped_points(tmp_path: Path) -> None:
    html = render_html(load_run_fixture(tmp_path), "the text report")
    figures = _figures(html)
    assert set(figures) == {"load-w-concurrency", "pareto-w"}, set(figures)
    assert "(4, 16]" in html and "capped (16 in flight, cap 8)" in html  # the crossover and the points tables


def test_the_environment_says_simulated(tmp_path: Path) -> None:
    run = load_run(RUN_A)
    sim = LoadedRun(path=run.path, analysis=run.analysis, env={"simulated": True, "gpus": {"backend": "fake"}})
    html = render_html(sim, "")
    assert re.search(r'<p class="simulated" id="environment">Environment: SIMULATED', html)


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        path = None
    if path:
        return path
    message = f"headless Chromium is not installed: {INSTALL}"
    if os.environ.get("SPECBENCH_REQUIRE_CHROMIUM") == "1":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    path = _chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=path, headless=True, args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


def _open(browser: Any, page_file: Path, width: int = VIEWPORT[0]) -> tuple[Any, list[str]]:
    context = browser.new_context(viewport={"width": width, "height": VIEWPORT[1]})
    requests: list[str] = []
    context.on("request", lambda r: requests.append(r.url) if not r.url.startswith(("file:", "data:")) else None)
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(page_file.as_uri())
    page.wait_for_load_state("load")
    return page, errors + requests


def _blank(region: Any) -> bool:
    """Whether an image region is (almost) one colour: a figure that did not draw."""
    lo, hi = region.convert("L").getextrema()
    colours = region.convert("RGB").getcolors(maxcolors=1 << 16)
    return hi - lo < 40 or (colours is not None and len(colours) < 8)


def test_the_page_renders_in_headless_chromium_nothing_cut(browser: Any, page_a: str, tmp_path: Path) -> None:
    from PIL import Image

    page_file = tmp_path / "report.html"
    page_file.write_text(page_a, encoding="utf-8")
    page, problems = _open(browser, page_file)
    facts = page.evaluate(CHECK_PAGE)
    assert problems == [], problems  # no console error, no request leaving the file
    assert len(facts["figures"]) >= 4
    for fig in facts["figures"]:
        assert fig["complete"] and fig["natural"] > 0 and fig["width"] > 200 and fig["height"] > 100, fig
    assert facts["wide"] == [] and facts["scroll"] <= facts["width"], facts["wide"][:10]
    shot_file = tmp_path / "shot.png"
    page.screenshot(path=str(shot_file), full_page=True)
    shot = Image.open(shot_file)
    assert shot.width == VIEWPORT[0] and shot.height == facts["height"]
    for fig in facts["figures"]:
        box = (int(fig["left"]), int(fig["top"]), int(fig["left"] + fig["width"]), int(fig["top"] + fig["height"]))
        assert not _blank(shot.crop(box)), f"figure {fig['name']} is blank in the screenshot"
        inner = shot.crop((box[0] + 60, box[1] + 40, box[2] - 20, box[3] - 30))  # the plot area itself
        assert not _blank(inner), f"figure {fig['name']} has an empty plot area"
    small = shot.resize((shot.width // 4, max(1, shot.height // 4)))
    if UPDATE or not REFERENCE.exists():
        small.convert("P", palette=Image.Palette.ADAPTIVE, colors=64).save(REFERENCE, optimize=True)
        if not UPDATE:
            pytest.fail(f"no reference screenshot: wrote {REFERENCE}; review and commit it")
    reference = Image.open(REFERENCE)
    assert reference.width == small.width
    assert abs(reference.height - small.height) <= 0.15 * reference.height, (reference.size, small.size)


@pytest.mark.parametrize("width", [1024, 800])
def test_nothing_is_cut_in_a_narrower_window(browser: Any, page_a: str, tmp_path: Path, width: int) -> None:
    page_file = tmp_path / "report.html"
    page_file.write_text(page_a, encoding="utf-8")
    page, problems = _open(browser, page_file, width)
    facts = page.evaluate(CHECK_PAGE)
    assert problems == [] and facts["width"] <= width
    assert facts["wide"] == [] and facts["scroll"] <= facts["width"], facts["wide"][:10]
    assert all(0 < fig["width"] <= width for fig in facts["figures"])


@pytest.mark.parametrize("width", [1280, 800, 600])
def test_no_table_header_or_cell_breaks_inside_a_word(browser: Any, page_a: str, tmp_path: Path, width: int) -> None:
    """Issue 46: "T P", "budge t". A header or a cell wraps between its words (a configuration's name, an interval
    stays whole); a table wider than the window scrolls in its own box instead of squeezing its words."""
    page_file = tmp_path / "report.html"
    page_file.write_text(page_a, encoding="utf-8")
    page, problems = _open(browser, page_file, width)
    facts = page.evaluate(BROKEN_HEADER_WORDS)
    assert problems == [] and facts["words"] > 100
    assert facts["broken"] == [], facts["broken"][:20]
    assert facts["tables"] == facts["boxes"] == facts["scrolling"], facts


def test_a_run_with_nothing_measured_yet_has_a_page_and_no_figure(tmp_path: Path) -> None:
    configs: list[dict[str, Any]] = [
        {"id": "a0", "name": "ar", "algorithm": "autoregressive", "argv": [], "params": {}, "baseline": None}]
    plan = {"sweep": "empty", "configs": configs, "workloads": [{"name": "w", "kind": "code", "repeats": 1}]}
    html = render_html(LoadedRun(path=tmp_path, env=None, analysis=analyse(plan, [], [])), "")
    assert "No figure: nothing measured yet." in html and "<figure" not in html
