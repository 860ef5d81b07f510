"""The plan as text, for ``specbench validate``: every configuration with its id, GPUs and exact argv."""

from __future__ import annotations

import shlex

from specbench_tui.core.load import LoadSpec
from specbench_tui.core.plan import Plan, PlannedConfig


def _status(config: PlannedConfig) -> str:
    if config.skipped:
        return f"SKIP: {config.skip_reason}"
    return f"{config.gpus_needed} GPU" + ("s" if config.gpus_needed > 1 else "")


def _config_lines(config: PlannedConfig) -> list[str]:
    """A configuration's lines: name, id and status, then its baseline, environment, argv and fork-only flags."""
    lines = [f"{config.name}  [{config.id}]  {_status(config)}"]
    if config.baseline:
        lines.append(f"    baseline  {config.baseline}")
    if config.env:
        lines.append("    env       " + " ".join(f"{k}={shlex.quote(v)}" for k, v in config.env))
    lines.append("    argv      " + shlex.join(config.argv))
    if config.fork_flags:
        lines.append("    fork-only " + " ".join(config.fork_flags) + "  (not in the engine's release parser)")
    return lines


def _load_line(load: LoadSpec) -> str:
    """A workload's load axis: its axes, requests per point and search, and its SLO."""
    axes = []
    if load.concurrency:
        axes.append(f"concurrency {list(load.concurrency)} (closed loop)")
    if load.request_rate:
        axes.append(f"request_rate {list(load.request_rate)} req/s (open loop, arrival_seed={load.arrival_seed})")
    per = f"requests={load.requests}" if load.requests is not None else f"waves={load.waves} × concurrency"
    search = ("adaptive: the ends first, then towards each configuration's crossover"
              if load.search == "adaptive" else "grid: every point")
    return (f"    under load: {'; '.join(axes)}; {per} per point and repeat; search {search}"
            + (f"; SLO {load.slo.describe()}" if load.slo else ""))


def format_plan(plan: Plan, launcher_argv: list[str] | None = None) -> str:
    """A human-readable plan; argv lines are shell-quoted so they can be pasted into a terminal."""
    sweep = plan.sweep
    engine = sweep.engine
    runnable = plan.runnable()
    launch_extra = f"--host {engine.host} --port {engine.port_base}+"
    if engine.api_key_env:
        launch_extra += f" --api-key ${engine.api_key_env}"
    lines = [
        f"sweep {sweep.name}: {len(plan.configs)} configurations ({len(runnable)} to run, "
        f"{len(plan.configs) - len(runnable)} skipped) × {len(plan.workloads)} workloads",
        f"  file      {sweep.shown_path}",
        f"  engine    {engine.profile} via {engine.launcher}"
        + (f" ({shlex.join(launcher_argv)})" if launcher_argv else ""),
        f"  launch    each server's argv below, then {launch_extra}",
        f"  GPU pool  {'all visible' if sweep.gpus is None else ','.join(map(str, sweep.gpus))}"
        + ("  (concurrent)" if sweep.concurrent else ""),
        f"  baseline  {sweep.baseline or '(none declared)'}",
        f"  results   {sweep.runs_dir}/<started>_{sweep.name}/",
        "",
    ]
    for config in plan.configs:
        lines += _config_lines(config)
    lines.append("")
    lines.append("workloads:")
    for w in plan.workloads:
        params = ", ".join(f"{k}={list(v) if isinstance(v, tuple) else v}" for k, v in w.params)
        lines.append(f"  {w.name} ({w.kind}): max_new_tokens={w.max_new_tokens}, repeats={w.repeats}, "
                     f"warmup={w.warmup}, temperature={w.temperature}, cache={w.cache}"
                     + (f", {params}" if params else ""))
        if w.load is not None:
            lines.append(_load_line(w.load))
    for note in plan.notes:
        lines.append(note if ": warning: " in note else f"note: {note}")
    return "\n".join(lines)
