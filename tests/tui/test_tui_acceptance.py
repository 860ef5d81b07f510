"""The acceptance screen (key ``a`` on the results table's selected row): per workload, the configuration's
acceptance length, draft acceptance rate, conditional acceptance by draft position, the histogram of accepted
drafts per verify step, step cost × and, for a ``prompt_dataset`` workload, the category × configuration
matrices.

It is shown on ``tests/data/acceptance_demo_run``: a run of the shipped ``sweeps/acceptance-demo.toml`` on the
simulator (EAGLE3 at 2, 3 and 5 draft steps against autoregressive decoding, over the shipped Spec-Bench sample and
two code prompts; ``specbench run sweeps/acceptance-demo.toml --headless``, the run directory without its server
logs, with the simulator profile it ran under copied to ``sim-profile.toml``). Snapshots at 160×48 and 80×24; the
numbers on the screen equal the analysis and the simulator's truth (``SpeedModel.expected_conditional_acceptance``
and ``expected_histogram`` for the profile and each configuration's own flags).
"""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from test_tui_snapshots import make_app, ready, steady
from textual.app import App
from tui_fakes import FakeEngine, until

from repo_paths import TESTS
from specbench_tui.core.acceptance import AcceptanceAnalysis, CellAcceptance
from specbench_tui.core.results import RunAnalysis
from specbench_tui.report.load import load_run
from specbench_tui.sim.args import parse_args, resolve
from specbench_tui.sim.profile import load_profile
from specbench_tui.sim.speed import SpeedModel
from specbench_tui.tui.acceptance_screen import AcceptanceScreen

RUN = TESTS / "data" / "acceptance_demo_run"
EAGLE3 = ("eagle3-s2-d3", "eagle3-s3-d4", "eagle3-s5-d6")
_SVG_TEXT = re.compile(r'<text class="[\w-]+" x="([\d.]+)" y="[\d.]+" textLength="[\d.]+" '
                       r'clip-path="url\(#[\w-]*?line-(\d+)\)">([^<]*)</text>')
CELL_WIDTH = 12.2
"""Width of one terminal cell in Textual's SVG screenshots."""


def screen_text(svg: str) -> str:
    """The terminal's text from a Textual SVG screenshot: one line per row, each piece at its column."""
    rows: dict[int, dict[int, str]] = {}
    for match in _SVG_TEXT.finditer(svg):
        column = round(float(match[1]) / CELL_WIDTH)
        rows.setdefault(int(match[2]), {})[column] = html.unescape(match[3]).replace("\xa0", " ")
    lines = []
    for row in sorted(rows):
        line = ""
        for column in sorted(rows[row]):
            line = line.ljust(column) + rows[row][column]
        lines.append(line.rstrip())
    return "\n".join(lines)


class Host(App[None]):
    """The acceptance screen alone over a fixed analysis."""

    def __init__(self, analysis: RunAnalysis, config: str) -> None:
        super().__init__()
        self.analysis = analysis
        self.config_id = next(c.id for c in analysis.configs if c.name == config)

    def on_mount(self) -> None:
        self.push_screen(AcceptanceScreen(lambda: self.analysis, self.config_id))


@pytest.fixture(scope="module")
def analysis() -> RunAnalysis:
    return load_run(RUN).analysis


def _cell(analysis: RunAnalysis, config: str, workload: str) -> CellAcceptance:
    figures = analysis.acceptance
    assert isinstance(figures, AcceptanceAnalysis)
    config_id = next(c.id for c in analysis.configs if c.name == config)
    cell = figures.cell(config_id, workload)
    assert cell is not None
    return cell


def _model(config: str) -> SpeedModel:
    """The simulator's model of ``config``: its own flags from the plan, the profile the run used."""
    plan = json.loads((RUN / "plan.json").read_text(encoding="utf-8"))
    argv = next(c["argv"] for c in plan["configs"] if c["name"] == config)
    profile = load_profile({"SPECBENCH_SIM_PROFILE": str(RUN / "sim-profile.toml")})
    return SpeedModel(profile, resolve(parse_args(argv)))


async def _shown(analysis: RunAnalysis, config: str, size: tuple[int, int] = (160, 120)) -> str:
    app = Host(analysis, config)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, AcceptanceScreen)
        return screen_text(app.export_screenshot())


def _block(text: str, workload: str) -> list[str]:
    """The screen's lines of one workload (from its title line to the next workload's)."""
    lines = text.splitlines()
    start = lines.index(f" {workload}")
    end = next((i for i in range(start + 1, len(lines)) if re.fullmatch(r" \S+", lines[i])), len(lines))
    return lines[start:end]


def _bars(lines: list[str], title: str) -> dict[str, str]:
    """``label → figure`` of the bars under the line starting with ``title``."""
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(title))
    out = {}
    for line in lines[start + 1:]:
        match = re.fullmatch(r"\s+(\S+) [█░]+ +(\S+)", line)
        if match is None:
            break
        out[match[1]] = match[2]
    return out


def test_acceptance_wide(analysis: RunAnalysis, snap_compare: Any) -> None:
    assert snap_compare(Host(analysis, "eagle3-s3-d4"), terminal_size=(160, 48))


def test_acceptance_narrow(analysis: RunAnalysis, snap_compare: Any) -> None:
    assert snap_compare(Host(analysis, "eagle3-s5-d6"), terminal_size=(80, 24))


@pytest.mark.parametrize("config", EAGLE3)
async def test_the_screens_numbers_are_the_simulators_truth(analysis: RunAnalysis, config: str) -> None:
    """Per position and per histogram bin, the screen shows the analysis' figure, and that figure is the
    simulator's truth within its sampling error (4 standard errors over the verify steps that reached it, plus
    the rounding of the two decimals shown)."""
    text = await _shown(analysis, config)
    lines = _block(text, "code")
    cell = _cell(analysis, config, "code")
    model = _model(config)
    truth = model.expected_conditional_acceptance("code")
    positions = _bars(lines, "conditional acceptance at position k")
    steps = int(config.split("-s")[1].split("-")[0])
    assert list(positions) == [f"k={k}" for k in range(1, steps + 1)] and len(truth) == steps
    for k, expected in enumerate(truth, start=1):
        measured = cell.conditional[k - 1]
        assert measured is not None and positions[f"k={k}"] == f"{measured:.2f}"
        reached = sum(cell.histogram[k - 1:])
        se = math.sqrt(expected * (1 - expected) / reached)
        assert abs(float(positions[f"k={k}"]) - expected) <= 4 * se + 0.005, (config, k, positions, truth, reached)
    histogram = _bars(lines, "accepted drafts per verify step")
    total = sum(cell.histogram)
    assert f"histogram over {total} verify steps" in "\n".join(lines)
    for j, share in enumerate(model.expected_histogram("code")):
        shown = histogram[str(j)]
        assert shown == f"{cell.histogram[j] / total:.1%}"
        assert abs(float(shown.rstrip("%")) / 100 - share) <= 4 * math.sqrt(share * (1 - share) / total) + 0.0005
    figures = "\n".join(lines)
    assert f"acceptance length {cell.acceptance_length:.2f} (server {cell.server_acceptance_length:.2f})" in figures
    assert f"draft acceptance rate {cell.draft_acceptance_rate:.3f}" in figures
    assert f"step cost × {cell.step_cost:.2f}" in figures and f"limited by {cell.limit}" in figures
    # the decay the simulator models is on the screen: the last position below the first in truth
    assert truth[-1] < truth[0]


async def test_the_category_matrices_of_a_prompt_dataset(analysis: RunAnalysis) -> None:
    """The Spec-Bench sample's six categories × the three EAGLE3 configurations, speedup and acceptance length,
    the shown configuration's column marked ▸, each value the analysis' matrix."""
    text = await _shown(analysis, "eagle3-s3-d4")
    figures = analysis.acceptance
    assert isinstance(figures, AcceptanceAnalysis)
    matrix = next(m for m in figures.categories if m.workload == "spec-bench-sample")
    assert len(matrix.categories) == 6
    lines = _block(text, "spec-bench-sample")
    for what, values in (("speedup", matrix.speedup), ("acceptance length", matrix.acceptance_length)):
        start = next(i for i, line in enumerate(lines) if line.strip() == f"{what} by category: spec-bench-sample")
        assert lines[start + 1].split() == ["category", "eagle3-s2-d3", "▸", "eagle3-s3-d4", "eagle3-s5-d6"]
        for offset, category in enumerate(matrix.categories, start=2):
            row = lines[start + offset].split()
            assert row == [category, *(f"{values[(category, cid)]:.2f}" for cid, _ in matrix.configs)]
    assert " code" in text.splitlines()  # a workload without categories has no matrix
    assert "by category: code" not in text


async def test_the_screen_follows_the_apps_newer_analysis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Opened mid-run, it draws the worker's analysis (not one of its own) and the next one when it arrives."""
    monkeypatch.chdir(tmp_path)
    engine = FakeEngine(tmp_path / "runs" / "2026-01-01_100000_demo")
    app = make_app(engine)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        engine.play_until_running()
        await steady(pilot)
        first = app.analysis
        await pilot.press("1", "ctrl+end", "a")  # the queue's last row: the running ddtree-b32-tp1
        screen = app.screen
        assert isinstance(screen, AcceptanceScreen) and screen.shown is first
        assert screen.detail is not None and screen.detail.config == "ddtree-b32-tp1"
        assert screen.detail.state == "running"
        engine.play()
        await steady(pilot)
        assert app.analysis is not first
        await until(pilot, lambda: screen.shown is app.analysis, "the next poll draws the newer analysis")
        assert screen.detail.config == "ddtree-b32-tp1" and screen.detail.state != "running"


async def test_a_opens_the_selected_configuration_and_n_p_step(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    engine = FakeEngine(tmp_path / "runs" / "2026-01-01_100000_demo")
    app = make_app(engine)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        engine.play()
        await steady(pilot)
        await pilot.press("2", "down", "down")  # the results table: dflash-b16-tp1's first row
        await pilot.press("a")
        screen = app.screen
        assert isinstance(screen, AcceptanceScreen) and screen.shown is app.analysis
        assert screen.detail is not None and screen.detail.config == "dflash-b16-tp1"
        title = str(screen.query_one("#acceptance-title").render())
        assert "acceptance · dflash-b16-tp1 (2/5 configurations" in title
        await pilot.press("n")
        assert screen.detail.config == "ddtree-b8-tp1"
        await pilot.press("p", "p")
        assert screen.detail.config == "ar-tp1"
        assert "not speculative" in screen_text(app.export_screenshot())
        await pilot.press("escape")
        assert not isinstance(app.screen, AcceptanceScreen)


@pytest.mark.parametrize(("engine", "header"), [("sglang", "acc.len"), ("vllm", "tok/fwd"), ("llamacpp", "tok/fwd")])
async def test_the_results_column_is_headed_by_what_the_engines_client_measures(engine: str, header: str) -> None:
    from specbench_tui.tui.results_panel import ACCEPT_COLUMN, ResultsPanel

    class Table(App[None]):
        def compose(self) -> Any:
            yield ResultsPanel(engine=engine)

    app = Table()
    async with app.run_test(size=(100, 10)) as pilot:
        await pilot.pause()
        panel = app.query_one(ResultsPanel)
        assert panel.labels[panel.column_keys.index(ACCEPT_COLUMN)] == header
        for _ in range(4):
            panel.cycle_sort()
        assert panel.sort_label() == header and panel.border_subtitle == f"sort: {header} ↓ (o)"


def test_on_vllm_and_llamacpp_each_side_is_named_by_its_own_definition() -> None:
    """The client's figure there is tokens per target forward; the server's counters give an acceptance length
    over the steps that drafted (real vLLM: 1.75 beside 4.55): both shown, each under its name."""
    from rich.console import Console

    from specbench_tui.application.acceptance_detail import AcceptanceDetail, WorkloadAcceptance
    from specbench_tui.core.acceptance import TOKENS_PER_TARGET_FORWARD
    from specbench_tui.tui.acceptance_screen import workload_block

    from specbench_tui.application.acceptance_detail import _client

    cell = CellAcceptance("c", "code", acceptance_length=1.75, server_acceptance_length=4.55,
                          draft_acceptance_rate=0.64, server_conditional=(0.8, 0.7),
                          client_definition=TOKENS_PER_TARGET_FORWARD.name)
    assert _client(cell) is TOKENS_PER_TARGET_FORWARD
    item = WorkloadAcceptance("code", cell, _client(cell), 1.4, positions=(0.8, 0.7), positions_from_server=True)
    detail = AcceptanceDetail("c", "ngram", True, "done", (item,))
    console = Console(width=160, record=True, color_system=None)
    console.print(workload_block(item, detail, 160))
    text = console.export_text()
    assert "tokens per target forward 1.75 · server's acceptance length per drafting step 4.55" in text
    assert "(server 4.55)" not in text and "conditional acceptance at position k (server counters)" in text


def test_a_zero_output_cell_says_why_it_has_no_figure(analysis: RunAnalysis) -> None:
    """A cell whose every request returned no token has no acceptance (never a zero, never bare dashes): the
    screen says so, as the results table flags it (the demo's dflash-b32-tp1 read '–' everywhere)."""
    import dataclasses

    from rich.console import Console

    from specbench_tui.application.acceptance_detail import AcceptanceDetail, WorkloadAcceptance, _why_no_figure
    from specbench_tui.core.acceptance import ACCEPTANCE_LENGTH
    from specbench_tui.tui.acceptance_screen import workload_block

    row = next(r for r in analysis.rows_for("code") if r.n_ok)
    assert _why_no_figure(row) is None
    zero = dataclasses.replace(row, n_ok=0, n_zero_output=4, n_error=0)
    why = _why_no_figure(zero)
    assert why == "no acceptance figure: 4 of 4 requests returned zero tokens (ZERO-OUTPUT)"
    assert _why_no_figure(dataclasses.replace(row, n_ok=0, n_zero_output=0, n_error=3)) == \
        "no acceptance figure: all 3 requests failed"
    item = WorkloadAcceptance("code", CellAcceptance(row.config_id, "code"), ACCEPTANCE_LENGTH, None, why=why)
    console = Console(width=120, record=True, color_system=None)
    console.print(workload_block(item, AcceptanceDetail(row.config_id, row.config, True, "done", (item,)), 120))
    text = console.export_text()
    assert why in text and "step cost ×" not in text
