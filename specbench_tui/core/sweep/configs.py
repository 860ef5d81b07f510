"""One ``[[configs]]`` block: its name template, algorithm, matrix axes (each value once, bounded in size) and
exclude rules (each matching values the matrix has). The matrix is expanded by :mod:`specbench_tui.core.plan`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from specbench_tui.core.errors import did_you_mean
from specbench_tui.core.sweep.flags import args_table, env_table
from specbench_tui.core.sweep.limits import MAX_CONFIGURATIONS, MAX_EXCLUDE_RULES
from specbench_tui.core.sweep.reader import Reader, short_repr, type_name
from specbench_tui.core.sweep.schema import ConfigSpec, ExcludeRule, Scalar
from specbench_tui.core.sweep.values import is_scalar, typed_key
from specbench_tui.core.tomlpos import KeyPath

_PARAM_OK = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CONFIG_KEYS = ("name", "algorithm", "matrix", "args", "fork_args", "env", "exclude")


def config_spec(r: Reader, index: int, raw: dict[str, object]) -> ConfigSpec:
    key: KeyPath = ("configs", index)
    t = r.table(raw, key, _CONFIG_KEYS)
    name = r.get(t, key, "name", (str,), f"config{index}", required=True)
    if not name.strip():
        r.error((*key, "name"), "a configuration name cannot be empty", "e.g. name = \"ddtree-b{budget}-tp{tp}\"")
        name = f"config{index}"
    algorithm = r.get(t, key, "algorithm", (str,), "")
    matrix_raw = r.get(t, key, "matrix", (dict,), {})
    matrix: list[tuple[str, tuple[Scalar, ...]]] = []
    points = 1
    for param, values in matrix_raw.items():
        pkey = (*key, "matrix", param)
        if not _PARAM_OK.fullmatch(param):
            r.error(pkey, f"'{param}' is not a usable parameter name",
                    "use a Python-style identifier such as budget, tp or topk")
            continue
        if not isinstance(values, list):
            values = [values]
        if not values:
            r.error(pkey, "empty matrix axis: it would expand to no configuration",
                    "give at least one value, e.g. [8, 16]")
            continue
        if len(values) > MAX_CONFIGURATIONS:
            r.too_large(pkey, "the number of values", len(values), MAX_CONFIGURATIONS, "MAX_CONFIGURATIONS")
            matrix = []
            points = MAX_CONFIGURATIONS + 1
            break
        if not all(is_scalar(v) for v in values):
            r.error(pkey, "matrix values are strings, numbers or booleans")
            continue
        seen_values: set[tuple[str, Scalar]] = set()
        duplicate = next((v for v in values if typed_key(v) in seen_values or _added(seen_values, typed_key(v))), None)
        if duplicate is not None:
            r.error(pkey, f"duplicate value {duplicate!r} in {short_repr(values)}", "list each value once")
            continue
        matrix.append((param, tuple(values)))
        points *= len(values)
        if points > MAX_CONFIGURATIONS:
            break
    if points > MAX_CONFIGURATIONS:
        r.error((*key, "matrix"), f"the matrix expands to {points:,} configurations (at most "
                f"{MAX_CONFIGURATIONS:,})", "split it into smaller sweeps or remove values")
        matrix = []
    excludes = _excludes(r, key, t.get("exclude", []), dict(matrix), set(matrix_raw))
    return ConfigSpec(
        index=index, name=name, algorithm=algorithm, matrix=tuple(matrix),
        args=args_table(r, t.get("args", {}), (*key, "args")),
        fork_args=args_table(r, t.get("fork_args", {}), (*key, "fork_args")),
        env=env_table(r, t.get("env", {}), (*key, "env")), exclude=tuple(excludes), line=r.line_of(key),
    )


def _excludes(r: Reader, key: KeyPath, raw: object, matrix: dict[str, tuple[Scalar, ...]],
              declared: set[str]) -> list[ExcludeRule]:
    """``[[configs.exclude]]`` rules: every key but ``reason`` names a matrix parameter and one of its values."""
    if not isinstance(raw, list):
        r.error((*key, "exclude"), f"expected an array of tables, got {type_name(raw)}",
                "write each rule as [[configs.exclude]] with the parameters to match and reason = \"...\"")
        return []
    excludes: list[ExcludeRule] = []
    if len(raw) > MAX_EXCLUDE_RULES:
        r.error((*key, "exclude", MAX_EXCLUDE_RULES), f"more than {MAX_EXCLUDE_RULES:,} exclude rules "
                "(MAX_EXCLUDE_RULES)", "exclude a whole axis value with one rule, e.g. { tp = 8, reason = ... }")
        return []
    axes = _Axes(matrix, declared)
    for j, rule in enumerate(raw):
        rkey = (*key, "exclude", j)
        if not isinstance(rule, dict):
            r.error(rkey, f"expected a table such as {{ budget = 8, tp = 1, reason = \"...\" }}, "
                    f"got {type_name(rule)}")
            continue
        reason = _exclude_reason(r, rkey, rule)
        match = tuple((k, v) for k, v in rule.items() if k != "reason")
        if not match:
            r.error(rkey, "an exclude rule needs at least one parameter to match", "e.g. budget = 8")
        checked = [axes.matches(r, rkey, k, v) for k, v in match]  # each key is reported, not only the first
        if all(checked) and match and reason is not None:
            excludes.append(ExcludeRule(match, reason, r.line_of(rkey)))
    return excludes


def _exclude_reason(r: Reader, rkey: KeyPath, rule: dict[str, object]) -> str | None:
    """The rule's reason, stripped; None (reported) when it has none or an empty one."""
    reason = rule.get("reason")
    if "reason" not in rule:
        r.error(rkey, "an exclude rule needs a reason, shown in the plan and the report",
                "add reason = \"why this point is skipped\"")
        return None
    if not isinstance(reason, str) or not reason.strip():
        r.error((*rkey, "reason"), "expected a non-empty string saying why these points are skipped")
        return None
    return reason.strip()


@dataclass
class _Axes:
    """A configuration's matrix, for matching exclude rules against: each axis's values, by typed key and by
    text (to say a quoted number is one)."""

    matrix: dict[str, tuple[Scalar, ...]]
    declared: set[str]
    """Every axis the configuration declares, valid or not."""

    @cached_property
    def typed(self) -> dict[str, set[tuple[str, Scalar]]]:
        return {k: {typed_key(v) for v in values} for k, values in self.matrix.items()}

    @cached_property
    def by_text(self) -> dict[str, dict[str, Scalar]]:
        return {k: {str(v): v for v in reversed(values)} for k, values in self.matrix.items()}

    def matches(self, r: Reader, rkey: KeyPath, k: str, v: object) -> bool:
        """Whether ``k = v`` names a matrix parameter and one of its values; why not is reported (not for an
        axis that is itself invalid: that is reported already)."""
        matrix, declared = self.matrix, self.declared
        if k not in matrix:
            if k in declared:
                return False
            if not declared:
                r.error((*rkey, k), f"'{k}' cannot be matched: this configuration has no matrix",
                        "add a matrix, or remove the exclude rule")
            else:
                r.error((*rkey, k), f"'{k}' is not a matrix parameter of this configuration (it has "
                        f"{', '.join(matrix) or 'none'})", did_you_mean(k, matrix))
            return False
        if is_scalar(v) and typed_key(v) in self.typed[k]:
            return True
        typed = self.by_text[k].get(str(v)) if is_scalar(v) else None
        hint = (f"{k} = {v!r} is {type_name(v)} but the matrix has {typed!r}; write it without quotes"
                if typed is not None else f"use one of {short_repr(list(matrix[k]))}")
        r.error((*rkey, k), f"{k} = {short_repr(v)[1:-1]} is not a value of matrix.{k}, so this rule matches "
                "nothing", hint)
        return False


def _added(seen: set[tuple[str, Scalar]], key: tuple[str, Scalar]) -> bool:
    """Add ``key`` to ``seen``; false, so that a generator's filter can remember what it passed."""
    seen.add(key)
    return False
