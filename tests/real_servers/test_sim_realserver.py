"""The simulator's issue-26 behaviours held against SGLang 0.5.23's own code, not against our reading of it.

Where SGLang's logic is plain Python (the running-cap formula, the new-token ratio, the retraction order, the
adaptive step slots, the NGRAM/UNO/DFLASH/FROZEN_KV_MTP argument handlers) this test cuts the function or class
out of the installed wheel with ``ast``, runs it on stubs of its few collaborators, and compares its answers
with the simulator's for the same inputs; where it is a message, the message's f-string becomes a regular
expression the simulator's text must match. Nothing of SGLang is imported and nothing of its text is copied.
Needs the parser environment (``bash tools/setup_sglang_parser_env.sh``); skipped without it, like
``tests/real_servers/test_sglang_source.py``. ``test_a_mutated_source_fails`` proves each check reads the source.
"""

from __future__ import annotations

import __future__

import ast
import bisect
import json
import math
import random
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import sglang_source as src

from specbench_tui.sim import adaptive as sim_adaptive
from specbench_tui.sim import api as sim_api
from specbench_tui.sim import args as sim_args
from specbench_tui.sim import caches as sim_caches
from specbench_tui.sim import kvpool

pytestmark = pytest.mark.sglang

PATHS = {
    "kv_configurator": "srt/mem_cache/kv_cache_configurator.py",
    "ratio": "srt/managers/scheduler_components/new_token_ratio_tracker.py",
    "environ": "srt/environ.py",
    "schedule_batch": "srt/managers/schedule_batch.py",
    "schedule_policy": "srt/managers/schedule_policy.py",
    "scheduler": "srt/managers/scheduler.py",
    "adaptive": "srt/speculative/adaptive_spec_params.py",
    "eagle_worker": "srt/speculative/eagle_worker_v2.py",
    "hook": "srt/arg_groups/speculative_hook.py",
    "http_server": "srt/entrypoints/http_server.py",
    "flush_wrapper": "srt/managers/scheduler_components/flush_wrapper.py",
}


@pytest.fixture(scope="module")
def root() -> Path:
    python = src.sglang_python()
    if python is None:
        pytest.skip("SGLANG 0.5.23 PARSER ENVIRONMENT MISSING: bash tools/setup_sglang_parser_env.sh")
    return src.sglang_root(python)


def _module(root: Path, key: str) -> ast.Module:
    path = root / PATHS[key]
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _node(module: ast.AST, name: str) -> ast.stmt:
    for node in ast.walk(module):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return node
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return node
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return node
    raise AssertionError(f"SGLang's source has no {name!r} any more")


def _load(root: Path, key: str, names: Sequence[str], namespace: dict[str, Any]) -> dict[str, Any]:
    """Run SGLang's definitions ``names`` of file ``key`` (decorators stripped to plain ones) in ``namespace``."""
    module = _module(root, key)
    body = []
    for name in names:
        node = _node(module, name)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.decorator_list = [d for d in node.decorator_list if isinstance(d, ast.Name) and d.id == "staticmethod"]
        body.append(node)
    code = compile(ast.Module(body=body, type_ignores=[]), str(root / PATHS[key]), "exec",
                   flags=__future__.annotations.compiler_flag, dont_inherit=True)
    exec(code, namespace)  # SGLang's own definitions, cut out by ast, run on stubs
    return namespace


def _env_default(root: Path, name: str) -> Any:
    """An ``envs`` default (``SGLANG_X = EnvFloat(0.7)`` in ``environ.py``)."""
    node = _node(_module(root, "environ"), name)
    assert isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
    return ast.literal_eval(node.value.args[0])


class _Envs:
    def __init__(self, root: Path) -> None:
        self.root = root

    def __getattr__(self, name: str) -> Any:
        return SimpleNamespace(get=lambda: _env_default(self.root, name))


def check_running_cap(root: Path) -> None:
    """``resolve_max_num_reqs``: the scheduler's cap, with the flag set or not, equals ``kvpool``'s."""
    ns = _load(root, "kv_configurator", ["resolve_max_num_reqs"], {"logger": SimpleNamespace(warning=print)})
    for requested in (None, 48, 64, 5000):
        for pool, ctx in ((1_000_000, 262144), (1_000_000, 32768), (3000, 32768), (40_000, 4096)):
            for dp in (1, 4):
                schedule = SimpleNamespace(max_running_requests=requested)
                ns["get_schedule"] = lambda schedule=schedule: schedule
                this = SimpleNamespace(model_config=SimpleNamespace(context_len=ctx), attn_dp_size=dp,
                                       mambaish_config=None)
                got = ns["resolve_max_num_reqs"](this, pool)
                assert kvpool.max_running_requests(requested, pool, ctx, dp) == got, (requested, pool, ctx, dp)


def check_token_ratio(root: Path) -> None:
    """``NewTokenRatioTracker``: the start, floor, decay and the re-estimate after a retraction."""
    ns = _load(root, "ratio", ["NewTokenRatioTracker"],
               {"dataclass": dataclass, "Sequence": Sequence, "envs": _Envs(root),
                "get_schedule": lambda: SimpleNamespace(schedule_conservativeness=1.0)})
    theirs = ns["NewTokenRatioTracker"].from_config()
    ours = kvpool.TokenRatio(1.0)
    assert (ours.init, ours.min, ours.decay) == pytest.approx((theirs.init, theirs.min, theirs.decay))
    reqs = [SimpleNamespace(output_ids=[0] * n, sampling_params=SimpleNamespace(max_new_tokens=m), max_new_tokens=m)
            for n, m in ((10, 600), (250, 600), (0, 90))]
    assert kvpool.TokenRatio.after_retract(reqs) == pytest.approx(theirs.estimate_new_token_ratio_after_retract(reqs))
    clip = _node(_module(root, "schedule_policy"), "CLIP_MAX_NEW_TOKENS")
    assert repr(str(kvpool.CLIP_MAX_NEW_TOKENS)) in ast.unparse(clip)


def check_retraction_order(root: Path) -> None:
    """``_get_decode_retraction_order`` (the default policy) and the KV-full warning."""
    ns = _load(root, "schedule_batch", ["_get_decode_retraction_order"],
               {"get_schedule": lambda: SimpleNamespace(retraction_policy="fcfs"), "Tuple": tuple, "List": list,
                "Req": object})
    rng = random.Random(3)
    for _ in range(50):
        reqs = [SimpleNamespace(output_ids=[0] * rng.randint(0, 5), origin_input_ids=[0] * (n := rng.randint(1, 5)),
                                input_ids=[0] * n) for _ in range(rng.randint(1, 8))]
        assert kvpool.retraction_order(reqs) == ns["_get_decode_retraction_order"](reqs)
    func = src.function(_module(root, "scheduler"), "update_running_batch")
    parts = [src.find_string(func, text) for text in ("KV cache pool is full", "#retracted_reqs", "#new_token_ratio")]
    pattern = re.compile("".join(src.template(p).pattern for p in parts))
    assert pattern.fullmatch(kvpool.retract_message(3, 812, 0.61234, 0.84)), pattern.pattern


def _adaptive(root: Path, log: list[str]) -> dict[str, Any]:
    return _load(root, "adaptive", ["DEFAULT_ADAPTIVE_CONFIG", "_load_adaptive_config", "AdaptiveStepSlot",
                                    "AdaptiveSpeculativeParams"],
                 {"json": json, "bisect": bisect, "math": math, "cached_property": cached_property, "logger": None,
                  "log_info_on_rank0": lambda _logger, message: log.append(message)})


def check_adaptive_slots(root: Path) -> None:
    """SGLang's ``AdaptiveSpeculativeParams`` and the simulator's ``AdaptiveSteps`` route every batch size to the
    same steps and move the same way (with the same log lines) on the same verify results."""
    theirs_log: list[str] = []
    ns = _adaptive(root, theirs_log)
    assert ns["DEFAULT_ADAPTIVE_CONFIG"] == sim_adaptive.DEFAULT_ADAPTIVE_CONFIG
    graph = [1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64]
    rng = random.Random(7)
    for initial in (1, 3, 5, 7, 0):
        theirs_log.clear()
        theirs = ns["AdaptiveSpeculativeParams"](initial)
        theirs.set_cuda_graph_bs(graph)
        ours_log: list[str] = []
        ours = sim_adaptive.AdaptiveSteps(initial, sim_adaptive.DEFAULT_ADAPTIVE_CONFIG, graph, ours_log.append)
        assert ours_log == theirs_log  # the initialisation line
        for _ in range(400):
            bs = rng.choice((1, 1, 1, 2, 5, 9, 20, 33, 60))
            steps = theirs.get_steps_for_batch(bs)
            assert ours.activate_for_batch(bs) == steps, (initial, bs)
            correct = [rng.randint(0, steps) for _ in range(bs)]
            theirs.on_verify_complete(correct, bs)
            ours.on_verify_complete(correct, bs)
        assert [m for m in ours_log if not m.startswith("Switch")] == theirs_log
    switch = src.template(src.find_string(src.function(_module(root, "eagle_worker"), "apply_runtime_state"),
                                          "Switch adaptive runtime state"))
    lines: list[str] = []
    sim_adaptive.AdaptiveSteps(3, sim_adaptive.DEFAULT_ADAPTIVE_CONFIG, None, lines.append).activate_for_batch(64)
    assert switch.fullmatch(lines[-1]), (switch.pattern, lines[-1])


def check_flush_texts(root: Path) -> None:
    """``/flush_cache``'s bodies and the scheduler's lines."""
    http = src.function(_module(root, "http_server"), "flush_cache")
    assert src.literal_text(src.find_string(http, "Cache flushed.")) == sim_api.FLUSH_OK
    assert src.literal_text(src.find_string(http, "Flush cache failed")) == sim_api.FLUSH_FAILED
    wrapper = _module(root, "flush_wrapper")
    assert src.literal_text(src.find_string(wrapper, "already in progress")) == sim_api.FLUSH_BUSY
    assert src.literal_text(src.find_string(wrapper, "Timed out waiting")) == sim_api.FLUSH_TIMED_OUT
    scheduler = src.function(_module(root, "scheduler"), "flush_cache")
    assert src.literal_text(src.find_string(scheduler, "Cache flushed successfully")) == sim_caches.FLUSHED_LOG
    refused = src.template(src.find_string(scheduler, "Cache not flushed"))
    assert refused.fullmatch(sim_caches.flush_refused_log(2, 5)), refused.pattern


class _Record:
    """A ServerArgs stand-in for SGLang's handlers: reads fall back to ``defaults``, ``declare_resolution`` writes."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__["values"] = values

    def __getattr__(self, name: str) -> Any:
        if name in self.values:
            return self.values[name]
        return _HANDLER_DEFAULTS.get(name, False)


_HANDLER_DEFAULTS: dict[str, Any] = {"device": "cuda", "attn_cp_size": 1, "lora_paths": None,
                                     "speculative_ngram_external_corpus_max_tokens": 0, "json_model_override_args": "{}"}


def _handlers(root: Path, warnings: list[str]) -> dict[str, Any]:
    def warn(message: str, *args: Any) -> None:
        warnings.append(message % args if args else message)

    def declare(record: _Record, _where: str, **values: Any) -> None:
        record.values.update(values)

    def backends(view: _Record) -> tuple[str, str]:
        base = view.attention_backend or "fa3"
        return (view.prefill_attention_backend or base, view.decode_attention_backend or base)

    namespace: dict[str, Any] = {
        "logger": SimpleNamespace(warning=warn, info=lambda *a: None), "resolving_view": lambda r: r,
        "resolved_view": lambda r: r, "declare_resolution": declare, "attention_backends_of": backends,
        "attn_dp_enabled_of": lambda r: r.attn_dp_size > 1, "_disable_overlap_schedule_for_cpu": lambda r: None,
        "_resolve_dflash_draft_attention_backend": lambda r: None, "envs": _Envs(root),
        "current_platform": SimpleNamespace(is_out_of_tree=lambda: False), "Optional": Any,
    }
    return _load(root, "hook", ["_handle_ngram", "_handle_uno", "_handle_dflash", "_handle_frozen_kv_mtp"], namespace)


def _parsed(argv: list[str]) -> dict[str, Any]:
    """The flags as SGLang's parser leaves them for the handlers (on a CUDA device)."""
    parsed = vars(sim_args.parse_args(["--model-path", "m", *argv]))
    parsed["speculative_algorithm"] = parsed["speculative_algorithm"].upper()
    parsed["device"] = "cuda"
    parsed["page_size"] = parsed["page_size"] or 1  # resolved before the speculative hook
    return parsed


RESOLVED_KEYS = ("max_running_requests", "speculative_num_steps", "speculative_eagle_topk",
                 "speculative_num_draft_tokens", "enable_mixed_chunk")
HANDLER_CASES: list[tuple[str, list[str]]] = [
    ("_handle_ngram", ["--speculative-algorithm", "NGRAM"]),
    ("_handle_ngram", ["--speculative-algorithm", "NGRAM", "--speculative-ngram-max-bfs-breadth", "4",
                       "--speculative-num-draft-tokens", "9"]),
    ("_handle_ngram", ["--speculative-algorithm", "NGRAM", "--max-running-requests", "64",
                       "--speculative-num-steps", "3"]),
    ("_handle_uno", ["--speculative-algorithm", "UNO", "--uno-lora-path", "l", "--speculative-num-draft-tokens", "4"]),
    ("_handle_uno", ["--speculative-algorithm", "UNO", "--uno-lora-path", "l", "--speculative-num-draft-tokens", "4",
                     "--speculative-num-steps", "3"]),
    ("_handle_dflash", ["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "d",
                        "--speculative-dflash-block-size", "8", "--speculative-num-steps", "2"]),
    ("_handle_frozen_kv_mtp", ["--speculative-algorithm", "FROZEN_KV_MTP", "--enable-mixed-chunk"]),
]


def check_handlers(root: Path) -> None:
    """NGRAM, UNO, DFLASH and FROZEN_KV_MTP: SGLang's own handler and the simulator's resolution leave the same
    cap, draft shape and mixed-chunk flag, with the same warnings."""
    for handler, argv in HANDLER_CASES:
        parsed = _parsed(argv)
        warnings: list[str] = []
        record = _Record(dict(parsed))
        _handlers(root, warnings)[handler](record)
        ours = sim_args.resolve(sim_args.parse_args(["--model-path", "m", *argv]))
        assert {k: ours.values[k] for k in RESOLVED_KEYS} == {k: record.values.get(k, parsed[k])
                                                             for k in RESOLVED_KEYS}, argv
        assert ours.warnings == warnings, argv
    for argv in (["--speculative-algorithm", "UNO", "--speculative-num-draft-tokens", "4"],
                 ["--speculative-algorithm", "UNO", "--uno-lora-path", "l"],
                 ["--speculative-algorithm", "UNO", "--uno-lora-path", "l", "--speculative-num-draft-tokens", "4",
                  "--attention-backend", "triton"]):
        with pytest.raises(ValueError) as theirs:
            _handlers(root, [])["_handle_uno"](_Record(_parsed(argv)))
        with pytest.raises(sim_args.ResolutionError) as ours_error:
            sim_args.resolve(sim_args.parse_args(["--model-path", "m", *argv]))
        assert ours_error.value.message == str(theirs.value), argv


CHECKS: list[Callable[[Path], None]] = [check_running_cap, check_token_ratio, check_retraction_order,
                                        check_adaptive_slots, check_flush_texts, check_handlers]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_the_simulator_does_what_sglangs_code_does(check: Callable[[Path], None], root: Path) -> None:
    check(root)


MUTATIONS = [
    (check_running_cap, "kv_configurator", "max(min(estimated, 4096), 2048)", "max(min(estimated, 4096), 1024)"),
    (check_token_ratio, "environ", "SGLANG_RETRACT_DECODE_STEPS = EnvInt(20)", "SGLANG_RETRACT_DECODE_STEPS = EnvInt(30)"),
    (check_retraction_order, "schedule_batch", "return (len(req.output_ids), -len(req.origin_input_ids))",
     "return (len(req.output_ids), len(req.origin_input_ids))"),
    (check_retraction_order, "scheduler", "#retracted_reqs: {len(retracted_reqs)}",
     "#retracted: {len(retracted_reqs)}"),
    (check_adaptive_slots, "adaptive", '"candidate_steps": [0, 1],', '"candidate_steps": [0, 1, 2],'),
    (check_adaptive_slots, "adaptive", '"ema_alpha", 0.2', '"ema_alpha", 0.3'),
    (check_flush_texts, "scheduler", "Cache not flushed because there are pending requests.",
     "Cache not flushed: pending requests."),
    (check_handlers, "hook", "speculative_num_draft_tokens=12,", "speculative_num_draft_tokens=10,"),
    (check_handlers, "hook", "max_running_requests=48,\n        )\n        logger.warning(\n            \"Max running "
     "requests is reset to 48 for speculative decoding. You can override this by explicitly setting "
     "--max-running-requests.\"\n        )\n\n    declare_resolution(\n        server_args,\n        \"_handle_ngram\"",
     "max_running_requests=32,\n        )\n        logger.warning(\n            \"Max running "
     "requests is reset to 32 for speculative decoding. You can override this by explicitly setting "
     "--max-running-requests.\"\n        )\n\n    declare_resolution(\n        server_args,\n        \"_handle_ngram\""),
    (check_handlers, "hook", 'raise ValueError("UNO requires --uno-lora-path.")',
     'raise ValueError("UNO requires a LoRA.")'),
]


@pytest.mark.parametrize(("check", "key", "old", "new"), MUTATIONS,
                         ids=[f"{m[0].__name__}-{m[2][:30]}" for m in MUTATIONS])
def test_a_mutated_source_fails(check: Callable[[Path], None], key: str, old: str, new: str, root: Path,
                                tmp_path: Path) -> None:
    copy = tmp_path / "sglang"
    for path in {PATHS[k] for k in PATHS}:
        (copy / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(root / path, copy / path)
    target = copy / PATHS[key]
    text = target.read_text(encoding="utf-8")
    assert text.count(old) == 1, (key, old)
    target.write_text(text.replace(old, new), encoding="utf-8")
    check(root)  # the original passes
    with pytest.raises((AssertionError, ValueError, KeyError)):
        check(copy)
