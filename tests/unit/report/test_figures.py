"""The run's figures (report/figures.py): what they draw from the analysis, and ``specbench report --figures DIR``.

Each exported file is opened by a reader of its own format: PNG by Pillow (matplotlib's own dependency), PDF by
its header, trailer and page objects, SVG by an XML parser. The drawings are checked on matplotlib's own
objects (bars, lines, texts) before any file is written: a configuration without a value has no bar and no
point at 0, only a mark with its reason.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, cast

import pytest
from narrowing import present
from test_report_html import load_run_fixture

from repo_paths import TESTS
from specbench_tui.cli import main
from specbench_tui.core.analysis import analyse
from specbench_tui.core.records import Measurement
from specbench_tui.report.figdata import bar_panels, budget_lines
from specbench_tui.report.figures import FigureSpec, figure_specs, render
from specbench_tui.report.load import load_run

RUN_A = TESTS / "data" / "report_run_a"
NAMES_A = ["speedup", "acceptance-length", "speedup-vs-budget", "acceptance-vs-budget", "decode-tps-vs-tp",
           "pareto-ttft-vs-tps"]


def _drawn(spec: FigureSpec) -> Any:
    from matplotlib.figure import Figure

    fig = Figure(figsize=spec.size)
    spec.draw(fig)
    return fig


def _texts(ax: Any) -> list[str]:
    return [t.get_text() for t in ax.texts]


def _zero_output_analysis() -> Any:
    """ar and spec on one workload; every answer of spec came back empty (the demo's broken DFlash draft)."""
    configs = [{"id": "a0", "name": "ar", "algorithm": "autoregressive", "argv": [], "params": {}, "baseline": None},
               {"id": "s1", "name": "spec", "algorithm": "dflash", "argv": [], "params": {}, "baseline": "ar"}]
    plan = {"sweep": "zero", "configs": configs, "workloads": [{"name": "w", "kind": "code", "temperature": 0.0,
                                                                 "repeats": 2}]}
    ms = []
    for r in (1, 2):
        for item in ("x", "y"):
            ms.append(Measurement(config_id="a0", config="ar", workload="w", item=item, repeat=r, status="ok",
                                  decode_tps=100.0, ttft_s=0.01, e2e_s=0.1, completion_tokens=20, started_at=1.0))
            ms.append(Measurement(config_id="s1", config="spec", workload="w", item=item, repeat=r,
                                  status="zero_output", completion_tokens=0, ttft_s=0.01, started_at=2.0))
    return analyse(plan, ms, [])


def test_the_demo_shaped_run_has_its_figures_with_stable_names() -> None:
    assert [s.name for s in figure_specs(load_run(RUN_A).analysis)] == NAMES_A


def test_crashed_skipped_and_empty_configurations_get_a_mark_and_no_bar() -> None:
    analysis = load_run(RUN_A).analysis
    metric, panels = bar_panels(analysis)
    spec = next(s for s in figure_specs(analysis) if s.name == "speedup")
    fig = _drawn(spec)
    for ax, panel in zip(fig.axes, panels):
        bars = [p for p in ax.patches if type(p).__name__ == "Rectangle"]
        assert len(bars) == sum(b.drawn for b in panel.bars)  # one bar per value: none for a missing one
        assert all(b.get_width() > 0.5 for b in bars)           # no bar at 0 (every speedup here is ≥ 0.97)
        missing = [b for b in panel.bars if not b.drawn]
        assert sorted(t for t in _texts(ax) if t.startswith("× ")) == sorted(f"× {b.mark}" for b in missing)
    code = {b.config: b for b in panels[0].bars}
    assert code["ddtree-b8-tp1"].mark == "crashed" and code["ddtree-b64-tp4"].mark == "skipped"
    assert code["ddtree-b12-tp1"].drawn and code["ddtree-b12-tp1"].mark == "partial, crashed"
    assert code["ar-tp1"].mark == "baseline" and metric == "speedup"


def test_a_configuration_whose_every_answer_was_empty_is_marked_not_drawn_as_zero() -> None:
    analysis = _zero_output_analysis()
    _, panels = bar_panels(analysis)
    bar = next(b for b in panels[0].bars if b.config == "spec")
    assert not bar.drawn and bar.mark == "zero output"
    spec = next(s for s in figure_specs(analysis) if s.name in ("speedup", "decode-tps"))
    ax = _drawn(spec).axes[0]
    assert "× zero output" in _texts(ax)
    assert len([p for p in ax.patches if type(p).__name__ == "Rectangle"]) == 1  # the baseline's bar alone


def test_acceptance_vs_budget_breaks_the_line_at_a_crash_and_names_it() -> None:
    analysis = load_run(RUN_A).analysis
    tp1 = next(line for line in budget_lines(analysis, "accept_length", "ddtree") if line.label == "TP1")
    assert dict(tp1.points)[8.0] is None and dict(tp1.missing)[8.0] == "crashed"
    spec = next(s for s in figure_specs(analysis) if s.name == "acceptance-vs-budget")
    ax = _drawn(spec).axes[-1]  # ddtree
    line = next(ln for ln in ax.get_lines() if ln.get_label() == "TP1")
    ys = dict(zip(line.get_xdata(), line.get_ydata()))
    assert math.isnan(ys[8.0]) and all(y > 1 for x, y in ys.items() if x != 8.0 and x != 12.0)
    assert "TP1: crashed" in _texts(ax)


def test_load_curves_mark_the_crossover_and_the_capped_points(tmp_path: Path) -> None:
    analysis = load_run_fixture(tmp_path).analysis
    c16 = present(present(analysis.load).point("s1", "w", "c16"))
    assert c16.capped
    spec = next(s for s in figure_specs(analysis) if s.name == "load-w-concurrency")
    fig = _drawn(spec)
    tps, ttft, speedup = fig.axes
    assert [ax.get_xscale() for ax in fig.axes] == ["log"] * 3
    squares = [c for c in tps.collections if c.get_offsets().shape[0] and c.get_paths()
               and len(c.get_paths()[0].vertices) == 5]  # marker "s": the capped points
    capped = present(c16.output_tps).median
    assert [tuple(o) for c in squares for o in c.get_offsets()] == [(16.0, pytest.approx(capped))]
    spans = [p for p in speedup.patches if type(p).__name__ in ("Polygon", "Rectangle")]
    assert spans, "the B* interval is shaded"
    edges = {(round(p.get_x(), 6), round(p.get_x() + p.get_width(), 6)) if hasattr(p, "get_width")
             else (round(min(p.get_xy()[:, 0]), 6), round(max(p.get_xy()[:, 0]), 6)) for p in spans}
    assert edges == {(4.0, 16.0)}  # B* in (4, 16]
    pareto = _drawn(next(s for s in figure_specs(analysis) if s.name == "pareto-w")).axes[0]
    assert "capped point" in [c.get_label() for c in pareto.collections]


def _pdf_pages(data: bytes) -> int:
    assert data.startswith(b"%PDF-1.") and data.rstrip().endswith(b"%%EOF")
    assert b"startxref" in data[-200:] and b"/Root" in data
    return len(re.findall(rb"/Type\s*/Page(?!s)\b", data))


def test_figures_dir_writes_pdf_svg_and_png_for_each_figure_and_an_index(tmp_path: Path) -> None:
    from PIL import Image

    out = tmp_path / "figs"
    assert main(["report", str(RUN_A), "--figures", str(out)]) == 0
    index = json.loads((out / "figures.json").read_text())
    assert index["schema"] == "specbench-figures/1" and index["run"] == "report_run_a"
    assert [f["name"] for f in index["figures"]] == NAMES_A
    for entry in index["figures"]:
        assert entry["title"] and entry["caption"]
        assert entry["files"] == {fmt: f"{entry['name']}.{fmt}" for fmt in ("pdf", "svg", "png")}
        with Image.open(out / entry["files"]["png"]) as png:
            png.verify()
        with Image.open(out / entry["files"]["png"]) as png:
            assert png.format == "PNG" and png.width > 600 and png.height > 300
            lo, hi = cast("tuple[int, int]", png.convert("L").getextrema())  # one band: (low, high)
            assert hi - lo > 100  # a drawing, not a blank page
        assert _pdf_pages((out / entry["files"]["pdf"]).read_bytes()) == 1
        root = ET.parse(out / entry["files"]["svg"]).getroot()
        assert root.tag == "{http://www.w3.org/2000/svg}svg" and float(root.get("width", "0pt")[:-2]) > 300
        assert entry["title"] in "".join(root.itertext())
    assert sorted(p.name for p in out.iterdir()) == sorted(["figures.json", *(f"{n}.{x}" for n in NAMES_A
                                                                               for x in ("pdf", "png", "svg"))])


def test_the_vector_files_are_the_same_from_one_export_to_the_next() -> None:
    spec = figure_specs(load_run(RUN_A).analysis)[0]
    first, second = render(spec, ("svg", "pdf")), render(spec, ("svg", "pdf"))
    assert first == second and b"<dc:date>" not in first["svg"] and b"/CreationDate" not in first["pdf"]


def test_figures_with_a_report_and_a_bad_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "f"
    assert main(["report", str(RUN_A), "--figures", str(out), "--format", "md", "-o", str(tmp_path / "r.md")]) == 0
    assert (out / "speedup.pdf").is_file() and (tmp_path / "r.md").read_text().startswith("# specbench report")
    (tmp_path / "file").write_text("")
    assert main(["report", str(RUN_A), "--figures", str(tmp_path / "file" / "sub")]) == 1
    assert "cannot write figures to" in capsys.readouterr().err


def test_the_cli_and_the_text_report_do_not_import_matplotlib() -> None:
    """``--help`` imports none of the numeric libraries; the text report computes its bootstrap intervals
    (scipy, numpy) but draws nothing (no matplotlib, no plotext)."""
    probe = ("import sys, contextlib, io\nfrom specbench_tui import cli\n"
             "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
             "    cli.main(['--help'])\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('matplotlib', 'numpy', 'scipy', 'plotext')))\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n"
             f"    cli.main(['report', {str(RUN_A)!r}])\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('matplotlib', 'plotext')))\n")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-2:] == ["[]", "[]"]


def test_conditional_acceptance_by_position_is_drawn_per_configuration() -> None:
    from dataclasses import replace

    from specbench_tui.core.acceptance import AcceptanceAnalysis, CellAcceptance

    analysis = load_run(RUN_A).analysis
    ids = {c.name: c.id for c in analysis.configs}
    cells = (CellAcceptance(ids["ddtree-b16-tp1"], "code", histogram=(1, 2, 3), conditional=(0.9, 0.7, None)),
             CellAcceptance(ids["dflash-b16-tp1"], "code", histogram=(1, 2), conditional=(0.8, 0.5)))
    with_positions = replace(analysis, acceptance=AcceptanceAnalysis(cells))
    assert "acceptance-by-position" not in [s.name for s in figure_specs(analysis)]  # no histogram: no figure
    spec = next(s for s in figure_specs(with_positions) if s.name == "acceptance-by-position")
    fig = _drawn(spec)
    ax = fig.axes[0]
    lines = {ln.get_label(): list(ln.get_ydata()) for ln in ax.get_lines()}
    assert lines["ddtree-b16-tp1"][:2] == [0.9, 0.7] and math.isnan(lines["ddtree-b16-tp1"][2])
    assert lines["dflash-b16-tp1"] == [0.8, 0.5]
    assert "ddtree-b8-tp1: crashed" in fig.get_supxlabel().replace("\n", " ")


PARALLEL_PROBE = """
import os, sys
from specbench_tui.report import figures
from specbench_tui.report.load import load_run
specs = figures.figure_specs(load_run(sys.argv[1]).analysis)
assert figures._parallel_workers(len(specs)) >= 2, "no worker processes on this machine"
serial = [figures.render(spec, ("svg",)) for spec in specs]
assert figures.render_all(specs, ("svg",)) == serial, "the workers drew other files"
def dies(index, formats):
    os._exit(3)  # a worker killed mid-figure
figures._render_pending = dies
assert figures.render_all(specs[:2], ("svg",)) == serial[:2], "a dead worker lost its figures"
print("ok", len(specs))
"""


def test_figures_drawn_in_worker_processes_are_the_files_drawn_here() -> None:
    """On several cores the report's figures are drawn in forked workers (issue 46: the demo's HTML in 3 s, its
    figures in 10 s, on 2 cores); the files are byte for byte those drawn in one process, and a worker that dies
    leaves its figures to this process. A fresh interpreter: pytest's own threads keep forks out of this one."""
    import os

    if (os.cpu_count() or 1) < 2:
        pytest.skip("one core: the figures are drawn in the report's own process")
    result = subprocess.run([sys.executable, "-c", PARALLEL_PROBE, str(RUN_A)], capture_output=True, text=True,
                            timeout=300, cwd=TESTS.parent)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["ok", str(len(NAMES_A))]


def test_no_fork_beside_other_threads_or_on_one_core(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from specbench_tui.report import figures

    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(figures, "_cores", lambda: 2)
    assert figures._parallel_workers(7) == 2 and figures._parallel_workers(1) == 0
    monkeypatch.setattr(threading, "active_count", lambda: 2)  # the TUI, pytest's workers: a fork copies held locks
    assert figures._parallel_workers(7) == 0
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(figures, "_cores", lambda: 1)
    assert figures._parallel_workers(7) == 0


def test_an_interrupt_stops_the_figure_workers_at_once(tmp_path: Path) -> None:
    """SIGINT while the workers draw: the report exits 130 within a second or two, no traceback from any worker,
    no worker left behind (they would otherwise draw every figure still queued before the report could end)."""
    import os
    import signal
    import time

    import psutil

    if (os.cpu_count() or 1) < 2:
        pytest.skip("one core: no worker processes")
    process = subprocess.Popen([sys.executable, "-m", "specbench_tui", "report", str(RUN_A), "--figures",
                                str(tmp_path / "figs")], cwd=TESTS.parent, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while len(psutil.Process(process.pid).children()) < 2 and process.poll() is None:
            assert time.monotonic() < deadline, "no figure workers started"
            time.sleep(0.05)
        workers = psutil.Process(process.pid).children()
        os.kill(process.pid, signal.SIGINT)  # the report's process only (kill -INT PID); a terminal's group too
        started = time.monotonic()
        _, err = process.communicate(timeout=30)
        stopped = time.monotonic() - started
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == 130 and stopped < 3, (process.returncode, stopped, err[-2000:])
    assert "Traceback" not in err, err[-2000:]
    assert not [w for w in workers if w.is_running() and w.status() != psutil.STATUS_ZOMBIE]
