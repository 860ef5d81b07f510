"""``specbench run --resume RUN --bisect-crashes``: run only the budgets between each crash boundary's ends.

For each boundary of the run (:func:`specbench_tui.core.bisect.boundaries`: a budget that crashed below one that
works, same algorithm and TP), the budget in the middle of what is still unknown is run as a sweep of its own
(the run's stored sweep with that one configuration, its workloads as they were), under ``RUN/bisect/``; its
outcome narrows the bracket, until the largest budget that crashes and the first that works are neighbours.
What was tried and found is written to ``RUN/bisect.json`` with the box and build it holds for; ``specbench
report RUN`` says it under the boundary ("crashes at ≤ 14").
"""

from __future__ import annotations

import json
import os
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from specbench_tui.core.bisect import FACTS_FILE, Boundary, Fact, Tried, boundaries, fact_of, next_budget
from specbench_tui.core.derived import DeriveError, derived_doc, pinned_block, to_toml
from specbench_tui.core.outcomes import ExitCode

FOLDER = "bisect"
"""The run directory's folder of bisection sweeps and their runs."""


def bisect_crashes(run_path: Path, out: TextIO = sys.stdout) -> int:
    """Bisect every crash boundary of the run at ``run_path``; exit code 0 when each was narrowed to neighbours
    (or there was none), 2 when the run cannot be read or a boundary cannot be bisected."""
    from specbench_tui.report.load import NotARunDir, load_run
    from specbench_tui.rundir.files import read_meta, read_object, read_text
    from specbench_tui.rundir.store import PLAN_JSON, SWEEP_TOML, StoreError

    try:
        run = load_run(run_path)
        doc = tomllib.loads(read_text(run_path, SWEEP_TOML))
        plan = read_object(run_path, PLAN_JSON) or {}
    except (NotARunDir, StoreError, OSError, tomllib.TOMLDecodeError) as exc:
        print(f"specbench run --bisect-crashes: {run_path}: {exc}", file=sys.stderr)
        return ExitCode.INVALID
    origin = read_meta(run_path).get("sweep_path")
    found = boundaries(run.analysis.configs)
    if not found:
        print("no crash boundary: no budget crashed below one of the same algorithm that works", file=out)
        return ExitCode.OK
    configs = plan.get("configs")
    plan_configs = {c.get("id"): c for c in configs if isinstance(c, dict)} if isinstance(configs, list) else {}
    box = _box(run.env)
    facts: list[Fact] = []
    for boundary in found:
        print(boundary.line(), file=out)
        config = plan_configs.get(boundary.works_config_id)
        if config is None:
            print(f"  cannot bisect: {boundary.works_config} is not in the run's plan", file=sys.stderr)
            return ExitCode.INVALID
        try:
            tried = _bisect_one(run_path, doc, Path(origin) if isinstance(origin, str) else None, boundary,
                                config, out)
        except DeriveError as exc:
            print(f"  cannot bisect {boundary.key}: {exc}", file=sys.stderr)
            return ExitCode.INVALID
        fact = fact_of(boundary, tried, box)
        print(f"  {fact.line()}", file=out)
        facts.append(fact)
    _write_facts(run_path, facts)
    return ExitCode.OK


def _bisect_one(run_path: Path, doc: Mapping[str, object], origin: Path | None, boundary: Boundary,
                config: Mapping[str, object], out: TextIO) -> list[Tried]:
    tried: list[Tried] = []
    while (budget := next_budget(boundary, tried)) is not None:
        block = pinned_block(doc, config, budget)
        sweep = derived_doc(doc, [block], origin, baseline=None, runs_dir=None,
                            name=f"bisect-{boundary.algorithm}-b{budget}".lower())
        folder = run_path / FOLDER / f"{boundary.key.replace('/', '-')}-b{budget}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "bisect.toml"
        path.write_text(to_toml(sweep, f"bisect of {boundary.line()}: budget {budget}"), encoding="utf-8")
        print(f"  running b{budget} ({path})", file=out)
        tried.append(_run_one(path, folder, budget, run_path))
        print(f"  b{budget}: {tried[-1].state}{f' ({tried[-1].signature})' if tried[-1].signature else ''}",
              file=out)
    return tried


def _run_one(sweep: Path, folder: Path, budget: int, run_path: Path) -> Tried:
    """Run the one-configuration sweep headless (its lines to ``folder/run.log``) and read its state."""
    from specbench_tui.application.headless import run_headless
    from specbench_tui.application.session import RunRequest
    from specbench_tui.report.load import load_run

    runs = folder / "runs"
    with open(folder / "run.log", "w", encoding="utf-8") as log:
        run_headless(RunRequest(sweep=str(sweep), runs_dir=runs), out=log)
    made = sorted(p for p in runs.iterdir() if p.is_dir()) if runs.is_dir() else []
    if not made:
        return Tried(budget, "failed", run=os.path.relpath(folder, run_path))
    analysis = load_run(made[-1]).analysis
    config = next(iter(analysis.configs), None)
    state = config.state if config is not None else "failed"
    return Tried(budget, state, config.name if config else "", os.path.relpath(made[-1], run_path),
                 config.signature if config else None)


def _object(value: object) -> Mapping[str, object]:
    """``value`` when it is a JSON object, else empty (the run's environment is read, not trusted)."""
    return value if isinstance(value, dict) else {}


def _box(run_env: object) -> dict[str, object]:
    """What the facts hold for: the host, its GPUs and the engine's packages, from the run's environment."""
    env = _object(run_env)
    host = _object(env.get("host"))
    gpus = _object(env.get("gpus"))
    packages = _object(_object(env.get("server_python")).get("packages"))
    names = ", ".join(f"{n} ×{c}" for n, c in _object(gpus.get("names")).items())
    build = {k: v for k, v in packages.items() if v}
    where = f"{host.get('name', '?')} ({names or 'no GPU'}"
    where += (", " + ", ".join(f"{k} {v}" for k, v in build.items()) if build else "") + ")"
    if env.get("simulated"):
        where += ", simulated"
    return {"where": where, "host": host.get("name"), "gpus": gpus.get("names"), "packages": build,
            "driver": gpus.get("driver_version")}


def _write_facts(run_path: Path, facts: list[Fact]) -> None:
    path = run_path / FACTS_FILE
    existing: object = None
    if path.is_file():
        try:
            existing = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            existing = None
    found = _object(existing).get("facts")
    kept = [f for f in (found if isinstance(found, list) else []) if isinstance(f, dict)
            and (f.get("algorithm"), f.get("tp")) not in {(n.algorithm, n.tp) for n in facts}]
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"facts": kept + [f.to_json() for f in facts]}, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
