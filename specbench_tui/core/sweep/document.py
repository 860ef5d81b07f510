"""The sweep document as a whole: the top-level tables, ``[sweep]`` (name, pool of GPUs, repeats), ``[server]``,
``[cluster]`` (read by :mod:`specbench_tui.core.cluster`), and the ``[[configs]]`` and ``[[workloads]]`` arrays
with their sweep-wide totals (configurations, requests, duplicate names). Each block is checked by its own
module; defaults stand in for every part with an issue."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TypedDict

from specbench_tui.core.cluster import read_cluster
from specbench_tui.core.sweep.configs import config_spec
from specbench_tui.core.sweep.engine_table import engine_spec
from specbench_tui.core.sweep.flags import args_table, env_table
from specbench_tui.core.sweep.measure import measure_spec
from specbench_tui.core.sweep.notify_table import read_metrics, read_notify
from specbench_tui.core.sweep.limits import (
    MAX_CONFIGURATIONS,
    MAX_GPUS,
    MAX_REPEATS,
    MAX_REQUESTS,
    MAX_WARMUP,
    MAX_WORKLOADS,
)
from specbench_tui.core.sweep.reader import Reader, short_repr, type_name
from specbench_tui.core.sweep.schema import ConfigSpec, Sweep, WorkloadSpec
from specbench_tui.core.sweep.values import shown_name, usable_name
from specbench_tui.core.sweep.workloads import WorkloadDefaults, workload_specs

_TOP_KEYS = ("sweep", "engine", "measure", "server", "configs", "workloads", "cluster", "notify", "metrics")
_SWEEP_KEYS = ("name", "description", "baseline", "runs_dir", "gpus", "concurrent", "lossless_check",
               "repeats", "warmup")
_SERVER_KEYS = ("args", "env")


class _SweepHead(TypedDict):
    """``[sweep]``'s values by name (:func:`_sweep_table`)."""

    name: str
    description: str
    baseline: str | None
    runs_dir: Path
    gpus: tuple[int, ...] | None
    concurrent: bool
    lossless: bool
    repeats: int
    warmup: int


def build_sweep(r: Reader, data: dict[str, object], text: str, path: Path, shown: str) -> Sweep:
    """The sweep, with defaults standing in for every part that had an issue (recorded in ``r``)."""
    r.table(data, (), _TOP_KEYS)
    base_dir = path.parent
    head = _sweep_table(r, data, path)
    engine = engine_spec(r, data.get("engine", {}), base_dir)
    measure = measure_spec(r, data.get("measure", {}), engine.profile)
    server_t = r.table(data.get("server", {}), ("server",), _SERVER_KEYS)
    server_args = args_table(r, server_t.get("args", {}), ("server", "args"))
    server_env = env_table(r, server_t.get("env", {}), ("server", "env"))
    cluster = read_cluster(r, data.get("cluster", {}))
    configs = _configs(r, data.get("configs"))
    defaults = WorkloadDefaults(head["repeats"], head["warmup"], measure.cache, engine.profile, measure.temperatures)
    workloads = _workloads(r, data.get("workloads"), defaults, base_dir)
    return Sweep(
        path=path, text=text, name=head["name"], description=head["description"], baseline=head["baseline"],
        runs_dir=head["runs_dir"], gpus=head["gpus"], concurrent=head["concurrent"],
        lossless_check=head["lossless"], engine=engine, server_args=server_args, server_env=server_env,
        configs=tuple(configs), workloads=tuple(workloads), display_path=shown, cluster=cluster,
        cache=measure.cache, measure_note=measure.note, notify=read_notify(r, data.get("notify", {})),
        metrics=read_metrics(r, data.get("metrics", {})),
    )


def _sweep_table(r: Reader, data: dict[str, object], path: Path) -> _SweepHead:
    """``[sweep]``'s values by name (defaults for the ones with an issue)."""
    sweep_t = r.table(data.get("sweep", {}), ("sweep",), _SWEEP_KEYS)
    if "sweep" not in data:
        r.error((), "no [sweep] table", "start the file with [sweep] and name = \"...\"")
    name = r.get(sweep_t, ("sweep",), "name", (str,), required="sweep" in data) or path.stem
    if isinstance(name, str) and not usable_name(name):
        r.error(("sweep", "name"), f"{shown_name(name)} is not a usable name",
                "use letters, digits, '.', '_', '-' and '+': it becomes part of the run directory's name")
        name = path.stem
    return {
        "name": name,
        "description": r.get(sweep_t, ("sweep",), "description", (str,), ""),
        "baseline": r.get(sweep_t, ("sweep",), "baseline", (str,)),
        "runs_dir": Path(r.get(sweep_t, ("sweep",), "runs_dir", (str,), "runs")).expanduser(),
        "gpus": _gpus(r, sweep_t),
        "concurrent": r.get(sweep_t, ("sweep",), "concurrent", (bool,), False),
        "lossless": r.get(sweep_t, ("sweep",), "lossless_check", (bool,), False),
        "repeats": r.positive(sweep_t, ("sweep",), "repeats", (int,), 1, limit=MAX_REPEATS,
                              limit_name="MAX_REPEATS"),
        "warmup": r.positive(sweep_t, ("sweep",), "warmup", (int,), 1, allow_zero=True, limit=MAX_WARMUP,
                             limit_name="MAX_WARMUP"),
    }


def _configs(r: Reader, configs_raw: object) -> list[ConfigSpec]:
    """The ``[[configs]]`` blocks, up to the sweep's limit of configurations."""
    configs: list[ConfigSpec] = []
    if configs_raw is None:
        r.error((), "no [[configs]]: a sweep needs at least one configuration",
                "add a [[configs]] block with name = \"...\" and its args")
    elif not isinstance(configs_raw, list) or not all(isinstance(c, dict) for c in configs_raw):
        r.error(("configs",), f"expected an array of tables, got {type_name(configs_raw)}",
                "write each configuration as its own [[configs]] block, with double brackets")
    elif not configs_raw:
        r.error(("configs",), "no configurations", "add a [[configs]] block")
    else:
        total = 0
        for i, c in enumerate(configs_raw):
            config = config_spec(r, i, c)
            points = math.prod(len(values) for _, values in config.matrix)
            if total + points > MAX_CONFIGURATIONS:
                r.error(("configs", i), f"the sweep expands to more than {MAX_CONFIGURATIONS:,} configurations "
                        f"from this block on (MAX_CONFIGURATIONS; {total:,} before it)",
                        "split it into smaller sweeps or remove values")
                break
            total += points
            configs.append(config)
    return configs


def _workloads(r: Reader, workloads_raw: object, defaults: WorkloadDefaults, base_dir: Path) -> list[WorkloadSpec]:
    """The ``[[workloads]]`` blocks, with the sweep's request total and duplicate names checked."""
    if workloads_raw is None:
        r.error((), "no [[workloads]]: a sweep needs at least one workload",
                "add a [[workloads]] block, e.g. with kind = \"code\"")
    elif not isinstance(workloads_raw, list) or not all(isinstance(w, dict) for w in workloads_raw):
        r.error(("workloads",), f"expected an array of tables, got {type_name(workloads_raw)}",
                "write each workload as its own [[workloads]] block, with double brackets")
    elif not workloads_raw:
        r.error(("workloads",), "no workloads", "add a [[workloads]] block")
    elif len(workloads_raw) > MAX_WORKLOADS:
        r.error(("workloads", MAX_WORKLOADS), f"more than {MAX_WORKLOADS} workloads (MAX_WORKLOADS)",
                "split the sweep")
    else:
        return _each_workload(r, workloads_raw, defaults, base_dir)
    return []


def _each_workload(r: Reader, workloads_raw: list[dict[str, object]], defaults: WorkloadDefaults,
                   base_dir: Path) -> list[WorkloadSpec]:
    workloads: list[WorkloadSpec] = []
    seen: dict[str, int] = {}
    requests = 0
    for i, w in enumerate(workloads_raw):
        for spec in workload_specs(r, i, w, defaults, base_dir):
            requests = _add_workload(r, i, w, spec, workloads, seen, requests)
    return workloads


def _add_workload(r: Reader, i: int, w: dict[str, object], spec: WorkloadSpec, workloads: list[WorkloadSpec],
                  seen: dict[str, int], requests: int) -> int:
    """Append one workload (of block ``i``), checking the sweep's request total and its name; the new total."""
    requests += spec.requests
    if requests > MAX_REQUESTS:
        r.error(("workloads", i), f"each configuration would be sent more than {MAX_REQUESTS:,} requests "
                f"by the workloads up to this one (MAX_REQUESTS: items × repeats + warm-up, "
                "or each load point's requests × repeats + warm-up)",
                "lower repeats, count, the number of items or temperatures, requests, waves or load points")
        requests = -(1 << 62)  # said once
    if spec.name in seen:
        implicit = "" if "name" in w else " (a workload without a name is named after its kind)"
        if spec.family is not None:
            implicit = f" (the name of '{spec.family}' at temperature {spec.temperature:g})"
        r.error(("workloads", i, "name"), f"duplicate workload name '{spec.name}'{implicit}; "
                f"workloads[{seen[spec.name]}] on line {r.line_of(('workloads', seen[spec.name]))} "
                "has it too", "give each workload its own name = \"...\"")
    else:
        seen[spec.name] = i
    workloads.append(spec)
    return requests


def _gpus(r: Reader, sweep_t: dict[str, object]) -> tuple[int, ...] | None:
    value = sweep_t.get("gpus", "all")
    key = ("sweep", "gpus")
    if value == "all":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        if value <= 0:
            r.error(key, f"expected a positive GPU count, got {value}", "write gpus = \"all\" to use every GPU")
            return None
        if value > MAX_GPUS:
            r.error(key, f"gpus = {value:,}: no machine has that many GPUs (MAX_GPUS = {MAX_GPUS})",
                    "write gpus = \"all\", or the number of GPUs this machine has")
            return None
        return tuple(range(value))
    if isinstance(value, list) and value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        if len(value) > MAX_GPUS or any(v >= MAX_GPUS for v in value):
            r.error(key, f"GPU indices go from 0 to {MAX_GPUS - 1} and a pool has at most {MAX_GPUS} (MAX_GPUS)",
                    "list the indices nvidia-smi shows")
            return None
        if any(v < 0 for v in value) or len(set(value)) != len(value):
            r.error(key, f"GPU indices must be distinct and non-negative, got {short_repr(value)}")
            return None
        return tuple(value)
    r.error(key, f"expected \"all\", a GPU count or a list of GPU indices, got {type_name(value)} {short_repr(value)}",
            "e.g. gpus = 8 or gpus = [0, 1, 2, 3]")
    return None
