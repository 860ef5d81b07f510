"""The report in each output format: txt (with charts), md, csv, json and latex.

Every renderer takes a :class:`~specbench_tui.report.load.LoadedRun` and returns the whole document as one
string ending in a newline. Output is deterministic (plan order, rounded numbers, the run directory's name
rather than its absolute path), which is what lets golden files pin it down.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable
from pathlib import Path

from specbench_tui.core.acceptance import AcceptanceAnalysis
from specbench_tui.core.results import ACCEPT_FROM_SERVER, CellRow, ConfigSummary, RunAnalysis, Spread, to_json
from specbench_tui.core.safetext import document_safe
from specbench_tui.rundir.store import log_file_name, safe_filename
from specbench_tui.report.energyview import (
    ENERGY_CSV_COLUMNS,
    energy_csv,
    energy_json,
    energy_markdown,
    energy_text,
)
from specbench_tui.report.acceptance_view import acceptance_json, acceptance_tables
from specbench_tui.report.boundaries import boundary_json, boundary_md, boundary_txt
from specbench_tui.report.charts import budget_charts
from specbench_tui.report.ladderview import ladder_json, ladder_md, ladder_txt
from specbench_tui.report.load import LoadedRun
from specbench_tui.report.nodesview import hardware_json, hardware_warnings, node_column, node_lines
from specbench_tui.report.recommendview import recommend_json, recommend_md, recommend_txt
from specbench_tui.report.loadview import (
    LOAD_CSV_COLUMNS,
    crossover_table,
    load_csv_rows,
    load_json,
    load_txt,
    points_table,
    schedule_table,
)
from specbench_tui.report.tables import (
    CACHE_TEXT,
    legend,
    best_marks,
    best_table,
    cache_policy,
    cell_intervals,
    clean_text,
    env_line,
    lossless_table,
    policy_line,
    problems_table,
    render_markdown_table,
    render_text_table,
    results_table,
    summary_line,
    Table,
)

FORMATS = ("txt", "md", "csv", "json", "latex", "html")
JSON_SCHEMA = "specbench-report/1"
FENCE = "`" * 3
EXCERPT_LINES = 12
"""Log lines of a crash shown in a report (the last ones: the error is at the end); the log has the rest."""


def _excerpt_heading(run: LoadedRun, config: ConfigSummary) -> str:
    """``last 12 of 19 log lines (full log: logs/x.log)`` or ``log excerpt``."""
    # Run directories written before log names carried the configuration id have logs/<name>.log.
    log = next((p for p in (Path("logs") / log_file_name(config.name, config.id),
                            Path("logs") / f"{safe_filename(config.name)}.log") if (run.path / p).is_file()), None)
    where = f" (full log: {log})" if log is not None else ""
    if len(config.excerpt) > EXCERPT_LINES:
        return f"last {EXCERPT_LINES} of {len(config.excerpt)} excerpt lines{where}"
    return f"log excerpt{where}"


# ---------------------------------------------------------------------------------------------- txt


def render_txt(run: LoadedRun, chart_width: int = 72, chart_height: int = 10) -> str:
    """Plain text for a terminal or a file: decision first, then the details, charts and notes."""
    analysis = run.analysis
    out = [f"specbench report: {analysis.sweep} (run {run.name})", summary_line(analysis)]
    policy = policy_line(analysis)
    if policy:
        out.append(policy)
    env = env_line(run.env)
    if env:
        out.append(f"env: {env}")
    out += [f"node {line}" for line in node_lines(run)]
    out += [f"warning: {w}" for w in hardware_warnings(run)]
    sequential = bool(analysis.workloads)  # a load-only run has none of the per-workload sections: never empty ones
    if sequential:
        out += ["", *render_text_table(best_table(analysis))]
    nodes = node_column(run)
    for workload in analysis.workloads:
        out += ["", *render_text_table(results_table(analysis, workload, nodes))]
    if sequential:
        out += ["", *_wrap(legend(analysis), 110)]
    out += _table_txt(problems_table(analysis))
    out += _excerpts_txt(run)
    out += boundary_txt(run)
    if sequential:
        out += ["", *render_text_table(lossless_table(analysis))]
    for table in acceptance_tables(analysis):
        out += _table_txt(table)
    out += energy_text(run.energy)
    if sequential:
        out += ["", "Charts", "------", *budget_charts(analysis, chart_width, chart_height)]
    out += load_txt(analysis, chart_width, chart_height)
    out += ladder_txt(analysis)
    out += recommend_txt(run)
    out += _notes_txt(run)
    return "\n".join(line.rstrip() for line in out) + "\n"


def _table_txt(table: Table) -> list[str]:
    """A section of the txt report: a blank line and the table; nothing for a table without a row or a note (a
    report never opens with an empty section)."""
    return ["", *render_text_table(table)] if table.rows or table.notes else []


def _excerpts_txt(run: LoadedRun) -> list[str]:
    """The last log lines of each configuration that crashed or failed, with its crash line."""
    out: list[str] = []
    for config in run.analysis.problems():
        if config.excerpt:
            out += ["", f"{config.name}: {config.signature or config.state}, {_excerpt_heading(run, config)}:"]
            shown = config.excerpt[-EXCERPT_LINES:]
            if config.crash_line and config.crash_line not in shown:
                out.append(f"  crash line: {clean_text(config.crash_line)}")
            out += [f"  | {clean_text(line)}" for line in shown]
    return out


def _wrap(text: str, width: int) -> list[str]:
    lines: list[str] = []
    current = ""
    for word in text.split(" "):
        if current and len(current) + 1 + len(word) > width:
            lines.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    return [*lines, current] if current else lines


def _notes_txt(run: LoadedRun) -> list[str]:
    notes = [clean_text(n) for n in (*run.analysis.notes, *(f"read: {w}" for w in run.warnings))]
    notes += [f"earlier attempt: {clean_text(n)}" for n in run.analysis.history]
    return ["", "Notes", "-----", *(f"- {n}" for n in notes)] if notes else []


# ---------------------------------------------------------------------------------------------- markdown


def render_md(run: LoadedRun) -> str:
    """GitHub-flavoured Markdown: the same tables as txt, without charts."""
    analysis = run.analysis
    out = [f"# specbench report: {analysis.sweep}", "", f"Run `{run.name}`: {summary_line(analysis)}.", ""]
    policy = policy_line(analysis)
    if policy:
        out += [policy[0].upper() + policy[1:] + ".", ""]
    env = env_line(run.env)
    if env:
        out += [f"Environment: {env}", ""]
    if node_lines(run):
        out += ["Nodes:", "", *(f"- {line}" for line in node_lines(run)), ""]
    out += [f"> **Warning:** {w}\n" for w in hardware_warnings(run)]
    out += render_markdown_table(best_table(analysis), 2)
    nodes = node_column(run)
    for workload in analysis.workloads:
        out += render_markdown_table(results_table(analysis, workload, nodes), 2)
    out += [legend(analysis), ""]
    out += render_markdown_table(problems_table(analysis), 2)
    for config in analysis.problems():
        if config.excerpt:
            out += [f"`{config.name}` ({config.signature or config.state}), {_excerpt_heading(run, config)}:", "",
                    FENCE, *(clean_text(line).replace(FENCE, "'''") for line in config.excerpt[-EXCERPT_LINES:]),
                    FENCE, ""]
    out += boundary_md(run)
    out += render_markdown_table(lossless_table(analysis), 2)
    for table in acceptance_tables(analysis):
        out += render_markdown_table(table, 2)
    out += energy_markdown(run.energy)
    if analysis.load is not None:
        for w in analysis.load.workloads:
            for table in (crossover_table(analysis.load, w.name), schedule_table(analysis.load, w.name),
                          points_table(analysis.load, w.name)):
                out += render_markdown_table(table, 2)
    out += ladder_md(analysis)
    out += recommend_md(run)
    notes = [clean_text(n) for n in (*analysis.notes, *(f"read: {w}" for w in run.warnings))]
    notes += [f"earlier attempt: {clean_text(n)}" for n in analysis.history]
    if notes:
        out += ["## Notes", "", *(f"- {n}" for n in notes), ""]
    return "\n".join(out).rstrip("\n") + "\n"


# ---------------------------------------------------------------------------------------------- csv

CSV_COLUMNS = (
    "sweep", "run", "config_id", "config", "algorithm", "tp", "budget", "baseline", "workload", "state",
    "n_ok", "n_zero_output", "n_error", "n_clamped",
    "decode_tps_median", "decode_tps_min", "decode_tps_max",
    "speedup", "speedup_min", "speedup_max", "speedup_note",
    "ttft_s_median", "ttft_s_min", "ttft_s_max", "repeats",
    "accept_length", "accept_method", "server_log_accept_length", "server_log_scope",
    "lossless", "lossless_checked", "lossless_mismatches",
    "best_for_workload", "best_at_tp", "flags", "signature", "reason",
    "coverage", "items_measured", "items_expected", "n_crash", "speedup_pairs", "node", "gpu_model",
    "cache", "from_memory", "n_retracted",
    "draft_acceptance_rate", "accepted_per_verified", "conditional_acceptance", "accept_histogram", "step_cost",
    "length_over_cost", "limited_by",
    "speedup_ci_low", "speedup_ci_high", "accept_length_ci_low", "accept_length_ci_high", "temperature",
)
"""One row per configuration × workload; ``_min``/``_max`` are the range of per-repeat values; ``coverage`` is
complete, partial (cut short: ``items_measured`` of ``items_expected``, ``n_crash`` requests cut by the crash),
running, not run or none; ``speedup_pairs`` the (item, repeat) pairs the speedup is over; ``node`` where it was
measured (``gpu-a 0,1``; empty on this machine alone) and ``gpu_model`` on which GPU model; ``cache`` the cache
policy it was measured under (cold, warm, mixed), ``from_memory`` set for a warm n-gram cell, ``n_retracted`` the
requests the server retracted (kept out of the latency figures); ``conditional_acceptance`` the conditional
acceptance at draft positions 1, 2, … and ``accept_histogram`` the verify steps that accepted 0, 1, … drafts
(space-separated), ``step_cost`` the step cost ×, ``length_over_cost`` acceptance length ÷ step cost × and
``limited_by`` which of the two limits the configuration (docs/acceptance.md); ``..._ci_low``/``_high`` the 95 %
bootstrap interval of the speedup and of ``accept_length`` (empty without one: core/intervals.py); ``temperature``
the workload's sampling temperature (0: greedy)."""


def _num(value: float | int | None, digits: int = 4) -> str:
    if value is None:
        return ""
    return str(value) if isinstance(value, int) else f"{value:.{digits}f}"


def _spread_cells(spread: Spread | None, digits: int = 4) -> list[str]:
    if spread is None:
        return ["", "", ""]
    return [_num(spread.median, digits), _num(spread.low, digits), _num(spread.high, digits)]


def csv_rows(run: LoadedRun) -> list[dict[str, str]]:
    analysis = run.analysis
    marks = best_marks(analysis)
    nodes = node_column(run) or {}
    temperatures = {w.name: w.temperature for w in analysis.workloads}
    out = []
    for row in analysis.rows:
        config = analysis.config(row.config_id)
        mark = marks.get((row.config_id, row.workload), "")
        best_tp = mark == "*" or _best_at_a_tp(analysis, row)
        cells = [
            analysis.sweep, run.name, row.config_id, row.config, row.algorithm, _num(row.tp), _num(row.budget),
            (config.baseline or "") if config else "", row.workload, row.state,
            str(row.n_ok), str(row.n_zero_output), str(row.n_error), str(row.n_clamped),
            *_spread_cells(row.decode_tps, 3), *_spread_cells(row.speedup, 4), row.speedup_note or "",
            *_spread_cells(row.ttft_s, 4), _num(row.decode_tps.repeats if row.decode_tps else None),
            _num(row.accept_length, 4), row.accept_method or "", _num(row.server_log_accept_length, 4),
            row.server_log_scope or "",
            row.lossless.status, str(row.lossless.checked), str(len(row.lossless.mismatches)),
            "yes" if mark == "**" else "", "yes" if best_tp else "", " ".join(row.flags),
            *_config_cells(config),
            row.coverage, str(row.items_measured), _num(row.expected), str(row.n_crash), str(row.paired),
            nodes.get(row.config_id, ""), clean_text(run.hardware.model(row.config_id) or "", 200),
            row.cache or "", row.from_memory or "", str(row.n_retracted), *_acceptance_cells(run, row),
            *_interval_cells(run, row), _temperature(temperatures.get(row.workload)),
        ]
        out.append(dict(zip(CSV_COLUMNS, cells)))
        if run.energy:
            out[-1].update(energy_csv(run.energy).get((row.config, row.workload), {}))
    return out


def _best_at_a_tp(analysis: RunAnalysis, row: CellRow) -> bool:
    """The cell is the best of its workload at its TP."""
    return any(b.config_id == row.config_id and b.workload == row.workload and b.tp is not None for b in analysis.best)


def _config_cells(config: ConfigSummary | None) -> list[str]:
    """The configuration's crash signature and reason (cleaned), empty when unknown."""
    if config is None:
        return ["", ""]
    return [config.signature or "", clean_text(config.reason or "")]


def _acceptance_cells(run: LoadedRun, row: CellRow) -> list[str]:
    figures = run.analysis.acceptance
    cell = figures.cell(row.config_id, row.workload) if isinstance(figures, AcceptanceAnalysis) else None
    if cell is None:
        return [""] * 7
    return [_num(cell.draft_acceptance_rate, 4), _num(cell.accepted_per_verified, 4),
            " ".join("" if v is None else f"{v:.4f}" for v in cell.conditional),
            " ".join(str(h) for h in cell.histogram), _num(cell.step_cost, 4), _num(cell.predicted_speedup, 4),
            cell.limit or ""]


def _temperature(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def _interval_cells(run: LoadedRun, row: CellRow) -> list[str]:
    ci = cell_intervals(run.analysis, row)
    out: list[str] = []
    for interval in (ci.speedup if ci else None, ci.accept_length if ci else None):
        ok = interval is not None and interval.ok
        out += [_num(interval.low, 4) if ok and interval else "", _num(interval.high, 4) if ok and interval else ""]
    return out


def render_csv(run: LoadedRun) -> str:
    """One row per configuration × workload; a run with a load axis adds the load columns and one row per
    configuration × workload × load point."""
    buffer = io.StringIO()
    load_rows = load_csv_rows(run.analysis, CSV_COLUMNS)
    columns = (*CSV_COLUMNS, *LOAD_CSV_COLUMNS) if load_rows else CSV_COLUMNS
    if run.energy:
        columns = (*columns, *ENERGY_CSV_COLUMNS)
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n", restval="")
    writer.writeheader()
    writer.writerows(csv_rows(run))
    for row in load_rows:
        row["run"] = run.name
        writer.writerow(row)
    return buffer.getvalue()


# ---------------------------------------------------------------------------------------------- json


def render_json(run: LoadedRun) -> str:
    """The whole analysis, for scripts: ``{"schema", "run", "env", "warnings", "analysis"}``."""
    analysis = to_json(run.analysis)
    analysis.pop("ladder", None)  # said below in the report's own words (report/ladderview.py)
    for key in ("load", "intervals"):
        if analysis.get(key) is None:
            analysis.pop(key, None)
    acceptance = acceptance_json(run.analysis)
    if acceptance is None:
        analysis.pop("acceptance", None)
    else:
        analysis["acceptance"] = acceptance
    counts = run.progress  # as logs, ps, runs and the TUI's header count them
    data: dict[str, object] = {
        "schema": JSON_SCHEMA, "run": run.name, "env": run.env, "warnings": list(run.warnings),
        "progress": {"configs": counts.total, "ran": counts.ran, "skipped": counts.skipped,
                     "measurements": counts.measurements, "text": counts.text},
        "analysis": analysis}
    hardware = hardware_json(run)
    if hardware is not None:  # a run on this machine alone, on one GPU model, has none
        data["hardware"] = hardware
    load = load_json(run.analysis)
    if load is not None:
        data["load"] = load
    if (ladder := ladder_json(run.analysis)) is not None:
        data["ladder"] = ladder
    if (recommendation := recommend_json(run)) is not None:
        data["recommendation"] = recommendation
    if boundary_json(run):
        data["crash_boundaries"] = boundary_json(run)
    if run.energy:
        data["energy"] = energy_json(run.energy)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------------------------------------- latex

_LATEX_SPECIALS = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                   "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
_LATEX_RE = re.compile("|".join(re.escape(k) for k in _LATEX_SPECIALS))


def latex_escape(text: str) -> str:
    """Escape the ten characters LaTeX treats specially, so any name or reason pastes safely."""
    return _LATEX_RE.sub(lambda m: _LATEX_SPECIALS[m.group(0)], text)


def _label(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "run"


def _latex_matrix(analysis: RunAnalysis, caption: str, label: str, cell: Callable[[CellRow], str]) -> list[str]:
    workloads = analysis.workloads
    marks = best_marks(analysis)
    out = [r"\begin{table}[t]", r"\centering", r"\small",
           r"\begin{tabular}{l r " + "r" * len(workloads) + "}", r"\toprule",
           "Configuration & TP & " + " & ".join(latex_escape(w.name) for w in workloads) + r" \\", r"\midrule"]
    for config in analysis.configs:
        if config.state == "skipped":
            continue
        cells = []
        for workload in workloads:
            row = analysis.row(config.id, workload.name)
            text = cell(row) if row else "--"
            if row and marks.get((row.config_id, row.workload)) and text[:1].isdigit():
                text = r"\textbf{" + text + "}"
            cells.append(text)
        out.append(f"{latex_escape(config.name)} & {config.tp if config.tp is not None else '--'} & "
                   + " & ".join(cells) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}", r"\caption{" + caption + "}", r"\label{" + label + "}",
            r"\end{table}", ""]
    return out


def _latex_flags(row: CellRow) -> str:
    """The marks a flagged cell carries whatever its figure reads (a number, n/b or --): the dagger for
    zero-output or non-lossless outputs, the double dagger for a workload cut short."""
    marks = r"$^{\dagger}$" if "zero_output" in row.flags or "lossless_mismatch" in row.flags else ""
    return marks + (r"$^{\ddagger}$" if row.partial else "")


def _latex_speedup(row: CellRow) -> str:
    if row.state in ("crashed", "failed") and row.n_ok == 0:
        return r"\textit{" + row.state + "}"
    if row.speedup is None:
        return ("n/b" if row.n_ok else "--") + _latex_flags(row)
    text = f"{row.speedup.median:.2f}" + r"$\times$"
    if row.speedup.repeats > 1 and row.speedup_note != "baseline":
        text += r"\,{\scriptsize[" + f"{row.speedup.low:.2f}, {row.speedup.high:.2f}" + "]}"
    # partial: over the items it reached before the cut, paired with the baseline's same items
    return text + _latex_flags(row)


def _latex_accept(row: CellRow) -> str:
    if row.state in ("crashed", "failed") and row.n_ok == 0:
        return r"\textit{" + row.state + "}"
    if row.accept_length is None:
        return "--" + _latex_flags(row)
    if row.accept_method == ACCEPT_FROM_SERVER:  # no per-request figure: it IS the server's
        return f"({row.accept_length:.2f})" + _latex_flags(row)
    log = f" ({row.server_log_accept_length:.2f})" if row.server_log_accept_length is not None else ""
    return f"{row.accept_length:.2f}{log}" + _latex_flags(row)


def render_latex(run: LoadedRun) -> str:
    """booktabs tables ready to paste (needs ``\\usepackage{booktabs}``): speedup, acceptance, failures."""
    analysis = run.analysis
    name = latex_escape(analysis.sweep)
    label = _label(analysis.sweep)
    out = [f"% specbench report: {analysis.sweep} (run {run.name}); needs \\usepackage{{booktabs}}", ""]
    out += _latex_matrix(
        analysis,
        f"Decode speedup over the autoregressive baseline at the same TP ({name}): median over requests, "
        r"[range over repeats], over the items both the configuration and its baseline measured. Bold: best per "
        r"workload and TP. $^{\dagger}$: zero-output or non-lossless outputs, not eligible. $^{\ddagger}$: partial, "
        "the workload was cut short (crash or interruption); not eligible. n/b: no baseline.",
        f"tab:{label}-speedup", _latex_speedup)
    out += _latex_matrix(
        analysis,
        f"Mean acceptance length weighted by verify steps ({name}); in parentheses the server's own log figure. "
        r"$^{\dagger}$: zero-output or non-lossless outputs. $^{\ddagger}$: partial, the workload was cut short.",
        f"tab:{label}-acceptance", _latex_accept)
    out += _latex_load(analysis, name, label)
    for index, table in enumerate(acceptance_tables(analysis)):
        out += _latex_table(table, f"tab:{label}-acceptance-{index + 1}")
    problems = analysis.problems()
    if problems:
        out += [r"\begin{table}[t]", r"\centering", r"\small", r"\begin{tabular}{l l l p{0.45\linewidth}}",
                r"\toprule", r"Configuration & State & Signature & Reason \\", r"\midrule"]
        for config in problems:
            cells = (config.name, config.state, config.signature or "--", config.reason or "--")
            out.append(" & ".join(latex_escape(clean_text(v)) for v in cells) + r" \\")
        out += [r"\bottomrule", r"\end{tabular}", r"\caption{Configurations that crashed, failed or were "
                f"skipped ({name}).}}", r"\label{tab:" + label + "-failures}", r"\end{table}", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def _latex_table(table: Table, label: str) -> list[str]:
    """A report table as booktabs (the sparkline column, whose block characters need a Unicode font, is left
    out: its values are in the next column)."""
    keep = [i for i, h in enumerate(table.headers) if h]
    out = [r"\begin{table}[t]", r"\centering", r"\small",
           r"\begin{tabular}{" + " ".join(table.align[i] for i in keep) + "}", r"\toprule",
           " & ".join(latex_escape(table.headers[i]) for i in keep) + r" \\", r"\midrule"]
    for row in table.rows:
        out.append(" & ".join(latex_escape(clean_text(row[i])) for i in keep) + r" \\")
    caption = latex_escape(table.title + (". " + " ".join(table.notes) if table.notes else ""))
    out += [r"\bottomrule", r"\end{tabular}", r"\caption{" + caption + "}", r"\label{" + label + "}",
            r"\end{table}", ""]
    return out


def _latex_load(analysis: RunAnalysis, name: str, label: str) -> list[str]:
    """The cache policy as a comment, and the crossovers with the capped points they rest on (a run with a load
    axis)."""
    policy = cache_policy(analysis.rows) or (cache_policy(analysis.load.points) if analysis.load else None)
    out = [f"% caches: {latex_escape(CACHE_TEXT.get(policy, policy))}", ""] if policy else []
    load = analysis.load
    if load is None or not load.crossovers:
        return out
    out += [r"\begin{table}[t]", r"\centering", r"\small", r"\begin{tabular}{l l l p{0.4\linewidth}}", r"\toprule",
            r"Configuration & Workload & $B^*$ & Capped points it rests on \\", r"\midrule"]
    for c in load.crossovers:
        cells = (c.config, c.workload, c.text, "; ".join(c.capped) or "--")
        out.append(" & ".join(latex_escape(clean_text(v)) for v in cells) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}", r"\caption{Where speculation stops paying under load (" + name
            + r"): a point above a server's running-request cap measures the cap.}",
            r"\label{tab:" + label + "-crossover}", r"\end{table}", ""]
    return out


RENDERERS: dict[str, Callable[[LoadedRun], str]] = {
    "txt": render_txt, "md": render_md, "csv": render_csv, "json": render_json, "latex": render_latex,
    "html": lambda run: _render_html(run),
}


def _render_html(run: LoadedRun) -> str:
    from specbench_tui.report.html import render_html

    return render_html(run, render_txt(run))


def render(run: LoadedRun, fmt: str) -> str:
    """The report in ``fmt`` (one of :data:`FORMATS`)."""
    try:
        renderer = RENDERERS[fmt]
    except KeyError:
        raise ValueError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})") from None
    # One rule for every text that reaches a terminal or a page: no control or format character of a foreign
    # value (a category, a model name, an error) is printed raw, whatever the format.
    return document_safe(renderer(run), json_text=fmt == "json")
