"""How a sweep ended, said the same way by ``--headless`` and the TUI: the exit code, a line of counts and the
summary table.

Exit codes (``specbench run``, with or without the TUI):

- ``0``: the sweep completed and every configuration is done (or skipped by the plan or the user);
- ``1``: the sweep completed but at least one configuration crashed or failed (its results are still valid),
  or one returned no tokens to any request (ZERO OUTPUT: a server that answers nothing is broken, not fast), or
  the engine itself stopped on an unexpected error;
- ``2``: nothing ran: the sweep file is invalid, the run directory cannot be resumed, or pre-flight failed;
- ``3``: the run directory could not be written mid-run (full disk, permissions): the sweep stopped;
- ``4``: a stopped server's GPUs were still held after ``engine.gpu_release_timeout_s``: nothing more was
  launched (free the GPUs, then ``specbench run --resume RUN_DIR``);
- ``5``: the Ray cluster's head was lost mid-sweep (``[cluster] executor = "ray"``): nothing answered at its
  address for ``[cluster] head_timeout_s`` (10 s); the configurations in flight were interrupted (what they
  measured is kept) and the sweep stopped, within ``head_timeout_s`` + 40 s of the loss at most (typically
  ``head_timeout_s`` + 1-6 s); start a cluster again and continue with
  ``specbench run --resume RUN_DIR --ray-address NEW_HEAD:6379``;
- ``129``: stopped by SIGHUP; ``130``: stopped on request (Ctrl-C, SIGTERM, or quitting the TUI mid-sweep);
  continue with ``specbench run --resume RUN_DIR``.

The summary table is the run directory's :class:`~specbench_tui.core.ledger.Ledger` and its analysis
(:func:`specbench_tui.core.analysis.analyse`), so headless, the TUI and ``specbench report`` show the same
figures: per workload the median decode tok/s with its speedup over the matched baseline (over the items both
measured), the geometric mean of those speedups (none for a crashed or partial configuration), the median TTFT,
and the acceptance length weighted by verify steps (a median of per-request ratios would snap to values such as
128/32 = 4.00 and show the same figure for different configurations). A cell cut short reads ``partial k/n``.
A configuration whose every request returned no tokens says ZERO OUTPUT in its note.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from specbench_tui.core import verdicts
from specbench_tui.core.acceptance import accept_columns, run_engine
from specbench_tui.core.verdicts import partial_configs, zero_output_configs
from specbench_tui.core.results import ACCEPT_FROM_SERVER, FLAG_CRASH_CUT, FLAG_PARTIAL, CellRow, ConfigSummary, RunAnalysis
from specbench_tui.core.events import ConfigState, Event
from specbench_tui.core.ledger import Ledger
from specbench_tui.core.outcomes import ExitCode
from specbench_tui.core.records import Measurement

if TYPE_CHECKING:
    from specbench_tui.core.crossover.results import PointRow
    from specbench_tui.engine.orchestrator import SweepOutcome

EXIT_OK = ExitCode.OK
EXIT_CONFIG_FAILED = ExitCode.FAILED
EXIT_INVALID = ExitCode.INVALID
EXIT_STORE = ExitCode.STORE
EXIT_GPU_HELD = ExitCode.GPU_HELD
EXIT_CLUSTER_LOST = ExitCode.CLUSTER_LOST
EXIT_HANGUP = ExitCode.HANGUP
EXIT_INTERRUPTED = ExitCode.INTERRUPTED


def exit_code(outcome: SweepOutcome, *, hangup: bool = False, analysis: RunAnalysis | None = None) -> ExitCode:
    """The exit code documented in this module for a sweep that ended with ``outcome`` (and, given the run's
    ``analysis``, a configuration that returned no tokens at all counts as failed)."""
    if outcome.failure == "preflight":
        return EXIT_INVALID
    if outcome.failure == "gpu_release":
        return EXIT_GPU_HELD
    if outcome.failure == "cluster":
        return EXIT_CLUSTER_LOST
    if outcome.state == "failed":
        return EXIT_STORE if outcome.failure == "store" else EXIT_INVALID
    if outcome.state == "aborted":
        return EXIT_HANGUP if hangup else EXIT_INTERRUPTED
    if any(state in (ConfigState.CRASHED, ConfigState.FAILED) for state in outcome.states.values()):
        return EXIT_CONFIG_FAILED
    if analysis is not None and analysis.all_zero_output():
        return EXIT_CONFIG_FAILED
    return EXIT_OK


def run_analysis(plan_json: Mapping[str, object] | None, measurements: list[Measurement], events: list[Event]) -> RunAnalysis:
    """The analysis of a run directory's contents, through the one ledger every view reads."""
    return Ledger.from_run(plan_json, measurements, events).analyse()


def state_counts(outcome: SweepOutcome, analysis: RunAnalysis | None = None) -> str:
    """``3 done, 1 crashed, 2 pending``: how many configurations ended in each state, in a fixed order.

    Given the run's ``analysis``, the done ones that are not what "done" suggests are said inside it, with the
    words the header uses: ``9 done (1 zero-out, 1 partial)`` (a zero-out one answered with no tokens on some
    workload; a partial one had a workload cut short)."""
    states = {cid: getattr(state, "value", str(state)) for cid, state in outcome.states.items()}
    return verdicts.state_counts(states, zero_output_configs(analysis), partial_configs(analysis))


def ending_line(outcome: SweepOutcome, analysis: RunAnalysis | None = None) -> str:
    """One line saying how the sweep ended and what to do next (the reason carries the resume command)."""
    reason = f"; {outcome.reason}" if outcome.reason else ""
    return f"sweep {outcome.state}: {state_counts(outcome, analysis)}{reason}"


SIMULATED_NOTE = ("SIMULATED: the SGLang simulator on a scripted GPU box made these figures; they say nothing "
                  "about real hardware")


def summary_table(plan_json: Mapping[str, object] | None, measurements: list[Measurement], events: list[Event],
                  simulated: bool = False) -> str:
    """The table printed at the end, over the run directory (earlier runs of a resumed one included)."""
    return render_summary(run_analysis(plan_json, measurements, events), simulated)


def render_summary(analysis: RunAnalysis, simulated: bool = False) -> str:
    """One row per configuration; per workload the median decode tok/s and its speedup over the matched
    baseline, then the geometric mean, TTFT, acceptance and a note (all figures are the analysis's); a
    simulated run says so first."""
    workloads = [w.name for w in analysis.workloads]
    loaded = [w.name for w in analysis.load.workloads] if analysis.load is not None else []
    columns = accept_columns(run_engine(analysis.acceptance))
    head = ["configuration", "state", "start s", *workloads, *(f"{w} (load)" for w in loaded), "speedup",
            "TTFT ms", columns.client, "note"]
    rows = [head, *(_config_cells(analysis, config, workloads, loaded) for config in analysis.configs)]
    out = [("decode tok/s per workload (median over requests; Nx = speedup over the matched baseline, over the "
            "items both measured; partial k/n: cut short after k of n items); speedup: geometric mean over all "
            "workloads, none for a crashed or partial configuration; "
            + (columns.legend or "accept len: acceptance length (tokens per verify step), weighted by verify "
               "steps (^: from the server's counters, the engine gives none per request)")),
           *_aligned(rows, left={0, 1, len(head) - 1})]
    if loaded:
        out.insert(1, "(load): speedup at the lowest and the highest load measured (the baseline: its output tok/s) "
                      "and B*, the load from which it no longer pays; speedup, TTFT and accept len at the lowest load")
    if simulated:
        out.insert(0, SIMULATED_NOTE)
    out += _best_lines(analysis) + _crossover_lines(analysis)
    out += [f"note: {note}" for note in analysis.notes if not note.startswith("info:")]
    out += [f"earlier attempt: {note}" for note in analysis.history]
    return "\n".join(out)


def _config_cells(analysis: RunAnalysis, config: ConfigSummary, workloads: list[str], loaded: list[str]) -> list[str]:
    """One configuration's row of the table."""
    cells = [config.name, config.state, _fmt(config.startup_s, "{:.1f}")]
    measured_any = False
    for workload in workloads:
        cell = _workload_cell(analysis, config, workload)
        measured_any = measured_any or cell is not None
        cells.append(cell or _unmeasured(analysis.row(config.id, workload)))
    cells += [_load_cell(analysis, config, workload) for workload in loaded]
    cells += _totals_cells(analysis, config, measured_any, loaded)
    cells.append(_note(analysis, config.id, workloads)[:70])
    return cells


def _aligned(rows: list[list[str]], left: set[int]) -> list[str]:
    """The rows as lines of columns (those in ``left`` left-aligned, the rest right-aligned), a rule under the
    first."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(widths[i]) if i in left else cell.rjust(widths[i])
                       for i, cell in enumerate(row)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def _best_lines(analysis: RunAnalysis) -> list[str]:
    """The best configuration of each workload over all TPs (after a blank line), if any."""
    best = [b for b in analysis.best if b.tp is None]
    out = [""] if best else []
    for b in best:
        speed = f" ({b.speedup.median:.2f}x)" if b.speedup is not None else ""
        close = f", within the noise of {b.runner_up}" if b.close_call and b.runner_up else ""
        out.append(f"best {b.workload}: {b.config} {b.decode_tps.median:.1f} tok/s{speed}{close}")
    return out


def _crossover_lines(analysis: RunAnalysis) -> list[str]:
    """Each load crossover and how much of the grid was measured (after a blank line), if any."""
    load = analysis.load
    if load is None or not load.crossovers:
        return []
    out = [""]
    for c in load.crossovers:
        axis = "B*" if c.axis == "concurrency" else "rate*"
        out.append(f"{axis} {c.workload}: {c.config} {c.text} ({c.measured} of {c.grid} load points)")
    out.append(f"load points measured: {load.points_measured} of the full grid's {load.grid_points}")
    return out


def _unmeasured(row: CellRow | None) -> str:
    return "-" if row is None or not row.partial else f"- partial {row.items_measured}/{row.expected or '?'}"


def _workload_cell(analysis: RunAnalysis, config: ConfigSummary, workload: str) -> str | None:
    """``182.0 1.82x``: the median decode tok/s and the speedup of a sequential workload; None if unmeasured."""
    row = analysis.row(config.id, workload)
    if row is None or row.decode_tps is None:
        return None
    text = f"{row.decode_tps.median:.1f}"
    if row.speedup is not None and not config.is_baseline:
        text += f" {row.speedup.median:.2f}x"
    if row.partial:
        text += f" partial {row.items_measured}/{row.expected or '?'}"
    return text


def _load_points(analysis: RunAnalysis, config_id: str, workload: str) -> list[PointRow]:
    load = analysis.load
    if load is None:
        return []
    return [p for p in load.points_of(config_id, workload) if p.output_tps is not None]


def _load_cell(analysis: RunAnalysis, config: ConfigSummary, workload: str) -> str:
    """``2x@c1 -> 0.8x@c64 B* (16, 24]``: a load workload's speedup at its lowest and highest load measured and
    where it stops paying (a baseline: its output tok/s at both ends)."""
    points = _load_points(analysis, config.id, workload)
    if not points:
        return "-"
    ends = [points[0], points[-1]] if len(points) > 1 else [points[0]]
    speedups = [(p.speedup, p.load) for p in ends if p.speedup is not None]
    if config.is_baseline or len(speedups) < len(ends):
        text = " -> ".join(f"{p.output_tps.median:.0f} tok/s@{p.load}" for p in ends if p.output_tps is not None)
    else:
        text = " -> ".join(f"{speedup.median:.2f}x@{load}" for speedup, load in speedups)
    crossover = analysis.load.crossover(config.id, workload) if analysis.load is not None else None
    if crossover is not None and not config.is_baseline:
        text += f" B* {crossover.interval_text}"
    return text


def _totals_cells(analysis: RunAnalysis, config: ConfigSummary, measured_any: bool, loaded: list[str]) -> list[str]:
    """speedup, TTFT ms and accept: over the sequential workloads, else at the first load workload's lowest load
    (where the whole run is not otherwise summed up in one figure)."""
    totals = analysis.totals_for(config.id)
    if not measured_any and loaded and (points := _load_points(analysis, config.id, loaded[0])):
        low = points[0]
        speedup = "base" if config.is_baseline else _fmt(low.speedup.median if low.speedup else None, "{:.2f}x")
        ttft = low.ttft_s.p50 if low.ttft_s is not None else None
        return [speedup, _fmt(ttft * 1000 if ttft is not None else None, "{:.0f}"),
                _fmt(low.accept_length if low.accept_length is not None else low.server_accept_length, "{:.2f}")]
    speedup = ("base" if config.is_baseline and measured_any
               else _fmt(totals.speedup if totals else None, "{:.2f}x"))
    ttft = totals.ttft_s.median if totals and totals.ttft_s else None
    accept = totals.accept_length if totals else None
    marker = "^" if totals and totals.accept_method == ACCEPT_FROM_SERVER else ""
    return [speedup, _fmt(ttft * 1000 if ttft is not None else None, "{:.0f}"),
            f"{accept:.2f}{marker}" if accept is not None else "-"]


def _note(analysis: RunAnalysis, config_id: str, workloads: list[str]) -> str:
    """Why a row needs a second look: crash signature or reason, ZERO OUTPUT, errors, flags."""
    config = analysis.config(config_id)
    assert config is not None
    cells = [r for w in workloads if (r := analysis.row(config_id, w)) is not None]
    parts: list[str] = [config.signature or config.reason or ""] if config.state != "done" else []
    parts = _count_notes(cells, parts)
    flags = sorted({f for r in cells for f in r.flags}
                   - {"zero_output", "errors", "no_baseline", FLAG_PARTIAL, FLAG_CRASH_CUT})
    parts += [verdicts.flag_note(f) for f in flags]
    return "; ".join(p for p in parts if p)


def _count_notes(cells: list[CellRow], parts: list[str]) -> list[str]:
    """``parts`` with the cells' zero outputs (all of them: ZERO OUTPUT first) and errors said."""
    ok = sum(r.n_ok for r in cells)
    zero = sum(r.n_zero_output for r in cells)
    errors = sum(r.n_error for r in cells)
    crash_cut = sum(r.n_crash for r in cells)
    if zero and not ok:
        parts = [f"ZERO OUTPUT: all {zero} requests returned no tokens", *parts]
    elif zero:
        parts = [*parts, f"{zero} zero-output"]
    if errors:
        parts = [*parts, f"{errors} errors" + (f" ({crash_cut} cut by the crash)" if crash_cut else "")]
    return parts


def _fmt(value: float | None, pattern: str) -> str:
    return "-" if value is None else pattern.format(value)
