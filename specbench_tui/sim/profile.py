"""The simulator's profile: every constant of the model, plus failures on demand, from a TOML file.

The CLI must take only SGLang's flags, so the profile comes from the environment:

- ``SPECBENCH_SIM_PROFILE``: path of a TOML file;
- ``SPECBENCH_SIM_PROFILE_TOML``: inline TOML text, merged over the file (handy in tests);
- ``SPECBENCH_SIM_TIME_SCALE`` and ``SPECBENCH_SIM_LOG_STYLE``: quick overrides of ``time_scale`` and
  ``logs.style``.

A profile only lists what it changes; everything else keeps :data:`DEFAULTS`. Unknown keys are an error
(a typo must not silently fall back to a default). Failure rules (``[[crash]]``, ``[[hang]]``,
``[[slow_start]]``, ``[[empty_output]]``, ``[[deterministic.config]]``) select configurations with the
match keys of :data:`MATCH_KEYS`; the first matching rule of each kind applies. See docs/simulator.md.
"""

from __future__ import annotations

import copy
import os
import sys
from collections.abc import Mapping
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

KINDS = ("code", "math", "json", "creative", "long", "chat")
"""Prompt kinds the tokenizer's classifier tells apart; acceptance and output style depend on them."""

DEFAULTS: dict[str, Any] = {
    "seed": None,  # overrides --random-seed when set
    "time_scale": 1.0,  # multiplies every simulated duration except deterministic steps and TTFT
    "model": {
        "context_length": 262144,
        "architecture": "Qwen3ForCausalLM",
        "model_type": "qwen3",
        "weights_gb": 54.0,  # a 27B model in bf16
        "draft_weights_gb": 3.2,
        "kv_bytes_per_token": 65536,
        "gpu_memory_gb": 139.8,  # an H200
        "default_mem_fraction_static": 0.83,
        "eos_token_id": 151645,
        "draft_block_size": 16,  # DFLASH/DDTree draft block when no flag sets it
        "tokenizer_max_length": 131072,  # the tokenizer's model_max_length: /v1/tokenize's max_model_len
    },
    "startup": {
        "init_s": 0.02,
        "weight_load_s": 0.12,
        "draft_load_s": 0.04,
        "kv_alloc_s": 0.02,
        "cuda_graph_s": 0.15,
        "extra_delay_s": 0.0,  # added before "Load weight end": a slow start
    },
    "speed": {
        "overhead_ms": 1.5,  # per forward, not parallelised
        "weights_ms": 13.5,  # reading the weights once per forward at TP1
        "compute_ms_per_token": 0.08,  # per token in the forward (batch x verify width) at TP1
        "verify_ms_per_token": 0.22,  # per extra verified token per step (tree attention), whatever the batch
        "kv_ms_per_1k_ctx": 0.05,  # attention over 1k tokens of context at TP1
        "tp_exponent": 0.8,  # TP n divides the parallel part by n ** tp_exponent
        "prefill_tok_s": 12000.0,  # TP1 prefill throughput
        "draft_ms": {  # draft cost per verify step at TP1 (EAGLE family: per draft step)
            "EAGLE": 1.0, "EAGLE3": 1.2, "STANDALONE": 2.5, "FROZEN_KV_MTP": 1.0, "DFLASH": 7.0,
            "DDTREE": 7.0, "DSPARK": 7.0, "NGRAM": 0.3, "UNO": 1.5,
        },
        "tree_build_ms_per_node": 0.2,  # DDTree tree construction, per budget node
        "jitter": 0.03,  # relative standard deviation of a step's time
    },
    "acceptance": {
        # Probability that a drafted token is accepted, per prompt kind, for a chain draft.
        "alpha": {"code": 0.73, "math": 0.71, "json": 0.78, "creative": 0.5, "long": 0.64, "chat": 0.62},
        "algorithm_scale": {
            "EAGLE": 0.92, "EAGLE3": 0.98, "STANDALONE": 0.95, "FROZEN_KV_MTP": 0.95, "DFLASH": 1.0,
            "DDTREE": 1.0, "DSPARK": 1.0, "NGRAM": 0.6, "UNO": 0.9,
        },
        # Per-position decay: the k-th draft (k = 1, 2, ...) of a chain is accepted, given the k-1 before it were,
        # with alpha * decay ** (k - 1); 1.0 keeps every position at alpha (a chain's later drafts are worse)
        "position_decay": {
            "EAGLE": 0.97, "EAGLE3": 0.98, "STANDALONE": 0.98, "FROZEN_KV_MTP": 0.97, "DFLASH": 0.995,
            "DDTREE": 0.997, "DSPARK": 0.995, "NGRAM": 0.95, "UNO": 0.97,
        },
        "tree_gain": 0.068,  # a tree of n nodes cuts the rejection probability by 1 + tree_gain * ln(n)
        "temperature_penalty": 0.1,  # alpha *= 1 - penalty * min(temperature, 1)
        # NGRAM: a draft position the server-wide corpus already holds (the same output decoded before and not
        # flushed) is accepted with this probability instead of alpha
        "ngram_warm_alpha": 0.97,
        # Acceptance decaying with context: the excess acceptance (alpha; in deterministic mode accept_length - 1)
        # halves every this many prompt tokens, 2 ** (-prompt_tokens / half_life); 0 keeps it flat (docs/simulator.md)
        "context_half_life_tokens": 0,
    },
    "output": {
        "eos": True,  # stop at a natural length unless ignore_eos
        "length": {  # natural length range per prompt kind (tokens), before max_new_tokens
            "code": [300, 900], "math": [150, 400], "json": [60, 250], "creative": [20, 80],
            "long": [200, 600], "chat": [150, 500],
        },
    },
    "deterministic": {
        "enabled": False,
        "tok_s": 100.0,  # per-request decode rate a streaming client measures
        "step_ms": None,  # alternative to tok_s: fixed verify-step time
        "accept_length": 3.0,  # tokens per verify step (1 without speculation); fractions alternate
        "ttft_ms": 20.0,  # first token this long after the request was received (idle scheduler)
        # ground truth under load: a verify step at batch bs takes step + batch_ms_per_token·(bs−1)·V ms
        # (V = verify width: draft tokens, 1 without speculation); 0 keeps it independent of the batch
        "batch_ms_per_token": 0.0,
        # NGRAM: tokens per verify step where the corpus holds the output (a warm repeat); unset: every draft
        # accepted (speculative_num_draft_tokens)
        "warm_accept_length": None,
        "config": [],  # [[deterministic.config]]: match keys + tok_s/step_ms/accept_length/ttft_ms
    },
    # style "period": the pre-0.5.10 "Decode batch. ..." form with a TP0 prefix; pool: the KV pool's usage
    # fields in the batch lines ("full", or a hybrid model's "swa" / "mamba" fields)
    "logs": {"style": "comma", "pool": "full"},
    "shutdown": {"poll_s": 5.0},  # SGLang's sigterm_watchdog sleeps 5 s between checks
    "health": {"poll_s": 0.02, "timeout_s": None},  # timeout None: SGLANG_HEALTH_CHECK_TIMEOUT or 20 s
    "failures": {"port_in_use": False},
    "crash": [],
    "hang": [],
    "slow_start": [],
    "empty_output": [],
}

MATCH_KEYS = ("algorithm", "budget", "num_draft_tokens", "num_steps", "topk", "tp", "dp", "model",
              "attention_backend")
RULE_KEYS: dict[str, tuple[str, ...]] = {
    "crash": ("when", "after_requests", "after_steps", "signature", "ranks"),
    "hang": ("when", "after_requests", "after_steps", "scope"),
    "slow_start": ("delay_s",),
    "empty_output": (),
    "deterministic.config": ("tok_s", "step_ms", "accept_length", "ttft_ms", "batch_ms_per_token",
                             "warm_accept_length"),
}
CRASH_SIGNATURES = ("cuda_illegal_instruction", "cuda_illegal_memory_access", "cuda_oom", "cuda_graph_oom",
                    "kv_pool_oom", "nccl_error")
WHENS = ("startup", "warmup", "after_requests", "after_steps")


class ProfileError(Exception):
    """The profile file is unreadable or names an unknown key or value."""


def _merge(base: dict[str, Any], override: Mapping[str, Any], path: str = "") -> None:
    for key, value in override.items():
        where = f"{path}{key}"
        if key not in base:
            raise ProfileError(f"unknown profile key: {where}")
        if isinstance(base[key], dict) and key not in ("draft_ms", "algorithm_scale", "position_decay", "alpha", "length"):
            if not isinstance(value, Mapping):
                raise ProfileError(f"profile key {where} must be a table")
            _merge(base[key], value, where + ".")
        elif isinstance(base[key], dict):  # open tables: merged, new keys allowed (new algorithms)
            if not isinstance(value, Mapping):
                raise ProfileError(f"profile key {where} must be a table")
            base[key].update(value)
        else:
            base[key] = value


def _check_rules(data: dict[str, Any]) -> None:
    rule_lists = {name: data[name] for name in ("crash", "hang", "slow_start", "empty_output")}
    rule_lists["deterministic.config"] = data["deterministic"]["config"]
    for name, rules in rule_lists.items():
        if not isinstance(rules, list):
            raise ProfileError(f"profile key {name} must be an array of tables ([[{name}]])")
        for rule in rules:
            unknown = set(rule) - set(MATCH_KEYS) - set(RULE_KEYS[name])
            if unknown:
                raise ProfileError(f"unknown key(s) in [[{name}]]: {', '.join(sorted(unknown))}")
            if "when" in rule and rule["when"] not in WHENS:
                raise ProfileError(f"[[{name}]] when must be one of {', '.join(WHENS)}")
            if rule.get("signature", CRASH_SIGNATURES[0]) not in CRASH_SIGNATURES:
                raise ProfileError(f"[[crash]] signature must be one of {', '.join(CRASH_SIGNATURES)}")
    if data["logs"]["style"] not in ("comma", "period"):
        raise ProfileError("logs.style must be 'comma' or 'period'")
    if data["logs"]["pool"] not in ("full", "swa", "mamba"):
        raise ProfileError("logs.pool must be 'full', 'swa' or 'mamba'")


def load_profile(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Return the effective profile: :data:`DEFAULTS` overridden by the file and inline TOML of ``environ``."""
    env = os.environ if environ is None else environ
    data = copy.deepcopy(DEFAULTS)
    path = env.get("SPECBENCH_SIM_PROFILE")
    try:
        if path:
            with open(path, "rb") as fh:
                _merge(data, tomllib.load(fh))
        inline = env.get("SPECBENCH_SIM_PROFILE_TOML")
        if inline:
            _merge(data, tomllib.loads(inline))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ProfileError(f"cannot read simulator profile: {exc}") from exc
    if env.get("SPECBENCH_SIM_TIME_SCALE"):
        data["time_scale"] = float(env["SPECBENCH_SIM_TIME_SCALE"])
    if env.get("SPECBENCH_SIM_LOG_STYLE"):
        data["logs"]["style"] = env["SPECBENCH_SIM_LOG_STYLE"]
    _check_rules(data)
    return data


def _value_matches(expected: object, actual: object) -> bool:
    options = expected if isinstance(expected, list) else [expected]
    for option in options:
        if option == "*" or option == actual:
            return True
        if isinstance(option, str) and isinstance(actual, str) and option.upper() == actual.upper():
            return True
    return False


def rule_matches(rule: Mapping[str, Any], facts: Mapping[str, object]) -> bool:
    """True if every match key the rule names agrees with ``facts`` (lists mean any of; ``model`` is a substring)."""
    for key in MATCH_KEYS:
        if key not in rule:
            continue
        if key == "model":
            models = rule[key] if isinstance(rule[key], list) else [rule[key]]
            if not any(m in str(facts.get("model", "")) for m in models):
                return False
        elif not _value_matches(rule[key], facts.get(key)):
            return False
    return True


def first_rule(rules: list[Mapping[str, Any]], facts: Mapping[str, object]) -> Mapping[str, Any] | None:
    """The first rule of ``rules`` that matches ``facts``, or None."""
    return next((rule for rule in rules if rule_matches(rule, facts)), None)
