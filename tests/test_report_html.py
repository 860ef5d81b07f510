"""specbench report --format html: one self-contained file whose charts render (headless Chromium).

Chromium comes from the package registry (``apt-get install -y chromium``; tools/setup_test_deps.sh installs it).
Without it the browser test is skipped with that command, or fails with ``SPECBENCH_REQUIRE_CHROMIUM=1`` (CI).
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from specbench_tui.core.analysis import analyse
from specbench_tui.core.load import LoadSpec, Slo, point_item
from specbench_tui.core.records import Measurement
from specbench_tui.report.html import render_html
from specbench_tui.report.load import LoadedRun
from specbench_tui.report.svg import PALETTE, line_chart, nice_ticks, scatter_chart

INSTALL = "apt-get install -y chromium"


def _ms(cid: str, name: str, label: str, tps: float, n: int) -> list[Measurement]:
    return [Measurement(config_id=cid, config=name, workload="w", item=point_item(["a"], j)[1], repeat=r,
                        status="ok", decode_tps=tps, ttft_s=0.01, itl_p99_s=0.01, e2e_s=0.1, completion_tokens=13,
                        started_at=1.0 + j * 0.01, load=label) for r in (1, 2, 3) for j in range(n)]


def _run(tmp_path: Path) -> LoadedRun:
    configs = [{"id": "a0", "name": "ar", "algorithm": "autoregressive", "argv": [], "params": {}, "baseline": None},
               {"id": "s1", "name": "spec", "algorithm": "eagle3", "argv": ["--speculative-algorithm", "EAGLE3"],
                "params": {}, "baseline": "ar"}]
    load = LoadSpec(concurrency=(1, 4, 16), waves=1, slo=Slo(ttft_ms=50))
    plan = {"sweep": "html", "configs": configs, "workloads": [{"name": "w", "kind": "code", "temperature": 0.0,
                                                                 "repeats": 3, "load": load.to_json()}]}
    ms = []
    for b, (ar, sp) in {1: (100.0, 180.0), 4: (90.0, 120.0), 16: (70.0, 60.0)}.items():
        ms += _ms("a0", "ar", f"c{b}", ar, b) + _ms("s1", "spec", f"c{b}", sp, b)
    return LoadedRun(path=tmp_path, env=None, analysis=analyse(plan, ms, []))


def test_nice_ticks_cover_the_range_with_round_steps() -> None:
    assert nice_ticks(0, 2.34) == [0, 0.5, 1.0, 1.5, 2.0, 2.5]
    assert nice_ticks(0, 3644)[-1] >= 3644 and nice_ticks(0, 3644)[1] == 1000


def test_line_chart_places_points_on_a_log_axis_and_draws_the_break_even_line() -> None:
    svg = line_chart([("a", [(1, 2.0), (4, 1.0), (16, 0.5)])], title="t", x_label="x", y_label="y", ref_y=1.0,
                     bands=[(0, 4, 16)])
    xs = [float(x) for x in re.findall(r'<circle cx="([\d.]+)"', svg)]
    assert xs[1] - xs[0] == pytest.approx(xs[2] - xs[1])  # 1 → 4 → 16 evenly spaced on a log axis
    assert 'class="ref"' in svg and 'class="band"' in svg and svg.count("<polyline") == 1
    gap = line_chart([("a", [(1, 2.0), (4, None), (16, 0.5), (32, 0.4)])], title="t", x_label="x", y_label="y")
    assert gap.count("<polyline") == 1 and gap.count("<circle") == 3  # a missing value breaks the line


def test_scatter_rings_the_pareto_front() -> None:
    svg = scatter_chart([("a", [(100, 50, "c1"), (300, 40, "c4")]), ("b", [(200, 30, "c1")])], title="t",
                        x_label="x", y_label="y", front=[("a", "c1"), ("a", "c4")])
    assert svg.count('class="front"') == 2 and svg.count('class="point"') == 3


def test_the_html_report_is_one_self_contained_file(tmp_path: Path) -> None:
    html = render_html(_run(tmp_path), "the text report")
    assert html.count("<svg") == 2 and 'data-chart="line"' in html and 'data-chart="scatter"' in html
    assert not re.search(r'(src|href)\s*=', html)      # nothing fetched: no script, image or stylesheet links
    assert "<script" not in html and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "spec" in html and "(4, 16]" in html         # the crossover table


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if path:
        return path
    message = f"headless Chromium is not installed: {INSTALL} (or bash tools/setup_test_deps.sh)"
    if os.environ.get("SPECBENCH_REQUIRE_CHROMIUM") == "1":
        pytest.fail(message)
    pytest.skip(message)


def _png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) of an 8-bit, non-interlaced PNG, as Chromium writes them."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    height = color_type = 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color_type, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
            assert depth == 8 and interlace == 0 and color_type in (2, 6)
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    bpp = 4 if color_type == 6 else 3
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows


def test_the_html_report_shows_its_charts_in_headless_chromium(tmp_path: Path) -> None:
    chromium = _chromium()
    page = tmp_path / "report.html"
    page.write_text(render_html(_run(tmp_path), "text"))
    shot = tmp_path / "shot.png"
    dom = subprocess.run([chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=60)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count("<svg") == 2 and dom.stdout.count("<circle") >= 6  # parsed as SVG by the browser
    done = subprocess.run([chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--window-size=900,1800", f"--screenshot={shot}", page.as_uri()],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    width, height, rows = _png_pixels(shot.read_bytes())
    bpp = len(rows[0]) // width
    colours = {bytes.fromhex(c[1:]) for c in PALETTE[:2]}  # the two configurations' lines and points
    counts = {c: 0 for c in colours}
    top_half = {c: 0 for c in colours}
    for y, row in enumerate(rows):
        for x in range(width):
            rgb = row[x * bpp:x * bpp + 3]
            if rgb in counts:
                counts[rgb] += 1
                top_half[rgb] += y < height // 2
    blue, red = (bytes.fromhex(c[1:]) for c in PALETTE[:2])
    # ar (the baseline: in the Pareto chart only) and spec (in both) drawn as lines and points, not just swatches
    assert counts[blue] > 80 and counts[red] > 300, counts  # a legend swatch alone is ~45 pixels
    assert top_half[red] > 150, top_half  # the speedup chart is at the top of the page
