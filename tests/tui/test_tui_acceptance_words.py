"""No view prints a bare "accept": every acceptance figure carries its definition (issue 27).

The scan (:data:`specbench_tui.core.acceptance.BARE_ACCEPT`: the word "accept" not followed by SGLang's own
``len`` or ``rate``) reads what a person sees: the TUI at 80×24 and 160×48 (main screen with the results table
sorted by its acceptance column, the live log's compact decode lines, the acceptance screen) over the scripted
demo, the txt, md, html and json reports and the end summary of simulator runs (``tests/data/acceptance_demo_run``,
``tests/data/report_run_a``). SGLang's own
``accept len:`` / ``accept rate:`` in its log lines stay verbatim. The last tests put a bare one back and watch the
scan catch it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_tui_acceptance import RUN, screen_text
from test_tui_snapshots import make_app, ready, steady
from tui_fakes import FakeEngine

from specbench_tui.core.acceptance import BARE_ACCEPT, Definition
from specbench_tui.report.formats import render
from specbench_tui.report.load import load_run
from specbench_tui.tui.acceptance_screen import AcceptanceScreen
from specbench_tui.tui.results_panel import ResultsPanel


def bare_accepts(text: str) -> list[str]:
    """The lines of ``text`` that print "accept" without its definition."""
    return [line for line in text.splitlines() if BARE_ACCEPT.search(line)]


async def _tui_screens(tmp_path: Path, size: tuple[int, int]) -> dict[str, str]:
    """The text of each view of the scripted demo at ``size``: the main screen (results sorted by the acceptance
    column, so its label is in the subtitle too), the results maximised, and the acceptance screen."""
    engine = FakeEngine(tmp_path / "runs" / "2026-01-01_100000_demo")
    app = make_app(engine)
    shown: dict[str, str] = {}
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        engine.play()
        await steady(pilot)
        await pilot.press("2", "o", "o", "o", "o")  # tok/s, speedup, TTFT, then the acceptance column
        await steady(pilot)
        panel = app.sweep_screen.query_one(ResultsPanel)
        shown["subtitle"] = str(panel.border_subtitle)
        shown["main"] = screen_text(app.export_screenshot())
        await pilot.press("m")
        await steady(pilot)
        shown["results"] = screen_text(app.export_screenshot())
        await pilot.press("m", "home", "down", "down", "a")  # dflash-b16-tp1
        await steady(pilot)
        assert isinstance(app.screen, AcceptanceScreen)
        shown["acceptance"] = screen_text(app.export_screenshot())
    return shown


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_the_tui_prints_no_bare_accept(size: tuple[int, int], tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    shown = await _tui_screens(tmp_path, size)
    for name, text in shown.items():
        assert not bare_accepts(text), (name, bare_accepts(text))
    assert "acc.len" in shown["main"] and "acc.len" in shown["results"]  # the column is there, named
    assert shown["subtitle"] == "sort: acc.len ↓ (o)"
    if size[0] >= 160:
        assert "Decode ▸" in shown["main"] and "acc.len 4.62 · acc.rate 0.92" in shown["main"]  # the log's line


@pytest.mark.parametrize("fmt", ["txt", "md", "html", "json"])
@pytest.mark.parametrize("run", [RUN, RUN.parent / "report_run_a"], ids=["acceptance_demo", "report_run_a"])
def test_the_reports_of_a_simulator_run_print_no_bare_accept(fmt: str, run: Path) -> None:
    """The acceptance demo (EAGLE3 per position, categories) and report_run_a (crashed, partial, zero-output and
    idle-draft cells, load points)."""
    text = render(load_run(run), fmt)
    if fmt == "html":  # what a reader sees: the text between the tags (a header's words are each in a span)
        text = re.sub(r"<[^>]*>", "", text)
    assert not bare_accepts(text), bare_accepts(text)[:5]
    assert "acceptance length" in text


@pytest.mark.parametrize("run", [RUN, RUN.parent / "report_run_a"], ids=["acceptance_demo", "report_run_a"])
def test_the_end_summary_prints_no_bare_accept(run: Path) -> None:
    from specbench_tui.engine.ending import render_summary

    text = render_summary(load_run(run).analysis, simulated=True)
    assert not bare_accepts(text), bare_accepts(text)[:5]
    assert "accept len" in text  # the column is there, under SGLang's name (its legend: acceptance length)


def test_sglangs_own_words_are_not_bare_and_a_bare_one_is() -> None:
    line = "Decode batch, #running-req: 1, accept len: 3.10, accept rate: 0.62, gen throughput (token/s): 90.0"
    assert not bare_accepts(line) and not bare_accepts("acceptance length 2.41 · 12 accepted drafts")
    assert bare_accepts("Decode ▸ 90.0 tok/s · accept 3.10") and bare_accepts("sort: accept ↓ (o)")


async def test_the_scan_catches_a_bare_accept_put_back_in_the_results_table(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The results column headed "accept" again (as it was): the TUI scan fails."""
    import specbench_tui.tui.results_panel as results_panel

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(results_panel, "client_definition",
                        lambda engine: Definition("acceptance length", "accept", "", "accept"))
    shown = await _tui_screens(tmp_path, (80, 24))
    assert any("accept" in line and "speedup" in line for line in bare_accepts(shown["main"]))


def test_the_scan_catches_a_bare_accept_put_back_in_a_report(monkeypatch: pytest.MonkeyPatch) -> None:
    import specbench_tui.report.acceptance_view as acceptance_view

    monkeypatch.setattr(acceptance_view, "ACCEPTANCE_LENGTH", Definition("accept", "accept", "", "accept"))
    for fmt in ("md", "html"):
        assert bare_accepts(render(load_run(RUN), fmt)), fmt
