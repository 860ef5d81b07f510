"""Inline SVG charts for the HTML report: lines on a log or linear x axis, and a connected scatter.

Why hand-written SVG rather than a plotting library: the report must be one self-contained file that opens
anywhere without a network (plotly's script alone is ~3.5 MB to inline; matplotlib pulls numpy and ~40 MB of
wheels into an otherwise small install for two charts), and it must be deterministic (golden-testable, no
timestamps or random ids). Two chart kinds of ~150 lines cover what the report draws; the tests check their
geometry and the browser test checks they render.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")
WIDTH, HEIGHT = 720, 400
MARGIN = (60, 170, 40, 50)
"""left, right (legend), top, bottom."""


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About ``count`` round tick values covering [low, high]."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low]
    raw = (high - low) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(low / step) * step
    ticks = [round(start, 10)]
    while ticks[-1] < high - step * 1e-9:  # the last tick is at or above ``high``: every point is inside
        ticks.append(round(start + len(ticks) * step, 10))
    return ticks


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}".rstrip("0").rstrip(".")
    return f"{v:.2f}".rstrip("0").rstrip(".")


class _Frame:
    def __init__(self, xs: Sequence[float], ys: Sequence[float], log_x: bool, y_floor: float | None = 0.0) -> None:
        self.log_x = log_x
        self.x0, self.x1 = min(xs), max(xs)
        if self.x0 == self.x1:
            self.x0, self.x1 = (self.x0 / 2, self.x1 * 2) if log_x else (self.x0 - 1, self.x1 + 1)
        lo = min(ys) if y_floor is None else min(y_floor, min(ys))
        hi = max(ys)
        if hi == lo:
            hi = lo + 1
        self.yticks = nice_ticks(lo, hi + (hi - lo) * 0.05)
        self.y0, self.y1 = self.yticks[0], self.yticks[-1]
        left, right, top, bottom = MARGIN
        self.px0, self.px1 = left, WIDTH - right
        self.py0, self.py1 = HEIGHT - bottom, top

    def x(self, v: float) -> float:
        if self.log_x:
            t = (math.log(v) - math.log(self.x0)) / (math.log(self.x1) - math.log(self.x0))
        else:
            t = (v - self.x0) / (self.x1 - self.x0)
        return round(self.px0 + t * (self.px1 - self.px0), 2)

    def y(self, v: float) -> float:
        t = (v - self.y0) / (self.y1 - self.y0)
        return round(self.py0 + t * (self.py1 - self.py0), 2)


def _axes(f: _Frame, xticks: Sequence[float], title: str, x_label: str, y_label: str) -> list[str]:
    out = [f'<text x="{(f.px0 + f.px1) / 2}" y="22" text-anchor="middle" class="title">{escape(title)}</text>',
           f'<line x1="{f.px0}" y1="{f.py0}" x2="{f.px1}" y2="{f.py0}" class="axis"/>',
           f'<line x1="{f.px0}" y1="{f.py0}" x2="{f.px0}" y2="{f.py1}" class="axis"/>']
    for t in f.yticks:
        y = f.y(t)
        out.append(f'<line x1="{f.px0}" y1="{y}" x2="{f.px1}" y2="{y}" class="grid"/>')
        out.append(f'<text x="{f.px0 - 6}" y="{y + 4}" text-anchor="end" class="tick">{_fmt(t)}</text>')
    for t in xticks:
        x = f.x(t)
        out.append(f'<line x1="{x}" y1="{f.py0}" x2="{x}" y2="{f.py0 + 5}" class="axis"/>')
        out.append(f'<text x="{x}" y="{f.py0 + 18}" text-anchor="middle" class="tick">{_fmt(t)}</text>')
    out.append(f'<text x="{(f.px0 + f.px1) / 2}" y="{HEIGHT - 8}" text-anchor="middle" class="label">'
               f'{escape(x_label)}</text>')
    out.append(f'<text x="14" y="{(f.py0 + f.py1) / 2}" text-anchor="middle" class="label" '
               f'transform="rotate(-90 14 {(f.py0 + f.py1) / 2})">{escape(y_label)}</text>')
    return out


def _color(i: int, name: str, colors: Mapping[str, int] | None) -> str:
    """A series' colour: by its name in ``colors`` (the same configuration, the same colour in every chart)."""
    index = colors.get(name, i) if colors else i
    return PALETTE[index % len(PALETTE)]


def _legend(names: Sequence[str], colors: Mapping[str, int] | None = None) -> list[str]:
    out = []
    for i, name in enumerate(names):
        y = MARGIN[2] + 10 + i * 18
        x = WIDTH - MARGIN[1] + 14
        color = _color(i, name, colors)
        out.append(f'<line x1="{x}" y1="{y}" x2="{x + 18}" y2="{y}" stroke="{color}" stroke-width="2.5"/>')
        out.append(f'<text x="{x + 24}" y="{y + 4}" class="legend">{escape(name)}</text>')
    return out


def _svg(body: list[str], kind: str, title: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="{escape(kind)}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" '
            f'aria-label="{escape(title)}">' + "".join(body) + "</svg>")


def line_chart(series: Sequence[tuple[str, Sequence[tuple[float, float | None]]]], *, title: str, x_label: str,
               y_label: str, log_x: bool = True, ref_y: float | None = None,
               bands: Sequence[tuple[int, float, float]] = (), colors: Mapping[str, int] | None = None) -> str:
    """One polyline per series (a None y breaks it), optional horizontal reference line and vertical bands
    ``(series index, x_low, x_high)`` (the crossover intervals, in the series' colour)."""
    pts = [(x, y) for _, s in series for x, y in s if y is not None and math.isfinite(y) and (x > 0 or not log_x)]
    if not pts:
        return _svg([f'<text x="20" y="40">{escape(title)}: no data</text>'], "line", title)
    ys = [y for _, y in pts] + ([ref_y] if ref_y is not None else [])
    f = _Frame([x for x, _ in pts], ys, log_x)
    xticks = sorted({x for x, _ in pts})
    body = _axes(f, xticks, title, x_label, y_label)
    for index, lo, hi in bands:
        color = _color(index, series[index][0], colors)
        a, b = f.x(max(lo, f.x0)), f.x(min(hi, f.x1))
        body.append(f'<rect x="{min(a, b)}" y="{f.py1}" width="{abs(b - a)}" height="{f.py0 - f.py1}" '
                    f'fill="{color}" opacity="0.10" class="band"/>')
    if ref_y is not None:
        ref_px = f.y(ref_y)
        body.append(f'<line x1="{f.px0}" y1="{ref_px}" x2="{f.px1}" y2="{ref_px}" class="ref"/>')
    for i, (name, s) in enumerate(series):
        color = _color(i, name, colors)
        run: list[str] = []
        for x, y in sorted(s):
            if y is None or not math.isfinite(y):
                if len(run) > 1:
                    body.append(f'<polyline points="{" ".join(run)}" fill="none" stroke="{color}" stroke-width="2"/>')
                run = []
                continue
            run.append(f"{f.x(x)},{f.y(y)}")
            body.append(f'<circle cx="{f.x(x)}" cy="{f.y(y)}" r="3.5" fill="{color}" class="point">'
                        f'<title>{escape(name)}: {_fmt(x)} → {_fmt(y)}</title></circle>')
        if len(run) > 1:
            body.append(f'<polyline points="{" ".join(run)}" fill="none" stroke="{color}" stroke-width="2"/>')
    body += _legend([name for name, _ in series], colors)
    return _svg(body, "line", title)


def scatter_chart(series: Sequence[tuple[str, Sequence[tuple[float, float, str]]]], *, title: str, x_label: str,
                  y_label: str, front: Sequence[tuple[str, str]] = (),
                  colors: Mapping[str, int] | None = None) -> str:
    """Each series' points joined in order (its load points), labelled; ``front`` (series name, point label)
    pairs are ringed: the Pareto front."""
    pts = [(x, y) for _, s in series for x, y, _ in s]
    if not pts:
        return _svg([f'<text x="20" y="40">{escape(title)}: no data</text>'], "scatter", title)
    f = _Frame([0.0] + [x for x, _ in pts], [y for _, y in pts], log_x=False)
    xticks = nice_ticks(0.0, f.x1)
    f.x1 = max(f.x1, xticks[-1])
    body = _axes(f, xticks, title, x_label, y_label)
    on_front = set(front)
    for i, (name, s) in enumerate(series):
        color = _color(i, name, colors)
        coords = [f"{f.x(x)},{f.y(y)}" for x, y, _ in s]
        if len(coords) > 1:
            body.append(f'<polyline points="{" ".join(coords)}" fill="none" stroke="{color}" stroke-width="1.5" '
                        'opacity="0.7"/>')
        for x, y, label in s:
            body.append(f'<circle cx="{f.x(x)}" cy="{f.y(y)}" r="3.5" fill="{color}" class="point">'
                        f'<title>{escape(name)} at {escape(label)}: {_fmt(x)} total, {_fmt(y)} per user</title>'
                        '</circle>')
            if (name, label) in on_front:
                body.append(f'<circle cx="{f.x(x)}" cy="{f.y(y)}" r="7" fill="none" stroke="#000" '
                            'stroke-width="1" class="front"/>')
    body += _legend([name for name, _ in series], colors)
    return _svg(body, "scatter", title)
