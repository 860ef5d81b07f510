"""Two runs side by side: per configuration (matched by id) and workload, what changed and whether it matters.

Configurations are matched by id (a hash of what the server is given), so a renamed configuration still
matches and one whose argv changed does not; those are listed apart, with a same-name hint. A change is
*significant* when it is at least :data:`SIGNIFICANT_CHANGE` and, where both sides had several repeats, their
per-repeat ranges do not overlap: a difference inside the noise is not news.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from specbench_tui.core.intervals import Interval
from specbench_tui.core.nodes import compare_warnings
from specbench_tui.core.results import CellRow, ConfigSummary, Spread
from specbench_tui.report.acceptance_view import PositionChange, position_change_table, position_changes
from specbench_tui.report.load import LoadedRun
from specbench_tui.report.nodesview import hardware_warnings
from specbench_tui.rundir import ENV_JSON
from specbench_tui.report.tables import (
    CACHE_TEXT,
    Table,
    cell_intervals,
    clean_text,
    env_facts,
    env_simulated,
    fmt_seconds,
    render_markdown_table,
    render_text_table,
    run_cache_policy,
)

_FAILED = ("crashed", "failed")

SIGNIFICANT_CHANGE = 0.05
"""Relative change below which nothing is called significant."""


@dataclass(frozen=True)
class Change:
    """One metric before (a) and after (b)."""

    a: float | None
    b: float | None
    relative: float | None
    """(b - a) / a, None when either side is missing."""
    significant: bool


@dataclass(frozen=True)
class CompareRow:
    config_id: str
    config: str
    workload: str
    decode_tps: Change
    ttft_s: Change
    accept_length: Change
    cut: str = ""
    """Which side measured the cell only in part (``A partial``, ``B partial``, ``A, B partial``), else ""."""
    host: str = ""
    """Which side measured the cell on a saturated host (``A at load 5.9 on 2 cores``), else "": then no change of
    the row is called significant (the recorded load explains it as well as the servers do)."""


@dataclass(frozen=True)
class Comparison:
    run_a: str
    run_b: str
    sweep_a: str
    sweep_b: str
    rows: tuple[CompareRow, ...]
    state_changes: tuple[tuple[str, str, str], ...]
    """(config, state in a, state in b) where they differ."""
    only_a: tuple[ConfigSummary, ...]
    only_b: tuple[ConfigSummary, ...]
    renamed_or_changed: tuple[str, ...] = ()
    """Names present in both runs under different ids (argv or environment changed)."""
    env_changes: tuple[str, ...] = ()
    workloads_only: tuple[str, ...] = field(default=())
    warnings: tuple[str, ...] = ()
    """What makes the two runs not comparable as they stand (a simulated run against a real one, configurations
    measured on different GPU models)."""
    places: tuple[tuple[str, str, str], ...] = ()
    """(config, where A measured it, where B did), when either run ran on cluster nodes."""
    positions: tuple[PositionChange, ...] = ()
    """Per cell both runs measured a histogram of: conditional acceptance by draft position in A and in B."""
    still_failing: tuple[tuple[str, str, str, str, str], ...] = ()
    """(config, state in A, signature in A, state in B, signature in B) of a configuration that crashed or failed
    in both runs: no state changed and no cell was measured, yet it belongs in the comparison."""


def _change(a: Spread | None, b: Spread | None, threshold: float) -> Change:
    if a is None or b is None:
        return Change(a.median if a else None, b.median if b else None, None, False)
    relative = (b.median - a.median) / a.median if a.median else None
    noisy = a.repeats > 1 and b.repeats > 1 and a.overlaps(b)
    return Change(a.median, b.median, relative, relative is not None and abs(relative) >= threshold and not noisy)


def _accept_change(a: CellRow, b: CellRow, threshold: float,
                   intervals: tuple[Interval | None, Interval | None] = (None, None)) -> Change:
    """The acceptance length's change; inside the noise (not significant) where both sides' bootstrap intervals
    exist and overlap."""
    if a.accept_length is None or b.accept_length is None:
        return Change(a.accept_length, b.accept_length, None, False)
    relative = (b.accept_length - a.accept_length) / a.accept_length if a.accept_length else None
    ci_a, ci_b = intervals
    noisy = (ci_a is not None and ci_b is not None and ci_a.ok and ci_b.ok and ci_a.why is None and ci_b.why is None
             and (ci_a.low or 0) <= (ci_b.high or 0) and (ci_b.low or 0) <= (ci_a.high or 0))
    return Change(a.accept_length, b.accept_length, relative,
                  relative is not None and abs(relative) >= threshold and not noisy)


def _accept_interval(run: LoadedRun, row: CellRow) -> Interval | None:
    ci = cell_intervals(run.analysis, row)
    return ci.accept_length if ci is not None else None


def _env_changes(env_a: Mapping[str, object] | None, env_b: Mapping[str, object] | None) -> list[str]:
    """What differs between the two environments, as ``key old -> new``."""
    if bool(env_a) != bool(env_b):
        return [f"{ENV_JSON} missing in {'A' if not env_a else 'B'}"]
    facts_a, facts_b = env_facts(env_a), env_facts(env_b)
    return [f"{key} {facts_a.get(key, '(none)')} -> {facts_b.get(key, '(none)')}"
            for key in dict.fromkeys([*facts_a, *facts_b]) if facts_a.get(key) != facts_b.get(key)]


def compare_runs(a: LoadedRun, b: LoadedRun, threshold: float = SIGNIFICANT_CHANGE) -> Comparison:
    """Match configurations by id and workloads by name; compare tok/s, TTFT and acceptance."""
    ids_b = {c.id for c in b.analysis.configs}
    ids_a = {c.id for c in a.analysis.configs}
    workloads_b = {w.name for w in b.analysis.workloads}
    matched = [(config, other) for config in a.analysis.configs if (other := b.analysis.config(config.id)) is not None]
    states, failing = _states(matched)
    rows = [_compare_cell(a, b, config.id, other.name, workload.name, threshold)
            for config, other in matched for workload in a.analysis.workloads
            if workload.name in workloads_b and _both_rows_measured(a, b, config.id, workload.name)]
    positions = position_changes(a.analysis, b.analysis, [(r.config_id, r.config, r.workload) for r in rows])
    only_a = tuple(c for c in a.analysis.configs if c.id not in ids_b)
    only_b = tuple(c for c in b.analysis.configs if c.id not in ids_a)
    names_b = {c.name for c in only_b}
    return Comparison(
        run_a=a.name, run_b=b.name, sweep_a=a.analysis.sweep, sweep_b=b.analysis.sweep, rows=tuple(rows),
        state_changes=tuple(states), only_a=only_a, only_b=only_b, positions=positions,
        renamed_or_changed=tuple(c.name for c in only_a if c.name in names_b),
        env_changes=tuple(_env_changes(a.env, b.env)),
        workloads_only=_workloads_only(a, b),
        warnings=(*_simulation_warnings(a.env, b.env), *_hardware_warnings(a, b, rows), *_cache_warnings(a, b),
                  *_host_warnings(rows)),
        places=_places(a, b, rows), still_failing=tuple(failing),
    )


def _workloads_only(a: LoadedRun, b: LoadedRun) -> tuple[str, ...]:
    """The workloads of one run that the other lacks, said with their side."""
    names_a = {w.name for w in a.analysis.workloads}
    names_b = {w.name for w in b.analysis.workloads}
    return tuple([f"{w} (only in A)" for w in names_a - names_b] + [f"{w} (only in B)" for w in names_b - names_a])


def _states(matched: list[tuple[ConfigSummary, ConfigSummary]]
            ) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str, str, str]]]:
    """The configurations whose state changed (name, A's, B's), and those crashed or failed in both (with each
    run's signature)."""
    states: list[tuple[str, str, str]] = []
    failing: list[tuple[str, str, str, str, str]] = []
    for config, other in matched:
        if config.state != other.state:
            states.append((other.name, config.state, other.state))
        elif config.state in _FAILED:
            failing.append((other.name, config.state, config.signature or "no signature", other.state,
                            other.signature or "no signature"))
    return states, failing


def _both_rows_measured(a: LoadedRun, b: LoadedRun, config_id: str, workload: str) -> bool:
    """Both runs have the cell, and at least one measured it."""
    row_a, row_b = a.analysis.row(config_id, workload), b.analysis.row(config_id, workload)
    return row_a is not None and row_b is not None and (row_a.measured or row_b.measured)


def _compare_cell(a: LoadedRun, b: LoadedRun, config_id: str, name: str, workload: str,
                  threshold: float) -> CompareRow:
    """One cell's changes from A to B (tok/s, TTFT, acceptance), which side was cut short, and nothing called
    significant on a saturated host."""
    row_a, row_b = a.analysis.row(config_id, workload), b.analysis.row(config_id, workload)
    assert row_a is not None and row_b is not None
    cut = ", ".join(side for side, row in (("A", row_a), ("B", row_b)) if row.partial)
    row = CompareRow(config_id, name, workload, _change(row_a.decode_tps, row_b.decode_tps, threshold),
                     _change(row_a.ttft_s, row_b.ttft_s, threshold),
                     _accept_change(row_a, row_b, threshold, (_accept_interval(a, row_a), _accept_interval(b, row_b))),
                     f"{cut} partial" if cut else "")
    return _on_saturated_host(row, a, b)


def _on_saturated_host(row: CompareRow, a: LoadedRun, b: LoadedRun) -> CompareRow:
    """``row`` with nothing called significant where either run measured its cell on a saturated host."""
    key = (row.config_id, row.workload)
    hot = [f"{side} at {load.describe()}" for side, run in (("A", a), ("B", b))
           if (load := run.host_loads.get(key)) is not None and load.saturated]
    if not hot:
        return row
    calm = [replace(change, significant=False) for change in (row.decode_tps, row.ttft_s, row.accept_length)]
    return replace(row, decode_tps=calm[0], ttft_s=calm[1], accept_length=calm[2], host=", ".join(hot))


def _host_warnings(rows: list[CompareRow]) -> list[str]:
    hot = [r for r in rows if r.host]
    if not hot:
        return []
    return [f"{len(hot)} of {len(rows)} compared cells were measured on a saturated host (load average at or above "
            f"the cores; e.g. {hot[0].config} {hot[0].workload}: {hot[0].host}): no change there is called "
            "significant, since the host's load explains it as well as the servers do"]


def _hardware_warnings(a: LoadedRun, b: LoadedRun, rows: list[CompareRow]) -> list[str]:
    """The compared configurations measured on different GPU models, across the runs and within each."""
    matched = {r.config_id: r.config for r in rows}
    out = compare_warnings(a.hardware, b.hardware, matched)
    for side, run in (("A", a), ("B", b)):
        out += [f"run {side}: {w}" for w in hardware_warnings(run)]
    return [clean_text(w) for w in out]


def _cache_warnings(a: LoadedRun, b: LoadedRun) -> list[str]:
    """Both runs' cache policies, and a warning when they differ (a warm repeat may meet its own prefix, and an
    n-gram drafter its own earlier output)."""
    policies = [run_cache_policy(run.analysis) for run in (a, b)]
    if not any(policies):
        return []
    shown = [p or "not recorded" for p in policies]
    if policies[0] == policies[1]:
        return [f"both runs' caches: {CACHE_TEXT.get(shown[0], shown[0])}"]
    return [f"NOT COMPARABLE as they stand: run A measured {shown[0]} caches and run B {shown[1]}"]


def _places(a: LoadedRun, b: LoadedRun, rows: list[CompareRow]) -> tuple[tuple[str, str, str], ...]:
    if not (a.hardware.on_nodes or b.hardware.on_nodes):
        return ()
    matched = {r.config_id: r.config for r in rows}
    return tuple((name, clean_text(a.hardware.where(config_id) or "-", 120),
                  clean_text(b.hardware.where(config_id) or "-", 120)) for config_id, name in matched.items())


def _simulation_warnings(env_a: Mapping[str, object] | None, env_b: Mapping[str, object] | None) -> list[str]:
    """A simulated run and a real one are not comparable; two simulated runs compare the simulator only."""
    sim_a, sim_b = env_simulated(env_a), env_simulated(env_b)
    if sim_a and sim_b:
        return ["both runs are SIMULATED (the SGLang simulator on a scripted GPU box): the changes are the "
                "simulator's, not any hardware's"]
    if sim_a or sim_b:
        which, other = ("A", "B") if sim_a else ("B", "A")
        return [f"NOT COMPARABLE: run {which} is SIMULATED (the SGLang simulator on a scripted GPU box) and run "
                f"{other} is not; the changes below compare a simulation with real hardware"]
    return []


def _pct(change: Change) -> str:
    if change.relative is None:
        return "-"
    return f"{change.relative * 100:+.1f}%" + (" *" if change.significant else "  ")


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


COMPARE_FORMATS = ("txt", "md", "html")


@dataclass(frozen=True)
class Listing:
    """A titled list of a comparison (``State changes``: one line per item), or with no item one line of its own
    (``Same name, different id…: a, b``)."""

    title: str
    items: tuple[str, ...] = ()


Block = Table | Listing


@dataclass(frozen=True)
class CompareDoc:
    """What every format of a comparison says, in order: the title, the summary lines, then the blocks."""

    title: str
    summary: tuple[str, ...]
    blocks: tuple[Block, ...]


def compare_doc(comparison: Comparison) -> CompareDoc:
    """The comparison's content, once for every format: summary, warnings, the changes table, state changes,
    configurations on one side."""
    c = comparison
    faster = sum(1 for r in c.rows if r.decode_tps.significant and (r.decode_tps.relative or 0) > 0)
    slower = sum(1 for r in c.rows if r.decode_tps.significant and (r.decode_tps.relative or 0) < 0)
    summary = [f"{len({r.config_id for r in c.rows})} configurations matched by id, {len(c.only_a)} only in A, "
               f"{len(c.only_b)} only in B; decode tok/s significantly faster in {faster} and slower in {slower} "
               f"of {len(c.rows)} configuration x workload cells"]
    summary += [f"warning: {w}" for w in c.warnings]
    if c.env_changes:
        summary.append("environment: " + "; ".join(c.env_changes))
    blocks: list[Block] = [_changes_table(c.rows)]
    if c.positions:
        blocks.append(position_change_table(c.positions))
    if c.places:
        where = Table("Where each configuration was measured", ["config", "A", "B"])
        where.rows += [list(place) for place in c.places]
        blocks.append(where)
    blocks += _side_lists(c)
    return CompareDoc(f"specbench compare: A = {c.run_a} ({c.sweep_a})  ->  B = {c.run_b} ({c.sweep_b})",
                      tuple(summary), tuple(blocks))


def render_compare(comparison: Comparison, fmt: str = "txt") -> str:
    """The comparison as plain text (``txt``), Markdown (``md``) or one self-contained HTML page (``html``): the
    same content in each."""
    doc = compare_doc(comparison)
    if fmt == "md":
        return _compare_md(doc)
    if fmt == "html":
        return _compare_html(doc)
    if fmt != "txt":
        raise ValueError(f"unknown format {fmt!r} (one of {', '.join(COMPARE_FORMATS)})")
    out = [doc.title, *doc.summary, ""]
    for i, block in enumerate(doc.blocks):
        if isinstance(block, Table):
            out += [*([""] if i else []), *render_text_table(block)]
        else:
            out += ["", block.title, *(f"  {item}" for item in block.items)]
    return "\n".join(line.rstrip() for line in out) + "\n"


def _compare_html(doc: CompareDoc) -> str:
    """One self-contained page (the report's CSS, nothing fetched), the same content as the text."""
    from html import escape

    from specbench_tui.report.html import page_head, table_html

    parts = page_head(doc.title)
    for line in doc.summary:  # a NOT COMPARABLE warning in the alert box, as the report's SIMULATED
        alert = ' class="simulated"' if line.startswith("warning: NOT COMPARABLE") else ""
        parts.append(f"<p{alert}>{escape(line)}</p>")
    for block in doc.blocks:
        if isinstance(block, Table):
            parts.append(table_html(block))
        elif block.items:
            parts += [f"<h3>{escape(block.title)}</h3><ul>", *(f"<li>{escape(i)}</li>" for i in block.items), "</ul>"]
        else:
            parts.append(f"<p>{escape(block.title)}</p>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _compare_md(doc: CompareDoc) -> str:
    out = [f"# {_md_text(doc.title)}", "", *(f"- {_md_text(line)}" for line in doc.summary), ""]
    for block in doc.blocks:
        if isinstance(block, Table):  # its notes are text under it ("* significant" is no bullet)
            out += render_markdown_table(replace(block, notes=[_md_text(n) for n in block.notes]), level=2)
        elif block.items:
            out += [f"## {_md_text(block.title)}", "", *(f"- {_md_text(item)}" for item in block.items), ""]
        else:
            out += [_md_text(block.title), ""]
    return "\n".join(line.rstrip() for line in out).rstrip("\n") + "\n"


_MD_SPECIAL = re.compile(r"[\\`*<|]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])|\](?=\()")
"""What Markdown would read as markup in running text: emphasis, code, an HTML tag, a table cell's end, a link's
``](``; an underscore inside a word (``cuda_illegal``) is no emphasis and stays bare."""


def _md_text(text: str) -> str:
    """Text outside a table's cells as written (a name like ``a*b*`` or ``<x>`` is not markup)."""
    return _MD_SPECIAL.sub(lambda m: "\\" + m.group(0), text)


def _changes_table(rows: tuple[CompareRow, ...]) -> Table:
    """The table of changes, one row per cell compared."""
    table = Table("Changes per configuration and workload (B vs A)",
                  ["config", "workload", "tok/s A", "tok/s B", "change", "TTFT A", "TTFT B", "change",
                   "accept len A", "accept len B", "change"], align="llrrrrrrrrr")
    for r in rows:
        table.rows.append([
            r.config + (f" ({r.cut})" if r.cut else "") + (f" (saturated host: {r.host})" if r.host else ""),
            r.workload, _num(r.decode_tps.a), _num(r.decode_tps.b), _pct(r.decode_tps),
            fmt_seconds(r.ttft_s.a), fmt_seconds(r.ttft_s.b), _pct(r.ttft_s),
            _num(r.accept_length.a, 2), _num(r.accept_length.b, 2), _pct(r.accept_length),
        ])
    table.notes.append(f"* significant: |change| >= {SIGNIFICANT_CHANGE * 100:.0f}% and the per-repeat ranges "
                       "do not overlap (accept len: the 95% bootstrap intervals, where both sides have one; tok/s: "
                       "higher is better; TTFT: lower is better)")
    return table


def _side_lists(c: Comparison) -> list[Listing]:
    """The state changes, the configurations failing in both runs or on one side only, renamed ones and the
    workloads not in both."""
    out: list[Listing] = []
    if c.state_changes:
        out.append(Listing("State changes", tuple(f"{name}: {sa} -> {sb}" for name, sa, sb in c.state_changes)))
    if c.still_failing:
        out.append(Listing("Crashed or failed in both runs", tuple(
            f"{name}: {sa} in A ({sig_a}), {sb} in B ({sig_b})" for name, sa, sig_a, sb, sig_b in c.still_failing)))
    for title, configs in (("Only in A", c.only_a), ("Only in B", c.only_b)):
        if configs:
            out.append(Listing(title, tuple(f"{cfg.name} [{cfg.id}] {cfg.state}" for cfg in configs)))
    if c.renamed_or_changed:
        out.append(Listing("Same name, different id (argv or environment changed, so not compared): "
                           + ", ".join(c.renamed_or_changed)))
    if c.workloads_only:
        out.append(Listing("Workloads not in both runs: " + ", ".join(sorted(c.workloads_only))))
    return out
