"""The plan: a sweep's matrices expanded into named configurations, each with an exact argv and a stable id.

A configuration id is a hash of what the server is actually given (engine, resolved argv, environment), so
renaming or editing one configuration never changes another's id, and resume can trust it.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from specbench_tui.core.engines import EngineFlags, engine_flags
from specbench_tui.core.errors import SweepError, SweepIssue, closest
from specbench_tui.core.sweep import ArgValue, ConfigSpec, Scalar, Sweep, WorkloadSpec

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_EAGLE_FAMILY = {"EAGLE", "EAGLE3", "NEXTN", "STANDALONE"}
_EAGLE_TRIPLE = ("speculative-num-steps", "speculative-eagle-topk", "speculative-num-draft-tokens")


@dataclass(frozen=True)
class PlannedConfig:
    """One server configuration of the plan."""

    id: str
    """Stable 12-hex-digit id derived from engine, argv and environment."""
    name: str
    algorithm: str
    params: tuple[tuple[str, Scalar], ...]
    """The matrix point this configuration came from."""
    argv: tuple[str, ...]
    """Server flags exactly as passed (host, port and API key are added at launch)."""
    fork_flags: tuple[str, ...]
    """Flags (with dashes) that exist only in forks, not in the engine's release parser."""
    env: tuple[tuple[str, str], ...]
    gpus_needed: int
    tp: int
    dp: int
    baseline: str | None
    """Name of the matched baseline configuration (None when this is one, or none is declared)."""
    skip_reason: str | None = None
    source_index: int = 0

    @property
    def skipped(self) -> bool:
        return self.skip_reason is not None

    def param(self, key: str, default: Any = None) -> Any:
        return dict(self.params).get(key, default)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["params"] = dict(self.params)
        data["env"] = dict(self.env)
        return data


@dataclass(frozen=True)
class Plan:
    """Every configuration of a sweep, in run order, with the workloads each runs."""

    sweep: Sweep
    configs: tuple[PlannedConfig, ...]
    workloads: tuple[WorkloadSpec, ...]
    notes: tuple[str, ...] = field(default=())
    """Adjustments worth telling the user (e.g. a flag SGLang will override)."""

    def runnable(self) -> tuple[PlannedConfig, ...]:
        return tuple(c for c in self.configs if not c.skipped)

    def by_id(self, config_id: str) -> PlannedConfig:
        for config in self.configs:
            if config.id == config_id:
                return config
        raise KeyError(config_id)

    def by_name(self, name: str) -> PlannedConfig | None:
        return next((c for c in self.configs if c.name == name), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "sweep": self.sweep.name,
            "configs": [c.to_json() for c in self.configs],
            "workloads": [{"name": w.name, "kind": w.kind, "max_new_tokens": w.max_new_tokens,
                           "repeats": w.repeats, "warmup": w.warmup, "temperature": w.temperature,
                           "ignore_eos": w.ignore_eos, "params": dict(w.params)} for w in self.workloads],
            "notes": list(self.notes),
        }


def substitute(template: str, params: dict[str, Scalar]) -> str:
    """Replace ``{param}`` placeholders; unknown ones raise KeyError (callers report them)."""
    return _PLACEHOLDER.sub(lambda m: _scalar_text(params[m.group(1)]), template)


def placeholders(template: str) -> set[str]:
    return set(_PLACEHOLDER.findall(template))


def _scalar_text(value: Scalar) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _resolve_value(value: ArgValue, params: dict[str, Scalar]) -> ArgValue:
    if isinstance(value, tuple):
        return tuple(_resolve_value(v, params) for v in value)  # type: ignore[misc]
    if isinstance(value, str):
        whole = _PLACEHOLDER.fullmatch(value)
        if whole:
            return params[whole.group(1)]
        return substitute(value, params)
    return value


def _argv(args: dict[str, ArgValue]) -> list[str]:
    out: list[str] = []
    for name, value in args.items():
        if value is False:
            continue
        out.append(f"--{name}")
        if value is True:
            continue
        if isinstance(value, tuple):
            out.extend(_scalar_text(v) for v in value)
        else:
            out.append(_scalar_text(value))
    return out


def config_id(engine: str, argv: tuple[str, ...], env: tuple[tuple[str, str], ...]) -> str:
    """Stable id from what the server is given; names, order of other configs and comments do not matter."""
    blob = json.dumps({"engine": engine, "argv": list(argv), "env": sorted(env)}, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _points(spec: ConfigSpec) -> Iterator[dict[str, Scalar]]:
    names = [p for p, _ in spec.matrix]
    for values in itertools.product(*(v for _, v in spec.matrix)):
        yield dict(zip(names, values))


def build_plan(sweep: Sweep) -> Plan:
    """Expand every matrix, resolve argv, check flags, ids and names; raise SweepError on problems."""
    flags = engine_flags(sweep.engine.profile)
    issues: list[SweepIssue] = []
    notes: list[str] = []
    shown = str(sweep.path)

    def error(line: int | None, key: str, message: str, hint: str | None = None) -> None:
        issues.append(SweepIssue(shown, line, key, message, hint))

    server_args = dict(sweep.server_args)
    _check_flags(flags, server_args, (), shown, None, "server.args", issues)
    configs: list[PlannedConfig] = []
    seen_names: dict[str, int] = {}
    for spec in sweep.configs:
        where = f"configs[{spec.index}]"
        params_known = {p for p, _ in spec.matrix}
        bad = False
        for template_key, template in [("name", spec.name), *(
                (f"args.{k}", v) for k, v in spec.args if isinstance(v, str)), *(
                (f"fork_args.{k}", v) for k, v in spec.fork_args if isinstance(v, str)), *(
                (f"env.{k}", v) for k, v in spec.env)]:
            for missing in sorted(placeholders(template) - params_known):
                error(spec.line, f"{where}.{template_key}",
                      f"'{{{missing}}}' refers to a parameter the matrix does not define",
                      f"did you mean '{{{closest(missing, params_known)}}}'?" if closest(missing, params_known)
                      else "add it to matrix, e.g. matrix = { " + missing + " = [...] }")
                bad = True
        if not spec.matrix and placeholders(spec.name):
            bad = True
        _check_flags(flags, dict(spec.args), dict(spec.fork_args), shown, spec.line, where, issues)
        if bad:
            continue
        used_rules: set[int] = set()
        points = list(_points(spec)) if spec.matrix else [{}]
        for params in points:
            name = substitute(spec.name, params)
            args = dict(server_args)
            for k, v in spec.args:
                args[k] = _resolve_value(v, params)
            fork = {k: _resolve_value(v, params) for k, v in spec.fork_args}
            env = dict(sweep.server_env)
            env.update((k, substitute(v, params)) for k, v in spec.env)
            value_issues = _check_values(flags, {**args, **fork})
            for flag, message in value_issues:
                error(spec.line, f"{where}.{'fork_args' if flag in fork else 'args'}.{flag}",
                      f"{message} (in '{name}')")
            if value_issues:
                continue
            skip_reason = None
            for j, rule in enumerate(spec.exclude):
                if all(params.get(k) == v for k, v in rule.match):
                    skip_reason = rule.reason
                    used_rules.add(j)
                    break
            if skip_reason is None:
                skip_reason = _invalid_combination(args)
            argv = tuple(_argv(args) + _argv(fork))
            env_t = tuple(sorted(env.items()))
            tp = flags.parallel_size(args, "tp")
            dp = flags.parallel_size(args, "dp")
            gpus_needed = flags.gpus_needed(args)
            if name in seen_names:
                error(spec.line, f"{where}.name", f"duplicate configuration name '{name}' "
                      f"(also produced by configs[{seen_names[name]}])",
                      "make the name template include every matrix parameter that varies")
                continue
            seen_names[name] = spec.index
            if sweep.gpus is not None and gpus_needed > len(sweep.gpus) and skip_reason is None:
                error(spec.line, f"{where}", f"'{name}' needs {gpus_needed} GPUs (tp×dp×pp) but the pool "
                      f"sweep.gpus has {len(sweep.gpus)}", "enlarge sweep.gpus or exclude this point")
                continue
            baseline = substitute(sweep.baseline, {**params, "tp": tp, "dp": dp}) if sweep.baseline else None
            configs.append(PlannedConfig(
                id=config_id(flags.name, argv, env_t), name=name, algorithm=spec.algorithm or "custom",
                params=tuple(params.items()), argv=argv,
                fork_flags=tuple(f"--{k}" for k in fork), env=env_t, gpus_needed=gpus_needed, tp=tp, dp=dp,
                baseline=baseline, skip_reason=skip_reason, source_index=spec.index,
            ))
        for j, rule in enumerate(spec.exclude):
            if j not in used_rules:
                error(rule.line or spec.line, f"{where}.exclude[{j}]",
                      "this exclude rule matches no configuration", "check its parameter values against the matrix")
    ids: dict[str, str] = {}
    for config in configs:
        if config.id in ids:
            error(None, "configs", f"'{config.name}' and '{ids[config.id]}' resolve to the same argv and "
                  "environment, so they would measure the same server twice", "remove one of them")
        ids[config.id] = config.name
    if sweep.baseline:
        names = {c.name for c in configs}
        missing = sorted({c.baseline for c in configs if c.baseline and c.baseline not in names})
        for name in missing:
            notes.append(f"baseline '{name}' is not in the plan: speedups against it will be reported as missing")
    configs = [
        c if c.baseline != c.name else _replace_baseline(c) for c in configs
    ]
    if issues:
        raise SweepError(issues)
    return Plan(sweep=sweep, configs=tuple(configs), workloads=sweep.workloads, notes=tuple(notes))


def _replace_baseline(config: PlannedConfig) -> PlannedConfig:
    data = {**config.__dict__, "baseline": None}
    return PlannedConfig(**data)


def _check_flags(flags: EngineFlags, args: dict[str, ArgValue], fork: dict[str, ArgValue], shown: str,
                 line: int | None, where: str, issues: list[SweepIssue]) -> None:
    """Flags must be the engine's full names; fork flags must not shadow real ones."""
    for name in args:
        key = f"{where}.args.{name}" if where != "server.args" else f"server.args.{name}"
        if name in flags.reserved:
            issues.append(SweepIssue(shown, line, key, f"--{name} is set by specbench for each server",
                                     f"use {flags.reserved[name]} instead"))
            continue
        if name in flags.known_flags:
            continue
        prefixed = sorted(f for f in flags.known_flags if f.startswith(name))
        if len(prefixed) == 1:
            issues.append(SweepIssue(shown, line, key, f"--{name} is an abbreviation",
                                     f"write the full flag name '{prefixed[0]}'"))
        elif name in flags.known_fork_flags:
            issues.append(SweepIssue(shown, line, key, f"--{name} is not a flag of {flags.name} releases; "
                                     "it exists only in forks", "move it under fork_args"))
        else:
            match = closest(name, flags.known_flags)
            issues.append(SweepIssue(shown, line, key, f"--{name} is not a {flags.name} flag",
                                     f"did you mean '{match}'?" if match else
                                     "flags that exist only in a fork go under fork_args"))
    for name in fork:
        if name in flags.known_flags:
            issues.append(SweepIssue(shown, line, f"{where}.fork_args.{name}",
                                     f"--{name} is a regular {flags.name} flag", "move it under args"))


def _check_values(flags: EngineFlags, args: dict[str, ArgValue]) -> list[tuple[str, str]]:
    out = []
    for name, value in args.items():
        if name in flags.positive_int and value is not False:
            try:
                number = int(str(value))
            except ValueError:
                out.append((name, f"--{name} expects a positive integer, got {value!r}"))
                continue
            if number <= 0:
                out.append((name, f"--{name} expects a positive integer, got {number}"))
    return out


def _invalid_combination(args: dict[str, ArgValue]) -> str | None:
    """SGLang's own rules that make a matrix point meaningless, as a skip reason (None when valid)."""
    algorithm = str(args.get("speculative-algorithm", "")).upper()
    if algorithm in _EAGLE_FAMILY:
        present = [f for f in _EAGLE_TRIPLE if f in args]
        if present and len(present) != 3:
            return ("EAGLE needs speculative-num-steps, speculative-eagle-topk and speculative-num-draft-tokens "
                    "set together (SGLang asserts otherwise)")
        if len(present) == 3:
            steps, topk, ndt = (int(str(args[f])) for f in _EAGLE_TRIPLE)
            if steps * topk + 1 < ndt:
                return f"steps×topk+1 = {steps * topk + 1} < num_draft_tokens = {ndt}: invalid draft tree"
            if topk == 1 and ndt != steps + 1:
                return f"with topk=1 SGLang forces num_draft_tokens to steps+1 = {steps + 1}: duplicate of that point"
    if algorithm == "DFLASH":
        if "speculative-draft-model-path" not in args and "speculative-draft-model" not in args:
            return "DFLASH needs speculative-draft-model-path"
        block = args.get("speculative-dflash-block-size")
        ndt = args.get("speculative-num-draft-tokens")
        if block is not None and ndt is not None and str(block) != str(ndt):
            return "speculative-dflash-block-size must equal speculative-num-draft-tokens"
    return None
