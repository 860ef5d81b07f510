"""Property: whatever a user (or a bad editor) does to a sweep file, validation answers with a Plan or a
SweepError, never another exception.

Two generators: structural mutations of valid sweeps (keys deleted, inserted, retyped, values changed), written
back as TOML, and raw text corruption (characters and lines deleted, duplicated, inserted, bytes flipped).
Derandomized with no example database, so CI sees the same examples each run.
"""

from __future__ import annotations

import copy
import datetime
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specbench_tui.core.errors import SweepError
from specbench_tui.core.plan import Plan, build_plan
from specbench_tui.core.sweep.loader import load_sweep, parse_sweep
from specbench_tui.paths import shipped_sweeps

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

FUZZ = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

BASES = [path.read_text() for path in shipped_sweeps()]
BASE_DATA = [tomllib.loads(text) for text in BASES]

# ------------------------------------------------------------------------------------ a small TOML writer


def _key(name: str) -> str:
    return name if name and all(c.isalnum() or c in "-_" for c in name) else json.dumps(name)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value) if value == value and value not in (float("inf"), float("-inf")) else "nan"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (datetime.date, datetime.time, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(type(value))


def dumps(data: dict[str, Any]) -> str:
    """TOML for a document whose top-level values are tables, arrays of tables or plain values."""
    lines: list[str] = []
    plain = {k: v for k, v in data.items() if not isinstance(v, dict) and not _array_of_tables(v)}
    lines += [f"{_key(k)} = {_value(v)}" for k, v in plain.items()]
    for k, v in data.items():
        if k in plain:
            continue
        if isinstance(v, dict):
            lines.append(f"[{_key(k)}]")
            lines += [f"{_key(a)} = {_value(b)}" for a, b in v.items()]
        else:
            for element in v:
                lines.append(f"[[{_key(k)}]]")
                lines += [f"{_key(a)} = {_value(b)}" for a, b in element.items()]
    return "\n".join(lines) + "\n"


def _array_of_tables(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


# --------------------------------------------------------------------------------------------- mutations

KEYS = ["name", "kind", "matrix", "args", "fork_args", "env", "exclude", "reason", "tp", "budget", "tp-size",
        "speculative-algorithm", "speculative-num-draft-tokens", "speculative-draft-model-path", "gpus", "baseline",
        "repeats", "warmup", "launcher", "sim_profile", "api_key_env", "crash_signatures", "items", "count",
        "prompt_tokens", "port", "tp", "page-size", "configs", "workloads", "server", "engine", "sweep", "x"]

scalars = st.one_of(
    st.booleans(), st.integers(-3, 70), st.sampled_from([0.5, -1.0, 1e9, float("nan"), float("inf")]),
    st.sampled_from(["", "{tp}", "{budget}", "{nope}", "DFLASH", "EAGLE3", "DDTREE", "all", "max", "code",
                     "sglang", "command", "(", "a b", "ar-tp{tp}", "/dev/shm/x", "sk-0123456789abcdefghij"]),
    st.text(max_size=6),
    st.just(datetime.date(2026, 1, 2)),
)
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.sampled_from(KEYS), inner, max_size=3)),
                      max_leaves=8)


def _containers(node: Any, out: list[Any]) -> list[Any]:
    if isinstance(node, (dict, list)):
        out.append(node)
        for child in (node.values() if isinstance(node, dict) else node):
            _containers(child, out)
    return out


@st.composite
def mutated_documents(draw: st.DrawFn) -> dict[str, Any]:
    data: dict[str, Any] = copy.deepcopy(draw(st.sampled_from(BASE_DATA)))
    for _ in range(draw(st.integers(1, 4))):
        containers = _containers(data, [])
        target = draw(st.sampled_from(containers))
        action = draw(st.sampled_from(["delete", "insert", "replace", "retype"]))
        if isinstance(target, dict):
            if not target or action == "insert":
                target[draw(st.sampled_from(KEYS))] = draw(values)
            else:
                key = draw(st.sampled_from(sorted(target)))
                if action == "delete":
                    del target[key]
                elif action == "replace":
                    target[key] = draw(values)
                else:
                    target[key] = draw(scalars) if isinstance(target[key], (dict, list)) else [target[key]]
        else:
            if not target or action == "insert":
                target.append(draw(values))
            else:
                index = draw(st.integers(0, len(target) - 1))
                if action == "delete":
                    del target[index]
                else:
                    target[index] = draw(values)
    return data


def check(text: str) -> None:
    """The property itself."""
    with tempfile.TemporaryDirectory() as folder:
        try:
            plan = build_plan(parse_sweep(text, Path(folder) / "fuzz.toml"))
        except SweepError as exc:
            assert exc.issues, "a SweepError always carries at least one issue"
            for issue in exc.issues:
                assert issue.path.endswith("fuzz.toml") and (issue.line is None or issue.line >= 1)
            return
        assert isinstance(plan, Plan)
        json.dumps(plan.to_json())  # the plan can always be written to plan.json


@FUZZ
@given(mutated_documents())
def test_structural_mutations_give_a_plan_or_a_sweep_error(data: dict[str, Any]) -> None:
    try:
        text = dumps(data)
    except TypeError:
        return
    check(text)


@FUZZ
@given(base=st.sampled_from(BASES), edits=st.lists(st.tuples(
    st.sampled_from(["delete_char", "insert_char", "delete_line", "duplicate_line", "swap_lines"]),
    st.integers(0, 10**6), st.sampled_from(list("[]{}=\"'#\n,.-{}0a ") + ["[[configs]]", "\"\"\""])),
    min_size=1, max_size=5))
def test_text_corruption_gives_a_plan_or_a_sweep_error(base: str, edits: list[tuple[str, int, str]]) -> None:
    text = base
    for action, position, char in edits:
        lines = text.split("\n")
        if action == "delete_char" and text:
            i = position % len(text)
            text = text[:i] + text[i + 1:]
        elif action == "insert_char":
            i = position % (len(text) + 1)
            text = text[:i] + char + text[i:]
        elif action == "delete_line":
            del lines[position % len(lines)]
            text = "\n".join(lines)
        elif action == "duplicate_line":
            i = position % len(lines)
            lines.insert(i, lines[i])
            text = "\n".join(lines)
        elif action == "swap_lines" and len(lines) > 1:
            i = position % (len(lines) - 1)
            lines[i], lines[i + 1] = lines[i + 1], lines[i]
            text = "\n".join(lines)
    check(text)


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(st.binary(max_size=40), st.integers(0, 10**6))
def test_corrupted_bytes_on_disk_give_a_plan_or_a_sweep_error(junk: bytes, position: int) -> None:
    raw = BASES[0].encode()
    i = position % len(raw)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "fuzz.toml"
        path.write_bytes(raw[:i] + junk + raw[i:])
        try:
            build_plan(load_sweep(path))
        except SweepError:
            pass


def test_writer_round_trips_the_shipped_sweeps() -> None:
    """The fuzzer's TOML writer is faithful, so mutations are what reach the loader."""
    for data in BASE_DATA:
        assert tomllib.loads(dumps(data)) == data
