"""One ``[[workloads]]`` block: its kind, name, the parameters common to every kind (repeats, warm-up,
max_new_tokens, ...), the kind's own parameters from :mod:`specbench_tui.core.workload_kinds`, a prompts file
read now (so that a run cannot die on it), and how many items one repeat sends. The load axis is checked by
:mod:`specbench_tui.core.sweep.load_axis`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench_tui.core.errors import did_you_mean
from specbench_tui.core.prompt_datasets import dataset_path, load_dataset
from specbench_tui.core.prompts import PromptsFileError, load_prompts_file
from specbench_tui.core.sweep.limits import (
    MAX_ITEMS,
    MAX_NAME_CHARS,
    MAX_NEW_TOKENS,
    MAX_PROMPT_TOKENS,
    MAX_PROMPTS_FILE_BYTES,
    MAX_REPEATS,
    MAX_TURNS,
    MAX_WARMUP,
)
from specbench_tui.core.records import CACHE_COLD
from specbench_tui.core.sweep.load_axis import LOAD_KEYS, load_spec
from specbench_tui.core.sweep.measure import cache_value
from specbench_tui.core.sweep.reader import Reader, is_type, resolve_path, short_repr, type_name, types_text
from specbench_tui.core.sweep.schema import WorkloadSpec
from specbench_tui.core.sweep.temperature import read_temperatures, variants
from specbench_tui.core.sweep.values import shown_name, usable_name
from specbench_tui.core.tomlpos import KeyPath
from specbench_tui.core.workload_kinds import COMMON_PARAMS, KINDS, ParamSpec

_WORKLOAD_KEYS = ("name", "kind", "cache", *COMMON_PARAMS, *LOAD_KEYS)


@dataclass(frozen=True)
class WorkloadDefaults:
    """What a workload takes from the rest of the sweep when it does not say."""

    repeats: int
    warmup: int
    cache: str = CACHE_COLD
    """``[measure] cache``."""
    engine: str = "sglang"
    """The engine profile (whether it can flush decides whether ``cache = "cold"`` is possible)."""
    temperatures: tuple[float, ...] = (0.0,)
    """``[measure] temperature``: the workload's temperatures unless it lists its own."""


def workload_specs(r: Reader, index: int, raw: dict[str, Any], defaults: WorkloadDefaults,
                   base_dir: Path) -> list[WorkloadSpec]:
    """One ``[[workloads]]`` block as the workloads it measures: one per temperature of its list
    (:mod:`specbench_tui.core.sweep.temperature`); none when it cannot be read."""
    spec = workload_spec(r, index, raw, defaults, base_dir)
    if spec is None:
        return []
    out = variants(spec, read_temperatures(r, raw, ("workloads", index), defaults.temperatures))
    for variant in out if len(out) > 1 else ():  # one temperature keeps the name checked already
        if not usable_name(variant.name):
            r.error(("workloads", index, "name"), f"{shown_name(variant.name)} (the workload at one temperature of "
                    "its list) is not a usable name", f"use a name of at most {MAX_NAME_CHARS - 8} characters")
    return out


def workload_spec(r: Reader, index: int, raw: dict[str, Any], defaults: WorkloadDefaults, base_dir: Path) -> WorkloadSpec | None:
    key: KeyPath = ("workloads", index)
    kind = r.get(raw, key, "kind", (str,), required=True)
    if kind is None:
        return None
    if kind not in KINDS:
        r.error((*key, "kind"), f"unknown workload kind '{kind}'", did_you_mean(kind, KINDS))
        return None
    kind_params = KINDS[kind]
    allowed = (*_WORKLOAD_KEYS, *kind_params)
    for pname in raw:
        if pname not in allowed:
            r.error((*key, pname), f"unknown key '{pname}' for a workload of kind '{kind}'",
                    did_you_mean(pname, allowed))
    name = r.get(raw, key, "name", (str,), kind)
    if not usable_name(name):
        r.error((*key, "name"), f"{shown_name(name)} is not a usable name",
                f"use letters, digits, '.', '_', '-' and '+', at most {MAX_NAME_CHARS} characters")
    common = _common_params(r, key, raw, defaults)
    params = _kind_params(r, key, raw, kind_params)
    if kind in ("long_context", "context_ladder"):
        _check_prompt_sizes(r, key, params, ascending=kind == "context_ladder")
    item_count = _item_count(kind, params)
    if kind == "prompts_file" and "path" in params:
        resolved = resolve_path(base_dir, params["path"])
        params["path"] = str(resolved)
        item_count = _check_prompts_file(r, (*key, "path"), resolved, params)
    if kind == "prompt_dataset":
        item_count = _check_dataset(r, key, base_dir, params)
    return WorkloadSpec(
        name=name, kind=kind, max_new_tokens=common["max_new_tokens"] or 256, repeats=common["repeats"] or 1,
        warmup=common["warmup"] if common["warmup"] is not None else 1, temperature=defaults.temperatures[0],
        ignore_eos=bool(common["ignore_eos"]), params=tuple(sorted(params.items())), item_count=item_count,
        load=load_spec(r, key, raw, kind), cache=cache_value(r, raw, key, defaults.cache, defaults.engine),
    )


def _common_params(r: Reader, key: KeyPath, raw: dict[str, Any], defaults: WorkloadDefaults) -> dict[str, Any]:
    """The parameters every kind takes (repeats and warm-up default to the sweep's)."""
    common: dict[str, Any] = {}
    for pname, spec in COMMON_PARAMS.items():
        if pname == "temperature":  # a number or a list: read by workload_specs (core/sweep/temperature.py)
            continue
        default = {"repeats": defaults.repeats, "warmup": defaults.warmup}.get(pname, spec.default)
        limit, limit_name = _COMMON_LIMITS.get(pname, (None, ""))
        if spec.positive:
            common[pname] = r.positive(raw, key, pname, spec.types, default, limit=limit, limit_name=limit_name)
        elif pname == "warmup":
            common[pname] = r.positive(raw, key, pname, spec.types, default, allow_zero=True, limit=limit,
                                       limit_name=limit_name)
        else:
            common[pname] = r.get(raw, key, pname, spec.types, default)
    return common


def _kind_params(r: Reader, key: KeyPath, raw: dict[str, Any], kind_params: Mapping[str, ParamSpec]) -> dict[str, Any]:
    """The kind's own parameters, each checked against its :class:`ParamSpec` (a bad one is left out)."""
    params: dict[str, Any] = {}
    for pname, spec in kind_params.items():
        value = r.get(raw, key, pname, spec.types, spec.default, required=spec.default is None)
        if value is None:
            continue
        checked = (_list_param(r, (*key, pname), pname, spec, value) if isinstance(value, list)
                   else _scalar_param(r, (*key, pname), pname, spec, value))
        if checked is not _BAD:
            params[pname] = checked
    return params


_BAD = object()
"""A parameter value that had an issue and is left out."""


def _list_param(r: Reader, pkey: KeyPath, pname: str, spec: ParamSpec, value: list[Any]) -> Any:
    wrong = [i for i, v in enumerate(value) if spec.item_types and not is_type(v, spec.item_types)]
    if wrong:
        item = value[wrong[0]]
        r.error((*pkey, wrong[0]), f"expected an array of {types_text(spec.item_types or ())}, got "
                f"{type_name(item)} {short_repr(item)}")
        return _BAD
    if len(value) > MAX_ITEMS:
        r.error(pkey, f"{len(value):,} items (MAX_ITEMS = {MAX_ITEMS:,})", "split the workload")
        return _BAD
    for i, v in enumerate(value):
        if spec.choices and v not in spec.choices:
            r.error((*pkey, i), f"unknown item '{v}'", did_you_mean(str(v), map(str, spec.choices)))
    if not value and pname in ("items", "prompt_tokens"):
        r.error(pkey, "empty list: this workload would send nothing", "give at least one item")
    return tuple(value)


def _scalar_param(r: Reader, pkey: KeyPath, pname: str, spec: ParamSpec, value: Any) -> Any:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and (
            (spec.positive and value <= 0) or value < 0):
        r.error(pkey, f"expected a {'positive' if spec.positive else 'non-negative'} number, got {value}")
    elif isinstance(value, int) and pname in _KIND_LIMITS and value > _KIND_LIMITS[pname][0]:
        r.too_large(pkey, pname, value, *_KIND_LIMITS[pname])
        return _BAD
    elif spec.choices and value not in spec.choices:
        r.error(pkey, f"unknown value '{value}'", did_you_mean(str(value), map(str, spec.choices)))
    return value


def _check_prompt_sizes(r: Reader, key: KeyPath, params: Mapping[str, Any], *, ascending: bool = False) -> None:
    """``long_context``'s ``prompt_tokens``: positive token counts within the limit, or ``"max"``; a context
    ladder's rungs also ascending, ``"max"`` last."""
    sizes = list(params.get("prompt_tokens", ()))
    for i, v in enumerate(sizes[1:], start=1) if ascending else ():
        before = sizes[i - 1]
        if before == "max" or (isinstance(v, int) and isinstance(before, int) and v <= before):
            r.error((*key, "prompt_tokens", i), f"the rungs must ascend: {short_repr(v)} follows {short_repr(before)}",
                    "list the rungs from the smallest context up, \"max\" last")
            break
    for i, v in enumerate(sizes):
        if isinstance(v, str) and v != "max":
            r.error((*key, "prompt_tokens", i), f"'{v}' is neither a token count nor \"max\"",
                    "\"max\" fills the context up to its limit")
        elif isinstance(v, int) and v <= 0:
            r.error((*key, "prompt_tokens", i), f"expected positive token counts, got {v}")
        elif isinstance(v, int) and v > MAX_PROMPT_TOKENS:
            r.too_large((*key, "prompt_tokens", i), "a prompt size", v, MAX_PROMPT_TOKENS, "MAX_PROMPT_TOKENS")


_COMMON_LIMITS: dict[str, tuple[int, str]] = {
    "max_new_tokens": (MAX_NEW_TOKENS, "MAX_NEW_TOKENS"), "repeats": (MAX_REPEATS, "MAX_REPEATS"),
    "warmup": (MAX_WARMUP, "MAX_WARMUP")}
_KIND_LIMITS: dict[str, tuple[int, str]] = {
    "count": (MAX_ITEMS, "MAX_ITEMS"), "limit": (MAX_ITEMS, "MAX_ITEMS"), "turns": (MAX_TURNS, "MAX_TURNS")}


def _item_count(kind: str, params: Mapping[str, Any]) -> int:
    """Items of one repeat, from the kind's parameters (a prompts file's are counted when it is read)."""
    for name in ("items", "prompt_tokens"):
        if isinstance(params.get(name), tuple):
            return len(params[name])
    count = params.get("count")
    return count if isinstance(count, int) else 1


def _check_dataset(r: Reader, key: KeyPath, base_dir: Path, params: dict[str, Any]) -> int:
    """A ``prompt_dataset`` file read now (path resolved from the sweep's folder; empty: the shipped sample):
    its prompt count, or an issue naming the file's line and the fix."""
    if params.get("path"):
        params["path"] = str(resolve_path(base_dir, params["path"]))
    path = dataset_path(str(params.get("path") or ""))
    if not path.is_file():
        r.error((*key, "path"), f"dataset file not found: {path}", "relative paths are taken from the sweep file's folder")
        return 0
    try:
        prompts = load_dataset(path, str(params.get("format") or "spec_bench"), params.get("categories") or (),
                               int(params.get("limit") or 0), int(params.get("per_category") or 0),
                               str(params.get("category_field") or "category"))
    except (OSError, PromptsFileError) as exc:
        r.error((*key, "path"), f"the dataset cannot be used: {exc}",
                "each line is a JSON object with question_id, category and turns (blank and # lines are skipped)")
        return 0
    if not prompts:
        r.error((*key, "path"), f"the dataset {path} gives no prompt", "check the file and the categories")
        return 0
    if len(prompts) > MAX_ITEMS:
        r.error((*key, "path"), f"the dataset {path} gives {len(prompts):,} prompts (MAX_ITEMS = {MAX_ITEMS:,})",
                "set limit = N or per_category = N")
        return 0
    return len(prompts)


def _check_prompts_file(r: Reader, key: KeyPath, path: Path, params: Mapping[str, Any]) -> int:
    """Read and parse a prompts file now, so that the run cannot die on it; the number of prompts it gives."""
    hint = "relative paths are taken from the sweep file's folder"
    if not path.is_file():
        r.error(key, f"prompts file not found: {path}" if not path.exists() else
                f"the prompts file {path} is not a regular file",
                hint)
        return 0
    try:
        size = path.stat().st_size
        if size > MAX_PROMPTS_FILE_BYTES:
            r.error(key, f"the prompts file {path} is {size:,} bytes (MAX_PROMPTS_FILE_BYTES = {MAX_PROMPTS_FILE_BYTES:,})",
                    "set limit = N and keep only the prompts you use in the file")
            return 0
        categories = params.get("categories") or ()
        prompts = load_prompts_file(path, categories, params.get("limit") or 0)
    except (OSError, PromptsFileError) as exc:
        r.error(key, f"the prompts file cannot be used: {exc}", "each line is a JSON object with \"turns\", "
                "\"prompt\" or \"text\" (blank and # lines are skipped)")
        return 0
    if not prompts:
        r.error(key, f"the prompts file {path} gives no prompt" + (f" in categories {list(categories)}" if categories else ""),
                "check the file and the categories")
        return 0
    if len(prompts) > MAX_ITEMS:
        r.error(key, f"the prompts file {path} holds {len(prompts):,} prompts (MAX_ITEMS = {MAX_ITEMS:,})", "set limit = N")
        return 0
    return len(prompts)
