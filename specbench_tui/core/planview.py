"""The plan as text, for ``specbench validate``."""

from __future__ import annotations

import shlex

from specbench_tui.core.plan import Plan


def format_plan(plan: Plan, launcher_argv: list[str] | None = None) -> str:
    sweep = plan.sweep
    runnable = plan.runnable()
    lines = [
        f"sweep {sweep.name}: {len(plan.configs)} configurations ({len(runnable)} to run, "
        f"{len(plan.configs) - len(runnable)} skipped) × {len(plan.workloads)} workloads",
        f"  file      {sweep.path}",
        f"  engine    {sweep.engine.profile} via {sweep.engine.launcher}"
        + (f" ({shlex.join(launcher_argv)})" if launcher_argv else ""),
        f"  GPU pool  {'all visible' if sweep.gpus is None else ','.join(map(str, sweep.gpus))}"
        + ("  (concurrent)" if sweep.concurrent else ""),
        f"  baseline  {sweep.baseline or '(none declared)'}",
        f"  results   {sweep.runs_dir}/<started>_{sweep.name}/",
        "",
    ]
    for config in plan.configs:
        status = f"SKIP: {config.skip_reason}" if config.skipped else f"{config.gpus_needed} GPU" + (
            "s" if config.gpus_needed > 1 else "")
        lines.append(f"{config.name}  [{config.id}]  {status}")
        if config.baseline:
            lines.append(f"    baseline  {config.baseline}")
        if config.env:
            lines.append("    env       " + " ".join(f"{k}={shlex.quote(v)}" for k, v in config.env))
        lines.append("    argv      " + shlex.join(config.argv))
        if config.fork_flags:
            lines.append("    fork-only " + " ".join(config.fork_flags))
    lines.append("")
    lines.append("workloads:")
    for w in plan.workloads:
        params = ", ".join(f"{k}={v}" for k, v in w.params)
        lines.append(f"  {w.name} ({w.kind}): max_new_tokens={w.max_new_tokens}, repeats={w.repeats}, "
                     f"warmup={w.warmup}, temperature={w.temperature}" + (f", {params}" if params else ""))
    for note in plan.notes:
        lines.append(f"note: {note}")
    return "\n".join(lines)
