"""The context ladder in the report: C* per speculative configuration (where its speedup over the matched
baseline falls below 1 along the prompt's length, with its bracket, estimate and the rungs it rests on) and the
per rung figures (decode tok/s, speedup at that rung, acceptance length and per draft position), for every
format (:mod:`specbench_tui.core.crossover.ladder` decides; this module says it)."""

from __future__ import annotations


from specbench_tui.core.acceptance import fmt_positions
from specbench_tui.core.crossover.ladder import LadderAnalysis, Rung
from specbench_tui.core.crossover.results import ALWAYS_PAYS, CROSSES, NEVER_PAYS, Crossover
from specbench_tui.core.load import AXIS_CONCURRENCY
from specbench_tui.core.results import RunAnalysis
from specbench_tui.report.tables import Table, clean_text


def _ladder(analysis: RunAnalysis) -> LadderAnalysis | None:
    ladder = analysis.ladder
    return ladder if isinstance(ladder, LadderAnalysis) and ladder.workloads else None


def c_star_line(c: Crossover) -> str:
    """``C* ladder: eagle3-s3 (8192, 12288]  ≈1.04e+04 tokens (4 of 12 rungs measured)``."""
    return f"C* {c.workload}: {c.config} {c.text}" + (" tokens" if c.estimate is not None else "")


def c_star_table(ladder: LadderAnalysis, workload: str) -> Table:
    table = Table(f"{workload}: where speculation stops paying along context (C*: the prompt tokens where the "
                  "speedup over the matched baseline falls below 1)",
                  ["configuration", "C* interval", "rungs measured", "evidence (rung: speedup)"], align="llll")
    for c in ladder.crossovers:
        if c.workload == workload:
            evidence = ", ".join(f"{e.load} {e.speedup:.2f}x" + ("?" if e.noisy else "")
                                 for e in sorted(c.evidence, key=lambda e: e.value) if e.speedup is not None)
            table.rows.append([c.config, c.text, f"{c.measured} of {c.grid}", evidence])
    if ladder.grid:
        table.notes.append(f"the search measured {ladder.measured} of the ladder's {ladder.grid} (configuration, rung) "
                           f"pairs ({ladder.measured / ladder.grid:.0%}); each rung and repeat had a filler of its "
                           "own; '?' marks a noisy or clamped rung")
    return table


def rungs_table(ladder: LadderAnalysis, workload: str) -> Table:
    table = Table(f"{workload}: per rung (decode tok/s and acceptance at each prompt length)",
                  ["configuration", "rung", "prompt tokens", "decode tok/s", "speedup", "accept len",
                   "acceptance by draft position", "note"], align="llrrrrll")
    for r in ladder.rungs:
        if r.point.workload == workload:
            p = r.point
            table.rows.append([
                p.config, p.load, f"{r.prompt_tokens:,.0f}" if r.prompt_tokens is not None else "-",
                f"{p.per_user_tps.median:.1f}" if p.per_user_tps else "-",
                f"{p.speedup.median:.2f}x" if p.speedup else ("base" if p.baseline is None else "-"),
                f"{p.accept_length:.2f}" if p.accept_length is not None else "-",
                fmt_positions(r.conditional) if r.conditional else "-", clean_text(p.noise or "")])
    return table


def _pays_below(c: Crossover, every: str, unit: str) -> str:
    """Where along its axis a crossover says speculation pays: ``under ≈10,144 prompt tokens``, ``at every load
    measured (to 16)`` and the like."""
    if c.status == CROSSES:
        at = c.estimate if c.estimate is not None else c.high
        return f"under ≈{at:,.0f} {unit}" if at is not None else "?"
    if c.status == ALWAYS_PAYS:
        return f"at every {every} measured (to {c.low:,.0f})" if c.low is not None else f"at every {every} measured"
    if c.status == NEVER_PAYS:
        return "nowhere measured"
    return c.status.replace("_", " ")


def map_table(analysis: RunAnalysis) -> Table | None:
    """The map of where each speculative configuration pays: along load (B*, on the load workloads' prompts) and
    along context (C*, one request at a time), one row per configuration and pair of workloads; None unless the
    run measured both axes. The corner where both are high was not measured: it pays there at most where both
    say it does."""
    ladder, load = _ladder(analysis), analysis.load
    if ladder is None or load is None or load.empty:
        return None
    table = Table("the map: where each configuration pays, along load and along context",
                  ["configuration", "along load (B*)", "along context (C*)", "pays"], align="llll")
    for along in (c for c in load.crossovers if c.axis == AXIS_CONCURRENCY):
        for ctx in (c for c in ladder.crossovers if c.config_id == along.config_id):
            load_text = _pays_below(along, "load", "requests in flight")
            ctx_text = _pays_below(ctx, "context", "prompt tokens")
            pays = "nowhere measured" if NEVER_PAYS in (along.status, ctx.status) else f"{load_text}, {ctx_text}"
            table.rows.append([along.config, f"{along.workload}: {along.text}", f"{ctx.workload}: {ctx.text}",
                               pays])
    table.notes.append("B* is measured on the load workload's prompts and C* one request at a time: long prompts "
                       "under load (the corner) were not measured; speculation pays there at most where both say it "
                       "does")
    return table if table.rows else None


def ladder_tables(analysis: RunAnalysis) -> list[Table]:
    ladder = _ladder(analysis)
    if ladder is None:
        return []
    tables = [t for w in ladder.workloads for t in (c_star_table(ladder, w.name), rungs_table(ladder, w.name))]
    the_map = map_table(analysis)
    return [the_map, *tables] if the_map is not None else tables


def ladder_md(analysis: RunAnalysis) -> list[str]:
    """The map (with a load axis) and the ladder's tables as Markdown (nothing for a run without a ladder)."""
    from specbench_tui.report.tables import render_markdown_table

    return [line for table in ladder_tables(analysis) for line in render_markdown_table(table, 2)]


def ladder_txt(analysis: RunAnalysis) -> list[str]:
    """The C* lines, then the ladder's tables (nothing for a run without a ladder)."""
    from specbench_tui.report.tables import render_text_table

    ladder = _ladder(analysis)
    if ladder is None:
        return []
    out = ["", *(c_star_line(c) for c in ladder.crossovers)]  # then the map (with a load axis) and the tables
    for table in ladder_tables(analysis):
        out += ["", *render_text_table(table)]
    return out


def _rung_json(r: Rung) -> dict[str, object]:
    p = r.point
    return {"config": p.config, "config_id": p.config_id, "workload": p.workload, "rung": p.load,
            "requested": r.requested, "context": p.value, "prompt_tokens": r.prompt_tokens, "clamped": r.clamped,
            "decode_tps": round(p.per_user_tps.median, 4) if p.per_user_tps else None,
            "speedup": round(p.speedup.median, 4) if p.speedup else None, "baseline": p.baseline,
            "accept_length": round(p.accept_length, 4) if p.accept_length is not None else None,
            "conditional": [round(v, 4) if v is not None else None for v in r.conditional],
            "repeats": p.repeats, "complete": p.complete, "noisy": p.noisy, "noise": p.noise}


def _map_json(analysis: RunAnalysis) -> list[dict[str, str]]:
    the_map = map_table(analysis)
    rows = the_map.rows if the_map is not None else []
    return [dict(zip(("config", "along_load", "along_context", "pays"), row)) for row in rows]


def ladder_json(analysis: RunAnalysis) -> dict[str, object] | None:
    """The report's ``ladder`` block: ``c_star`` per speculative configuration and workload (``interval``: the
    bracket (low, high] in prompt tokens), every rung's figures, and the search's cost."""
    ladder = _ladder(analysis)
    if ladder is None:
        return None
    return {
        "c_star": [{"config": c.config, "config_id": c.config_id, "workload": c.workload, "status": c.status,
                    "interval": [c.low, c.high], "estimate": round(c.estimate, 1) if c.estimate is not None else None,
                    "text": c.text, "rungs_measured": c.measured, "rungs": c.grid, "note": c.note,
                    "evidence": [{"rung": e.load, "context": e.value,
                                  "speedup": round(e.speedup, 4) if e.speedup is not None else None, "noisy": e.noisy}
                                 for e in sorted(c.evidence, key=lambda e: e.value)]}
                   for c in ladder.crossovers],
        "rungs": [_rung_json(r) for r in ladder.rungs],
        "map": _map_json(analysis),
        "measured": ladder.measured,
        "grid": ladder.grid,
    }
