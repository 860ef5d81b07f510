"""One configuration × workload cell of an analysis: its spreads, acceptance, paired speedup, losslessness,
coverage and flags (:func:`cell_row`), and the best cell of each workload (:func:`best_cells`). The rules are
:mod:`specbench_tui.core.analysis`'s docstring. Pure: no I/O, no Textual.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import TypeGuard

from specbench_tui.core.records import (
    CACHE_WARM,
    ERROR_KIND_CRASH,
    STATUS_ERROR,
    STATUS_OK,
    STATUS_ZERO_OUTPUT,
    Measurement,
)
from specbench_tui.core.results import (
    ACCEPT_FROM_SERVER,
    COVERAGE_COMPLETE,
    COVERAGE_NONE,
    COVERAGE_NOT_RUN,
    COVERAGE_PARTIAL,
    COVERAGE_RUNNING,
    FAILED_STATES,
    FROM_MEMORY_TEXT,
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
    IDLE_ACCEPTANCE,
    LOSSLESS_MISMATCH,
    LOSSLESS_NA,
    LOSSLESS_NOT_CHECKED,
    LOSSLESS_PASS,
    Barred,
    Best,
    CellRow,
    ConfigSummary,
    LosslessCheck,
    Mismatch,
    Spread,
    WorkloadInfo,
)

def _per_repeat_medians(ok: list[Measurement], attr: str) -> dict[int, float]:
    by_repeat: dict[int, list[float]] = defaultdict(list)
    for m in ok:
        value = getattr(m, attr)
        if isinstance(value, (int, float)) and math.isfinite(value):
            by_repeat[m.repeat].append(float(value))
    return {r: statistics.median(v) for r, v in sorted(by_repeat.items())}


def spread_of(ok: list[Measurement], attr: str) -> Spread | None:
    """Median of ``attr`` over the measurements, with the min..max of the per-repeat medians."""
    values = [float(getattr(m, attr)) for m in ok
              if isinstance(getattr(m, attr), (int, float)) and math.isfinite(getattr(m, attr))]
    if not values:
        return None
    per_repeat = _per_repeat_medians(ok, attr)
    return Spread(statistics.median(values), min(per_repeat.values()), max(per_repeat.values()), len(per_repeat))


def acceptance(ok: list[Measurement]) -> tuple[float | None, str | None]:
    """Mean acceptance length weighted by verify steps, else the plain mean; with the method used."""
    weighted = [(m.accept_length, m.verify_ct) for m in ok
                if m.accept_length is not None and m.verify_ct is not None and m.verify_ct > 0]
    if weighted:
        total = sum(v for _, v in weighted)
        return sum(a * v for a, v in weighted) / total, "verify-weighted"
    plain = [m.accept_length for m in ok if m.accept_length is not None]
    if plain:
        return statistics.fmean(plain), "mean"
    return None, None


def paired_speedup(ok: list[Measurement], base_ok: list[Measurement]) -> tuple[float | None, list[float], int]:
    """Median tok/s over the (item, repeat) pairs both measured, over the baseline's median on the same pairs;
    with the same ratio per repeat and how many pairs there were. The one speedup computation: cells and load
    points (:mod:`specbench_tui.core.crossover`) both use it."""
    mine = {(m.item, m.repeat): float(m.decode_tps) for m in ok if _finite(m.decode_tps)}
    theirs = {(m.item, m.repeat): float(m.decode_tps) for m in base_ok if _finite(m.decode_tps)}
    pairs = sorted(mine.keys() & theirs.keys())
    if not pairs:
        return None, [], 0
    denominator = statistics.median(theirs[k] for k in pairs)
    if denominator <= 0:
        return None, [], len(pairs)
    central = statistics.median(mine[k] for k in pairs) / denominator
    ratios: list[float] = []
    for repeat in sorted({r for _, r in pairs}):
        keys = [k for k in pairs if k[1] == repeat]
        below = statistics.median(theirs[k] for k in keys)
        if below > 0:
            ratios.append(statistics.median(mine[k] for k in keys) / below)
    return central, ratios, len(pairs)


def _speedup(ok: list[Measurement], base_ok: list[Measurement]) -> tuple[Spread | None, int]:
    """:func:`paired_speedup` as a :class:`Spread` (its range: the per-repeat ratios)."""
    central, ratios, n_pairs = paired_speedup(ok, base_ok)
    if central is None:
        return None, n_pairs
    pairs = range(n_pairs)
    if not ratios:
        return Spread(central, central, central, 0), len(pairs)
    return Spread(central, min(min(ratios), central), max(max(ratios), central), len(ratios)), len(pairs)


def _finite(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _lossless(config: ConfigSummary, workload: WorkloadInfo, cell: list[Measurement],
              baseline: ConfigSummary | None, base_cell: list[Measurement]) -> LosslessCheck:
    if config.is_baseline or not config.speculative:
        return LosslessCheck(LOSSLESS_NA)
    hashed = [m for m in cell if m.status == STATUS_OK and m.output_sha]
    if not cell:
        return LosslessCheck(LOSSLESS_NOT_CHECKED, note="no measurements")
    if workload.temperature is None:
        return LosslessCheck(LOSSLESS_NOT_CHECKED, note="sampling temperature unknown")
    if workload.temperature != 0:  # sampled outputs differ by chance: the check applies to greedy decoding only
        return LosslessCheck(LOSSLESS_NA, note=f"not applicable: sampled at temperature {workload.temperature:g}")
    if baseline is None:
        return LosslessCheck(LOSSLESS_NOT_CHECKED, note="no baseline")
    if not hashed:
        return LosslessCheck(LOSSLESS_NOT_CHECKED, note="no output hashes recorded")
    checked, mismatches = _compare_outputs(config, workload, hashed, base_cell)
    if checked == 0:
        return LosslessCheck(LOSSLESS_NOT_CHECKED, note=f"baseline '{baseline.name}' has no outputs to compare")
    return LosslessCheck(LOSSLESS_MISMATCH if mismatches else LOSSLESS_PASS, checked, tuple(mismatches))


def _compare_outputs(config: ConfigSummary, workload: WorkloadInfo, hashed: list[Measurement],
                     base_cell: list[Measurement]) -> tuple[int, list[Mismatch]]:
    """Each hashed output against the baseline's for the same item and repeat (else any repeat of the item): how
    many had one to compare with, and those that differ."""
    exact = {(m.item, m.repeat): m.output_sha for m in base_cell if m.status == STATUS_OK and m.output_sha}
    any_repeat: dict[str, str] = {}
    for (item, _), sha in sorted(exact.items()):
        any_repeat.setdefault(item, sha)
    checked = 0
    mismatches: list[Mismatch] = []
    for m in sorted(hashed, key=lambda m: (m.item, m.repeat)):
        reference = exact.get((m.item, m.repeat)) or any_repeat.get(m.item)
        if reference is None:
            continue
        checked += 1
        if reference != m.output_sha:
            mismatches.append(Mismatch(config.name, workload.name, m.item, m.repeat, str(m.output_sha), reference))
    return checked, mismatches


def _coverage(config: ConfigSummary, workload: WorkloadInfo, cell: list[Measurement], n_crash: int,
              not_run_why: Mapping[str, str], current_workload: str | None, expected: int | None) -> str:
    not_run = not_run_why.get(workload.name)
    if not cell:
        return COVERAGE_NOT_RUN if not_run else COVERAGE_NONE
    items = len(cell) - n_crash
    if current_workload == workload.name and config.state in ("launching", "ready", "running"):
        return COVERAGE_RUNNING
    if n_crash or not_run or (expected is not None and items < expected):
        return COVERAGE_PARTIAL
    return COVERAGE_COMPLETE


def cell_row(config: ConfigSummary, workload: WorkloadInfo, cell: list[Measurement],
             baseline: ConfigSummary | None, base_cell: list[Measurement], not_run_why: Mapping[str, str],
             current_workload: str | None, expected: int | None, *, include_retracted: bool = False) -> CellRow:
    """The cell of ``config`` × ``workload`` from its measurements and its baseline's; ``not_run_why``: why each
    workload of the configuration was not run, ``current_workload``: the one its events say is running. A request
    the server retracted is kept out of the latency figures unless ``include_retracted``."""
    ok = [m for m in cell if m.status == STATUS_OK]
    n_zero, n_error, n_crash = _failure_counts(cell)
    coverage = _coverage(config, workload, cell, n_crash, not_run_why, current_workload, expected)
    accept, method = _cell_acceptance(config, workload, ok)
    tps = spread_of(ok, "decode_tps")
    speedup, note, paired = _speedup_and_note(config, workload, ok, tps, baseline, base_cell)
    lossless = _lossless(config, workload, cell, baseline, base_cell)
    log_value, log_scope = _server_log_accept(config, workload, cell)
    n_clamped = sum(1 for m in cell if m.clamped)
    cache = cache_of(cell)
    from_memory = FROM_MEMORY_TEXT if cache in (CACHE_WARM, "mixed") and drafts_from_memory(config) else None
    n_retracted = sum(1 for m in ok if m.retracted)
    flags = _flags(config, workload, cell, ok, accept, (coverage, n_crash, n_zero, n_error, n_clamped),
                   lossless, speedup, note)
    flags += [flag for present, flag in ((from_memory, FLAG_FROM_MEMORY), (n_retracted, FLAG_RETRACTED)) if present]
    timed = ok if include_retracted else [m for m in ok if not m.retracted]
    errors = tuple(dict.fromkeys(str(m.error) for m in cell if m.status == STATUS_ERROR and m.error))[:3]
    return CellRow(
        config_id=config.id, config=config.name, workload=workload.name, algorithm=config.algorithm, tp=config.tp,
        budget=config.budget, state=config.state, n_ok=len(ok), n_zero_output=n_zero, n_error=n_error,
        n_clamped=n_clamped, decode_tps=tps, ttft_s=spread_of(timed, "ttft_s"),
        accept_length=accept, accept_method=method, server_log_accept_length=log_value, server_log_scope=log_scope,
        speedup=speedup, speedup_note=note, lossless=lossless, flags=tuple(flags), errors=errors,
        n_crash=n_crash, expected=expected, coverage=coverage,
        not_run=not_run_why.get(workload.name) if not cell else None, paired=paired,
        cache=cache, from_memory=from_memory, n_retracted=n_retracted, accept_by_repeat=_accept_by_repeat(ok),
    )


def _failure_counts(cell: list[Measurement]) -> tuple[int, int, int]:
    """Zero-output answers, errors (of any status but OK and zero-output) and requests a crash cut."""
    n_zero = sum(1 for m in cell if m.status == STATUS_ZERO_OUTPUT)
    n_error = sum(1 for m in cell if m.status == STATUS_ERROR or m.status not in (STATUS_OK, STATUS_ZERO_OUTPUT))
    n_crash = sum(1 for m in cell if m.status == STATUS_ERROR and m.error_kind == ERROR_KIND_CRASH)
    return n_zero, n_error, n_crash


def _cell_acceptance(config: ConfigSummary, workload: WorkloadInfo,
                     ok: list[Measurement]) -> tuple[float | None, str | None]:
    """The cell's acceptance from its requests; where they report none (vLLM), the server's own counters over the
    workload stand in."""
    accept, method = acceptance(ok)
    server_accept = dict(config.workload_log_accept).get(workload.name)
    if accept is None and ok and server_accept is not None:
        return server_accept, ACCEPT_FROM_SERVER
    return accept, method


def _server_log_accept(config: ConfigSummary, workload: WorkloadInfo,
                       cell: list[Measurement]) -> tuple[float | None, str | None]:
    """The server log's acceptance for the cell and its scope (``workload`` or ``lifetime``): only where this
    workload was measured, as a lifetime figure on a workload that never ran would be a number without
    measurements behind it."""
    if not cell:
        return None, None
    per_workload = dict(config.workload_log_accept).get(workload.name)
    if per_workload is not None:
        return per_workload, "workload"
    log_value = config.server_log_accept_length
    return log_value, (None if log_value is None else "lifetime")


def cache_of(cell: list[Measurement]) -> str | None:
    """The cache policy the measurements ran under: one of them, ``mixed``, or None when none recorded one."""
    policies = {m.held_cache for m in cell if m.cache}
    if not policies:
        return None
    return policies.pop() if len(policies) == 1 else "mixed"


def drafts_from_memory(config: ConfigSummary) -> bool:
    """Whether the configuration drafts from what its server has seen (SGLang's NGRAM, llama.cpp's ngram types):
    measured warm, its repeats read their own earlier outputs."""
    return config.speculative and "ngram" in config.algorithm.lower()


def _accept_by_repeat(ok: list[Measurement]) -> tuple[tuple[int, float], ...]:
    by_repeat: dict[int, list[Measurement]] = defaultdict(list)
    for m in ok:
        by_repeat[m.repeat].append(m)
    out = []
    for repeat, group in sorted(by_repeat.items()):
        value, _ = acceptance(group)
        if value is not None:
            out.append((repeat, value))
    return tuple(out)


def _speedup_and_note(config: ConfigSummary, workload: WorkloadInfo, ok: list[Measurement], tps: Spread | None,
                      baseline: ConfigSummary | None, base_cell: list[Measurement]
                      ) -> tuple[Spread | None, str | None, int]:
    """The paired speedup over the baseline, or why there is none; with the pairs it rests on."""
    if not ok:
        return None, None, 0
    if tps is None:
        return None, "no decode rate", 0  # the answers came in one burst each (FLAG_BURST): nothing to compare
    if config.is_baseline:
        return Spread(1.0, 1.0, 1.0, tps.repeats), "baseline", 0
    if config.baseline is None:
        return None, "no baseline declared", 0
    if baseline is None:
        return None, f"no baseline: '{config.baseline}' is not in this run", 0
    base_ok = [m for m in base_cell if m.status == STATUS_OK]
    speedup, paired = _speedup(ok, base_ok)
    note = None
    if speedup is None and any(_finite(m.decode_tps) for m in base_ok):
        note = f"no baseline: '{baseline.name}' measured none of the same items of {workload.name}"
    elif speedup is None:
        note = (f"no baseline: '{baseline.name}' {baseline.state}, no measurements of {workload.name}"
                if baseline.state in FAILED_STATES else
                f"no baseline: '{baseline.name}' has no ok measurements of {workload.name}")
    return speedup, note, paired


def _flags(config: ConfigSummary, workload: WorkloadInfo, cell: list[Measurement], ok: list[Measurement],
           accept: float | None, counts: tuple[str, int, int, int, int], lossless: LosslessCheck,
           speedup: Spread | None, note: str | None) -> list[str]:
    """The cell's flags, in their fixed order; ``counts``: (coverage, crash cuts, zero outputs, errors, clamped)."""
    coverage, n_crash, n_zero, n_error, n_clamped = counts
    flags: list[str] = []
    for present, flag in ((coverage == COVERAGE_PARTIAL, FLAG_PARTIAL), (n_crash, FLAG_CRASH_CUT),
                          (n_zero, FLAG_ZERO_OUTPUT), (n_error, FLAG_ERRORS)):
        if present:
            flags.append(flag)
    if _idle_draft(config, workload, ok, accept):
        flags.append(FLAG_IDLE)
    if lossless.status == LOSSLESS_MISMATCH:
        flags.append(FLAG_MISMATCH)
    if n_clamped:
        flags.append(FLAG_CLAMPED)
    if ok and speedup is None and not config.is_baseline and note != "no decode rate":
        flags.append(FLAG_NO_BASELINE)
    if ok and all(map(_in_one_burst, ok)):
        flags.append(FLAG_BURST)
    return flags


def _idle_draft(config: ConfigSummary, workload: WorkloadInfo, ok: list[Measurement], accept: float | None) -> bool:
    """A speculative configuration whose acceptance (or, without one, its server log's for the workload) is
    below what drafting nothing gives."""
    if not config.speculative or config.is_baseline:
        return False
    per_workload_log = dict(config.workload_log_accept).get(workload.name)
    shown = accept if accept is not None else (per_workload_log if ok else None)
    return shown is not None and shown < IDLE_ACCEPTANCE


def _in_one_burst(m: Measurement) -> bool:
    """An answer of several tokens that came all at once (no decode rate: its last token within 1 ms of its
    first)."""
    return (m.decode_tps is None and m.ttft_s is not None and m.e2e_s is not None and m.e2e_s - m.ttft_s < 1e-3
            and (m.completion_tokens or 0) > 1)


# ------------------------------------------------------------------------------------------------ best


def _why_barred(row: CellRow) -> str | None:
    if row.state in FAILED_STATES:
        return row.state
    if row.coverage in (COVERAGE_PARTIAL, COVERAGE_RUNNING):
        return row.coverage_text()
    if row.n_zero_output:
        return f"{row.n_zero_output} zero-output"
    if row.lossless.status == LOSSLESS_MISMATCH:
        return f"lossless mismatch ({len(row.lossless.mismatches)}/{row.lossless.checked})"
    return None


def best_cells(rows: list[CellRow], configs: list[ConfigSummary], workloads: list[WorkloadInfo]) -> list[Best]:
    """The fastest eligible cell of each workload, over all TPs and per TP, with the faster ones barred and why."""
    out: list[Best] = []
    cut: dict[str, str] = {}
    for row in rows:
        if row.partial and row.config_id not in cut:
            cut[row.config_id] = f"partial on {row.workload}"

    def why_barred(row: CellRow) -> str | None:
        return _why_barred(row) or cut.get(row.config_id)

    tps_values = sorted({c.tp for c in configs if c.tp is not None})
    for workload in workloads:
        measured = [r for r in rows if r.workload == workload.name and r.decode_tps is not None]
        groups: list[tuple[int | None, list[CellRow]]] = [(None, measured)]
        if len(tps_values) > 1:
            groups += [(tp, [r for r in measured if r.tp == tp]) for tp in tps_values]
        for tp, group in groups:
            best = _best_of(workload.name, tp, group, why_barred)
            if best is not None:
                out.append(best)
    return out


def _best_of(workload: str, tp: int | None, group: list[CellRow],
             why_barred: Callable[[CellRow], str | None]) -> Best | None:
    """The fastest eligible row of ``group`` (rows with a decode figure), its runner-up and the faster rows
    barred; None when none is eligible."""
    # ``group`` holds only rows with a decode figure; mypy does not narrow through the filter.
    ranked = sorted(group, key=lambda r: (-r.decode_tps.median, r.config))  # type: ignore[union-attr]
    eligible = [r for r in ranked if why_barred(r) is None]
    if not eligible:
        return None
    winner = eligible[0]
    assert winner.decode_tps is not None
    barred = tuple(Barred(r.config, r.decode_tps.median if r.decode_tps else None, why_barred(r) or "")
                   for r in ranked if why_barred(r) and r.decode_tps
                   and r.decode_tps.median > winner.decode_tps.median)
    runner = eligible[1] if len(eligible) > 1 else None
    return Best(
        workload=workload, tp=tp, config_id=winner.config_id, config=winner.config,
        decode_tps=winner.decode_tps, speedup=winner.speedup,
        runner_up=runner.config if runner else None,
        runner_up_tps=runner.decode_tps if runner else None,
        close_call=bool(runner and runner.decode_tps and runner.decode_tps.overlaps(winner.decode_tps)
                        and winner.decode_tps.repeats > 1),
        barred=barred,
    )
