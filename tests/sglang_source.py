"""Facts read from the installed SGLang 0.5.23 wheel's own source by ``ast``, for tests/real_servers/test_sglang_source.py.

Nothing here copies SGLang's text: each extractor finds a node by a short locator (a function name, a call, a
distinctive fragment) and returns what SGLang's code says there: the whole message template as a regular
expression (literal pieces escaped, each ``{value}`` a group), the keys it writes, the names it lists. A test
then checks that the simulator emits, and the product accepts, exactly that. A change in SGLang's source
changes the extracted facts, and a test fails instead of the product misreading a real server.

Every extractor takes ``root``, the ``sglang`` package directory, so the same checks run on a modified copy.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import cast

REPO = Path(__file__).resolve().parent.parent

FILES = {
    "http_server": "srt/entrypoints/http_server.py",
    "engine": "srt/entrypoints/engine.py",
    "metrics_reporter": "srt/managers/scheduler_components/metrics_reporter.py",
    "pool_stats": "srt/managers/scheduler_components/pool_stats_observer.py",
    "tokenizer_manager": "srt/managers/tokenizer_manager.py",
    "managers_utils": "srt/managers/utils.py",
    "schedule_batch": "srt/managers/schedule_batch.py",
    "scheduler": "srt/managers/scheduler.py",
    "detokenizer": "srt/managers/detokenizer_manager.py",
    "dp_controller": "srt/managers/data_parallel_controller.py",
    "tp_worker": "srt/managers/tp_worker.py",
    "spec_info": "srt/speculative/spec_info.py",
    "watchdog": "srt/utils/watchdog.py",
    "prefill_graph": "srt/model_executor/runner/prefill_cuda_graph_runner.py",
    "internal_state": "srt/managers/scheduler_components/internal_state.py",
    "speculative_hook": "srt/arg_groups/speculative_hook.py",
    "spec_registry": "srt/speculative/spec_registry.py",
    "spec_fields": "srt/arg_groups/fields/spec.py",
    "schedule_fields": "srt/arg_groups/fields/schedule.py",
    "adaptive": "srt/speculative/adaptive_spec_params.py",
    "dspark_config": "srt/speculative/dspark_components/dspark_config.py",
    "openai_protocol": "srt/entrypoints/openai/protocol.py",
    "flush_wrapper": "srt/managers/scheduler_components/flush_wrapper.py",
    "tokenizer_control": "srt/managers/tokenizer_control_mixin.py",
    "common": "srt/utils/common.py",
    "server_args": "srt/server_args.py",
    "environ": "srt/environ.py",
    "spec_utils": "srt/speculative/spec_utils.py",
    "eagle_worker_v2": "srt/speculative/eagle_worker_v2.py",
    "ngram_worker": "srt/speculative/ngram_worker.py",
    "exec_fields": "srt/arg_groups/fields/exec_.py",
    "cuda_graph_hook": "srt/arg_groups/cuda_graph_hook.py",
    "memory_hook": "srt/arg_groups/memory_hook.py",
    "cuda_graph_config": "srt/model_executor/cuda_graph_config.py",
    **{f"fields_{name}": f"srt/arg_groups/fields/{name}.py" for name in (
        "device", "disagg", "exec_", "lora", "memory", "mm", "model", "observability", "parallel", "schedule",
        "serving", "spec")},
}
"""The wheel's files the facts come from (package paths)."""


def sglang_python() -> Path | None:
    override = os.environ.get("SPECBENCH_SGLANG_PYTHON")
    candidate = Path(override) if override else REPO / ".venv-sglang" / "bin" / "python"
    return candidate if candidate.exists() else None


def sglang_root(python: Path) -> Path:
    """The installed ``sglang`` package directory (``find_spec`` does not import it, so no torch is loaded)."""
    code = ("import importlib.util, sys; spec = importlib.util.find_spec('sglang'); "
            "sys.stdout.write(list(spec.submodule_search_locations)[0])")
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return Path(out.stdout.strip())


@lru_cache(maxsize=64)
def _tree(path: str, mtime: float) -> ast.Module:
    return ast.parse(Path(path).read_text(encoding="utf-8"), filename=path)


def tree(root: Path, key: str) -> ast.Module:
    path = root / FILES[key]
    return _tree(str(path), path.stat().st_mtime)


def function(module: ast.AST, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    """The (first) function or method called ``name`` anywhere in ``module``."""
    for node in ast.walk(module):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
    raise AssertionError(f"SGLang's source has no function {name!r} any more")


def _pieces(node: ast.AST) -> list[ast.AST] | None:
    """A string expression as literal/value pieces (f-strings, plain strings and their ``+``), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node]
    if isinstance(node, ast.JoinedStr):
        return list(node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _pieces(node.left), _pieces(node.right)
        return left + right if left is not None and right is not None else None
    return None


def const_str(node: ast.Constant) -> str:
    """The text of a string constant (the f-string pieces and dict keys read here are strings; typeshed types
    ``Constant.value`` as any literal)."""
    return cast(str, node.value)


def template(node: ast.AST) -> re.Pattern[str]:
    """A string expression as a regular expression: literal pieces escaped, each ``{value}`` a lazy group."""
    pieces = _pieces(node)
    if pieces is None:
        raise AssertionError(f"not a string expression: {ast.dump(node)[:200]}")
    parts = [re.escape(const_str(p)) if isinstance(p, ast.Constant) else "(.+?)" for p in pieces]
    return re.compile("".join(parts), re.S)


def percent_template(text: str) -> re.Pattern[str]:
    """A ``%``-style logging format (``%d``, ``%s``) as a regular expression."""
    return re.compile("".join("(.+?)" if re.fullmatch(r"%[ds]", part) else re.escape(part)
                              for part in re.split(r"(%[ds])", text)), re.S)


def literal_text(node: ast.AST) -> str:
    """The literal pieces of a string expression joined (values dropped): for locating."""
    return "".join(const_str(p) for p in _pieces(node) or () if isinstance(p, ast.Constant))


def string_exprs(scope: ast.AST) -> Iterator[ast.AST]:
    """Every maximal string expression in ``scope`` (a ``+`` of strings counts once, not its halves)."""
    inner: set[int] = set()
    for node in ast.walk(scope):
        if id(node) in inner:
            continue
        if _pieces(node) is not None and not (isinstance(node, ast.Constant) and id(node) in inner):
            for child in ast.walk(node):
                if child is not node:
                    inner.add(id(child))
            yield node


def find_string(scope: ast.AST, fragment: str) -> ast.AST:
    """The string expression whose literal text contains ``fragment`` (exactly one must)."""
    found = [n for n in string_exprs(scope) if fragment in literal_text(n)]
    if not found:
        raise AssertionError(f"SGLang's source no longer has a string with {fragment!r}")
    return found[0]


def labels(scope: ast.AST) -> set[str]:
    """``label: {value}`` labels of every f-string in ``scope`` (``#running-req``, ``accept len``...)."""
    out: set[str] = set()
    for node in ast.walk(scope):
        if not isinstance(node, ast.JoinedStr):
            continue
        values = node.values
        for piece, after in zip(values, values[1:]):
            if isinstance(piece, ast.Constant) and isinstance(after, ast.FormattedValue):
                match = re.search(r"(?:^|, |\. )([#A-Za-z][A-Za-z0-9 _\-/()]*): $", const_str(piece))
                if match:
                    out.add(match.group(1))
    return out


def subscript_keys(scope: ast.AST, target: str) -> set[str]:
    """Keys written as ``target["key"] = ...``, in dict literals assigned to ``target`` and in
    ``target.update({...})``."""
    keys: set[str] = set()
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if (isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == target
                        and isinstance(t.slice, ast.Constant) and isinstance(t.slice.value, str)):
                    keys.add(t.slice.value)
                if isinstance(t, ast.Name) and t.id == target and isinstance(node.value, ast.Dict):
                    keys |= {const_str(k) for k in node.value.keys if isinstance(k, ast.Constant)}
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == target and node.args
                and isinstance(node.args[0], ast.Dict)):
            keys |= {const_str(k) for k in node.args[0].keys if isinstance(k, ast.Constant)}
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == target \
                and isinstance(node.value, ast.Dict):
            keys |= {const_str(k) for k in node.value.keys if isinstance(k, ast.Constant)}
    return keys


def dict_keys(scope: ast.AST) -> set[str]:
    """String keys of every dict literal in ``scope``."""
    return {k.value for n in ast.walk(scope) if isinstance(n, ast.Dict) for k in n.keys
            if isinstance(k, ast.Constant) and isinstance(k.value, str)}


def call_args(scope: ast.AST, name: str) -> list[ast.AST]:
    """First arguments of calls to ``name`` (a bare name or an attribute's last part)."""
    out: list[ast.AST] = []
    for node in ast.walk(scope):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if called == name:
                out.append(node.args[0])
    return out
