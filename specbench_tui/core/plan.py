"""The plan: a sweep's matrices expanded into named configurations, each with an exact argv and a stable id.

A configuration id is a hash of what the server is actually given (engine, resolved flags, environment), so
renaming, reordering, adding or removing another configuration never changes an id, and resume can trust it.

Expansion is also the second half of validation: flag names are checked against the engine's parser, values
against each flag's shape, templates against the matrix, and SGLang's own rules against each point. A rule a
user broke (DFLASH without a draft model) is an error naming the file, line and key; a matrix point that
SGLang would reject or silently rewrite (an EAGLE tree it cannot build) is kept in the plan as *skipped*,
with the reason, because a matrix is expected to contain such points.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from specbench_tui.core.engines.base import NON_SPECULATIVE_ALGORITHMS, EngineFlags
from specbench_tui.core.engines.registry import get_profile
from specbench_tui.core.errors import SweepError, SweepIssue, closest
from specbench_tui.core.sweep.reader import sort_issues
from specbench_tui.core.sweep.schema import ArgValue, ConfigSpec, Scalar, Sweep, WorkloadSpec
from specbench_tui.core.sweep.values import shown_name, typed_key, usable_name
from specbench_tui.core.tomlpos import KeyLocator, KeyPath, format_path

_PLACEHOLDER = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_]*)\}")
"""``{param}``; ``${NAME}`` is an environment reference (kept for secrets, expanded at launch), not one."""


@dataclass(frozen=True)
class PlannedConfig:
    """One server configuration of the plan."""

    id: str
    """Stable 12-hex-digit id derived from engine, flags and environment."""
    name: str
    algorithm: str
    params: tuple[tuple[str, Scalar], ...]
    """The matrix point this configuration came from."""
    argv: tuple[str, ...]
    """Server flags exactly as passed (host, port and API key are added at launch)."""
    fork_flags: tuple[str, ...]
    """Flags (with dashes) present in ``argv`` that exist only in forks, not in the engine's release parser."""
    env: tuple[tuple[str, str], ...]
    gpus_needed: int
    tp: int
    dp: int
    baseline: str | None
    """Name of the matched baseline configuration (None when this is one, or none is declared)."""
    skip_reason: str | None = None
    source_index: int = 0
    """Index of the ``[[configs]]`` block this configuration expanded from."""
    speculative: bool | None = None
    """Whether the server speculates, by its engine's rule (recorded in the run's plan, so that a report needs no
    engine module); None when unknown."""
    draft_budget: int | None = None
    """The draft budget the argv sets, by its engine's rule (None: none)."""

    @property
    def skipped(self) -> bool:
        """True when the plan keeps this point only to show why it is not run."""
        return self.skip_reason is not None

    def param(self, key: str, default: object = None) -> Any:
        """The value of matrix parameter ``key`` at this point."""
        return dict(self.params).get(key, default)

    def to_json(self) -> dict[str, object]:
        data = dict(vars(self))  # its fields, all immutable: asdict's deep copy of each (a plan of 10,000
        data["params"] = dict(self.params)  # points took seconds) would make the same values
        data["env"] = dict(self.env)
        return data


@dataclass(frozen=True)
class Plan:
    """Every configuration of a sweep, in run order, with the workloads each runs."""

    sweep: Sweep
    configs: tuple[PlannedConfig, ...]
    workloads: tuple[WorkloadSpec, ...]
    notes: tuple[str, ...] = field(default=())
    """Adjustments worth telling the user (e.g. an algorithm only a fork ships)."""

    def runnable(self) -> tuple[PlannedConfig, ...]:
        """The configurations that will be launched."""
        return tuple(c for c in self.configs if not c.skipped)

    def by_id(self, config_id: str) -> PlannedConfig:
        for config in self.configs:
            if config.id == config_id:
                return config
        raise KeyError(config_id)

    def by_name(self, name: str) -> PlannedConfig | None:
        return next((c for c in self.configs if c.name == name), None)

    def to_json(self) -> dict[str, object]:
        return {
            "sweep": self.sweep.name,
            "engine": self.sweep.engine.profile,
            "configs": [c.to_json() for c in self.configs],
            "workloads": [{"name": w.name, "kind": w.kind, "max_new_tokens": w.max_new_tokens,
                           "repeats": w.repeats, "warmup": w.warmup, "temperature": w.temperature,
                           "ignore_eos": w.ignore_eos, "params": dict(w.params), "cache": w.cache,
                           **({"family": w.family} if w.family is not None else {}),
                           **({"load": w.load.to_json()} if w.load is not None else {})} for w in self.workloads],
            "notes": list(self.notes),
        }


# ------------------------------------------------------------------------------------------- templates


def substitute(template: str, params: Mapping[str, Scalar]) -> str:
    """Replace ``{param}`` placeholders; unknown ones raise KeyError (callers check first)."""
    return _PLACEHOLDER.sub(lambda m: _scalar_text(params[m.group(1)]), template)


def placeholders(template: object) -> set[str]:
    """The ``{param}`` names used in a string, or in the strings of an array."""
    if isinstance(template, str):
        return set(_PLACEHOLDER.findall(template))
    if isinstance(template, (tuple, list)):
        return set().union(*(placeholders(v) for v in template)) if template else set()
    return set()


def _scalar_text(value: Scalar) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _resolve_value(value: ArgValue, params: Mapping[str, Scalar]) -> ArgValue:
    """A flag value with placeholders filled; ``"{p}"`` alone takes the parameter's own type."""
    if isinstance(value, tuple):
        # A tuple's items are scalars, and a scalar resolves to a scalar: mypy cannot see the second part.
        return tuple(_resolve_value(v, params) for v in value)  # type: ignore[misc]
    if isinstance(value, str):
        whole = _PLACEHOLDER.fullmatch(value)
        if whole:
            return params[whole.group(1)]
        if value.startswith("{") and _PLACEHOLDER.search(value):
            try:
                data = json.loads(value)
            except ValueError:
                data = None
            if isinstance(data, dict):  # a JSON object (a TOML table): "{p}" alone takes p's own type there too
                return json.dumps(_resolve_json(data, params), separators=(",", ":"))
        return substitute(value, params)
    return value


def _resolve_json(data: object, params: Mapping[str, Scalar]) -> object:
    if isinstance(data, dict):
        return {key: _resolve_json(item, params) for key, item in data.items()}
    if isinstance(data, list):
        return [_resolve_json(item, params) for item in data]
    if isinstance(data, str):
        whole = _PLACEHOLDER.fullmatch(data)
        return params[whole.group(1)] if whole else substitute(data, params)
    return data


def _argv(args: Mapping[str, ArgValue]) -> list[str]:
    """``true`` → bare flag, ``false`` → omitted, an array → the flag followed by each value."""
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


def _flag_groups(argv: tuple[str, ...] | list[str]) -> list[list[str]]:
    """argv cut into ``[flag, value...]`` groups."""
    groups: list[list[str]] = []
    for part in argv:
        if part.startswith("--") or not groups:
            groups.append([part])
        else:
            groups[-1].append(part)
    return groups


def config_id(engine: str, argv: tuple[str, ...] | list[str], env: tuple[tuple[str, str], ...]) -> str:
    """Stable id from what the server is given.

    Flags are hashed as an unordered set of ``[flag, values...]`` groups and the environment as a sorted set,
    so names, comments, the order of keys in a table and every other configuration do not matter; a changed
    flag or value does.
    """
    blob = json.dumps({"engine": engine, "argv": sorted(_flag_groups(argv)), "env": sorted(env)},
                      separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _points(spec: ConfigSpec) -> Iterator[dict[str, Scalar]]:
    names = [p for p, _ in spec.matrix]
    for values in itertools.product(*(v for _, v in spec.matrix)):
        yield dict(zip(names, values))


class _RuleIndex:
    """A configuration's exclude rules, matched against a point in time independent of their number.

    Each rule is a bit; for every axis and value, the rules that axis does not stop (they do not name it, or
    name that value) form an integer bit set, so a point's matching rules are the AND of one set per axis.
    """

    def __init__(self, spec: ConfigSpec) -> None:
        self.rules = spec.exclude
        everything = (1 << len(self.rules)) - 1
        mentions: dict[str, int] = {param: 0 for param, _ in spec.matrix}
        named: dict[str, dict[tuple[str, Scalar], int]] = {param: {} for param, _ in spec.matrix}
        for j, rule in enumerate(self.rules):
            for k, v in rule.match:
                if k in mentions:
                    mentions[k] |= 1 << j
                    named[k][typed_key(v)] = named[k].get(typed_key(v), 0) | 1 << j
        self._sets: dict[str, dict[tuple[str, Scalar], int]] = {}
        for param, values in spec.matrix:
            free = everything & ~mentions[param]
            self._sets[param] = {typed_key(v): free | named[param].get(typed_key(v), 0) for v in values}
        self._everything = everything
        self.used = 0
        """Bit j is set once rule j matched a point."""

    def first_reason(self, params: Mapping[str, Scalar]) -> str | None:
        """The reason of the first rule matching ``params`` (None when none does); the rules are marked used."""
        if not self.rules:
            return None
        matching = self._everything
        for param, value in params.items():
            matching &= self._sets[param].get(typed_key(value), 0)
            if not matching:
                return None
        self.used |= matching
        return self.rules[(matching & -matching).bit_length() - 1].reason


# ----------------------------------------------------------------------------------------- the builder


ALGORITHM_LABELS = frozenset({"autoregressive", "dflash", "ddtree", "eagle", "eagle3", "ngram", "mtp", "standalone",
                              "medusa", "lookahead", "suffix"})
"""The ``algorithm`` labels the reports and charts know (their colours); a configuration may also use its flag's
own name in lower case."""


class _Planner:
    """Expands one sweep, collecting located issues."""

    def __init__(self, sweep: Sweep) -> None:
        self.sweep = sweep
        self.engine = get_profile(sweep.engine.profile)
        self.flags = self.engine.flags()
        self.locator = KeyLocator(sweep.text)
        self.shown = sweep.shown_path
        self.issues: list[SweepIssue] = []
        self.notes: list[str] = []
        self._reported_duplicates: set[tuple[int, int]] = set()

    def error(self, path: KeyPath, message: str, hint: str | None = None) -> None:
        self.issues.append(SweepIssue(self.shown, self.locator.line(path) or 1, format_path(path), message, hint))

    def build(self) -> Plan:
        sweep = self.sweep
        launcher = sweep.engine.launcher
        if launcher != "command" and launcher not in self.engine.python_modules:
            offered = ", ".join(f'"{name}"' for name in self.engine.python_modules)
            self.error(("engine", "launcher"), f"engine profile '{self.engine.name}' has no launcher '{launcher}'"
                       + (f" (it has {offered} and \"command\")" if offered else ""),
                       "set launcher = \"command\" and command = [\"/path/to/the/server\", ...] in [engine]")
        self._check_flags(dict(sweep.server_args), {}, ("server", "args"))
        configs: list[PlannedConfig] = []
        seen_names: dict[str, int] = {}
        for spec in sweep.configs:
            configs.extend(self._expand(spec, seen_names))
        self._check_ids(configs)
        self._check_baselines(configs)
        from specbench_tui.core.sweep.context_fit import context_issues

        self.issues.extend(context_issues(sweep, configs, self.engine.planned_reserved))
        from specbench_tui.core.measure_notes import plan_warnings

        self.notes.extend(plan_warnings(sweep, configs, self.engine))
        if self.issues:
            raise SweepError(sort_issues(self.issues))
        return Plan(sweep=sweep, configs=tuple(configs), workloads=sweep.workloads,
                    notes=tuple(dict.fromkeys(self.notes)))

    # ----------------------------------------------------------------------------------- one [[configs]]

    def _templates(self, spec: ConfigSpec) -> Iterator[tuple[KeyPath, object]]:
        """Every templated value that reaches this configuration, with the key it is written at."""
        where: KeyPath = ("configs", spec.index)
        yield (*where, "name"), spec.name
        for flag, value in self.sweep.server_args:
            yield ("server", "args", flag), value
        for flag, value in self.sweep.server_env:
            yield ("server", "env", flag), value
        for section, items in (("args", spec.args), ("fork_args", spec.fork_args), ("env", spec.env)):
            for flag, value in items:
                yield (*where, section, flag), value

    def _expand(self, spec: ConfigSpec, seen_names: dict[str, int]) -> list[PlannedConfig]:
        where: KeyPath = ("configs", spec.index)
        known = {p for p, _ in spec.matrix}
        bad = False
        for path, template in self._templates(spec):
            for missing in sorted(placeholders(template) - known):
                bad = True
                match = closest(missing, known)
                what = f"configs[{spec.index}] ('{spec.name}')"
                self.error(path, f"'{{{missing}}}' refers to a parameter that the matrix of {what} does not define",
                           f"did you mean '{{{match}}}'?" if match else
                           f"add it to that configuration's matrix, e.g. matrix = {{ {missing} = [...] }}")
        self._check_flags(dict(spec.args), dict(spec.fork_args), where)
        if bad:
            return []
        planned: list[PlannedConfig] = []
        rules = _RuleIndex(spec)
        for params in (_points(spec) if spec.matrix else [{}]):
            config = self._point(spec, params, seen_names, rules)
            if config is not None:
                planned.append(config)
        for j, _rule in enumerate(spec.exclude):
            if not rules.used >> j & 1 and planned:
                self.error((*where, "exclude", j), "this exclude rule matches no configuration",
                           "check its parameter values against the matrix")
        return planned

    def _origin(self, spec: ConfigSpec, flag: str) -> KeyPath:
        """Where the value of ``flag`` was written: the matrix axis it came from, or its own key."""
        where: KeyPath = ("configs", spec.index)
        for section, items in (("args", spec.args), ("fork_args", spec.fork_args)):
            value = dict(items).get(flag)
            if value is not None:
                used = sorted(placeholders(value))
                return (*where, "matrix", used[0]) if used else (*where, section, flag)
        value = dict(self.sweep.server_args).get(flag)
        used = sorted(placeholders(value)) if value is not None else []
        return (*where, "matrix", used[0]) if used else ("server", "args", flag)

    def _value_origin(self, spec: ConfigSpec, flag: str, params: Mapping[str, Scalar]) -> KeyPath:
        """Like :meth:`_origin`, down to the matrix value this point took (its own line when the axis spans
        several): a bad value is reported where it is written, not at the axis or the name that uses it."""
        origin = self._origin(spec, flag)
        if len(origin) >= 2 and origin[-2] == "matrix":
            axis = str(origin[-1])
            values = dict(spec.matrix).get(axis, ())
            value = params.get(axis)
            index = next((i for i, v in enumerate(values) if v == value and type(v) is type(value)), None)
            if index is not None:
                return (*origin, index)
        return origin

    def _point(self, spec: ConfigSpec, params: dict[str, Scalar], seen_names: dict[str, int],
               rules: _RuleIndex) -> PlannedConfig | None:
        where: KeyPath = ("configs", spec.index)
        flags = self.flags
        name = substitute(spec.name, params)
        if not usable_name(name):
            self.error((*where, "name"), f"the name template gives {shown_name(name)}, which is not a usable name",
                       "names use letters, digits, '.', '_', '-' and '+': they name log files and table rows")
            return None
        args: dict[str, ArgValue] = {k: _resolve_value(v, params) for k, v in self.sweep.server_args}
        args.update((k, _resolve_value(v, params)) for k, v in spec.args)
        fork = {k: _resolve_value(v, params) for k, v in spec.fork_args}
        env = {k: substitute(v, params) for k, v in self.sweep.server_env}
        env.update((k, substitute(v, params)) for k, v in spec.env)
        if not self._values_ok(spec, params, args, fork):
            return None
        skip_reason = rules.first_reason(params)
        if skip_reason is None:
            skip_reason = self.engine.skip_reason(args)
        if not self._unique_name(spec, name, seen_names):
            return None
        seen_names[name] = spec.index
        gpus_needed = flags.gpus_needed(args)
        if skip_reason is None and not self._fits_pool(spec, params, name, args, gpus_needed):
            return None
        algorithm_flag = self._algorithm_flag(spec, params, args)
        if algorithm_flag is None or not self._label_ok(spec, algorithm_flag):
            return None
        tp = flags.parallel_size(args, "tp")
        dp = flags.parallel_size(args, "dp")
        argv = tuple(_argv(args) + _argv(fork))
        env_items = tuple(sorted(env.items()))
        baseline = self._baseline(spec, params, tp, dp)
        algorithm = spec.algorithm or (algorithm_flag.lower() if algorithm_flag else "autoregressive")
        return PlannedConfig(
            id=config_id(flags.name, argv, env_items), name=name, algorithm=algorithm,
            params=tuple(params.items()), argv=argv,
            fork_flags=tuple(f"--{k}" for k, v in fork.items() if v is not False),
            env=env_items, gpus_needed=gpus_needed, tp=tp, dp=dp, baseline=baseline, skip_reason=skip_reason,
            source_index=spec.index, speculative=self.engine.speculative(argv, algorithm),
            draft_budget=self.engine.draft_budget(argv),
        )

    def _values_ok(self, spec: ConfigSpec, params: dict[str, Scalar], args: dict[str, ArgValue],
                   fork: dict[str, ArgValue]) -> bool:
        """Every flag's value is one its parser takes and the engine accepts; each that is not is reported where
        it is written (identical reports collapse)."""
        ok = True
        for flag, message, hint in _check_values(self.flags, {**args, **fork}):
            self.error(self._value_origin(spec, flag, params), message, hint)
            ok = False
        for user_flag, message, hint in self.engine.user_errors(args):
            self.error(self._value_origin(spec, user_flag, params) if user_flag else ("configs", spec.index),
                       message, hint)
            ok = False
        return ok

    def _unique_name(self, spec: ConfigSpec, name: str, seen_names: dict[str, int]) -> bool:
        """No earlier point is named ``name``; a duplicate is reported once per pair of configurations."""
        if name not in seen_names:
            return True
        where: KeyPath = ("configs", spec.index, "name")
        other = seen_names[name]
        if (spec.index, other) in self._reported_duplicates:
            return False
        self._reported_duplicates.add((spec.index, other))
        varying = [p for p, values in spec.matrix if len(values) > 1 and f"{{{p}}}" not in spec.name]
        if other == spec.index:
            self.error(where, f"duplicate configuration name '{name}': several points of this "
                       "matrix produce it", f"put {', '.join('{' + p + '}' for p in varying)} in the name "
                       "template" if varying else "make the name template include the varying parameters")
        else:
            self.error(where, f"duplicate configuration name '{name}' (configs[{other}] on line "
                       f"{self.locator.line(('configs', other)) or '?'} produces it too)",
                       "give each configuration its own name")
        return False

    def _fits_pool(self, spec: ConfigSpec, params: dict[str, Scalar], name: str, args: dict[str, ArgValue],
                   gpus_needed: int) -> bool:
        """The point needs no more GPUs than the sweep's pool has; reported where its size is written if not."""
        flags = self.flags
        pool = self.sweep.gpus
        if pool is None or gpus_needed <= len(pool):
            return True
        size_flag = next((f for f in (*flags.tp_flags, *flags.dp_flags, *flags.pp_flags) if f in args), None)
        gpus_line = self.locator.line(("sweep", "gpus"))
        origin = self._origin(spec, size_flag) if size_flag else ("configs", spec.index)
        # Named by the matrix value when it comes from one, so the points it spoils collapse into one issue.
        who = f"{origin[-1]} = {params[str(origin[-1])]!r}" if "matrix" in origin else f"'{name}'"
        self.error(origin, f"{who} needs {gpus_needed} GPUs (tp × dp × pp) but the GPU pool has {len(pool)} "
                   f"(sweep.gpus on line {gpus_line})",
                   "remove that value, exclude the point with a reason, or enlarge sweep.gpus")
        return False

    def _algorithm_flag(self, spec: ConfigSpec, params: dict[str, Scalar], args: dict[str, ArgValue]) -> str | None:
        """The algorithm the point's flags name ("" for none); None after reporting one that neither the engine
        ships nor the sweep declares. One the engine does not ship but the sweep declares gets a note."""
        flags = self.flags
        which = self.engine.algorithm_flag
        algorithm_flag = str(args[which]) if which and args.get(which) else ""
        if not (algorithm_flag and which and flags.known_algorithms):
            return algorithm_flag
        declared = {s.algorithm.upper() for s in self.sweep.configs if s.algorithm}
        if self._mislabelled(spec, params, algorithm_flag):
            return None
        if not spec.fork_args and algorithm_flag.upper() not in flags.known_algorithms | declared:
            # SGLang's parser takes any string and fails at start-up; a fork registers its own names, which a
            # sweep declares by naming them as a configuration's algorithm (algorithm = "ddtree"), or by
            # running that configuration with fork flags (fork_args: the server is a fork build).
            origin = self._origin(spec, which)
            shown = f"{origin[-1]} = {params[str(origin[-1])]!r}" if "matrix" in origin else \
                f"--{which} {algorithm_flag}"
            choices = sorted(flags.known_algorithms | declared)
            match = closest(algorithm_flag.upper(), choices)
            self.error(self._value_origin(spec, which, params),
                       f"{shown} is not an algorithm of {flags.name} {flags.release} "
                       f"({', '.join(sorted(flags.known_algorithms))}) nor one this sweep declares",
                       (f"did you mean '{match}'? " if match else "") + "a fork's own algorithm is declared by "
                       "naming it as the configuration's algorithm (algorithm = \"ddtree\") or by its fork_args")
            return None
        if algorithm_flag.upper() not in flags.known_algorithms:
            self.notes.append(
                f"configs[{spec.index}] passes --{which} {algorithm_flag}, which {flags.name} "
                f"{flags.release} does not ship: the server must be a build (a fork) that registers it")
        return algorithm_flag

    def _label_ok(self, spec: ConfigSpec, algorithm_flag: str) -> bool:
        """The configuration's ``algorithm`` label is one the tables and charts know, its own flag's name, or far
        from every known one (a label of one's own, noted); a near miss (``ddtre``) is reported with the fix."""
        label = spec.algorithm.lower()
        known = ALGORITHM_LABELS | NON_SPECULATIVE_ALGORITHMS | {a.lower() for a in self.flags.known_algorithms}
        if not label or label in known or label == algorithm_flag.lower():
            return True
        match = closest(label, sorted(known))
        if match is None:
            self.notes.append(f"configs[{spec.index}] algorithm = {spec.algorithm!r} is a label of this sweep's "
                              "own: its tables and charts give it a colour of their own")
            return True
        self.error(("configs", spec.index, "algorithm"),
                   f"algorithm = {spec.algorithm!r} is not an algorithm label specbench knows "
                   f"({', '.join(sorted(ALGORITHM_LABELS))}, or the flag's own name)", f"did you mean '{match}'?")
        return False

    def _mislabelled(self, spec: ConfigSpec, params: dict[str, Scalar], algorithm_flag: str) -> bool:
        """A flag the engine does not ship, which is not the configuration's own algorithm label but looks like a
        misspelling of it or of a shipped one (``DDTRE`` beside ``algorithm = "ddtree"``): reported, with the
        spelling it was likely meant to be, even under fork_args (the server would refuse it at start-up)."""
        which = self.engine.algorithm_flag or ""
        own = spec.algorithm.upper()
        flag = algorithm_flag.upper()
        if not own or flag == own or flag in self.flags.known_algorithms:
            return False
        match = closest(flag, sorted(self.flags.known_algorithms | {own}))
        if match is None:
            return False
        origin = self._origin(spec, which)
        shown = f"{origin[-1]} = {params[str(origin[-1])]!r}" if "matrix" in origin else f"--{which} {algorithm_flag}"
        self.error(self._value_origin(spec, which, params),
                   f"{shown} is not an algorithm of {self.flags.name} {self.flags.release} nor this "
                   f"configuration's algorithm '{spec.algorithm}': the server would refuse it at start-up",
                   f"did you mean '{match}'?")
        return True

    def _baseline(self, spec: ConfigSpec, params: dict[str, Scalar], tp: int, dp: int) -> str | None:
        template = self.sweep.baseline
        if not template:
            return None
        values: dict[str, Scalar] = {**params, "tp": tp, "dp": dp}
        missing = sorted(placeholders(template) - set(values))
        if missing:
            self.error(("sweep", "baseline"), f"'{{{missing[0]}}}' is not defined for configs[{spec.index}] "
                       f"('{spec.name}')", "a baseline template may use {tp}, {dp} and the matrix parameters "
                       "that every configuration has")
            return None
        return substitute(template, values)

    # ------------------------------------------------------------------------------------ whole-plan checks

    def _check_ids(self, configs: list[PlannedConfig]) -> None:
        ids: dict[str, PlannedConfig] = {}
        for config in configs:
            first = ids.get(config.id)
            if first is not None:
                self.error(("configs", config.source_index, "name"),
                           f"'{config.name}' and '{first.name}' resolve to the same flags and environment, so "
                           "they would measure the same server twice", "remove one of them")
            else:
                ids[config.id] = config

    def _check_baselines(self, configs: list[PlannedConfig]) -> None:
        names = {c.name for c in configs}
        for i, config in enumerate(configs):
            if config.baseline == config.name:
                configs[i] = replace(config, baseline=None)
        missing = sorted({c.baseline for c in configs if c.baseline and c.baseline not in names})
        for name in missing:
            self.notes.append(f"baseline '{name}' is not in the plan: speedups against it will be reported as "
                              "missing")

    def _check_flags(self, args: dict[str, ArgValue], fork: dict[str, ArgValue], where: KeyPath) -> None:
        """Flags must be the engine's full names; fork flags must not shadow real ones."""
        flags = self.flags
        for name in args:
            key = (*where, name) if where == ("server", "args") else (*where, "args", name)
            if name in flags.reserved:
                self.error(key, f"--{name} is set by specbench for each server",
                           f"remove it and set {flags.reserved[name]} instead")
                continue
            if name in flags.known_flags:
                continue
            if name in flags.removed:
                self.error(key, f"--{name} was removed from {flags.name} {flags.release}: {flags.removed[name]}",
                           "write the replacement flag the message names")
                continue
            if name in flags.short_aliases:
                long = flags.short_aliases[name]
                self.error(key, f"'{name}' is {flags.name}'s short form -{name} of --{long}; sweeps use long names",
                           f"write {long} = ... (short forms are refused so that each flag has one spelling)")
                continue
            prefixed = sorted(f for f in flags.known_flags if f.startswith(name))
            if name in flags.known_fork_flags:
                self.error(key, f"--{name} is not a flag of {flags.name} {flags.release}; it exists only in forks",
                           "move it under the configuration's fork_args")
            elif len(prefixed) == 1:
                self.error(key, f"--{name} is an abbreviation of --{prefixed[0]}",
                           f"write the full flag name, {prefixed[0]} = ...; an abbreviation breaks when "
                           f"{flags.name} adds a flag")
            elif len(prefixed) > 1:
                shown = ", ".join(f"--{f}" for f in prefixed[:4]) + (", ..." if len(prefixed) > 4 else "")
                self.error(key, f"--{name} is an ambiguous abbreviation (it could be {shown})",
                           "write the full flag name")
            else:
                match = closest(name, flags.known_flags)
                self.error(key, f"--{name} is not a flag of {flags.name} {flags.release}",
                           f"did you mean '{match}'?" if match else
                           "a flag that exists only in a fork goes under the configuration's fork_args")
        for name in fork:
            if name in flags.known_flags:
                self.error((*where, "fork_args", name), f"--{name} is a regular {flags.name} {flags.release} flag",
                           "move it under args, so it is checked like the others")
            elif name in flags.reserved:
                self.error((*where, "fork_args", name), f"--{name} is set by specbench for each server",
                           f"remove it and set {flags.reserved[name]} instead")


def flag_name_issues(sweep: Sweep) -> list[SweepIssue]:
    """Only the flag-name checks (unknown, abbreviated, reserved, fork or not) of every configuration.

    They need no matrix expansion, so the loader runs them even on a file with other problems.
    """
    planner = _Planner(sweep)
    planner._check_flags(dict(sweep.server_args), {}, ("server", "args"))
    for spec in sweep.configs:
        planner._check_flags(dict(spec.args), dict(spec.fork_args), ("configs", spec.index))
    return planner.issues


def build_plan(sweep: Sweep) -> Plan:
    """Expand every matrix, resolve argv, check flags, ids and names; raise :class:`SweepError` on problems."""
    return _Planner(sweep).build()


# ------------------------------------------------------------------------------------------ the rules


def _check_values(flags: EngineFlags, args: Mapping[str, ArgValue]) -> list[tuple[str, str, str | None]]:
    """(flag, message, hint) for values the engine's parser or its first checks would refuse."""
    out: list[tuple[str, str, str | None]] = []
    for name, value in args.items():
        shape = flags.shapes.get(name)
        if shape is not None:
            problem = shape.problem(name, value)
            if problem is not None:
                out.append((name, *problem))
                continue
        if name in flags.positive_int and value is not False:
            try:
                number = int(str(value))
            except ValueError:
                out.append((name, f"--{name} expects a positive integer, got {_show(value)}", None))
                continue
            if number <= 0:
                out.append((name, f"--{name} expects a positive integer, got {number}", "use a value >= 1"))
        elif name in flags.unit_fraction and not isinstance(value, bool):
            try:
                fraction = float(str(value))
            except ValueError:
                fraction = -1.0
            if not 0 < fraction <= 1:
                out.append((name, f"--{name} expects a fraction in (0, 1], got {_show(value)}",
                            "e.g. 0.85 for 85% of GPU memory"))
    return out


def _show(value: ArgValue) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(map(repr, value)) + "]"
    return repr(value)
