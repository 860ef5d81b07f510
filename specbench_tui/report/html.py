"""``specbench report --format html``: one self-contained file (inline CSS and SVG, no script, nothing fetched).

It holds the load sections as tables and charts (speedup against concurrency with each configuration's B*
interval shaded, and per-user against total output tok/s, the Pareto view), then the whole text report. Every
figure comes from the analysis (``RunAnalysis.load``), as in the other formats.
"""

from __future__ import annotations

from html import escape

from specbench_tui.core.load import AXIS_CONCURRENCY, AXIS_RATE
from specbench_tui.report.load import LoadedRun
from specbench_tui.report.loadview import (
    AXIS_NAMES,
    crossover_table,
    pareto_front,
    pareto_series,
    points_table,
    schedule_table,
    speedup_series,
)
from specbench_tui.report.nodesview import hardware_warnings, node_lines
from specbench_tui.report.svg import line_chart, scatter_chart
from specbench_tui.report.tables import Table, env_line, summary_line

CSS = """
body { font-family: system-ui, -apple-system, Segoe UI, sans-serif; margin: 2em; color: #222; max-width: 1200px; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; } h3 { font-size: 1em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; } th { background: #f3f3f3; text-align: left; }
td.r { text-align: right; font-variant-numeric: tabular-nums; }
p.note { font-size: 0.85em; color: #555; margin: 0.2em 0; }
pre { background: #f8f8f8; padding: 1em; overflow-x: auto; font-size: 0.8em; }
svg.chart { border: 1px solid #ddd; margin: 0.5em 0; background: #fff; max-width: 100%; height: auto; }
svg .axis { stroke: #333; stroke-width: 1; } svg .grid { stroke: #eee; stroke-width: 1; }
svg .ref { stroke: #000; stroke-width: 1; stroke-dasharray: 5 4; }
svg .tick, svg .legend { font-size: 11px; fill: #333; } svg .label { font-size: 12px; fill: #333; }
svg .title { font-size: 13px; font-weight: 600; fill: #222; }
.simulated { background: #fff3cd; border: 1px solid #e0c060; padding: 0.5em 1em; }
"""


def _table(table: Table) -> str:
    out = [f"<h3>{escape(table.title)}</h3>", "<table>", "<tr>"]
    out += [f"<th>{escape(h)}</th>" for h in table.headers]
    out.append("</tr>")
    for row in table.rows:
        out.append("<tr>" + "".join(f'<td class="{"r" if table.align[i:i + 1] == "r" else "l"}">{escape(c)}</td>'
                                    for i, c in enumerate(row)) + "</tr>")
    out.append("</table>")
    out += [f'<p class="note">{escape(n)}</p>' for n in table.notes]
    return "\n".join(out)


def render_html(run: LoadedRun, text_report: str) -> str:
    analysis = run.analysis
    title = f"specbench report: {analysis.sweep}"
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{escape(title)}</title><style>{CSS}</style></head><body>",
             f"<h1>{escape(title)}</h1>", f"<p>Run <code>{escape(run.name)}</code>: {escape(summary_line(analysis))}</p>"]
    env = env_line(run.env)
    if env:
        cls = ' class="simulated"' if "SIMULATED" in env.upper() else ""
        parts.append(f"<p{cls}>Environment: {escape(env)}</p>")
    nodes = node_lines(run)
    if nodes:
        parts.append("<p>Nodes:</p><ul>" + "".join(f"<li>{escape(line)}</li>" for line in nodes) + "</ul>")
    parts += [f'<p class="simulated">Warning: {escape(w)}</p>' for w in hardware_warnings(run)]  # the alert box
    load = analysis.load
    if load is not None and not load.empty:
        colors = {c.name: i for i, c in enumerate(analysis.configs)}
        for w in load.workloads:
            parts.append(f"<h2>{escape(w.name)} under load</h2>")
            for axis in (AXIS_CONCURRENCY, AXIS_RATE):
                series = speedup_series(load, w.name, axis)
                if not series:
                    continue
                names = [s.label for s in series]
                bands = [(names.index(c.config), c.low, c.high) for c in load.crossovers
                         if c.workload == w.name and c.axis == axis and c.config in names
                         and c.low is not None and c.high is not None]
                parts.append(line_chart([(s.label, s.points) for s in series],
                                        title=f"{w.name}: speedup over the matched baseline vs {AXIS_NAMES[axis]}",
                                        x_label=AXIS_NAMES[axis] + (" (log scale)" if axis == AXIS_CONCURRENCY else ""),
                                        y_label="speedup (x)", log_x=axis == AXIS_CONCURRENCY, ref_y=1.0,
                                        bands=bands, colors=colors))
            pareto = pareto_series(load, w.name)
            if pareto:
                parts.append(scatter_chart(pareto, title=f"{w.name}: per-user vs total output tok/s (Pareto)",
                                           x_label="total output tok/s", y_label="output tok/s per user",
                                           front=pareto_front(pareto), colors=colors))
            for table in (crossover_table(load, w.name), schedule_table(load, w.name), points_table(load, w.name)):
                parts.append(_table(table))
    parts += ["<h2>Full report</h2>", f"<pre>{escape(text_report)}</pre>", "</body></html>"]
    return "\n".join(parts) + "\n"
