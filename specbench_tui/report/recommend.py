"""``specbench recommend RUN``: per workload and band the winner as the exact server command, the SGLang recipe per
band, vLLM's per-batch-size draft-token schedule, and a confirm sweep written beside the run
(:mod:`specbench_tui.core.recommend` decides; this module says it and writes the sweep)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path

from specbench_tui.core.derived import DeriveError, derived_doc, pinned_block, to_toml
from specbench_tui.core.outcomes import ExitCode
from specbench_tui.core.recommend import (
    CONFIRM_REPEATS,
    Band,
    Recommendation,
    confirm_configs,
    deploy_argv,
    recipe,
    recommend,
    vllm_schedule,
)

CONFIRM_FILE = "confirm.toml"
"""The confirm sweep's file name in the run directory (``--confirm`` writes it elsewhere)."""


def launch_command(rec: Recommendation, config_id: str) -> list[str]:
    """``python -m <the engine's own launcher> <the plan's argv>`` (the simulator's stand-in never: the answer is
    for the real server)."""
    from specbench_tui.core.engines.registry import get_profile

    modules = get_profile(rec.engine).python_modules
    module = modules.get(rec.engine) or next((m for k, m in modules.items() if k != "simulator"), None)
    prefix = ["python", "-m", module] if module else []
    return [*prefix, *deploy_argv(rec.configs.get(config_id, {}), rec.engine)]


def band_text(rec: Recommendation, band: Band, code: Callable[[str], str] = str) -> tuple[str, str, list[str]]:
    """One band as words, for every format: its span, what follows the span on its line, and its notes; names and
    commands pass through ``code`` (Markdown: backticks)."""
    if band.winner_id is None:
        why = "; ".join(f"{e.config}: {e.why}" for e in band.excluded) or "nothing measured"
        return band.span, f"no winner ({why})", []
    margin = f"by {band.margin:+.1%} over {band.runner_up}" if band.margin is not None else "no runner-up measured"
    speedup = ""
    if band.speedup is not None:
        median, low, high = band.speedup
        speedup = f", {median:.2f}× the baseline [{low:.2f}, {high:.2f}]"
    notes = []
    if band.partial:
        notes.append(f"{band.partial} (an adaptive search): the confirm sweep measures every one")
    if band.eager:
        notes.append(f"ran eager (no CUDA graph for some decode steps) at {', '.join(band.eager)}: "
                     "the figure may be an artefact")
    notes.append(f"command: {code(shlex.join(launch_command(rec, band.winner_id)))}")
    notes += [f"excluded {code(e.config)}: {e.why}" for e in band.excluded]
    return band.span, f"{code(str(band.winner))} {margin}{speedup}", notes


def _band_lines(rec: Recommendation, band: Band) -> list[str]:
    span, line, notes = band_text(rec, band)
    return [f"  {span}: {line}", *(f"    {note}" for note in notes)]


def render_recommendation(rec: Recommendation) -> str:
    out = [f"specbench recommend: {rec.sweep} ({rec.engine})"]
    for workload in rec.workloads():
        bands = [b for b in rec.bands if b.workload == workload]
        out += ["", f"{workload}: the winner per band (per-user decode tok/s; margin over the runner-up)"]
        for band in bands:
            out += _band_lines(rec, band)
        out.append("  SGLang recipe per band:")
        out += [f"    {b.span}: {recipe(rec.configs.get(b.winner_id or ''))}" for b in bands if b.winner_id]
        if rec.engine == "vllm" and any(b.axis == "concurrency" for b in bands):
            schedule = vllm_schedule(bands, rec.configs)
            out.append("  vLLM draft-token schedule (speculative-config num_speculative_tokens_per_batch_size): "
                       + json.dumps(schedule))
    return "\n".join(out) + "\n"


def confirm_sweep(rec: Recommendation, doc: Mapping[str, object], origin: Path | None, repeats: int) -> str:
    """The confirm sweep's TOML: each workload's band winners, their baselines and runners-up, every point of
    their bands on a grid, with more repeats."""
    ids: list[str] = []
    for workload in rec.workloads():
        ids += [cid for cid in confirm_configs(rec, workload) if cid not in ids]
    blocks = [pinned_block(doc, rec.configs[cid]) for cid in ids]
    workloads = []
    listed = doc.get("workloads")
    for raw in listed if isinstance(listed, list) else []:
        if not isinstance(raw, dict) or raw.get("name") not in rec.workloads():
            continue
        workloads.append(_confirm_workload(rec, dict(raw)))
    confirm = derived_doc(doc, blocks, origin, name=f"{rec.sweep}-confirm", repeats=repeats, runs_dir=None,
                          description=f"re-measures each band's winner of {rec.sweep} against the baseline and "
                                      "the runner-up")
    confirm["workloads"] = workloads
    return to_toml(confirm, "written by specbench recommend: each band's winner, its baseline and its runner-up,\n"
                            f"measured again with {repeats} repeats")


def _confirm_workload(rec: Recommendation, w: dict[str, object]) -> dict[str, object]:
    """A workload of the confirm sweep: only the points of its bands that have a winner, on a grid (every
    candidate at every one of them: the run's search measured some), at the confirm's repeats."""
    loads = [label for b in rec.bands if b.workload == w.get("name") and b.winner_id for label in b.loads]
    if w.get("kind") == "context_ladder":  # a ladder's bands are rungs: the confirm measures each of them
        w["prompt_tokens"] = [int(x) if x != "max" else x for x in dict.fromkeys(loads)]
    for axis in ("concurrency", "request_rate"):
        if axis in w:
            w[axis] = sorted({float(x[1:]) if axis == "request_rate" else int(x[1:])
                              for x in loads if x.startswith("c" if axis == "concurrency" else "r")})
    if "search" in w or w.get("kind") == "context_ladder" or "concurrency" in w or "request_rate" in w:
        w["search"] = "grid"
    w.pop("repeats", None)
    return w


def recommend_command(args: argparse.Namespace) -> int:
    """``specbench recommend RUN [--confirm FILE]``."""
    from specbench_tui.report.load import NotARunDir, load_run
    from specbench_tui.rundir.files import read_meta, read_object, read_text
    from specbench_tui.rundir.store import PLAN_JSON, SWEEP_TOML, StoreError

    path = Path(args.run_dir)
    try:
        run = load_run(path)
        plan = read_object(path, PLAN_JSON) or {}
        doc = tomllib.loads(read_text(path, SWEEP_TOML))
    except (NotARunDir, StoreError, OSError, tomllib.TOMLDecodeError) as exc:
        print(f"specbench recommend: {exc}", file=sys.stderr)
        return ExitCode.INVALID
    rec = recommend(run.analysis, plan)
    sys.stdout.write(render_recommendation(rec))
    origin = read_meta(path).get("sweep_path")
    repeats = max(CONFIRM_REPEATS, 2 * int((doc.get("sweep") or {}).get("repeats", 1)))
    target = Path(args.confirm) if getattr(args, "confirm", None) else path / CONFIRM_FILE
    try:
        text = confirm_sweep(rec, doc, Path(origin) if isinstance(origin, str) else None, repeats)
        target.write_text(text, encoding="utf-8")
    except (DeriveError, OSError) as exc:
        print(f"specbench recommend: cannot write the confirm sweep {target}: {exc}", file=sys.stderr)
        return ExitCode.FAILED
    print(f"\nconfirm sweep: {target} (specbench run {target})")
    return ExitCode.OK
