"""Sweeps derived from a run's own sweep: one configuration of the plan pinned to its matrix point (or moved to
another draft budget), written back as TOML. The crash bisection (:mod:`specbench_tui.core.bisect`) and the
confirm sweep of ``specbench recommend`` (:mod:`specbench_tui.core.recommend`) are made of these.

Pure: dictionaries in, text out. The TOML written is the subset a sweep uses (tables, arrays of tables, inline
tables, arrays and scalars) and is read back with :mod:`tomllib` before it is returned, so a value it cannot
spell is an error here, never a file that does not load.
"""

from __future__ import annotations

import copy
import json
import math
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import TypeGuard

PATH_KEYS = ("sim_profile",)
"""``[engine]`` keys holding a path relative to the sweep file: made absolute, as the derived sweep lives
elsewhere."""


class DeriveError(ValueError):
    """The configuration cannot be derived (its budget is not a matrix parameter, or the block is gone)."""


def pinned_block(doc: Mapping[str, object], config: Mapping[str, object], budget: int | None = None) -> dict[str, object]:
    """The ``[[configs]]`` block that expands to exactly ``config`` (a configuration of the stored plan: ``source_index``,
    ``params``, ``name``): its matrix pinned to the configuration's point, its exclusions dropped; with
    ``budget``, the matrix parameter that sets the draft budget moved to it."""
    blocks = doc.get("configs")
    index = config.get("source_index", 0)
    if not isinstance(blocks, list) or not isinstance(index, int) or not 0 <= index < len(blocks):
        raise DeriveError(f"{config.get('name')}: its [[configs]] block #{index} is not in the stored sweep")
    block: dict[str, object] = dict(copy.deepcopy(blocks[index]))
    block.pop("exclude", None)
    planned = config.get("params")
    params: dict[str, object] = dict(planned) if isinstance(planned, Mapping) else {}
    if budget is not None:
        key = _budget_param(params, config.get("draft_budget"))
        if key is None:
            raise DeriveError(f"{config.get('name')}: its draft budget is not a matrix parameter of its "
                              "[[configs]] block; write the budgets to try as one (matrix = { budget = [...] })")
        params[key] = budget
        if "{" + key + "}" not in str(block.get("name", "")):
            block["name"] = f"{block.get('name', config.get('name'))}-b{{{key}}}"
    if params:
        block["matrix"] = {k: [v] for k, v in params.items()}
    return block


def _budget_param(params: Mapping[str, object], draft_budget: object) -> str | None:
    if not isinstance(draft_budget, int):
        return None
    named = [k for k, v in params.items() if v == draft_budget and not isinstance(v, bool)]
    preferred = [k for k in named if "budget" in k or "draft" in k or "token" in k]
    chosen = preferred or named
    return chosen[0] if chosen else None


def derived_doc(doc: Mapping[str, object], blocks: list[dict[str, object]], origin: Path | None,
                **sweep: object) -> dict[str, object]:
    """The stored sweep ``doc`` with its configurations replaced by ``blocks``, ``[sweep]`` keys set from
    ``sweep`` (a None value removes the key) and relative engine paths resolved against ``origin``'s folder."""
    out = copy.deepcopy(dict(doc))
    out["configs"] = blocks
    table = _table(out, "sweep")
    for key, value in sweep.items():
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
    out["sweep"] = table
    engine = _table(out, "engine")
    for key in PATH_KEYS:
        value = engine.get(key)
        if isinstance(value, str) and origin is not None and not Path(value).is_absolute():
            engine[key] = str((origin.parent / value).resolve())
    if engine:
        out["engine"] = engine
    return out


def _table(doc: Mapping[str, object], name: str) -> dict[str, object]:
    """A copy of ``doc``'s table ``name`` (empty when it has none)."""
    table = doc.get(name)
    return dict(table) if isinstance(table, Mapping) else {}


def to_toml(doc: Mapping[str, object], header: str = "") -> str:
    """``doc`` as TOML (scalars and arrays first, then tables, then arrays of tables), read back to check."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    lines += _table_lines(doc, ())
    text = "\n".join(lines).strip("\n") + "\n"
    if tomllib.loads(text) != _plain(doc):
        raise DeriveError("the derived sweep does not read back as written")
    return text


def _table_lines(table: Mapping[str, object], path: tuple[str, ...], in_array: bool = False) -> list[str]:
    """A table's lines: its mappings are tables of their own, but inside an array of tables they are inline."""
    lines: list[str] = []
    tables = {k: v for k, v in table.items() if isinstance(v, Mapping) and not in_array}
    arrays = {k: v for k, v in table.items() if _is_table_array(v)}
    for key, value in table.items():
        if key not in tables and key not in arrays:
            lines.append(f"{_key(key)} = {_value(value)}")
    for key, value in tables.items():
        lines += ["", f"[{'.'.join(_key(k) for k in (*path, key))}]", *_table_lines(value, (*path, key))]
    for key, value in arrays.items():
        for item in value:
            lines += ["", f"[[{'.'.join(_key(k) for k in (*path, key))}]]",
                      *_table_lines(item, (*path, key), in_array=True)]
    return lines


def _is_table_array(value: object) -> TypeGuard[list[Mapping[str, object]]]:
    return isinstance(value, list) and bool(value) and all(isinstance(v, Mapping) for v in value)


def _key(key: str) -> str:
    return key if key.replace("-", "").replace("_", "").isalnum() and key.isascii() else json.dumps(key)


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        raise DeriveError(f"{value} has no TOML spelling a sweep reads")
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }" if value else "{}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise DeriveError(f"{value!r} has no TOML spelling a sweep reads")


def _plain(value: object) -> object:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
