"""SGLang 0.5.23's speculative argument resolution (``srt/arg_groups/speculative_hook.py``), per algorithm.

``handle_speculative_decoding`` upper-cases the algorithm, resolves the NEXTN alias, runs the adaptive
set-up (``_maybe_disable_adaptive``, ``_init_adaptive_speculative_params``) and then one handler per
algorithm (``SpeculativeAlgorithm.handle_server_args``): ``_handle_dflash`` (and the DDTree forks, which
extend it), ``_handle_uno``, ``_handle_dspark``, ``_handle_frozen_kv_mtp``, ``_handle_eagle_family`` or
``_handle_ngram``. Every handler except UNO's resets an unset ``max_running_requests`` to 48 with the
warning :data:`RESET_48`. Texts are SGLang's; the device checks (CUDA only) are left out.
"""

from __future__ import annotations

import json
from typing import Any

from specbench_tui.sim.adaptive import DEFAULT_ADAPTIVE_CONFIG, candidate_steps_of

BUILTIN_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO", "FROZEN_KV_MTP")
FORK_ALGORITHMS = ("DDTREE",)
"""Registered by the DDTree forks (sgl-project/sglang PR #29907); the simulator plays such a build."""
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "STANDALONE", "FROZEN_KV_MTP")
"""The algorithms whose drafts the speed model counts in draft steps (FROZEN_KV_MTP has its own handler)."""
DEFAULT_DSPARK_GAMMA = 7
"""``dspark_components/dspark_config.py``."""
RESET_48 = ("Max running requests is reset to 48 for speculative decoding. "
            "You can override this by explicitly setting --max-running-requests.")


class ResolutionError(Exception):
    """SGLang would raise ``exc_type: message`` in the main process while resolving its arguments."""

    def __init__(self, exc_type: str, message: str) -> None:
        super().__init__(message)
        self.exc_type = exc_type
        self.message = message


def _fail(message: str, exc_type: str = "ValueError") -> ResolutionError:
    return ResolutionError(exc_type, message)


def _reset_48(v: dict[str, Any], warnings: list[str]) -> None:
    if v["max_running_requests"] is None:
        v["max_running_requests"] = 48
        warnings.append(RESET_48)


def load_adaptive_config(path: str | None) -> dict[str, Any]:
    """``_load_adaptive_config``: the JSON file, or the default tiers; the BS keys must name candidate steps."""
    if path is None:
        return DEFAULT_ADAPTIVE_CONFIG
    try:
        with open(path, encoding="utf-8") as handle:
            cfg = json.load(handle)
    except FileNotFoundError as exc:
        raise _fail(f"[Errno 2] No such file or directory: {path!r}", "FileNotFoundError") from exc
    except json.JSONDecodeError as exc:
        raise _fail(str(exc), "json.decoder.JSONDecodeError") from exc
    if not isinstance(cfg, dict):
        raise _fail(f"speculative_adaptive_config must be a JSON object, got {type(cfg).__name__}")
    found = False
    for key, entry in cfg.items():
        if not key.isdigit():
            continue
        steps = entry.get("candidate_steps") if isinstance(entry, dict) else None
        if not isinstance(steps, list) or not steps or not all(isinstance(s, int) and s >= 0 for s in steps):
            raise _fail(f"BS {key}: candidate_steps must be a list of non-negative ints, got {steps!r}")
        found = True
    if not found:
        raise _fail("speculative_adaptive_config must contain at least one integer-string BS key, e.g. "
                    f'{{"1": {{"candidate_steps": [1,3,7]}}}}. Got keys: {list(cfg.keys())}')
    return cfg


def _adaptive_unsupported_reason(v: dict[str, Any]) -> str | None:
    algo = v["speculative_algorithm"]
    if algo not in ("EAGLE", "EAGLE3"):
        return f"speculative_algorithm={algo} (only EAGLE/EAGLE3 are supported)"
    if v["speculative_eagle_topk"] is not None and v["speculative_eagle_topk"] != 1:
        return f"speculative_eagle_topk={v['speculative_eagle_topk']} (only topk=1 is supported)"
    if v["attn_dp_size"] > 1:
        return "attention DP is not supported (adaptive tier decisions are not synchronized across DP ranks)"
    if v["enable_multi_layer_eagle"]:
        return "enable_multi_layer_eagle=True is not supported (MultiLayerEagleWorkerV2 does not implement adaptive)"
    return None


def handle_adaptive(v: dict[str, Any], warnings: list[str]) -> None:
    """``_maybe_disable_adaptive`` then ``_init_adaptive_speculative_params``: topk 1, steps the middle
    candidate, draft tokens steps + 1; ``max_speculative_num_draft_tokens`` = max candidate + 1."""
    v["max_speculative_num_draft_tokens"] = None
    if not v["speculative_adaptive"]:
        return
    reason = _adaptive_unsupported_reason(v)
    if reason is not None:
        warnings.append(f"speculative_adaptive disabled: {reason}. Falling back to static speculative params.")
        v["speculative_adaptive"] = False
        return
    candidates = candidate_steps_of(load_adaptive_config(v["speculative_adaptive_config"]))
    if v["speculative_eagle_topk"] is None:
        v["speculative_eagle_topk"] = 1
    if v["speculative_num_steps"] is None:
        v["speculative_num_steps"] = candidates[len(candidates) // 2]
    if v["speculative_num_steps"] not in candidates:
        raise _fail(f"--speculative-num-steps={v['speculative_num_steps']} is not in the adaptive config "
                    f"candidate_steps {candidates}. Pass one of those values.")
    v["speculative_num_draft_tokens"] = v["speculative_num_steps"] + 1
    v["max_speculative_num_draft_tokens"] = max(candidates) + 1


def handle_eagle_family(v: dict[str, Any], warnings: list[str], auto: tuple[int, int, int]) -> int:
    """``_handle_eagle_family`` (EAGLE, EAGLE3, STANDALONE); returns the budget (draft tokens − 1)."""
    _reset_48(v, warnings)
    steps, topk, ndt = v["speculative_num_steps"], v["speculative_eagle_topk"], v["speculative_num_draft_tokens"]
    if not v["speculative_adaptive"] and steps is None:
        if topk is not None or ndt is not None:
            raise _fail("speculative_eagle_topk and speculative_num_draft_tokens should be None "
                        "when speculative_num_steps is None", "AssertionError")
        steps, topk, ndt = (3, 1, 4) if v["speculative_algorithm"] == "STANDALONE" else auto
    topk = 1 if topk is None else topk
    if topk == 1 and ndt != steps + 1:
        if ndt is not None:
            warnings.append("speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 "
                            "when speculative_eagle_topk == 1")
        ndt = steps + 1
    v["speculative_num_steps"], v["speculative_eagle_topk"], v["speculative_num_draft_tokens"] = steps, topk, ndt
    return int(ndt) - 1


def handle_frozen_kv_mtp(v: dict[str, Any], warnings: list[str]) -> int:
    """``_handle_frozen_kv_mtp``: only the 48 reset (and mixed chunk off); the draft shape stays as given."""
    _reset_48(v, warnings)
    if v["enable_mixed_chunk"]:
        v["enable_mixed_chunk"] = False
        warnings.append("Mixed chunked prefill is disabled because of using Frozen-KV MTP speculative decoding.")
    return max(0, int(v["speculative_num_draft_tokens"] or 1) - 1)


def _one_step_one_topk(v: dict[str, Any], warnings: list[str], label: str) -> None:
    for field in ("speculative_num_steps", "speculative_eagle_topk"):
        if v[field] not in (None, 1):
            warnings.append(f"{label} only supports {field} == 1; overriding {field}={v[field]} to 1.")
        v[field] = 1


def handle_dflash(v: dict[str, Any], warnings: list[str], draft_block_size: int) -> int:
    """``_handle_dflash``: steps = topk = 1; draft tokens = ``--speculative-dflash-block-size``, else the draft
    config's block size (the profile's ``model.draft_block_size``); the 48 reset last. Returns the budget."""
    if v["pp_size"] != 1:
        raise _fail("Currently DFLASH speculative decoding only supports pp_size == 1.")
    if v["speculative_draft_model_path"] is None:
        raise _fail("DFLASH speculative decoding requires setting --speculative-draft-model-path.")
    _one_step_one_topk(v, warnings, "DFLASH")
    block, ndt = v["speculative_dflash_block_size"], v["speculative_num_draft_tokens"]
    if block is not None:
        if block <= 0:
            raise _fail(f"DFLASH requires --speculative-dflash-block-size to be positive, got {block}.")
        if ndt is not None and ndt != block:
            raise _fail("Both --speculative-num-draft-tokens and --speculative-dflash-block-size are set but they "
                        "differ. For DFLASH they must match. "
                        f"speculative_num_draft_tokens={ndt}, speculative_dflash_block_size={block}.")
        ndt = block
    if ndt is None:
        ndt = draft_block_size
    v["speculative_num_draft_tokens"] = ndt
    _reset_48(v, warnings)
    return int(ndt) - 1


def handle_ddtree(v: dict[str, Any], warnings: list[str], draft_block_size: int) -> int:
    """The DDTree forks: DFLASH's handler, then draft tokens = budget + 1, page size 1, no overlap."""
    budget = v["speculative_ddtree_budget"]
    if budget is not None and v["speculative_num_draft_tokens"] is None and v["speculative_dflash_block_size"] is None:
        v["speculative_num_draft_tokens"] = budget + 1
    handle_dflash(v, warnings, draft_block_size)
    if budget is None:
        budget = int(v["speculative_num_draft_tokens"]) - 1
    v["speculative_ddtree_budget"] = budget
    v["speculative_num_draft_tokens"] = budget + 1
    if v["page_size"] != 1:
        raise _fail("DDTree speculative decoding requires --page-size 1.")
    v["disable_overlap_schedule"] = True
    return int(budget)


def handle_dspark(v: dict[str, Any], warnings: list[str]) -> int:
    """``_handle_dspark``: steps = topk = 1; gamma = ``--speculative-dspark-block-size`` (default 7 when neither
    it nor the draft tokens are set); draft tokens = gamma + 1; the 48 reset. Returns the budget (gamma)."""
    if v["speculative_draft_model_path"] is None:
        raise _fail("DSpark dense speculative decoding requires setting --speculative-draft-model-path.")
    _one_step_one_topk(v, warnings, "DSpark")
    gamma, ndt = v["speculative_dspark_block_size"], v["speculative_num_draft_tokens"]
    if gamma is not None and gamma <= 0:
        raise _fail(f"DSpark requires --speculative-dspark-block-size to be positive, got {gamma}.")
    if gamma is None and ndt is None:
        gamma = DEFAULT_DSPARK_GAMMA
        warnings.append(f"DSpark gamma is not set; defaulting to {gamma}.")
    if gamma is not None:
        window = gamma + 1
        if ndt is not None and ndt != window:
            raise _fail(f"DSpark speculative_num_draft_tokens must equal gamma + 1 (= {window} for gamma={gamma}), "
                        f"but got speculative_num_draft_tokens={ndt}.")
        ndt = window
    if int(ndt) < 2:
        raise _fail(f"DSpark speculative_num_draft_tokens must be >= 2 (= gamma + 1), got {ndt}.")
    v["speculative_num_draft_tokens"] = ndt
    _reset_48(v, warnings)
    return int(ndt) - 1


def handle_ngram(v: dict[str, Any], warnings: list[str]) -> int:
    """``_handle_ngram``: the 48 reset; topk = ``--speculative-ngram-max-bfs-breadth``; 12 draft tokens by
    default; steps = draft tokens // topk; mixed chunk off. Returns the budget (draft tokens − 1)."""
    _reset_48(v, warnings)
    v["enable_mixed_chunk"] = False
    v["speculative_eagle_topk"] = topk = v["speculative_ngram_max_bfs_breadth"]
    if v["speculative_num_draft_tokens"] is None:
        v["speculative_num_draft_tokens"] = 12
        warnings.append("speculative_num_draft_tokens is set to 12 by default for ngram speculative decoding. "
                        "You can override this by explicitly setting --speculative-num-draft-tokens.")
    ndt = int(v["speculative_num_draft_tokens"])
    if v["speculative_num_steps"] is None:
        v["speculative_num_steps"] = ndt // topk
    budget = v["speculative_ngram_external_sam_budget"]
    if v["speculative_ngram_external_corpus_path"] is not None:
        if budget <= 0:
            raise _fail("--speculative-ngram-external-sam-budget must be positive when "
                        "--speculative-ngram-external-corpus-path is set.")
        if budget > ndt - 1:
            raise _fail("speculative_ngram_external_sam_budget must be less than or equal to "
                        f"speculative_num_draft_tokens - 1 ({ndt - 1}).")
    warnings.append("The mixed chunked prefill are disabled because of using ngram speculative decoding.")
    if topk > 1 and v["page_size"] > 1 and v["attention_backend"] != "flashinfer":
        raise _fail(f"speculative_eagle_topk({topk}) > 1 with page_size({v['page_size']}) > 1 is unstable and "
                    "produces incorrect results for paged attention backends. This combination is only supported "
                    "for the 'flashinfer' backend.")
    if v["attn_dp_size"] > 1:
        raise _fail("Currently ngram speculative decoding does not support dp attention.")
    return ndt - 1


def _uno_tree_checks(steps: int | None, width: int, topk: int) -> None:
    if steps is None:
        raise _fail("UNO tree mode requires --speculative-num-steps so its draft width F can be derived as "
                    "speculative_num_steps + 1.")
    if steps < 1:
        raise _fail(f"UNO tree mode requires --speculative-num-steps to be positive, got {steps}.")
    if width < steps + 1:
        raise _fail(f"UNO tree mode requires Q >= F; got Q={width}, F={steps + 1}.")
    if width > 128:
        raise _fail(f"UNO tree mode currently supports at most Q=128 verify nodes, got Q={width}.")


def handle_uno(v: dict[str, Any], warnings: list[str]) -> int:
    """``_handle_uno``: no draft model, ``--uno-lora-path`` and ``--speculative-num-draft-tokens`` required,
    TP = PP = 1, FA3 attention, and no 48 reset. Returns the budget (draft tokens − 1)."""
    if v["speculative_draft_model_path"] is not None:
        raise _fail("UNO reuses the target model and does not accept --speculative-draft-model-path.")
    if v["uno_lora_path"] is None:
        raise _fail("UNO requires --uno-lora-path.")
    width = v["speculative_num_draft_tokens"]
    if width is None or int(width) < 1:
        raise _fail("UNO requires --speculative-num-draft-tokens to be a positive integer denoting the linear "
                    "width or tree verify width Q.")
    topk = 1 if v["speculative_eagle_topk"] is None else int(v["speculative_eagle_topk"])
    if topk < 1:
        raise _fail(f"UNO requires --speculative-eagle-topk to be at least 1, got {topk}.")
    if topk > 1:
        _uno_tree_checks(v["speculative_num_steps"], int(width), topk)
        v["speculative_eagle_topk"] = topk
    else:
        for field in ("speculative_num_steps", "speculative_eagle_topk"):
            if v[field] not in (None, 1):
                warnings.append(f"UNO uses {field}=1; overriding {v[field]}.")
            v[field] = 1
    if (v["tp_size"], v["pp_size"]) != (1, 1):
        raise _fail("UNO requires TP=PP=1.")
    if v["attn_dp_size"] > 1:
        raise _fail("UNO does not support DP attention or context parallelism.")
    if v["enable_mixed_chunk"]:
        v["enable_mixed_chunk"] = False
        warnings.append("Mixed chunked prefill is disabled for UNO speculative decoding.")
    base = v["attention_backend"] or "fa3"
    prefill, decode = v["prefill_attention_backend"] or base, v["decode_attention_backend"] or base
    if (prefill, decode) != ("fa3", "fa3"):
        raise _fail(f"UNO requires FA3 for both prefill and decode attention; got prefill={prefill!r}, "
                    f"decode={decode!r}.")
    return int(width) - 1


RESERVING_ALGORITHMS = ("EAGLE", "EAGLE3", "FROZEN_KV_MTP")
"""``SpeculativeAlgorithm.is_eagle()``: the algorithms whose draft tokens take output slots (NEXTN resolves to EAGLE)."""


def reserved_tokens(args: Any) -> int:
    """SGLang's ``compute_num_reserved_tokens``: ``max(topk * steps, max_speculative_num_draft_tokens())`` for the
    EAGLE family, else 0; with ``--speculative-adaptive`` the largest draft width is the largest candidate step
    + 1 (8 with the default tiers), not the configured one."""
    if args.algorithm not in RESERVING_ALGORITHMS:
        return 0
    topk, steps = args.speculative_eagle_topk or 0, args.speculative_num_steps or 0
    widest = max(args.speculative_num_draft_tokens or 0, args.max_speculative_num_draft_tokens or 0)
    return max(topk * steps, widest)
