"""The report's crash boundaries: between which budgets each algorithm stops crashing, and what
``--bisect-crashes`` found there (:mod:`specbench_tui.core.bisect`)."""

from __future__ import annotations


from specbench_tui.core.bisect import FACTS_FILE, Fact, boundaries, boundary_lines, facts_from_json
from specbench_tui.report.load import LoadedRun
from specbench_tui.rundir.files import read_object
from specbench_tui.rundir.store import StoreError


def bisect_facts(run: LoadedRun) -> list[Fact]:
    """The run's bisected boundaries (none when it was never bisected or the file is unreadable)."""
    try:
        return facts_from_json(read_object(run.path, FACTS_FILE))
    except (StoreError, OSError):
        return []


def boundary_txt(run: LoadedRun) -> list[str]:
    """``Crash boundaries`` and a line per boundary (nothing when the run has none)."""
    lines = boundary_lines(run.analysis.configs, bisect_facts(run))
    return ["", "Crash boundaries", "----------------", *lines] if lines else []


def boundary_md(run: LoadedRun) -> list[str]:
    """The same as Markdown: a heading and a bullet per boundary, its bisection nested under it."""
    lines = boundary_lines(run.analysis.configs, bisect_facts(run))
    bullets = [f"  - {line.strip()}" if line.startswith(" ") else f"- {line}" for line in lines]
    return ["## Crash boundaries", "", *bullets, ""] if lines else []


def boundary_json(run: LoadedRun) -> list[dict[str, object]]:
    """Each boundary as JSON (``between``: the budgets not measured; ``bisected``: the bisection's fact or null)."""
    facts = {(f.algorithm, f.tp): f for f in bisect_facts(run)}
    out: list[dict[str, object]] = []
    for b in boundaries(run.analysis.configs):
        fact = facts.get((b.algorithm, b.tp))
        out.append({"algorithm": b.algorithm, "tp": b.tp, "crashed": b.crashed, "works": b.works,
                    "crashed_config": b.crashed_config, "works_config": b.works_config, "between": list(b.between),
                    "line": b.line(), "bisected": fact.to_json() if fact is not None else None})
    return out
