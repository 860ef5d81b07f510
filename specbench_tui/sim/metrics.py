"""``GET /metrics`` (with ``--enable-metrics``): SGLang's ``sglang:`` Prometheus names in the text format.

Names and labels are 0.5.23's (``sglang/srt/observability/metrics_collector.py``, held to a real server's by
tests/unit/sim/test_sim_vs_sglang_real.py): a counter is declared and sampled as ``x_total``, the scheduler's families carry
the ranks, the tokenizer manager's do not, and request counters and latencies split by ``is_streaming``. Scheduler
gauges change on the decode log interval, like SGLang's; the gauges the simulator does not model are exported at 0.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Protocol

_LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)

_GAUGE_HELP = {
    "gen_throughput": "The generation throughput (token/s).",
    "num_running_reqs": "The number of running requests.",
    "num_queue_reqs": "The number of requests in the waiting queue.",
    "token_usage": "The token usage.",
    "cache_hit_rate": "The prefix cache hit rate.",
    "spec_accept_length": "Mean acceptance length of speculative decoding (accepted drafts + bonus token per forward).",
    "spec_accept_rate": "`accepted drafts / proposed drafts` in batch",
    "spec_num_steps": "The number of speculative decoding steps.",
    "spec_num_draft_tokens": "The number of speculative draft tokens.",
    "max_total_num_tokens": "Maximum total number of tokens in the KV cache pool.",
    "context_len": "The context length.",
    "startup_time_seconds": "Server startup time in seconds.",
    "startup_cuda_graph_time_seconds": "CUDA graph capture time during startup in seconds.",
    "kv_cache_memory_usage_gb": "KV cache memory usage in GB.",
    "weight_memory_usage_gb": "Model weight memory usage in GB.",
    "graph_memory_usage_gb": "CUDA graph memory usage in GB.",
    "num_retracted_reqs": "The number of retracted requests.",
}
_UNMODELLED_GAUGES = (
    "decode_sum_seq_lens", "full_token_usage", "fwd_occupancy", "is_cuda_graph", "kv_available_tokens",
    "kv_evictable_tokens", "kv_used_tokens", "mamba_available_tokens", "mamba_evictable_tokens", "mamba_usage",
    "mamba_used_tokens", "new_token_ratio", "num_decode_deferred_kv_release_reqs", "num_decode_host_receive_queue_reqs",
    "num_decode_prealloc_queue_reqs", "num_decode_transfer_queue_reqs", "num_grammar_queue_reqs", "num_pages",
    "num_paused_reqs", "num_prefill_bootstrap_queue_reqs", "num_prefill_inflight_queue_reqs",
    "num_unique_running_routing_keys", "num_used_tokens", "page_size", "pending_prealloc_token_usage",
    "prealloc_full_token_usage", "prealloc_swa_token_usage", "spec_block_accept_length", "spec_cap_length",
    "startup_available_gpu_memory_gb", "swa_available_tokens", "swa_evictable_tokens", "swa_token_usage",
    "swa_used_tokens", "utilization",
)
"""The scheduler gauges 0.5.23 exports that the simulator does not model: exported under their names and labels,
at 0 (tests/data/sglang_real/sim_differences.json)."""
_COUNTER_HELP = {
    "prompt_tokens": "Number of prefill tokens processed.",
    "generation_tokens": "Number of generation tokens processed.",
    "cached_tokens": "Number of cached prompt tokens.",
    "num_requests": "Number of requests processed.",
    "num_aborted_requests": "Number of requests aborted.",
    "spec_verify_calls": "Number of speculative verify forward calls.",
    "num_retracted_requests": "Total number of retracted requests.",
}
_HISTOGRAM_HELP = {
    "time_to_first_token_seconds": "Histogram of time to first token in seconds.",
    "inter_token_latency_seconds": "Histogram of inter-token latency in seconds.",
    "e2e_request_latency_seconds": "Histogram of End-to-end request latency in seconds",
    "request_time_per_output_token_seconds": "Histogram of time per output token in seconds.",
    "queue_time_seconds": "Histogram of queueing time in seconds.",
}

# Which collector exports each family in 0.5.23 (``observability/metrics_collector.py``), hence its labels: the
# scheduler's carry the ranks (``moe_ep_rank``, ``pp_rank``, ``tp_rank``), the tokenizer manager's only the engine
# and model, and a request counter or latency histogram splits by ``is_streaming``.
_TOKENIZER = frozenset({"prompt_tokens", "generation_tokens", "cached_tokens", "num_requests", "num_aborted_requests",
                        "time_to_first_token_seconds", "inter_token_latency_seconds", "e2e_request_latency_seconds",
                        "request_time_per_output_token_seconds"})
_STREAMING = frozenset({"prompt_tokens", "generation_tokens", "num_requests", "time_to_first_token_seconds",
                        "e2e_request_latency_seconds", "request_time_per_output_token_seconds"})
_EXTRA_LABELS = {"cached_tokens": {"cache_source": "device"}, "graph_memory_usage_gb": {"phase": "decode"},
                 "num_retracted_reqs": {"pid": "0"}, "num_paused_reqs": {"pid": "0"},
                 "startup_time_seconds": {"phase": "total"}, "startup_cuda_graph_time_seconds": {"phase": "decode"}}
_NO_RANKS = frozenset({"startup_time_seconds", "startup_cuda_graph_time_seconds"})



class FinishedRequest(Protocol):
    """What the metrics read of a finished request (:class:`specbench_tui.sim.engine.Request`)."""

    input_ids: list[int]
    cached_tokens: int
    created_mono: float
    first_token_mono: float | None
    finished_mono: float | None

    @property
    def completion_tokens(self) -> int: ...

@dataclass
class Histogram:
    """A cumulative-bucket histogram."""

    counts: list[int] = field(default_factory=lambda: [0] * (len(_LATENCY_BUCKETS) + 1))
    total: float = 0.0
    n: int = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(_LATENCY_BUCKETS, value)] += 1
        self.total += value
        self.n += 1


class Metrics:
    """The server's Prometheus state."""

    def __init__(self, labels: dict[str, str], static_gauges: dict[str, float]) -> None:
        self.labels = labels
        self.gauges: dict[str, float] = {name: 0.0 for name in _GAUGE_HELP}
        self.gauges.update(static_gauges)
        self.counters: dict[str, float] = {name: 0.0 for name in _COUNTER_HELP}
        self.histograms = {name: Histogram() for name in _HISTOGRAM_HELP}
        self.spec_verify_calls = 0

    def update_gauges(self, **values: float) -> None:
        self.gauges.update(values)

    def reset_spec(self) -> None:
        self.gauges["spec_accept_length"] = 0.0
        self.gauges["spec_accept_rate"] = 0.0

    def observe_finished(self, req: FinishedRequest, aborted: bool) -> None:
        """Count a finished request (an ``engine.Request``)."""
        c = self.counters
        c["prompt_tokens"] += len(req.input_ids)
        c["generation_tokens"] += req.completion_tokens
        c["cached_tokens"] += req.cached_tokens
        c["num_requests"] += 1
        if aborted:
            c["num_aborted_requests"] += 1
        if c["prompt_tokens"]:
            self.gauges["cache_hit_rate"] = c["cached_tokens"] / c["prompt_tokens"]
        end = req.finished_mono or req.created_mono
        self.histograms["e2e_request_latency_seconds"].observe(end - req.created_mono)
        if req.first_token_mono is not None:
            ttft = req.first_token_mono - req.created_mono
            self.histograms["time_to_first_token_seconds"].observe(ttft)
            self.histograms["queue_time_seconds"].observe(0.0)
            if req.completion_tokens > 1:
                tpot = (end - req.first_token_mono) / (req.completion_tokens - 1)
                self.histograms["request_time_per_output_token_seconds"].observe(tpot)
                self.histograms["inter_token_latency_seconds"].observe(tpot)

    def _labels(self, name: str) -> str:
        """The label set 0.5.23 exports ``name`` with (see :data:`_TOKENIZER`)."""
        base = {k: v for k, v in self.labels.items() if k in ("engine_type", "model_name")}
        if name in _STREAMING:
            base["is_streaming"] = "false"
        if name not in _TOKENIZER and name not in _NO_RANKS:
            base.update({"moe_ep_rank": "0", "pp_rank": self.labels.get("pp_rank", "0"),
                         "tp_rank": self.labels.get("tp_rank", "0")})
        base.update(_EXTRA_LABELS.get(name, {}))
        return ",".join(f'{k}="{v}"' for k, v in sorted(base.items()))

    def render(self) -> str:
        """The Prometheus text exposition: 0.5.23 declares a counter by its ``_total`` name."""
        out: list[str] = []
        self.counters["spec_verify_calls"] = float(self.spec_verify_calls)
        for name, help_text in _COUNTER_HELP.items():
            out += [f"# HELP sglang:{name}_total {help_text}", f"# TYPE sglang:{name}_total counter",
                    f"sglang:{name}_total{{{self._labels(name)}}} {float(self.counters[name])}"]
        gauges = {**_GAUGE_HELP, **{name: f"sglang:{name} (not modelled by the simulator)" for name in _UNMODELLED_GAUGES}}
        for name, help_text in gauges.items():
            out += [f"# HELP sglang:{name} {help_text}", f"# TYPE sglang:{name} gauge",
                    f"sglang:{name}{{{self._labels(name)}}} {float(self.gauges.get(name, 0.0))}"]
        for name, help_text in _HISTOGRAM_HELP.items():
            hist = self.histograms[name]
            label = self._labels(name)
            out += [f"# HELP sglang:{name} {help_text}", f"# TYPE sglang:{name} histogram"]
            running = 0
            for bound, count in zip([*map(str, _LATENCY_BUCKETS), "+Inf"], hist.counts):
                running += count
                out.append(f'sglang:{name}_bucket{{{label},le="{bound}"}} {float(running)}')
            out += [f"sglang:{name}_count{{{label}}} {float(hist.n)}", f"sglang:{name}_sum{{{label}}} {hist.total}"]
        return "\n".join(out) + "\n"


@dataclass
class DecodeInterval:
    """One DP rank's counts between two ``Decode batch`` lines."""

    tokens: int = 0
    accept_tokens: int = 0
    correct: int = 0
    forwards: int = 0
    proposed: int = 0

    def add(self, got: int, accepted: int, proposed: int) -> None:
        self.tokens += got
        self.accept_tokens += got
        self.correct += accepted
        self.forwards += 1
        self.proposed += max(1, proposed)

    def merge(self, other: DecodeInterval) -> None:
        for name in ("tokens", "accept_tokens", "correct", "forwards", "proposed"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def accept(self, spec: bool) -> tuple[float | None, float | None]:
        """``accept len`` (tokens per forward) and ``accept rate`` (correct drafts / proposed); None without
        speculation, 0.00 for an interval without forwards."""
        if not spec:
            return None, None
        if not self.forwards:
            return 0.0, 0.0
        return self.accept_tokens / self.forwards, self.correct / self.proposed if self.proposed else 0.0
