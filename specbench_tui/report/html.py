"""``specbench report --format html``: one self-contained page for every sweep (inline CSS, figures as inline
``data:`` SVG images, no script, nothing fetched, so it opens offline and can be mailed as one file).

The page holds the summary and the environment (a simulated run says SIMULATED in a box), the run's figures
(:mod:`specbench_tui.report.figures`, drawn by matplotlib from the analysis), the tables of the other formats as
HTML tables that wrap to the page's width, the crash excerpts, the load sections and the notes; the plain-text
report closes it, folded. Every figure and number comes from the analysis, as in the other formats.
"""

from __future__ import annotations

import base64
import re
from html import escape

from specbench_tui.report.energyview import energy_table
from specbench_tui.report.acceptance_view import acceptance_tables
from specbench_tui.report.figscope import figure_scope
from specbench_tui.report.figures import FigureSpec, figure_specs, render_all
from specbench_tui.report.ladderview import ladder_tables
from specbench_tui.report.load import LoadedRun
from specbench_tui.report.loadview import crossover_table, points_table, schedule_table
from specbench_tui.report.recommendview import recommend_html
from specbench_tui.report.nodesview import hardware_warnings, node_column, node_lines
from specbench_tui.report.tables import (
    legend,
    Table,
    best_table,
    clean_text,
    env_line,
    env_simulated,
    lossless_table,
    policy_line,
    problems_table,
    results_table,
    summary_line,
)

EXCERPT_LINES = 12
CSS = """
*, *::before, *::after { box-sizing: border-box; }
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; padding: 1.5em;
       color: #222; max-width: 1280px; line-height: 1.4; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
h3 { font-size: 1em; margin-bottom: 0.3em; }
div.scroll { overflow-x: auto; margin: 0.4em 0 1em; }
table { border-collapse: collapse; font-size: 0.8em; width: 100%; table-layout: auto; }
th, td { border: 1px solid #d4d4d4; padding: 2px 6px; vertical-align: top; }
th { background: #f3f3f3; text-align: left; white-space: normal; word-break: normal; overflow-wrap: normal;
     hyphens: none; }
th .w, td .w { white-space: nowrap; }
td { word-break: normal; overflow-wrap: break-word; hyphens: none; }
td.r { text-align: right; font-variant-numeric: tabular-nums; }
p.note, li.note { font-size: 0.85em; color: #555; margin: 0.2em 0; }
figure { margin: 1em 0 2em; }
figure img { display: block; max-width: 100%; height: auto; border: 1px solid #e4e4e4; background: #fff; }
figcaption { font-size: 0.85em; color: #444; margin-top: 0.4em; }
pre { background: #f8f8f8; padding: 0.8em; font-size: 0.8em; white-space: pre-wrap; overflow-wrap: anywhere; }
details pre { max-height: 40em; overflow: auto; }
.simulated { background: #fff3cd; border: 1px solid #e0c060; padding: 0.5em 1em; }
nav ul { columns: 2; font-size: 0.9em; }
"""
_SVG_SIZE = re.compile(rb'<svg[^>]*?width="([\d.]+)pt"[^>]*?height="([\d.]+)pt"')


def table_html(table: Table) -> str:
    """A table in a box that scrolls sideways when it is wider than the page: a header or a cell wraps between its
    words, never inside one (``T P``, ``budge t``, ``ddtree-b16-``), and the table is never narrower than its
    longest words."""
    out = [f"<h3>{escape(table.title)}</h3>", '<div class="scroll"><table>', "<tr>"]
    out += [f"<th>{_header(h)}</th>" for h in table.headers]
    out.append("</tr>")
    for row in table.rows:
        out.append("<tr>" + "".join(f'<td class="{"r" if table.align[i:i + 1] == "r" else "l"}">{_cell(c)}</td>'
                                    for i, c in enumerate(row)) + "</tr>")
    if not table.rows:
        out.append(f'<tr><td colspan="{max(1, len(table.headers))}">(none)</td></tr>')
    out.append("</table></div>")
    out += [f'<p class="note">{escape(n)}</p>' for n in table.notes]
    return "\n".join(out)


def _cell(text: str) -> str:
    """A cell's text, a word with a hyphen kept whole (``ddtree-b16-tp1``, ``[102.9-140.7]`` would otherwise wrap
    at it); the cell still wraps between its words."""
    if "-" not in text:
        return escape(text)
    return " ".join(f'<span class="w">{escape(w)}</span>' if "-" in w.strip("-") else escape(w)
                    for w in text.split(" "))


def _header(text: str) -> str:
    """A header's words, each kept whole (``runner-up`` would otherwise wrap at its hyphen)."""
    return " ".join(f'<span class="w">{escape(word)}</span>' for word in text.split())


def page_head(title: str) -> list[str]:
    """The page's head (inline CSS, nothing fetched) and its heading."""
    return ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{escape(title)}</title><style>{CSS}</style></head><body>", f"<h1>{escape(title)}</h1>"]


def figure_html(spec: FigureSpec, svg: bytes) -> str:
    """One figure as an ``<img>`` holding its SVG as a ``data:`` URI (its own ids, nothing fetched)."""
    size = _SVG_SIZE.search(svg)
    dims = f' width="{round(float(size.group(1)) * 4 / 3)}" height="{round(float(size.group(2)) * 4 / 3)}"' if size \
        else ""
    data = base64.b64encode(svg).decode("ascii")
    return (f'<figure id="figure-{escape(spec.name)}" data-figure="{escape(spec.name)}">'
            f'<img alt="{escape(spec.title)}"{dims} src="data:image/svg+xml;base64,{data}">'
            f"<figcaption><b>{escape(spec.name)}</b>: {escape(spec.caption)}</figcaption></figure>")


def _head(run: LoadedRun) -> list[str]:
    analysis = run.analysis
    parts = page_head(f"specbench report: {analysis.sweep}")
    parts.append(f"<p>Run <code>{escape(run.name)}</code>: {escape(summary_line(analysis))}</p>")
    policy = policy_line(analysis)
    if policy:
        parts.append(f"<p>{escape(policy[0].upper() + policy[1:])}.</p>")
    env = env_line(run.env)
    if env:
        cls = ' class="simulated"' if env_simulated(run.env) else ""
        parts.append(f'<p{cls} id="environment">Environment: {escape(env)}</p>')
    nodes = node_lines(run)
    if nodes:
        parts.append("<p>Nodes:</p><ul>" + "".join(f"<li>{escape(line)}</li>" for line in nodes) + "</ul>")
    parts += [f'<p class="simulated">Warning: {escape(w)}</p>' for w in hardware_warnings(run)]  # the alert box
    return parts


def _excerpts(run: LoadedRun) -> list[str]:
    out = []
    for config in run.analysis.problems():
        if not config.excerpt:
            continue
        shown = config.excerpt[-EXCERPT_LINES:]
        lines = [clean_text(line) for line in shown]
        if config.crash_line and config.crash_line not in shown:
            lines.insert(0, "crash line: " + clean_text(config.crash_line))
        heading = f"{config.name}: {config.signature or config.state}, last {len(shown)} log lines"
        out.append(f"<h3>{escape(heading)}</h3><pre>{escape(chr(10).join(lines))}</pre>")
    return out


def _load_sections(run: LoadedRun) -> list[str]:
    load = run.analysis.load
    if load is None or load.empty:
        return []
    out = []
    for w in load.workloads:
        out.append(f"<h2>{escape(w.name)} under load</h2>")
        for table in (crossover_table(load, w.name), schedule_table(load, w.name), points_table(load, w.name)):
            out.append(table_html(table))
    return out


def _notes(run: LoadedRun) -> list[str]:
    notes = [clean_text(n) for n in (*run.analysis.notes, *(f"read: {w}" for w in run.warnings))]
    notes += [f"earlier attempt: {clean_text(n)}" for n in run.analysis.history]
    if not notes:
        return []
    return ["<h2>Notes</h2><ul>", *(f'<li class="note">{escape(n)}</li>' for n in notes), "</ul>"]


def render_html(run: LoadedRun, text_report: str) -> str:
    analysis = run.analysis
    parts = _head(run)
    specs = figure_specs(analysis)
    if specs:
        parts.append("<nav><ul>" + "".join(f'<li><a href="#figure-{escape(s.name)}">{escape(s.title)}</a></li>'
                                           for s in specs) + "</ul></nav>")
    parts.append(table_html(best_table(analysis)))
    parts.append("<h2>Figures</h2>")
    left_out = figure_scope(analysis)[1]
    if left_out:
        parts.append(f'<p class="note">{escape(left_out)}</p>')
    parts += [figure_html(spec, drawn["svg"]) for spec, drawn in zip(specs, render_all(specs, ("svg",)))]
    if not specs:
        parts.append('<p class="note">No figure: nothing measured yet.</p>')
    parts.append("<h2>Results</h2>")
    nodes = node_column(run)
    for workload in analysis.workloads:
        if analysis.rows_for(workload.name):
            parts.append(table_html(results_table(analysis, workload, nodes)))
    parts.append(f'<p class="note">{escape(legend(analysis))}</p>')
    parts.append("<h2>Crashed, failed and skipped</h2>")
    parts += [table_html(problems_table(analysis)), *_excerpts(run), table_html(lossless_table(analysis))]
    if (energy := energy_table(run.energy)) is not None:
        parts.append(table_html(energy))
    acceptance = acceptance_tables(analysis)
    if acceptance:
        parts += ["<h2>Acceptance</h2>", *(table_html(t) for t in acceptance)]
    parts += _load_sections(run)
    parts += [table_html(table) for table in ladder_tables(analysis)]
    parts += recommend_html(run)
    parts += _notes(run)
    parts += ["<h2>Plain-text report</h2>", f"<details><summary>the txt format</summary><pre>{escape(text_report)}"
              "</pre></details>", "</body></html>"]
    return "\n".join(parts) + "\n"
