"""``GET /metrics`` (with ``--enable-metrics``): SGLang's ``sglang:`` Prometheus names in the text format.

Names, help texts and labels follow ``sglang/srt/observability/metrics_collector.py`` as the reference lists
them; the exposition mimics ``prometheus_client`` (a counter ``sglang:x`` is declared as ``x`` and sampled
as ``x_total``). Scheduler gauges change on the decode log interval, like SGLang's.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

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

    def observe_finished(self, req: Any, aborted: bool) -> None:
        """Count a finished request (``req`` is an ``engine.Request``)."""
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

    def render(self) -> str:
        """The Prometheus text exposition."""
        label = ",".join(f'{k}="{v}"' for k, v in self.labels.items())
        out: list[str] = []
        self.counters["spec_verify_calls"] = float(self.spec_verify_calls)
        for name, help_text in _COUNTER_HELP.items():
            out += [f"# HELP sglang:{name} {help_text}", f"# TYPE sglang:{name} counter",
                    f"sglang:{name}_total{{{label}}} {float(self.counters[name])}"]
        for name, help_text in _GAUGE_HELP.items():
            out += [f"# HELP sglang:{name} {help_text}", f"# TYPE sglang:{name} gauge",
                    f"sglang:{name}{{{label}}} {float(self.gauges[name])}"]
        for name, help_text in _HISTOGRAM_HELP.items():
            hist = self.histograms[name]
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
