"""SGLang 0.5.23's command line, as far as the simulator needs it, and SGLang's argument resolution.

The parser mirrors ``sglang.srt.server_args.prepare_server_args``: ``argparse.ArgumentParser(prog="sglang
serve")`` with ``allow_abbrev`` left on, so a unique prefix (``--tp``) is accepted, an ambiguous one
(``--cuda-graph-max-bs``) fails with ``error: ambiguous option`` and exit code 2, and an unknown flag fails
with ``error: unrecognized arguments`` and exit code 2. Flag names, aliases, defaults and the few ``choices``
come from the reference (``docs/simulator.md`` lists them). Fork-only DDTree flags are included because the
simulator plays a server built from those forks.

:func:`resolve` then applies the resolution rules that matter for a sweep (speculative defaults and their
warnings, ``max_running_requests`` reset to 48, DDTree forcing ``disable_overlap_schedule``), raising
:class:`ResolutionError` with SGLang's exception text where SGLang would fail at start-up.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Sequence
from typing import Any

ATTENTION_BACKENDS = (
    "triton", "torch_native", "flex_attention", "dsa", "nsa", "qsa", "dsv4", "compressed", "fa3", "fa4",
    "flashinfer", "llada2_cfg_flashinfer", "flashmla", "trtllm_mla", "cutedsl_mla", "tokenspeed_mla",
    "trtllm_mha", "hpc_ops", "minicpm_flashattn", "minicpm_flashinfer", "aiter", "wave", "intel_amx",
    "ascend", "intel_xpu",
)
CUDA_GRAPH_BACKENDS = ("full", "breakable", "disabled")
MAMBA_STRATEGIES = ("auto", "no_buffer", "extra_buffer", "extra_buffer_lazy")
DRAFT_KV_DTYPES = ("auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16")

BUILTIN_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO", "FROZEN_KV_MTP")
FORK_ALGORITHMS = ("DDTREE",)
"""Registered by the DDTree forks (sgl-project/sglang PR #29907); the simulator plays such a build."""
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "STANDALONE", "FROZEN_KV_MTP")

_HUMAN_INT = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kKmMgGtT]i?)?\s*$")
_MULTIPLIERS = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}


def human_readable_int(value: str) -> int:
    """Parse ``32768``, ``32k`` (32000), ``1Ki`` (1024), ``1.5M``: SGLang's ``--context-length`` type."""
    match = _HUMAN_INT.match(value)
    if not match:
        raise ValueError(value)
    number, suffix = match.groups()
    result = float(number) * _MULTIPLIERS.get((suffix or "").lower(), 1)
    if result != int(result):
        raise ValueError(value)
    return int(result)


def build_parser() -> argparse.ArgumentParser:
    """Return a parser that accepts SGLang 0.5.23's flag names (plus the DDTree fork flags)."""
    parser = argparse.ArgumentParser(prog="sglang serve")
    add = parser.add_argument
    # Model and tokenizer.
    add("--model-path", "--model", dest="model_path", type=str, default=None)
    add("--tokenizer-path", type=str, default=None)
    add("--tokenizer-mode", type=str, default="auto")
    add("--load-format", type=str, default="auto")
    add("--trust-remote-code", action="store_true")
    add("--context-length", type=human_readable_int, default=None)
    add("--revision", type=str, default=None)
    add("--served-model-name", type=str, default=None)
    add("--chat-template", type=str, default=None)
    add("--is-embedding", action="store_true")
    add("--dtype", type=str, default="auto")
    add("--kv-cache-dtype", type=str, default="auto")
    add("--quantization", type=str, default=None)
    add("--device", type=str, default=None)
    # Parallelism.
    add("--tp-size", "--tensor-parallel-size", dest="tp_size", type=int, default=1)
    add("--dp-size", "--data-parallel-size", dest="dp_size", type=int, default=1)
    add("--attn-dp-size", "--attention-data-parallel-size", dest="attn_dp_size", type=int, default=1)
    add("--pp-size", "--pipeline-parallel-size", dest="pp_size", type=int, default=1)
    add("--pp-max-micro-batch-size", type=int, default=None)
    add("--pp-async-batch-depth", type=int, default=0)
    add("--ep-size", "--expert-parallel-size", dest="ep_size", type=int, default=1)
    add("--enable-dp-lm-head", action="store_true")
    add("--base-gpu-id", type=int, default=0)
    add("--gpu-id-step", type=int, default=1)
    add("--nnodes", type=int, default=1)
    add("--node-rank", type=int, default=0)
    add("--dist-init-addr", type=str, default=None)
    add("--nccl-port", type=int, default=None)
    # HTTP server.
    add("--host", type=str, default="127.0.0.1")
    add("--port", type=int, default=30000)
    add("--api-key", type=str, default=None)
    add("--skip-server-warmup", action="store_true")
    add("--watchdog-timeout", type=float, default=300)
    add("--random-seed", type=int, default=None)
    # Logging and observability.
    add("--log-level", type=str, default="info")
    add("--log-level-http", type=str, default=None)
    add("--log-requests", action="store_true")
    add("--enable-metrics", action="store_true")
    add("--decode-log-interval", type=int, default=40)
    add("--enable-cache-report", action="store_true")
    # Memory and scheduling.
    add("--mem-fraction-static", type=float, default=None)
    add("--max-running-requests", type=int, default=None)
    add("--max-queued-requests", type=int, default=None)
    add("--max-total-tokens", type=int, default=None)
    add("--chunked-prefill-size", type=int, default=None)
    add("--max-prefill-tokens", type=int, default=16384)
    add("--schedule-policy", type=str, default="fcfs")
    add("--schedule-conservativeness", type=float, default=1.0)
    add("--page-size", type=int, default=None)
    add("--disable-radix-cache", action="store_true")
    add("--disable-overlap-schedule", action="store_true")
    add("--enable-mixed-chunk", action="store_true")
    add("--mamba-radix-cache-strategy", type=str, choices=MAMBA_STRATEGIES, default="auto")
    # Streaming and API behaviour.
    add("--stream-interval", type=int, default=1)
    add("--allow-auto-truncate", action="store_true")
    add("--stream-response-default-include-usage", action="store_true")
    add("--incremental-streaming-output", action="store_true")
    add("--reasoning-parser", type=str, default=None)
    add("--tool-call-parser", type=str, default=None)
    # Kernels and CUDA graphs.
    add("--attention-backend", type=str, choices=ATTENTION_BACKENDS, default=None)
    add("--prefill-attention-backend", type=str, choices=ATTENTION_BACKENDS, default=None)
    add("--decode-attention-backend", type=str, choices=ATTENTION_BACKENDS, default=None)
    add("--sampling-backend", type=str, default=None)
    add("--grammar-backend", type=str, default=None)
    add("--cuda-graph-max-bs-decode", type=int, default=None)
    add("--cuda-graph-max-bs-prefill", type=int, default=None)
    add("--cuda-graph-bs-decode", type=int, nargs="+", default=None)
    add("--cuda-graph-backend-decode", type=str, choices=CUDA_GRAPH_BACKENDS, default=None)
    add("--cuda-graph-backend-prefill", type=str, choices=CUDA_GRAPH_BACKENDS, default=None)
    add("--cuda-graph-config", type=str, default=None)
    add("--disable-cuda-graph", action="store_true")
    add("--disable-decode-cuda-graph", action="store_true")
    add("--disable-prefill-cuda-graph", action="store_true")
    add("--enable-torch-compile", action="store_true")
    add("--torch-compile-max-bs", type=int, default=32)
    # Speculative decoding (sglang/srt/arg_groups/fields/spec.py).
    add("--speculative-algorithm", type=str, default=None)
    add("--speculative-draft-model-path", "--speculative-draft-model", dest="speculative_draft_model_path",
        type=str, default=None)
    add("--speculative-draft-model-revision", type=str, default=None)
    add("--speculative-draft-load-format", type=str, default=None)
    add("--speculative-draft-model-quantization", type=str, default=None)
    add("--speculative-num-steps", type=int, default=None)
    add("--speculative-eagle-topk", type=int, default=None)
    add("--speculative-num-draft-tokens", type=int, default=None)
    add("--speculative-dflash-block-size", type=int, default=None)
    add("--speculative-dspark-block-size", type=int, default=None)
    add("--speculative-dspark-sps-table-path", type=str, default=None)
    add("--speculative-dspark-confidence-sts-path", type=str, default=None)
    add("--speculative-dspark-align-verify-tokens-to-graph-tier", action="store_true")
    add("--speculative-accept-threshold-single", type=float, default=1.0)
    add("--speculative-accept-threshold-acc", type=float, default=1.0)
    add("--speculative-use-rejection-sampling", action="store_true")
    add("--speculative-use-block-verification", action="store_true")
    add("--speculative-attention-mode", type=str, choices=("prefill", "decode"), default="prefill")
    add("--speculative-draft-attention-backend", type=str, default=None)
    add("--speculative-draft-kv-cache-dtype", type=str, choices=DRAFT_KV_DTYPES, default=None)
    add("--speculative-draft-window-size", type=int, default=None)
    add("--speculative-draft-sink-size", type=int, default=None)
    add("--speculative-token-map", type=str, default=None)
    add("--speculative-dsa-topk-backend", type=str, default=None)
    add("--speculative-moe-runner-backend", type=str, default=None)
    add("--speculative-moe-a2a-backend", type=str, default=None)
    add("--enable-multi-layer-eagle", action="store_true")
    add("--speculative-adaptive", action="store_true")
    add("--speculative-adaptive-config", type=str, default=None)
    add("--spec-trace-dir", type=str, default=None)
    add("--speculative-domino-candidate-pool-size", type=int, default=2048)
    add("--uno-lora-path", type=str, default=None)
    add("--speculative-ngram-min-bfs-breadth", type=int, default=1)
    add("--speculative-ngram-max-bfs-breadth", type=int, default=10)
    add("--speculative-ngram-match-type", type=str, choices=("BFS", "PROB"), default="BFS")
    add("--speculative-ngram-max-trie-depth", type=int, default=18)
    add("--speculative-ngram-capacity", type=int, default=10 * 1000 * 1000)
    add("--speculative-ngram-external-corpus-path", type=str, default=None)
    add("--speculative-ngram-external-sam-budget", type=int, default=0)
    # DDTree fork flags: PR #29907 (--speculative-ddtree-budget), DB-Guo/sglang-ddtree-dev
    # (--speculative-dflash-enable-ddtree), PR #31069 (--speculative-dflash-tree-verify).
    add("--speculative-ddtree-budget", type=int, default=None)
    add("--speculative-dflash-enable-ddtree", action="store_true")
    add("--speculative-dflash-tree-verify", action="store_true")
    return parser


class ResolutionError(Exception):
    """SGLang would raise ``exc_type: message`` in the main process while resolving its arguments."""

    def __init__(self, exc_type: str, message: str) -> None:
        super().__init__(message)
        self.exc_type = exc_type
        self.message = message


@dataclasses.dataclass
class Resolved:
    """Arguments after SGLang's resolution, plus the few derived facts the simulator models with.

    ``values`` is the ServerArgs-like mapping reported by ``/server_info`` and logged as
    ``server_args=ServerArgs(...)``; ``warnings`` are the lines SGLang logs while resolving.
    """

    values: dict[str, Any]
    warnings: list[str]
    algorithm: str  # "NONE", "EAGLE", "EAGLE3", "DFLASH", "DDTREE", "NGRAM", ...
    budget: int  # DDTree budget, else num draft tokens - 1 (0 without speculation)

    @property
    def spec_on(self) -> bool:
        return self.algorithm != "NONE"

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["values"][name]
        except KeyError as exc:
            raise AttributeError(name) from exc


def resolve(ns: argparse.Namespace, auto_params: tuple[int, int, int] = (3, 1, 4)) -> Resolved:
    """Apply SGLang's resolution rules to parsed flags (``arg_groups/speculative_hook.py`` and friends).

    ``auto_params`` is what ``_auto_choose_speculative_params`` picks for the model's architecture
    (``(5, 4, 8)`` for Llama, ``(3, 1, 4)`` for most others).
    """
    v: dict[str, Any] = dict(vars(ns))
    warnings: list[str] = []
    if v["model_path"] is None:
        raise ResolutionError("ValueError", "model_path is required. Please pass --model-path.")
    v["tokenizer_path"] = v["tokenizer_path"] or v["model_path"]
    v["served_model_name"] = v["served_model_name"] or v["model_path"]
    v["log_level_http"] = v["log_level_http"] or v["log_level"]
    v["page_size"] = v["page_size"] or 1
    if v["random_seed"] is None:
        v["random_seed"] = 0
    if v["disable_cuda_graph"]:
        warnings.append(
            "'--disable-cuda-graph' is deprecated and will be removed in a future release. "
            "Use '--cuda-graph-backend-{decode,prefill}=disabled' instead."
        )
        v["cuda_graph_backend_decode"] = v["cuda_graph_backend_prefill"] = "disabled"
    if v["disable_decode_cuda_graph"]:
        v["cuda_graph_backend_decode"] = "disabled"
    if v["disable_prefill_cuda_graph"]:
        v["cuda_graph_backend_prefill"] = "disabled"
    v["cuda_graph_backend_decode"] = v["cuda_graph_backend_decode"] or "full"
    v["cuda_graph_backend_prefill"] = v["cuda_graph_backend_prefill"] or "breakable"

    algorithm, budget = _resolve_speculative(v, warnings, auto_params)
    if algorithm != "NONE" and v["max_running_requests"] is None:
        v["max_running_requests"] = 48
        warnings.append(
            "Max running requests is reset to 48 for speculative decoding. "
            "You can override this by explicitly setting --max-running-requests."
        )
    if v["cuda_graph_max_bs_decode"] is None:
        v["cuda_graph_max_bs_decode"] = v["max_running_requests"] or 256
    if v["chunked_prefill_size"] is None:
        v["chunked_prefill_size"] = 8192
    return Resolved(values=v, warnings=warnings, algorithm=algorithm, budget=budget)


def _resolve_speculative(v: dict[str, Any], warnings: list[str], auto: tuple[int, int, int]) -> tuple[str, int]:
    """Resolve the speculative fields in place; return the modelled algorithm and its budget."""
    name = v["speculative_algorithm"]
    if name is None or name.upper() == "NONE":
        v["speculative_algorithm"] = None
        return "NONE", 0
    algo = name.upper()
    if algo == "NEXTN":
        algo = "EAGLE"
    if algo not in BUILTIN_ALGORITHMS + FORK_ALGORITHMS:
        raise ResolutionError("ValueError", f"Unknown speculative algorithm name: {name}")
    v["speculative_algorithm"] = algo
    steps, topk, ndt = v["speculative_num_steps"], v["speculative_eagle_topk"], v["speculative_num_draft_tokens"]
    if algo in ("DFLASH", "DDTREE", "EAGLE3", "STANDALONE") and not v["speculative_draft_model_path"]:
        raise ResolutionError(
            "ValueError", f"{algo} speculative decoding requires --speculative-draft-model-path to be set."
        )

    if algo in EAGLE_FAMILY:
        if steps is None:
            assert_msg = "" if topk is None and ndt is None else (
                "speculative_eagle_topk and speculative_num_draft_tokens should be None "
                "when speculative_num_steps is None"
            )
            if assert_msg:
                raise ResolutionError("AssertionError", assert_msg)
            steps, topk, ndt = auto
        topk = 1 if topk is None else topk
        if topk == 1 and ndt != steps + 1:
            if ndt is not None:
                warnings.append(
                    "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 "
                    "when speculative_eagle_topk == 1"
                )
            ndt = steps + 1
        budget = ndt - 1
    elif algo in ("DFLASH", "DDTREE", "DSPARK"):
        if steps not in (None, 1):
            warnings.append(f"{algo} only supports speculative_num_steps == 1; overriding speculative_num_steps={steps} to 1.")
        if topk not in (None, 1):
            warnings.append(f"{algo} only supports speculative_eagle_topk == 1; overriding speculative_eagle_topk={topk} to 1.")
        steps, topk = 1, 1
        block = v["speculative_dflash_block_size"] if algo != "DSPARK" else v["speculative_dspark_block_size"]
        if block is not None and ndt is not None and block != ndt:
            raise ResolutionError(
                "ValueError",
                f"--speculative-{algo.lower()}-block-size ({block}) must equal "
                f"--speculative-num-draft-tokens ({ndt}) when both are set.",
            )
        if algo == "DDTREE" or v["speculative_dflash_enable_ddtree"]:
            budget = v["speculative_ddtree_budget"]
            if budget is None:
                budget = (ndt or block or 16) - 1
            v["speculative_ddtree_budget"] = budget
            ndt = budget + 1
            if v["page_size"] != 1:
                raise ResolutionError("ValueError", "DDTree speculative decoding requires --page-size 1.")
            v["disable_overlap_schedule"] = True
            v["speculative_num_steps"], v["speculative_eagle_topk"], v["speculative_num_draft_tokens"] = steps, topk, ndt
            return "DDTREE", budget
        ndt = ndt or block or 16
        budget = ndt - 1
    else:  # NGRAM, UNO
        ndt = ndt or 8
        steps = steps or ndt - 1
        topk = topk or 1
        budget = ndt - 1
    v["speculative_num_steps"], v["speculative_eagle_topk"], v["speculative_num_draft_tokens"] = steps, topk, ndt
    return algo, budget


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse argv like SGLang does (exits 2 on unknown or ambiguous flags)."""
    return build_parser().parse_args(argv)
