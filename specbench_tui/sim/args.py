"""SGLang 0.5.23's command line, as far as the simulator needs it, and SGLang's argument resolution.

The parser mirrors ``sglang.srt.server_args.prepare_server_args``: ``argparse.ArgumentParser(prog="sglang
serve")`` with ``allow_abbrev`` left on, so a unique prefix (``--tp``) is accepted, an ambiguous one
(``--cuda-graph-max-bs``) fails with ``error: ambiguous option`` and exit code 2, and an unknown flag fails
with ``error: unrecognized arguments`` and exit code 2. Flag names, aliases, defaults and the few ``choices``
come from the reference (``docs/simulator.md`` lists them). Fork-only DDTree flags are included because the
simulator plays a server built from those forks.

:func:`resolve` then applies the resolution rules that matter for a sweep: the generic ones here, the
speculative ones handler by handler in :mod:`specbench_tui.sim.spec_hook` (SGLang's ``speculative_hook.py``:
defaults and their warnings, the 48 reset of every algorithm but UNO, adaptive steps, DDTree forcing
``disable_overlap_schedule``), raising :class:`ResolutionError` with SGLang's exception text where SGLang would
fail at start-up.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import Any

from specbench_tui.sim import spec_hook
from specbench_tui.sim.spec_hook import (
    BUILTIN_ALGORITHMS,
    EAGLE_FAMILY,
    FORK_ALGORITHMS,
    ResolutionError,
)

__all__ = ["BUILTIN_ALGORITHMS", "EAGLE_FAMILY", "FORK_ALGORITHMS", "ResolutionError", "Resolved", "build_parser",
           "human_readable_int", "parse_args", "resolve"]

ATTENTION_BACKENDS = (
    "triton", "torch_native", "flex_attention", "dsa", "nsa", "qsa", "dsv4", "compressed", "fa3", "fa4",
    "flashinfer", "llada2_cfg_flashinfer", "flashmla", "trtllm_mla", "cutedsl_mla", "tokenspeed_mla",
    "trtllm_mha", "hpc_ops", "minicpm_flashattn", "minicpm_flashinfer", "aiter", "wave", "intel_amx",
    "ascend", "intel_xpu",
)
CUDA_GRAPH_BACKENDS = ("full", "breakable", "disabled")
MAMBA_STRATEGIES = ("auto", "no_buffer", "extra_buffer", "extra_buffer_lazy")
DRAFT_KV_DTYPES = ("auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16")

ALGORITHMS = BUILTIN_ALGORITHMS + FORK_ALGORITHMS

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
    max_speculative_num_draft_tokens: int | None = None
    """The widest draft the algorithm may use (adaptive: largest candidate + 1): SGLang keeps it in the runtime
    context, not in ServerArgs, so ``/server_info`` does not carry it."""

    @property
    def spec_on(self) -> bool:
        return self.algorithm != "NONE"

    @property
    def decode_graph_max_bs(self) -> int:
        """The decode CUDA-graph ceiling (``cuda_graph_config.decode.max_bs``)."""
        return int(self.values["cuda_graph_config"]["decode"]["max_bs"])

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["values"][name]
        except KeyError as exc:
            raise AttributeError(name) from exc


def resolve(ns: argparse.Namespace, auto_params: tuple[int, int, int] = (3, 1, 4),
            draft_block_size: int = 16) -> Resolved:
    """Apply SGLang's resolution rules to parsed flags (``arg_groups/speculative_hook.py`` and friends).

    ``auto_params`` is what ``_auto_choose_speculative_params`` picks for the model's architecture
    (``(5, 4, 8)`` for Llama, ``(3, 1, 4)`` for most others); ``draft_block_size`` is what DFLASH reads from
    the draft model's config when no flag sets the draft tokens. ``max_running_requests`` stays None for
    UNO and the autoregressive baseline (the scheduler sizes it from the KV pool).
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

    algorithm, budget = _resolve_speculative(v, warnings, auto_params, draft_block_size)
    # parse_cuda_graph_config folds --cuda-graph-max-bs-decode into cuda_graph_config's decode phase; the flag's
    # own field stays null unless passed (handle_gpu_memory_settings sizes the phase otherwise).
    v["cuda_graph_config"] = {
        "decode": {"backend": v["cuda_graph_backend_decode"],
                   "max_bs": v["cuda_graph_max_bs_decode"] or v["max_running_requests"] or 256, "bs": None},
        "prefill": {"backend": v["cuda_graph_backend_prefill"], "max_bs": v["cuda_graph_max_bs_prefill"], "bs": None},
    }
    if v["chunked_prefill_size"] is None:
        v["chunked_prefill_size"] = 8192
    widest = v.pop("max_speculative_num_draft_tokens", None)
    return Resolved(values=v, warnings=warnings, algorithm=algorithm, budget=budget,
                    max_speculative_num_draft_tokens=widest)


def _resolve_speculative(v: dict[str, Any], warnings: list[str], auto: tuple[int, int, int],
                         draft_block_size: int = 16) -> tuple[str, int]:
    """``handle_speculative_decoding``: the alias, the adaptive set-up, then the algorithm's handler (in place);
    return the modelled algorithm and its budget."""
    name = v["speculative_algorithm"]
    if name is None or name.upper() == "NONE":
        v["speculative_algorithm"] = None
        spec_hook.handle_adaptive(v, warnings)
        return "NONE", 0
    algo = "EAGLE" if name.upper() == "NEXTN" else name.upper()
    if algo not in ALGORITHMS:
        raise ResolutionError("ValueError", f"Unknown speculative algorithm name: {name}")
    v["speculative_algorithm"] = algo  # DFLASH + --speculative-dflash-enable-ddtree stays "DFLASH" here
    if algo == "DFLASH" and v["speculative_dflash_enable_ddtree"]:
        algo = "DDTREE"
    if algo in ("EAGLE3", "STANDALONE") and not v["speculative_draft_model_path"]:
        raise ResolutionError(
            "ValueError", f"{algo} speculative decoding requires --speculative-draft-model-path to be set."
        )
    spec_hook.handle_adaptive(v, warnings)
    return algo, _HANDLERS[algo](v, warnings, auto, draft_block_size)


_HANDLERS: dict[str, Callable[[dict[str, Any], list[str], tuple[int, int, int], int], int]] = {
    "EAGLE": lambda v, w, auto, _block: spec_hook.handle_eagle_family(v, w, auto),
    "EAGLE3": lambda v, w, auto, _block: spec_hook.handle_eagle_family(v, w, auto),
    "STANDALONE": lambda v, w, auto, _block: spec_hook.handle_eagle_family(v, w, auto),
    "FROZEN_KV_MTP": lambda v, w, _auto, _block: spec_hook.handle_frozen_kv_mtp(v, w),
    "DFLASH": lambda v, w, _auto, block: spec_hook.handle_dflash(v, w, block),
    "DDTREE": lambda v, w, _auto, block: spec_hook.handle_ddtree(v, w, block),
    "DSPARK": lambda v, w, _auto, _block: spec_hook.handle_dspark(v, w),
    "NGRAM": lambda v, w, _auto, _block: spec_hook.handle_ngram(v, w),
    "UNO": lambda v, w, _auto, _block: spec_hook.handle_uno(v, w),
}
"""``SpeculativeAlgorithm.handle_server_args``: one handler per algorithm (DDTree: the forks' DFLASH)."""


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse argv like SGLang does (exits 2 on unknown or ambiguous flags)."""
    return build_parser().parse_args(argv)
