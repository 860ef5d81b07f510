"""What SGLang 0.5.23's own source says about the facts issue 26 found misread, read by ``ast`` from the installed
wheel (``root`` is its ``sglang`` package directory, so the same readers run on a modified copy).

Each reader finds its node by a locator (a function, a guard, a field's help text) and returns what the code there
does: the ``max_running_requests`` each speculative handler resets, which algorithm reaches which handler, the
adaptive tiers and the draft width they reserve, the NGRAM and DSPARK defaults, the retraction warning, the
``/flush_cache``, ``/v1/models`` and ``/server_info`` contracts. When the code no longer has the shape a reader
knows, it raises ``AssertionError`` naming what moved: a change in SGLang fails a check instead of passing it.
"""

from __future__ import annotations

import ast
import http
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sglang_source as src


def _module(body: list[ast.stmt]) -> ast.Module:
    return ast.Module(body=body, type_ignores=[])


def _keywords(scope: ast.AST, name: str) -> list[ast.expr]:
    """Values of every ``name=...`` keyword argument in ``scope``."""
    return [k.value for n in ast.walk(scope) if isinstance(n, ast.Call) for k in n.keywords if k.arg == name]


def _warnings(scope: ast.AST) -> list[ast.expr]:
    """First arguments of ``logger.warning(...)`` calls in ``scope``."""
    return [n.args[0] for n in ast.walk(scope) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == "warning" and n.args]


def _class(module: ast.AST, name: str) -> ast.ClassDef:
    for node in ast.walk(module):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise AssertionError(f"SGLang's source has no class {name!r} any more")


def _assigned(module: ast.AST, name: str) -> ast.expr:
    """The value of the module-level assignment to ``name`` (plain or annotated)."""
    for node in ast.walk(module):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return node.value
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name \
                and node.value is not None:
            return node.value
    raise AssertionError(f"SGLang's source no longer assigns {name!r}")


def _field(root: Path, key: str, name: str) -> ast.AnnAssign:
    """A ServerArgs field declared as ``name: A[type, help] = default`` in ``arg_groups/fields/``."""
    for node in ast.walk(src.tree(root, key)):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return node
    raise AssertionError(f"ServerArgs has no field {name!r} in {src.FILES[key]} any more")


def field_default(root: Path, key: str, name: str) -> Any:
    node = _field(root, key, name)
    assert node.value is not None, f"the ServerArgs field {name!r} has no default any more"
    return ast.literal_eval(node.value)


# ------------------------------------------------------------------------ the running-request cap (48 reset)


@dataclass(frozen=True)
class CapReset:
    """A speculative handler's reset of an unset ``--max-running-requests``."""

    handler: str
    value: int
    warning: re.Pattern[str]
    """The whole warning it logs, as a regular expression (literal pieces escaped)."""


def cap_resets(root: Path) -> dict[str, CapReset]:
    """Per function of ``arg_groups/speculative_hook.py`` that sets ``max_running_requests``: the value and the
    warning. Every such assignment must sit under ``if cfg.max_running_requests is None:`` with one warning."""
    out: dict[str, CapReset] = {}
    for func in src.tree(root, "speculative_hook").body:
        if not isinstance(func, ast.FunctionDef):
            continue
        values = _keywords(func, "max_running_requests")
        if not values:
            continue
        guards = [n for n in ast.walk(func) if isinstance(n, ast.If)
                  and re.fullmatch(r"\w+\.max_running_requests is None", ast.unparse(n.test))]
        assert len(values) == 1 and len(guards) == 1, (
            f"{func.name} sets max_running_requests {len(values)} times under {len(guards)} 'is None' guards")
        guarded = _keywords(_module(guards[0].body), "max_running_requests")
        assert guarded == values, f"{func.name} sets max_running_requests outside its 'is None' guard"
        warnings = _warnings(_module(guards[0].body))
        assert len(warnings) == 1, f"{func.name} logs {len(warnings)} warnings where it resets the cap"
        out[func.name] = CapReset(func.name, ast.literal_eval(values[0]), src.template(warnings[0]))
    return out


def _members(expr: ast.expr, methods: dict[str, ast.FunctionDef]) -> set[str]:
    """The ``SpeculativeAlgorithm`` members for which a predicate expression (``self == X``, ``self in (X, Y)``,
    ``self.is_x() or ...``) is true."""
    if isinstance(expr, ast.BoolOp) and isinstance(expr.op, ast.Or):
        return set().union(*(_members(v, methods) for v in expr.values))
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and not expr.args \
            and ast.unparse(expr.func.value) == "self" and expr.func.attr in methods:
        returns = [n for n in ast.walk(methods[expr.func.attr]) if isinstance(n, ast.Return) and n.value]
        assert len(returns) == 1, f"{expr.func.attr} is no single return any more"
        return _members(returns[0].value, methods)  # type: ignore[arg-type]
    if isinstance(expr, ast.Compare) and len(expr.ops) == 1 and ast.unparse(expr.left) == "self":
        right = expr.comparators[0]
        if isinstance(expr.ops[0], ast.Eq) and isinstance(right, ast.Attribute):
            return {right.attr}
        if isinstance(expr.ops[0], ast.In) and isinstance(right, (ast.Tuple, ast.List, ast.Set)):
            return {e.attr for e in right.elts if isinstance(e, ast.Attribute)}
    raise AssertionError(f"cannot read the algorithm predicate {ast.unparse(expr)!r}")


def algorithm_handlers(root: Path) -> dict[str, str | None]:
    """Per algorithm name a user may pass (enum members and reserved aliases, ``NONE`` left out): the
    ``speculative_hook`` handler ``SpeculativeAlgorithm.handle_server_args`` calls for it (None: none)."""
    enum = _class(src.tree(root, "spec_info"), "SpeculativeAlgorithm")
    members = [t.id for n in enum.body if isinstance(n, ast.Assign) for t in n.targets
               if isinstance(t, ast.Name) and t.id != "NONE"]
    methods = {f.name: f for f in enum.body if isinstance(f, ast.FunctionDef)}
    assert "handle_server_args" in methods, "SpeculativeAlgorithm.handle_server_args is gone"
    chain = next((n for n in methods["handle_server_args"].body if isinstance(n, ast.If)
                  and "self.is_" in ast.unparse(n.test)), None)
    assert chain is not None, "handle_server_args no longer dispatches on self.is_*()"
    branches: list[tuple[set[str], str]] = []
    node: ast.stmt | None = chain
    while isinstance(node, ast.If):
        called = [n.func.id for n in ast.walk(_module(node.body)) if isinstance(n, ast.Call)
                  and isinstance(n.func, ast.Name) and n.func.id.startswith("_handle_")]
        assert len(called) == 1, f"the branch {ast.unparse(node.test)!r} calls {called}"
        branches.append((_members(node.test, methods), called[0]))
        node = node.orelse[0] if len(node.orelse) == 1 else None
    out: dict[str, str | None] = {m: next((h for ms, h in branches if m in ms), None) for m in members}
    for alias, target in aliases(root).items():
        out[alias] = out[target]
    return out


def aliases(root: Path) -> dict[str, str]:
    """Reserved algorithm spellings and the member ``from_string`` returns for them (``NEXTN`` → ``EAGLE``)."""
    names = ast.literal_eval(_assigned(src.tree(root, "spec_registry"), "_RESERVED_ALIASES").args[0])  # type: ignore[attr-defined]
    from_string = src.function(_class(src.tree(root, "spec_info"), "SpeculativeAlgorithm"), "from_string")
    gate = next(n for n in ast.walk(from_string) if isinstance(n, ast.If) and "_RESERVED_ALIASES" in ast.unparse(n.test))
    target = gate.body[0]
    assert isinstance(target, ast.Return) and isinstance(target.value, ast.Attribute), ast.unparse(gate)
    return {name: target.value.attr for name in names}


def cap_per_algorithm(root: Path) -> dict[str, int | None]:
    """Per algorithm: the ``max_running_requests`` SGLang gives it when the flag is unset (None: left unset)."""
    resets = cap_resets(root)
    return {alg: (resets[h].value if h in resets else None) for alg, h in algorithm_handlers(root).items()}


# ------------------------------------------------------------------------------------------ adaptive steps


def adaptive_config(root: Path) -> dict[str, Any]:
    """``DEFAULT_ADAPTIVE_CONFIG``, the tiers used when no ``--speculative-adaptive-config`` is given."""
    config = ast.literal_eval(_assigned(src.tree(root, "adaptive"), "DEFAULT_ADAPTIVE_CONFIG"))
    assert isinstance(config, dict), type(config)
    return config


def adaptive_field(root: Path) -> str:
    """The ServerArgs field that switches adaptive steps on (its guard in ``handle_speculative_decoding``)."""
    handle = src.function(src.tree(root, "speculative_hook"), "handle_speculative_decoding")
    gate = next((n for n in ast.walk(handle) if isinstance(n, ast.If) and "_init_adaptive_speculative_params"
                 in ast.unparse(n)), None)
    assert gate is not None and isinstance(gate.test, ast.Attribute), "adaptive set-up is no longer behind a flag"
    return gate.test.attr


def adaptive_tiers(root: Path) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """``DEFAULT_ADAPTIVE_CONFIG`` as (lowest batch size of the tier, its candidate steps), sorted."""
    config = adaptive_config(root)
    return tuple(sorted((int(k), tuple(sorted(set(v["candidate_steps"])))) for k, v in config.items()
                        if k.isdigit()))


def adaptive_routing_is_floor(root: Path) -> bool:
    """Whether a batch size goes to the tier with the largest key not above it (the first below the first key)."""
    closest = ast.unparse(src.function(src.tree(root, "adaptive"), "_find_closest_bs"))
    return ("bisect.bisect_right(self._bs_list, target) - 1" in closest
            and "self._bs_list[max(0, idx)]" in closest)


def adaptive_steps(root: Path, batch_size: int) -> tuple[int, ...]:
    """The candidate steps SGLang's default adaptive config chooses among at ``batch_size`` (before CUDA-graph
    padding: ``_route`` first rounds the batch up to a captured size)."""
    assert adaptive_routing_is_floor(root), "AdaptiveSpeculativeParams._find_closest_bs routes differently"
    tiers = adaptive_tiers(root)
    chosen = tiers[0]
    for tier in tiers:
        if tier[0] <= batch_size:
            chosen = tier
    return chosen[1]


def adaptive_algorithms(root: Path) -> tuple[str, ...]:
    """The algorithms ``--speculative-adaptive`` runs with (others fall back to static steps)."""
    reason = src.function(src.tree(root, "adaptive"), "adaptive_unsupported_reason")
    gate = next(n for n in ast.walk(reason) if isinstance(n, ast.Compare) and isinstance(n.ops[0], ast.NotIn)
                and ast.unparse(n.left) == "cfg.speculative_algorithm")
    return tuple(ast.literal_eval(gate.comparators[0]))


def adaptive_draft_width(root: Path) -> int:
    """The draft tokens an adaptive server sizes for: ``max(candidate_steps) + k`` in
    ``resolve_max_speculative_num_draft_tokens`` (the union of every tier's steps)."""
    resolve = src.function(src.tree(root, "spec_info"), "resolve_max_speculative_num_draft_tokens")
    last = [n for n in resolve.body if isinstance(n, ast.Return)][-1].value
    assert isinstance(last, ast.BinOp) and isinstance(last.op, ast.Add) and isinstance(last.right, ast.Constant) \
        and isinstance(last.right.value, int) and ast.unparse(last.left) == "max(candidate_steps)", \
        ast.unparse(last) if last else None
    steps = {s for _, tier in adaptive_tiers(root) for s in tier}
    return max(steps) + last.right.value


def adaptive_reserved_tokens(root: Path) -> int:
    """Context tokens an adaptive EAGLE server reserves per request: ``compute_num_reserved_tokens`` is
    ``max(topk * steps, max draft tokens)`` with topk 1 (adaptive needs it) and steps among the candidates."""
    rule = ast.unparse(src.function(src.tree(root, "managers_utils"), "compute_num_reserved_tokens"))
    assert "spec.speculative_eagle_topk * spec.speculative_num_steps" in rule and \
        "max_speculative_num_draft_tokens()" in rule, "compute_num_reserved_tokens changed"
    topk = ast.literal_eval(_keywords(src.function(src.tree(root, "speculative_hook"),
                                                   "_init_adaptive_speculative_params"), "speculative_eagle_topk")[0])
    assert isinstance(topk, int), topk
    steps = max(s for _, tier in adaptive_tiers(root) for s in tier)
    return max(topk * steps, adaptive_draft_width(root))


# ------------------------------------------------------------------------------------------ NGRAM and DSPARK


def _resolution(func: ast.AST, name: str) -> ast.expr:
    values = _keywords(func, name)
    assert len(values) == 1, f"{getattr(func, 'name', '?')} resolves {name} {len(values)} times"
    return values[0]


def ngram_defaults(root: Path) -> dict[str, int]:
    """What ``_handle_ngram`` resolves an NGRAM server to when only the algorithm is given."""
    handler = src.function(src.tree(root, "speculative_hook"), "_handle_ngram")
    topk = _resolution(handler, "speculative_eagle_topk")
    assert isinstance(topk, ast.Attribute), ast.unparse(topk)
    breadth = field_default(root, "spec_fields", topk.attr)
    drafts = ast.literal_eval(_resolution(handler, "speculative_num_draft_tokens"))
    steps = ast.unparse(_resolution(handler, "speculative_num_steps"))
    assert steps == "cfg.speculative_num_draft_tokens // cfg.speculative_eagle_topk", steps
    return {"speculative_num_draft_tokens": drafts, "speculative_eagle_topk": breadth,
            "speculative_num_steps": drafts // breadth}


def ngram_topk_field(root: Path) -> str:
    """The flag field NGRAM's topk is set from (``speculative_ngram_max_bfs_breadth``)."""
    topk = _resolution(src.function(src.tree(root, "speculative_hook"), "_handle_ngram"), "speculative_eagle_topk")
    assert isinstance(topk, ast.Attribute), ast.unparse(topk)
    return topk.attr


def dspark_rule(root: Path) -> tuple[int, int]:
    """(default gamma, k) of ``_handle_dspark``: ``num_draft_tokens = gamma + k`` where gamma is
    ``--speculative-dspark-block-size`` or, without one (and no draft checkpoint saying), the default."""
    handler = src.function(src.tree(root, "speculative_hook"), "_handle_dspark")
    assert ast.unparse(_resolution(handler, "speculative_num_draft_tokens")) == "verify_window"
    window = next(n.value for n in ast.walk(handler) if isinstance(n, ast.Assign)
                  and ast.unparse(n.targets[0]) == "verify_window")
    assert isinstance(window, ast.BinOp) and isinstance(window.op, ast.Add) and isinstance(window.right, ast.Constant) \
        and ast.unparse(window.left) == "int(gamma)", ast.unparse(window)
    from_flag = [n for n in ast.walk(handler) if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "gamma"
                 and ast.unparse(n.value) == "int(cfg.speculative_dspark_block_size)"]
    assert from_flag, "_handle_dspark no longer takes gamma from --speculative-dspark-block-size"
    default = ast.literal_eval(_assigned(src.tree(root, "dspark_config"), "DEFAULT_DSPARK_GAMMA"))
    assert isinstance(default, int) and isinstance(window.right.value, int), (default, window.right.value)
    return default, window.right.value


# ------------------------------------------------------------------------------------------------ retraction


def retract_line(root: Path) -> tuple[re.Pattern[str], ast.AST]:
    """The scheduler's warning when the KV pool is full (no mamba pool), as a regular expression, and its literal
    prefix node; the text comes from ``update_running_batch``'s ``msg_prefix + msg_details``."""
    update = src.function(src.tree(root, "scheduler"), "update_running_batch")
    prefix = src.find_string(update, "Retract requests")
    assigned = {ast.unparse(n.targets[0]): n.value for n in ast.walk(update) if isinstance(n, ast.Assign)}
    added = {ast.unparse(n.test): n.body for n in ast.walk(update) if isinstance(n, ast.If)}
    details = assigned.get("msg_details")
    assert details is not None, "update_running_batch builds no msg_details any more"
    ratio = [s.value for s in added.get("kv_full_retract_flag", []) if isinstance(s, ast.AugAssign)
             and ast.unparse(s.target) == "msg_details"]
    assert len(ratio) == 1, "the KV-full retraction no longer appends its token ratio"
    logged = [ast.unparse(w) for w in _warnings(update)]
    assert "msg_prefix + msg_details" in logged, logged
    pattern = src.template(prefix).pattern + src.template(details).pattern + src.template(ratio[0]).pattern
    return re.compile(pattern, re.S), prefix


def retraction_key(root: Path) -> str:
    """The ``meta_info`` key the tokenizer manager writes from ``recv_obj.retraction_counts``."""
    for node in ast.walk(src.tree(root, "tokenizer_manager")):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and "retraction_counts" in ast.unparse(v):
                    return str(k.value)
    raise AssertionError("meta_info no longer carries the retraction count")


# ------------------------------------------------------------------------------- endpoints the product reads


def route(root: Path, handler: str) -> tuple[str, frozenset[str]]:
    """The path and methods of the ``@app`` route on ``handler`` in ``entrypoints/http_server.py``."""
    func = src.function(src.tree(root, "http_server"), handler)
    for d in func.decorator_list:
        if isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and ast.unparse(d.func.value) == "app" \
                and d.args:
            methods = next((ast.literal_eval(k.value) for k in d.keywords if k.arg == "methods"), None)
            return src.literal_text(d.args[0]), frozenset(methods or [d.func.attr.upper()])
    raise AssertionError(f"{handler} is no @app route any more")


@dataclass(frozen=True)
class Flush:
    path: str
    methods: frozenset[str]
    done: str
    """The body of a flush that ran."""
    refused: str
    refused_status: int
    """Body and status when the scheduler refuses (requests running or waiting, and no ``timeout`` given)."""
    timeout_param: str
    """The query parameter that makes SGLang wait for idle instead of refusing at once."""


def flush_endpoint(root: Path) -> Flush:
    """``/flush_cache``: the route, what it answers, and that the scheduler refuses unless fully idle."""
    path, methods = route(root, "flush_cache")
    handler = src.function(src.tree(root, "http_server"), "flush_cache")
    branch = next(n for n in ast.walk(handler) if isinstance(n, ast.If) and ast.unparse(n.test) == "ret.success")
    done = next(s.value for s in branch.body if isinstance(s, ast.Assign))
    refused = next(s.value for s in branch.orelse if isinstance(s, ast.Assign))
    assert isinstance(refused, ast.BoolOp) and ast.unparse(refused.values[0]) == "ret.message", ast.unparse(refused)
    status = _keywords(handler, "status_code")[0]
    assert isinstance(status, ast.IfExp) and ast.unparse(status.test) == "ret.success" \
        and ast.literal_eval(status.body) == 200, ast.unparse(status)
    code = int(http.HTTPStatus[ast.unparse(status.orelse).split(".")[-1]])
    timeout = [a.arg for a in handler.args.args]
    assert len(timeout) == 1, timeout
    # The scheduler flushes only when fully idle; without a timeout the wrapper answers at once, with no message.
    scheduler = ast.unparse(src.function(src.tree(root, "scheduler"), "flush_cache"))
    assert re.search(r"if self\.is_fully_idle\(", scheduler), "Scheduler.flush_cache no longer checks idleness"
    wrapper = src.function(src.tree(root, "flush_wrapper"), "handle")
    immediate = next(n for n in ast.walk(wrapper) if isinstance(n, ast.If) and ast.unparse(n.test) == "timeout_s <= 0.0")
    assert ast.unparse(immediate.body[0]) == "return FlushCacheReqOutput(success=self._flush_cache())", \
        ast.unparse(immediate.body[0])
    return Flush(path, methods, src.literal_text(done), src.literal_text(refused.values[1]), code, timeout[0])


def models_context(root: Path) -> tuple[str, str]:
    """``/v1/models``: its path and what ``data[0].max_model_len`` is set from (the served model's card; the
    LoRA adapters' cards come after it)."""
    path, _ = route(root, "available_models")
    handler = src.function(src.tree(root, "http_server"), "available_models")
    cards = [n for n in ast.walk(handler) if isinstance(n, ast.Call) and ast.unparse(n.func) == "ModelCard"]
    base = [c for c in cards if not any(k.arg == "parent" for k in c.keywords)]
    assert base, "available_models builds no base-model card"
    value = _keywords(base[0], "max_model_len")
    assert len(value) == 1, "the base model's card has no max_model_len"
    card = _class(src.tree(root, "openai_protocol"), "ModelCard")
    assert "max_model_len" in {n.target.id for n in card.body if isinstance(n, ast.AnnAssign)
                               and isinstance(n.target, ast.Name)}
    return path, ast.unparse(value[0])


def enforced_context(root: Path) -> str:
    """What the tokenizer manager's ``context_len`` (the limit ``_validate_one_request`` enforces) is set from."""
    init = ast.unparse(src.tree(root, "tokenizer_manager"))
    match = re.search(r"self\.context_len = (self\.model_config\.context_len)\b", init)
    assert match, "the tokenizer manager's context_len no longer comes from model_config"
    return match.group(1)


@dataclass(frozen=True)
class RunningCap:
    field: str
    """The ServerArgs field ``/server_info`` carries (resolved: 48 after a speculative reset)."""
    default: Any
    states: str
    """The ``/server_info`` key of the per-DP scheduler states."""
    per_dp: str
    """The key of each state that holds the scheduler's own cap."""


def running_cap_keys(root: Path) -> RunningCap:
    """Where ``/server_info`` says the running-request cap."""
    field = next((n for n in ast.walk(src.tree(root, "schedule_fields")) if isinstance(n, ast.AnnAssign)
                  and isinstance(n.target, ast.Name) and "maximum number of running requests"
                  in ast.unparse(n.annotation)), None)
    assert field is not None and isinstance(field.target, ast.Name) and field.value is not None, \
        "no ServerArgs field is 'The maximum number of running requests' any more"
    build = ast.unparse(src.function(src.tree(root, "common"), "build_server_info"))
    assert "result = server_args.resolved_dict()" in build, "/server_info no longer carries every resolved field"
    info = src.function(src.tree(root, "http_server"), "server_info")
    states = next(k.value for n in ast.walk(info) if isinstance(n, ast.Dict) for k, v in zip(n.keys, n.values)
                  if isinstance(k, ast.Constant) and ast.unparse(v) == "internal_states")
    per_dp = [t.slice.value for n in ast.walk(src.tree(root, "internal_state")) if isinstance(n, ast.Assign)
              and ast.unparse(n.value) == "scheduler.max_running_requests" for t in n.targets
              if isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant)]
    assert len(per_dp) == 1, f"internal states carry the scheduler's cap under {per_dp}"
    return RunningCap(field.target.id, ast.literal_eval(field.value), str(states), str(per_dp[0]))


@dataclass(frozen=True)
class GraphCeiling:
    """Where ``/server_info`` says the decode batch sizes captured as CUDA graphs."""

    captured: str
    """The key of each ``internal_states`` entry listing the captured decode batch sizes (the scheduler's own)."""
    config: tuple[str, str, str]
    """(field, phase, key) of the resolved ceiling: ``cuda_graph_config.decode.max_bs``."""


def graph_ceiling_keys(root: Path) -> GraphCeiling:
    """``--cuda-graph-max-bs-decode`` only folds into ``cuda_graph_config``'s decode phase (no hook resolves the
    flag's own field: it stays null unless passed); ``handle_gpu_memory_settings`` sets that phase's ``max_bs`` and
    declares the config, a ServerArgs field served whole; every scheduler state lists the batch sizes its model
    runner captured."""
    _field(root, "exec_fields", "cuda_graph_max_bs_decode")
    config_field = _field(root, "exec_fields", "cuda_graph_config")
    fold = ast.unparse(src.function(src.tree(root, "cuda_graph_hook"), "parse_cuda_graph_config"))
    assert "_set(Phase.DECODE, 'max_bs', cfg.cuda_graph_max_bs_decode)" in fold, \
        "--cuda-graph-max-bs-decode no longer folds into cuda_graph_config"
    for key in ("cuda_graph_hook", "memory_hook", "speculative_hook"):
        assert not _keywords(src.tree(root, key), "cuda_graph_max_bs_decode"), f"{key} resolves the flag's field"
    memory = src.function(src.tree(root, "memory_hook"), "handle_gpu_memory_settings")
    declared = [ast.unparse(v) for v in _keywords(memory, "cuda_graph_config")]
    assert "cuda_graph_config" in declared, "the memory settings no longer declare the resolved cuda_graph_config"
    phase = next((n.value.attr for n in ast.walk(memory) if isinstance(n, ast.Assign)
                  and ast.unparse(n.targets[0]) == "decode_cuda_graph_config" and isinstance(n.value, ast.Attribute)),
                 None)
    assert phase is not None, "the memory settings no longer take the decode phase of cuda_graph_config"
    assert any(isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "decode_cuda_graph_config.max_bs"
               for n in ast.walk(memory)), "the memory settings no longer size the decode graphs"
    phases = _class(src.tree(root, "cuda_graph_config"), "CudaGraphConfig")
    fields = _class(src.tree(root, "cuda_graph_config"), "PhaseConfig")
    assert phase in {n.target.id for n in phases.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    assert "max_bs" in {n.target.id for n in fields.body if isinstance(n, ast.AnnAssign)
                        and isinstance(n.target, ast.Name)}
    assert isinstance(config_field.target, ast.Name)
    captured = [t.slice.value for n in ast.walk(src.tree(root, "internal_state")) if isinstance(n, ast.Assign)
                and "get_decode_cuda_graph_bs()" in ast.unparse(n.value) for t in n.targets
                if isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant)]
    assert len(captured) == 1, f"internal states list the captured decode batch sizes under {captured}"
    runner = ast.unparse(src.function(src.tree(root, "tp_worker"), "get_decode_cuda_graph_bs"))
    assert "decode_cuda_graph_capture_bs" in runner, runner
    return GraphCeiling(str(captured[0]), (config_field.target.id, phase, "max_bs"))


def server_args_fields(root: Path) -> set[str]:
    """Every ServerArgs field (``arg_groups/fields/*.py``): the keys ``resolved_dict()`` gives ``/server_info``."""
    names: set[str] = set()
    for key in src.FILES:
        if key.startswith("fields_"):
            for cls in ast.walk(src.tree(root, key)):
                if isinstance(cls, ast.ClassDef):
                    names |= {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign)
                              and isinstance(n.target, ast.Name)}
    assert len(names) > 300, f"only {len(names)} ServerArgs fields found"
    return names


def server_info_keys(root: Path) -> tuple[set[str], set[str]]:
    """(top-level keys, keys of each ``internal_states`` entry) ``/server_info`` can have: the resolved fields, what
    ``build_server_info`` adds, the scheduler's start-up info and the handler's own keys; each state's keys."""
    build = src.function(src.tree(root, "common"), "build_server_info")
    resolved = ast.unparse(src.function(src.tree(root, "server_args"), "resolved_dict"))
    extra = set(re.findall(r"resolved\['(\w+)'\] =", resolved))
    init = src.function(src.tree(root, "scheduler"), "get_init_info")
    handler = src.function(src.tree(root, "http_server"), "server_info")
    top = (server_args_fields(root) | src.subscript_keys(build, "result") | extra
           | src.subscript_keys(init, "result_dict") | src.dict_keys(handler))
    # Each state starts from the resolved fields (resolved_server_args_dict) and adds its own.
    states = src.subscript_keys(src.tree(root, "internal_state"), "state") | server_args_fields(root)
    return top, states


def simulated_acceptance_env(root: Path) -> tuple[str, float]:
    """The environment variable that makes SGLang's verifier accept a fixed length (``spec_utils.SIMULATE_ACC_LEN``,
    on when above 0) and its default (off)."""
    value = _assigned(src.tree(root, "spec_utils"), "SIMULATE_ACC_LEN")
    assert isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "get" \
        and isinstance(value.func.value, ast.Attribute) and ast.unparse(value.func.value.value) == "envs", \
        ast.unparse(value)
    name = value.func.value.attr
    guard = ast.unparse(src.function(src.tree(root, "spec_utils"), "check_simulate_acc_token_mode"))
    assert "SIMULATE_ACC_LEN > 0" in guard, "the simulated acceptance is no longer on above 0"
    declared = _assigned(_class(src.tree(root, "environ"), "Envs"), name)
    assert isinstance(declared, ast.Call) and ast.unparse(declared.func) == "EnvFloat" and declared.args, \
        ast.unparse(declared)
    default = ast.literal_eval(declared.args[0])
    assert isinstance(default, (int, float)), default
    return name, float(default)


ADAPTIVE_LINES = {
    "switch": ("eagle_worker_v2", "apply_runtime_state", "Switch adaptive runtime state"),
    "initialized": ("adaptive", "AdaptiveSpeculativeParams", "AdaptiveSpeculativeParams initialized"),
    "updated": ("adaptive", "_apply_target_steps", "Adaptive spec params updated"),
}
"""The lines an adaptive server logs its steps with: (file, where, a fragment of the message)."""


def adaptive_line(root: Path, which: str) -> ast.AST:
    """The message expression of one of :data:`ADAPTIVE_LINES` (its ``{values}`` in order: for ``switch`` the old
    steps, the new steps, the old and the new draft tokens; for ``initialized`` the steps and the candidates)."""
    key, where, fragment = ADAPTIVE_LINES[which]
    module = src.tree(root, key)
    scope: ast.AST = _class(module, where) if where[0].isupper() else src.function(module, where)
    return src.find_string(scope, fragment)


def flush_clears(root: Path) -> tuple[str, ...]:
    """What ``Scheduler.flush_cache`` empties when idle: the radix prefix cache, the KV pools, the drafter's pool,
    which for NGRAM is its server-wide corpus of past tokens (``NGRAMWorker.clear_cache_pool``)."""
    flush = src.function(src.tree(root, "scheduler"), "flush_cache")
    idle = next((n for n in ast.walk(flush) if isinstance(n, ast.If) and "is_fully_idle" in ast.unparse(n.test)), None)
    assert idle is not None, "Scheduler.flush_cache no longer flushes only when idle"
    calls = {ast.unparse(n.func) for n in ast.walk(_module(idle.body)) if isinstance(n, ast.Call)}
    cleared = []
    for what, call in (("prefix cache", "self.tree_cache.reset"), ("kv pool", "self.token_to_kv_pool_allocator.clear"),
                       ("draft pool", "self.draft_worker.clear_cache_pool")):
        if call in calls:
            cleared.append(what)
    worker = src.function(src.tree(root, "ngram_worker"), "clear_cache_pool")
    if "self.ngram_corpus.reset" in {ast.unparse(n.func) for n in ast.walk(worker) if isinstance(n, ast.Call)} \
            and "draft pool" in cleared:
        cleared.append("ngram corpus")
    return tuple(cleared)
