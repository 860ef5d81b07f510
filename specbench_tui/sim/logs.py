"""SGLang's log formats on stderr: ``[%Y-%m-%d %H:%M:%S{.ms}{ prefix}] message``.

Every line is written with a single ``os.write`` on fd 2, so lines of the main process and its children
never interleave mid-line (the children inherit the same stderr, like SGLang's). ``SGLANG_LOG_MS=1`` adds
milliseconds. The scheduler prefix is ``" DP{n}"`` with data parallelism and ``" TP{n}"`` with tp > 1 (0.5.23
prints no ``TP0`` at TP1; the older "period" style always does). Uvicorn lines carry uvicorn's level prefix
(``INFO:     ``), as SGLang configures uvicorn's formatter with the same timestamp.

The ``format_*`` helpers build the ``Prefill batch`` / ``Decode batch`` lines from SGLang's format strings
(``metrics_reporter.py``), in the 0.5.23 comma form or the older period form, and the exception texts of
the failures the simulator reproduces.
"""

from __future__ import annotations

import os
import time

LEVELS = {"debug": 10, "info": 20, "warning": 30, "warn": 30, "error": 40, "critical": 50, "fatal": 50}
_HTTP_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
                 422: "Unprocessable Entity", 500: "Internal Server Error", 503: "Service Unavailable"}


def level_number(name: str) -> int:
    """``logging``'s number for a ``--log-level`` string (unknown names behave like ``info``)."""
    return LEVELS.get(name.lower(), 20)


def write_raw(text: str) -> None:
    """Write ``text`` to stderr in one system call (atomic below PIPE_BUF)."""
    data = text.encode("utf-8", "replace")
    try:
        while data:
            written = os.write(2, data)
            data = data[written:]
    except OSError:
        pass


def timestamp() -> str:
    """SGLang's asctime, with ``.mmm`` when ``SGLANG_LOG_MS`` is set."""
    now = time.time()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
    if os.environ.get("SGLANG_LOG_MS", "").lower() in ("1", "true", "yes"):
        stamp += f".{int(now * 1000) % 1000:03d}"
    return stamp


class Logger:
    """One process's SGLang-style logger (``prefix`` like ``" TP1"``; ``level`` from ``--log-level``)."""

    def __init__(self, prefix: str = "", level: str = "info", http_level: str | None = None) -> None:
        self.prefix = prefix
        self.level = level_number(level)
        self.http_level = level_number(http_level or level)

    def log(self, message: str, level: int = 20) -> None:
        if level >= self.level:
            write_raw(f"[{timestamp()}{self.prefix}] {message}\n")

    def info(self, message: str) -> None:
        self.log(message, 20)

    def warning(self, message: str) -> None:
        self.log(message, 30)

    def error(self, message: str) -> None:
        self.log(message, 40)

    def uvicorn(self, message: str, level: int = 20) -> None:
        """A uvicorn line: ``[ts] INFO:     message`` (no scheduler prefix)."""
        if level >= self.http_level:
            name = {20: "INFO", 30: "WARNING", 40: "ERROR"}.get(level, "INFO")
            write_raw(f"[{timestamp()}] {(name + ':').ljust(9)} {message}\n")

    def access(self, client: tuple[str, int], method: str, target: str, status: int) -> None:
        """A uvicorn access line: ``INFO:     127.0.0.1:41452 - "GET /health HTTP/1.1" 200 OK``."""
        reason = _HTTP_REASONS.get(status, "")
        self.uvicorn(f'{client[0]}:{client[1]} - "{method} {target} HTTP/1.1" {status} {reason}'.rstrip())


def scheduler_prefix(dp_rank: int | None, tp_rank: int, tp_size: int, style: str = "comma") -> str:
    """The scheduler's log prefix: ``" DP1 TP2"``; no ``TP0`` at TP1 except in the older style."""
    prefix = f" DP{dp_rank}" if dp_rank is not None else ""
    if tp_size > 1 or style == "period":
        prefix += f" TP{tp_rank}"
    return prefix


def usage_fields(pool: str, tokens: int | None, usage: float) -> str:
    """The KV pool's usage fields (``pool_stats_observer.py``): ``#token: N, token usage: U`` (decode) or
    ``token usage: U`` (prefill, ``tokens`` None) for a full-attention pool; a hybrid model's ``full``/``swa``
    (sliding window) or ``full``/``mamba`` fields otherwise (the simulator's second pool mirrors the first)."""
    if pool == "swa":
        if tokens is None:
            return f"full token usage: {usage:.2f}, swa token usage: {usage:.2f}"
        return f"#full token: {tokens}, full token usage: {usage:.2f}, #swa token: {tokens}, swa token usage: {usage:.2f}"
    if pool == "mamba":
        if tokens is None:
            return f"full token usage: {usage:.2f}, mamba usage: {usage:.2f}"
        return f"#full token: {tokens}, full token usage: {usage:.2f}, mamba num: 1, mamba usage: {usage:.2f}"
    return f"token usage: {usage:.2f}" if tokens is None else f"#token: {tokens}, token usage: {usage:.2f}"


def format_prefill(style: str, new_seq: int, new_token: int, cached: int, usage: float, running: int,
                   queued: int, pending: int = 0, graph: bool = False, input_tps: float = 0.0,
                   pool: str = "full") -> str:
    """A ``Prefill batch`` message (0.5.23 comma form, or the older period form ending in a comma)."""
    if style == "period":
        return (f"Prefill batch. #new-seq: {new_seq}, #new-token: {new_token}, #cached-token: {cached}, "
                f"token usage: {usage:.2f}, #running-req: {running}, #queue-req: {queued},")
    return (f"Prefill batch, #new-seq: {new_seq}, #new-token: {new_token}, #cached-token: {cached}, "
            f"{usage_fields(pool, None, usage)}, #running-req: {running}, #queue-req: {queued}, "
            f"#pending-token: {pending}, cuda graph: {graph}, input throughput (token/s): {input_tps:.2f}")


def format_decode(style: str, running: int, tokens: int, usage: float, accept_len: float | None,
                  accept_rate: float | None, graph: bool, gen_tps: float, queued: int, pool: str = "full") -> str:
    """A ``Decode batch`` message; ``accept len``/``accept rate`` only with speculative decoding."""
    sep = "." if style == "period" else ","
    spec = f"accept len: {accept_len:.2f}, accept rate: {accept_rate:.2f}, " if accept_len is not None else ""
    fields = f"#token: {tokens}, token usage: {usage:.2f}" if style == "period" else usage_fields(pool, tokens, usage)
    line = (f"Decode batch{sep} #running-req: {running}, {fields}, {spec}"
            f"cuda graph: {graph}, gen throughput (token/s): {gen_tps:.2f}, #queue-req: {queued}")
    return line + ("," if style == "period" else "")


SITE = "/usr/local/lib/python3.12/dist-packages"
_WORKER_FILES = {
    "NONE": ("sglang/srt/managers/tp_worker.py", "forward_batch_generation", "logits_output, can_run_cuda_graph = self.model_runner.forward("),
    "EAGLE": ("sglang/srt/speculative/eagle_worker_v2.py", "verify", "logits_output, can_run_cuda_graph = self.target_worker.forward_batch_generation("),
    "DFLASH": ("sglang/srt/speculative/dflash_worker_v2.py", "verify", "logits_output = self.target_worker.forward_batch_generation("),
    "DDTREE": ("sglang/srt/speculative/ddtree_worker.py", "verify_tree", "logits_output = self.target_worker.forward_batch_generation("),
    "NGRAM": ("sglang/srt/speculative/ngram_worker.py", "verify", "logits_output = self.target_worker.forward_batch_generation("),
}


def _frames(frames: list[tuple[str, int, str, str]]) -> str:
    return "".join(f'  File "{SITE}/{path}", line {line}, in {func}\n    {code}\n' for path, line, func, code in frames)


def forward_traceback(algorithm: str) -> str:
    """The frames of an exception raised inside a decode forward of ``algorithm``'s worker."""
    path, func, code = _WORKER_FILES.get(algorithm, _WORKER_FILES["EAGLE"] if algorithm != "NONE" else _WORKER_FILES["NONE"])
    return "Traceback (most recent call last):\n" + _frames([
        ("sglang/srt/managers/scheduler.py", 3214, "run_scheduler_process", "scheduler.run_event_loop()"),
        ("sglang/srt/managers/scheduler.py", 1187, "run_event_loop", "dispatch_event_loop(self)"),
        ("sglang/srt/managers/scheduler.py", 1206, "event_loop_normal", "result = self.run_batch(batch)"),
        ("sglang/srt/managers/scheduler.py", 2671, "run_batch", "batch_result = self.model_worker.forward_batch_generation("),
        (path, 512, func, code),
        ("torch/utils/_contextlib.py", 120, "decorate_context", "return func(*args, **kwargs)"),
    ])


def startup_traceback(stage: str) -> str:
    """The frames of an exception raised while the scheduler initialises (``load``, ``kv`` or ``graph``)."""
    frames = [("sglang/srt/managers/scheduler.py", 3198, "run_scheduler_process",
               "scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)"),
              ("sglang/srt/managers/scheduler.py", 402, "__init__", "self.init_model_worker()"),
              ("sglang/srt/managers/tp_worker.py", 247, "__init__", "self.model_runner = ModelRunner("),
              ("sglang/srt/model_executor/model_runner.py", 398, "__init__", "self.initialize(min_per_gpu_memory)")]
    if stage == "load":
        frames += [("sglang/srt/model_executor/model_runner.py", 1342, "load_model",
                    "self.model = self.loader.load_model("),
                   ("sglang/srt/model_loader/loader.py", 721, "load_model", "model.load_weights(self._get_all_weights(model_config, model))")]
    elif stage == "kv":
        frames += [("sglang/srt/model_executor/model_runner.py", 512, "initialize", "self.init_memory_pool(min_per_gpu_memory)"),
                   ("sglang/srt/model_executor/pool_configurator.py", 96, "configure", 'raise RuntimeError("Not enough memory. Please try to increase --mem-fraction-static.")')]
    else:
        frames += [("sglang/srt/model_executor/model_runner.py", 540, "initialize", "self.init_device_graphs()"),
                   ("sglang/srt/model_executor/cuda_graph_runner.py", 468, "__init__", "self.capture()")]
    return "Traceback (most recent call last):\n" + _frames(frames)


CUDA_ASYNC_NOTE = (
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
    "might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
)
CUDA_GRAPH_CAPTURE_FAILED_MSG = (
    "Possible solutions:\n1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
    "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)\n"
    "3. disable decode CUDA graph by --cuda-graph-backend-decode=disabled. (Not recommended. Huge performance loss)\n"
    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n"
)


def oom_text(gpu_id: int, total_gib: float, in_use_gib: float) -> str:
    """torch's CUDA out-of-memory message."""
    free = max(total_gib - in_use_gib, 0.0) * 1024
    return (f"CUDA out of memory. Tried to allocate 448.00 MiB. GPU {gpu_id} has a total capacity of {total_gib:.2f} GiB "
            f"of which {free:.2f} MiB is free. Including non-PyTorch memory, this process has {in_use_gib:.2f} GiB "
            f"memory in use. Of the allocated memory {in_use_gib - 1.2:.2f} GiB is allocated by PyTorch, and "
            "1.21 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try "
            "setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation "
            "for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")


def exception_tail(signature: str, gpu_id: int, total_gib: float) -> str:
    """The last lines of the traceback for a crash ``signature`` (see profile.CRASH_SIGNATURES)."""
    if signature == "cuda_illegal_instruction":
        return ("torch.AcceleratorError: CUDA error: an illegal instruction was encountered\n"
                "Search for `cudaErrorIllegalInstruction' in https://docs.nvidia.com/cuda/cuda-runtime-api/"
                "group__cudart__types.html for more information.\n" + CUDA_ASYNC_NOTE)
    if signature == "cuda_illegal_memory_access":
        return ("torch.AcceleratorError: CUDA error: an illegal memory access was encountered\n"
                "Search for `cudaErrorIllegalAddress' in https://docs.nvidia.com/cuda/cuda-runtime-api/"
                "group__cudart__types.html for more information.\n" + CUDA_ASYNC_NOTE)
    if signature == "cuda_oom":
        return "torch.OutOfMemoryError: " + oom_text(gpu_id, total_gib, total_gib - 0.3) + "\n"
    if signature == "cuda_graph_oom":
        return ("Exception: Capture cuda graph failed: " + oom_text(gpu_id, total_gib, total_gib - 0.3) + "\n"
                + CUDA_GRAPH_CAPTURE_FAILED_MSG)
    if signature == "kv_pool_oom":
        return "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.\n"
    return "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)\n"
