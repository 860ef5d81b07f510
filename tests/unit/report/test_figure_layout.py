"""The figures read as drawn (issue 46, point 5): on the demo's own run (tests/data/figure_demo_run, a headless run
of sweeps/demo.toml on the simulator) no two tick labels of an axis and no two reason labels touch in the rendered
figure (matplotlib's renderer gives each Text's window extent), budgets 15 and 16 never print as "1516", the
speedup panels share one x-scale, and acceptance-by-position draws the points that rest on one or two verify steps
hollow on a dotted line, not with k = 1's solid line."""

from __future__ import annotations

from typing import Any

import pytest

from repo_paths import TESTS
from specbench_tui.report.figures import FigureSpec, _style, figure_specs
from specbench_tui.report.load import load_run

DEMO_RUN = TESTS / "data" / "figure_demo_run"
CHECKED = ("speedup", "acceptance-length", "speedup-vs-budget", "acceptance-vs-budget", "acceptance-by-position",
           "decode-tps-vs-tp")
"""The figures the issue names (the Pareto front's point names are left to a later change)."""


@pytest.fixture(scope="module")
def specs() -> dict[str, FigureSpec]:
    return {spec.name: spec for spec in figure_specs(load_run(DEMO_RUN).analysis)}


def _rendered(spec: FigureSpec) -> tuple[Any, Any]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with _style():
        fig = Figure(figsize=spec.size)
        spec.draw(fig)
        FigureCanvasAgg(fig)
        renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
        fig.draw(renderer)
    return fig, renderer


def _box(text: Any, renderer: Any) -> Any:
    patch = text.get_bbox_patch()  # a reason's white box is what covers its neighbour
    return (patch.get_window_extent(renderer) if patch is not None else text.get_window_extent(renderer)).padded(1)


def _touching(texts: list[Any], renderer: Any) -> list[tuple[str, str]]:
    shown = [(t.get_text(), _box(t, renderer)) for t in texts if t.get_visible() and t.get_text()]
    return [(a, b) for i, (a, box_a) in enumerate(shown) for b, box_b in shown[i + 1:] if box_a.overlaps(box_b)]


@pytest.mark.parametrize("name", CHECKED)
def test_no_two_labels_touch(specs: dict[str, FigureSpec], name: str) -> None:
    fig, renderer = _rendered(specs[name])
    for ax in fig.axes:
        for labels in (ax.get_xticklabels(), ax.get_yticklabels()):
            assert not _touching(list(labels), renderer), (name, ax.get_title())
        assert not _touching(list(ax.texts), renderer), (name, ax.get_title())


def test_the_demo_has_budgets_15_and_16_and_reasons_at_tp1(specs: dict[str, FigureSpec]) -> None:
    fig, _ = _rendered(specs["speedup-vs-budget"])
    ticks = [t.get_text() for ax in fig.axes for t in ax.get_xticklabels()]
    assert "15" in ticks and "16" in ticks  # the crowded pair this test is about
    fig, _ = _rendered(specs["decode-tps-vs-tp"])
    assert len(fig.axes[0].texts) >= 2  # several reasons at one TP


def test_the_speedup_panels_share_one_x_scale(specs: dict[str, FigureSpec]) -> None:
    fig, _ = _rendered(specs["speedup"])
    limits = {tuple(round(v, 6) for v in ax.get_xlim()) for ax in fig.axes}
    assert len(fig.axes) > 1 and len(limits) == 1, limits


def test_thin_positions_are_hollow_on_a_dotted_line(specs: dict[str, FigureSpec]) -> None:
    fig, _ = _rendered(specs["acceptance-by-position"])
    hollow = [line for ax in fig.axes for line in ax.get_lines() if line.get_markerfacecolor() == "white"]
    dotted = [line for ax in fig.axes for line in ax.get_lines() if line.get_linestyle() == ":"]
    assert hollow and dotted
    for ax in fig.axes:  # a configuration's solid line never reaches one of its hollow points
        lines = ax.get_lines()
        for solid in (line for line in lines if line.get_linestyle() == "-"):
            hollow_x = {x for line in lines if line.get_markerfacecolor() == "white"
                        and line.get_markeredgecolor() == solid.get_color() for x in line.get_xdata()}
            assert not hollow_x & set(solid.get_xdata()), solid.get_label()



def test_each_panel_title_sits_above_its_axes_clear_of_every_label(specs: dict[str, FigureSpec]) -> None:
    """The titles are placed at the axes' top by the style (``axes.titley``) instead of matplotlib's search for
    labels above the axes: no figure has any, and a title never sinks into the plot or covers a label."""
    for name, spec in specs.items():
        fig, renderer = _rendered(spec)
        for ax in fig.axes:
            if not ax.get_visible() or not ax.get_title():
                continue
            title = ax.title.get_window_extent(renderer)
            assert title.y0 >= ax.bbox.y1, (name, ax.get_title(), title.y0, ax.bbox.y1)
            labels = [*ax.get_xticklabels(which="both"), *ax.get_yticklabels(which="both"), ax.xaxis.label,
                      ax.yaxis.label, *(t.label2 for t in ax.xaxis.get_major_ticks() if t.label2.get_visible())]
            covered = [t.get_text() for t in labels if t.get_visible() and t.get_text()
                       and t.get_window_extent(renderer).overlaps(title)]
            assert not covered, (name, ax.get_title(), covered)
