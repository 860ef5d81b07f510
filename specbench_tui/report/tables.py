"""Format-neutral tables of a run's analysis, and the number formats every output shares.

Each builder returns a :class:`Table` (title, headers, string cells, alignment); the text and Markdown
renderers lay it out, so the same figures appear the same way in every format.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from specbench_tui.core.acceptance import accept_columns, run_engine
from specbench_tui.core.engines import simulator
from specbench_tui.core.intervals import CellIntervals, Interval
from specbench_tui.core.results import (
    ACCEPT_FROM_SERVER,
    FLAG_BURST,
    FLAG_CLAMPED,
    FLAG_CRASH_CUT,
    FLAG_ERRORS,
    FLAG_FROM_MEMORY,
    FLAG_IDLE,
    FLAG_MISMATCH,
    FLAG_NO_BASELINE,
    FLAG_PARTIAL,
    FLAG_RETRACTED,
    FLAG_ZERO_OUTPUT,
    LOSSLESS_MISMATCH,
    LOSSLESS_PASS,
    CellRow,
    RunAnalysis,
    Spread,
    WorkloadInfo,
)

DASH = "-"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
FLAG_TEXT = {
    FLAG_ZERO_OUTPUT: "ZERO-OUTPUT",
    FLAG_ERRORS: "errors",
    FLAG_IDLE: "SPEC-IDLE",
    FLAG_MISMATCH: "MISMATCH",
    FLAG_CLAMPED: "clamped",
    FLAG_NO_BASELINE: "no-baseline",
    FLAG_BURST: "one-burst",
    FLAG_PARTIAL: "PARTIAL",
    FLAG_CRASH_CUT: "cut-by-crash",
    FLAG_FROM_MEMORY: "FROM-MEMORY",
    FLAG_RETRACTED: "retracted",
}
"""How each row flag reads in a table (upper case: the row's figures must not be trusted as they stand)."""

LEGEND = (
    "tok/s: median decode tok/s [min-max of per-repeat medians]; speedup: over the matched baseline at the "
    "same workload [range of per-repeat ratios]; accept len: acceptance length (tokens per verify step), weighted by verify steps "
    "(~: plain mean, no verify counts; ^: the server's counters over the workload, no per-request figure); log accept len: the server's own acceptance length from its decode log lines during the "
    "workload (L: over the server's whole life); n: ok/zero/error; "
    "**: best for the workload, *: best at its TP; SPEC-IDLE: acceptance < 1.05, speculation doing nothing; "
    "one-burst: the server sent each answer in one piece, so there is no decode rate; "
    "speedup pairs items: over the (item, repeat) pairs both the configuration and its baseline measured; "
    "partial (k of n items): the workload was cut short (crash, failure, kill), cut-by-crash: the request in "
    "flight when the server died, recorded as an error; "
    "ZERO-OUTPUT, MISMATCH, PARTIAL and crashed rows cannot be best, and crashed or partial configurations are in "
    "no geometric mean."
)


@dataclass
class Table:
    """A titled grid of strings; ``align`` holds one of "l" or "r" per column."""

    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    align: str = ""
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.align = (self.align or "").ljust(len(self.headers), "l")


# ---------------------------------------------------------------------------------------------- numbers


def clean_text(text: str, limit: int = 400) -> str:
    """Untrusted text (log lines, reasons, error texts) made safe to print: no ANSI escapes or control
    characters, line breaks and tabs as spaces, at most ``limit`` characters."""
    text = _CONTROL.sub("", _ANSI.sub("", text.replace("\n", " ").replace("\r", " ").replace("\t", " ")))
    return text if len(text) <= limit else text[: limit - 1] + "~"


def fmt_num(value: float | None, digits: int = 1) -> str:
    return DASH if value is None else f"{value:.{digits}f}"


def fmt_range(spread: Spread | None, digits: int = 1, suffix: str = "") -> str:
    """``121.9 [118.2-125.0]``; the range is left out when there was a single repeat."""
    if spread is None:
        return DASH
    text = f"{spread.median:.{digits}f}{suffix}"
    if spread.repeats > 1:
        text += f" [{spread.low:.{digits}f}-{spread.high:.{digits}f}]"
    return text


def fmt_state(row: CellRow) -> str:
    """The configuration's state, with the cell's coverage when it was cut short: ``crashed, partial (3 of 9
    items)``."""
    coverage = row.coverage_text()
    return f"{row.state}, {coverage}" if coverage and coverage != "not run" else row.state


def fmt_pm(interval: Interval | None, digits: int = 2) -> str:
    """A bootstrap interval beside its figure: `` ±0.04``, `` +0.05/-0.03`` when the two sides differ at
    ``digits``, `` ±0`` without variation, `` (n<5)`` with too few units for one; "" without an interval."""
    if interval is None:
        return ""
    if not interval.ok:
        return f" ({interval.why})" if interval.why else ""
    if interval.why:  # no variation: the interval is the figure itself
        return " ±0"
    minus, plus = f"{interval.minus:.{digits}f}", f"{interval.plus:.{digits}f}"
    return f" ±{plus}" if minus == plus else f" +{plus}/-{minus}"


def cell_intervals(analysis: RunAnalysis, row: CellRow) -> CellIntervals | None:
    """The row's bootstrap intervals, when the analysis carries them (a report's does; the TUI's does not)."""
    intervals = analysis.intervals
    return intervals.cell(row.config_id, row.workload) if intervals is not None else None


def fmt_speedup(row: CellRow, interval: Interval | None = None) -> str:
    """``2.41x [2.38-2.45] ±0.03``: median, range of the per-repeat ratios, and the bootstrap interval."""
    if row.speedup is None:
        return "no baseline" if row.speedup_note and row.speedup_note.startswith("no baseline") else DASH
    if row.speedup_note == "baseline":
        return "1.00x (base)"
    return fmt_range(row.speedup, 2, "x") + fmt_pm(interval, 2)


def fmt_seconds(value: float | None) -> str:
    """TTFT: milliseconds below a second, seconds above."""
    if value is None:
        return DASH
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def fmt_accept(row: CellRow, interval: Interval | None = None) -> str:
    if row.accept_length is None:
        return DASH
    return (f"{row.accept_length:.2f}" + {"mean": "~", ACCEPT_FROM_SERVER: "^"}.get(row.accept_method or "", "")
            + fmt_pm(interval, 2))


def fmt_log_accept(row: CellRow) -> str:
    text = fmt_num(row.server_log_accept_length, 2)
    return text + " L" if row.server_log_scope == "lifetime" else text


def fmt_counts(row: CellRow) -> str:
    return f"{row.n_ok}/{row.n_zero_output}/{row.n_error}"


def fmt_flags(row: CellRow) -> str:
    return " ".join(FLAG_TEXT.get(f, f) for f in row.flags)


def fmt_tp(tp: int | None) -> str:
    return DASH if tp is None else str(tp)


def describe_workload(workload: WorkloadInfo) -> str:
    parts = [workload.kind]
    if workload.temperature is not None:
        parts.append("greedy" if workload.temperature == 0 else f"temperature {workload.temperature:g}")
    if workload.repeats:
        parts.append(f"{workload.repeats} repeat{'s' if workload.repeats != 1 else ''}")
    return ", ".join(parts)


def best_marks(analysis: RunAnalysis) -> dict[tuple[str, str], str]:
    """(config id, workload) → ``**`` (best for the workload) or ``*`` (best at its TP)."""
    marks: dict[tuple[str, str], str] = {}
    for best in analysis.best:
        key = (best.config_id, best.workload)
        if best.tp is None:
            marks[key] = "**"
        else:
            marks.setdefault(key, "*")
    return marks


CACHE_TEXT = {
    "cold": "cold (the server was flushed before every measured request and load point)",
    "warm": "warm (kept between requests: a repeat may meet its own prefix and an n-gram drafter its own "
            "earlier output)",
    "mixed": "mixed (some measurements cold, some warm)",
}
"""How each cache policy reads in a report."""


class Cached(Protocol):
    """A row that may record its cache policy: a results cell or a load point."""

    @property
    def cache(self) -> str | None: ...


def cache_policy(rows: Sequence[Cached]) -> str | None:
    """The policy of the rows (cells or load points) that recorded one: cold, warm, mixed, or None."""
    policies = {r.cache for r in rows if r.cache}
    if not policies:
        return None
    return policies.pop() if len(policies) == 1 else "mixed"


def cache_note(rows: Sequence[Cached]) -> str | None:
    """``caches: cold (...)`` for a table's notes, None when no row recorded a policy."""
    return _caches_text(cache_policy(rows))


def _caches_text(policy: str | None) -> str | None:
    return f"caches: {CACHE_TEXT.get(policy, policy)}" if policy else None


def run_cache_policy(analysis: RunAnalysis) -> str | None:
    """The policy of a whole run: its cells and its load points together (:func:`cache_policy`)."""
    return cache_policy([*analysis.rows, *(analysis.load.points if analysis.load is not None else ())])


def policy_line(analysis: RunAnalysis) -> str | None:
    """``caches: cold (...)`` for a report's head, None when no measurement recorded a policy."""
    return _caches_text(run_cache_policy(analysis))


def row_notes(rows: Sequence[CellRow]) -> list[str]:
    """The notes a results table owes its reader: the cache policy, warm n-gram rows (drafted from memory, with
    their acceptance per repeat) and retracted requests."""
    notes = [n for n in [cache_note(rows)] if n]
    for row in rows:
        if row.from_memory:
            per = ", ".join(f"{r}: {a:.2f}" for r, a in row.accept_by_repeat)
            notes.append(f"FROM-MEMORY {row.config}: {row.from_memory} (warm n-gram: each repeat is drafted from the "
                         f"server's corpus of the earlier ones; acceptance by repeat {per}); measure it cold")
        if row.n_retracted:
            notes.append(f"retracted {row.config}: {row.n_retracted} request(s) retracted by the server (KV cache "
                         "full) are kept out of the latency figures")
    return notes


# ---------------------------------------------------------------------------------------------- tables


def results_table(analysis: RunAnalysis, workload: WorkloadInfo, nodes: dict[str, str] | None = None) -> Table:
    """Every configuration that ran (or crashed) on one workload, in plan order; ``nodes`` (config id -> where it
    was measured) adds a node column after the configuration's name."""
    marks = best_marks(analysis)
    columns = accept_columns(run_engine(analysis.acceptance))
    table = Table(f"Results: {workload.name} ({describe_workload(workload)})",
                  ["", "config", *(["node"] if nodes is not None else []), "TP", "budget", "state", "tok/s",
                   "speedup", "TTFT", columns.client, columns.server, "n", "lossless", "flags"],
                  align="ll" + ("l" if nodes is not None else "") + "lrlrrrrrrll")
    for row in analysis.rows_for(workload.name):
        if not row.measured and row.state not in ("crashed", "failed"):
            continue
        ci = cell_intervals(analysis, row)
        table.rows.append([
            marks.get((row.config_id, row.workload), ""), row.config,
            *([nodes.get(row.config_id) or DASH] if nodes is not None else []), fmt_tp(row.tp),
            DASH if row.budget is None else str(row.budget), fmt_state(row), fmt_range(row.decode_tps),
            fmt_speedup(row, ci.speedup if ci else None), fmt_seconds(row.ttft_s.median if row.ttft_s else None),
            fmt_accept(row, ci.accept_length if ci else None),
            fmt_log_accept(row), fmt_counts(row), fmt_lossless(row), fmt_flags(row),
        ])
    table.notes += row_notes(analysis.rows_for(workload.name))
    if columns.legend:
        table.notes.append(columns.legend)
    return table


def legend(analysis: RunAnalysis) -> str:
    """:data:`LEGEND`, with what the ± of the tables are (level, method, resamples, seed, units) when the
    analysis has bootstrap intervals."""
    return LEGEND + (f" {analysis.intervals.described}." if analysis.intervals is not None else "")


def fmt_lossless(row: CellRow) -> str:
    check = row.lossless
    if check.status == LOSSLESS_PASS:
        return f"ok {check.checked}/{check.checked}"
    if check.status == LOSSLESS_MISMATCH:
        return f"DIFF {len(check.mismatches)}/{check.checked}"
    if check.note and check.note.startswith("not applicable"):  # sampled: the check is for greedy decoding
        return "n/a (sampled)"
    return DASH


def best_table(analysis: RunAnalysis) -> Table:
    """The decision: per workload, the fastest configuration that did not crash, empty out or diverge."""
    table = Table("Best configuration per workload (and per TP)",
                  ["workload", "TP", "best", "tok/s", "speedup", "runner-up", "note"], align="llllrll")
    for best in analysis.best:
        row = analysis.row(best.config_id, best.workload)
        notes = []
        if best.close_call:
            notes.append("within the repeat spread of the runner-up")
        notes += [f"faster {b.config} barred: {b.why}" for b in best.barred]
        table.rows.append([
            best.workload, "all" if best.tp is None else str(best.tp), best.config, fmt_range(best.decode_tps),
            fmt_speedup(row, getattr(cell_intervals(analysis, row), "speedup", None)) if row else DASH,
            f"{best.runner_up} ({fmt_num(best.runner_up_tps.median if best.runner_up_tps else None)})"
            if best.runner_up else DASH,
            "; ".join(notes),
        ])
    return table


def problems_table(analysis: RunAnalysis) -> Table:
    """Crashed, failed and skipped configurations with their signature and reason."""
    table = Table("Crashed, failed and skipped configurations",
                  ["config", "id", "state", "signature", "reason", "workloads cut short or not run"])
    for config in analysis.problems():
        cut = [r for r in analysis.rows_of(config.id) if r.partial]
        table.rows.append([
            config.name, config.id, config.state, clean_text(config.signature or DASH),
            clean_text(config.reason or DASH),
            ", ".join([*(f"{r.workload}: {r.coverage_text()}" for r in cut),
                       *(w for w, _ in config.workloads_not_run)]) or DASH,
        ])
    return table


def lossless_table(analysis: RunAnalysis) -> Table:
    """Every output that differs from the baseline's under greedy sampling."""
    table = Table("Losslessness: outputs that differ from the baseline (greedy workloads)",
                  ["config", "workload", "item", "repeat", "output", "baseline output"], align="lllrll")
    checked = [r for r in analysis.rows if r.lossless.checked]
    for row in analysis.rows:
        for m in row.lossless.mismatches:
            table.rows.append([m.config, m.workload, m.item, str(m.repeat), m.output_sha, m.baseline_sha])
    total = sum(r.lossless.checked for r in checked)
    wrong = sum(len(r.lossless.mismatches) for r in checked)
    if total:
        table.notes.append(f"{total} outputs of speculative configurations compared with their baseline's; "
                           f"{wrong} differ.")
    else:
        table.notes.append("no outputs were compared (no greedy workload with output hashes and a baseline).")
    sampled = [f"{w.name} (temperature {w.temperature:g})" for w in analysis.workloads if w.temperature]
    if sampled:
        table.notes.append("not applicable to sampled workloads, whose outputs differ by chance: "
                           + ", ".join(sampled) + "; the check runs at temperature 0.")
    return table


def summary_line(analysis: RunAnalysis) -> str:
    counts: dict[str, int] = {}
    for config in analysis.configs:
        counts[config.state] = counts.get(config.state, 0) + 1
    states = ", ".join(f"{n} {state}" for state, n in counts.items())
    loaded = len(analysis.load.workloads) if analysis.load is not None else 0
    under_load = f" + {loaded} under load" if loaded else ""
    return f"{len(analysis.configs)} configurations ({states}) x {len(analysis.workloads)} workloads{under_load}"


ENV_PACKAGES = ("sglang", "sgl-kernel", "torch", "triton", "flashinfer-python", "transformers", "vllm")
"""Flat keys read from a hand-made environment document; a fingerprint lists the packages its engine named instead."""
MAX_ENV_PACKAGES = 16
"""Recorded package versions shown at most (an engine names fewer; a hand-edited file may hold thousands)."""


def env_facts(env: Mapping[str, object] | None) -> dict[str, str]:
    """The facts of the run's environment document that explain a change in speed: GPUs, driver, CUDA, package versions.

    Reads the fingerprint written by the engine (``gpus.names``, ``gpus.driver_version``,
    ``server_python.packages``…) and, for hand-made files, flat keys (``driver``, ``cuda``, ``sglang``…).
    """
    if not isinstance(env, dict):
        return {}
    facts = {**_gpu_facts(env.get("gpus")), **_package_facts(env.get("server_python"))}
    for key in ("driver", "cuda", "compute_capability", *ENV_PACKAGES):
        value = env.get(key)
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            facts.setdefault(key, str(value))
    host = env.get("host")
    if isinstance(host, dict) and host.get("name"):
        facts["host"] = str(host["name"])
    return {k: clean_text(v, 120) for k, v in facts.items()}


def _gpu_facts(gpus: object) -> dict[str, str]:
    """The GPUs (``2x NAME``), driver, CUDA and SM of a fingerprint's ``gpus``, or of a hand-made list of GPUs."""
    facts: dict[str, str] = {}
    if isinstance(gpus, dict):
        names = gpus.get("names")
        if isinstance(names, dict) and names:
            facts["gpus"] = ", ".join(f"{count}x {name}" for name, count in names.items())
        for key, label in (("driver_version", "driver"), ("cuda_driver_version", "cuda"), ("sm", "sm")):
            value = gpus.get(key)
            if value not in (None, "", []):
                facts[label] = ",".join(map(str, value)) if isinstance(value, list) else str(value)
    elif isinstance(gpus, list) and gpus:
        listed = [str(g.get("name", "?")) if isinstance(g, dict) else str(g) for g in gpus]
        facts["gpus"] = ", ".join(f"{listed.count(n)}x {n}" for n in dict.fromkeys(listed))
    return facts


def _package_facts(server: object) -> dict[str, str]:
    """The package versions the run's engine named (EngineProfile.python_packages), in its order, and torch's
    CUDA."""
    packages = server.get("packages") if isinstance(server, dict) else None
    if not isinstance(server, dict) or not isinstance(packages, dict):
        return {}
    found = [(name, version) for name, version in packages.items() if isinstance(name, str) and version]
    facts = {clean_text(name, 40): str(version) for name, version in found[:MAX_ENV_PACKAGES]}
    if server.get("torch_cuda"):
        facts["torch cuda"] = str(server["torch_cuda"])
    return facts


SIMULATED_LABEL = "SIMULATED (the SGLang simulator on a scripted GPU box: no real hardware)"


def env_simulated(env: Mapping[str, object] | None) -> bool:
    """Whether the environment document describes a simulated run (the simulator's servers, or the fake GPU box)."""
    if not isinstance(env, dict):
        return False
    gpus = env.get("gpus")
    extra = env.get("extra")
    return bool(env.get("simulated") is True
                or (isinstance(gpus, dict) and (gpus.get("backend") == "fake" or gpus.get("simulated") is True))
                or (isinstance(extra, dict) and extra.get("launcher") == simulator.LAUNCHER))


def env_line(env: Mapping[str, object] | None) -> str | None:
    """GPUs, driver and versions from the environment document on one line, whatever of them it has; a simulated run says
    so first (its GPU names and driver are the fake box's inventions)."""
    facts = env_facts(env)
    if env_simulated(env):
        shown = " | ".join(v if k == "gpus" else f"{k} {v}" for k, v in facts.items() if k in ("gpus", "host"))
        return SIMULATED_LABEL + (f": {shown}" if shown else "")
    if not facts:
        return None
    return " | ".join(v if k == "gpus" else f"{k} {v}" for k, v in facts.items())


# ---------------------------------------------------------------------------------------------- layout


def render_text_table(table: Table, indent: str = "") -> list[str]:
    """A table as aligned plain-text lines (title, header, rule, rows, notes)."""
    lines = [table.title, "-" * len(table.title)]
    if not table.rows:
        lines.append(indent + "(none)")
    else:
        widths = [max(len(h), *(len(r[i]) for r in table.rows)) for i, h in enumerate(table.headers)]

        def fmt(cells: Sequence[str]) -> str:
            out = [c.rjust(w) if a == "r" else c.ljust(w) for c, w, a in zip(cells, widths, table.align)]
            return (indent + "  ".join(out)).rstrip()

        lines.append(fmt(table.headers))
        lines.append(fmt(["-" * w for w in widths]))
        lines += [fmt(r) for r in table.rows]
    lines += [indent + n for n in table.notes]
    return lines


def _md_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("*", "\\*").replace("\n", " ") or " "


def render_markdown_table(table: Table, level: int = 3) -> list[str]:
    """A table in GitHub-flavoured Markdown."""
    lines = [f"{'#' * level} {table.title}", ""]
    if not table.rows:
        lines.append("(none)")
    else:
        lines.append("| " + " | ".join(_md_cell(h) for h in table.headers) + " |")
        lines.append("|" + "|".join("---:" if a == "r" else "---" for a in table.align) + "|")
        lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table.rows]
    if table.notes:
        lines.append("")
        lines += table.notes
    lines.append("")
    return lines
