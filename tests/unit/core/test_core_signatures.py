"""Crash signatures: the built-ins match SGLang's fatal lines, the most specific name wins, sweeps extend them."""

from specbench_tui.core.engines.sglang import SGLANG_SIGNATURES
from specbench_tui.core.signatures import (
    LEVEL_ERROR,
    LEVEL_FATAL,
    LEVEL_INFO,
    LEVEL_WARNING,
    SignatureSet,
    line_level,
    most_specific,
)

SIGS = SignatureSet(builtins=SGLANG_SIGNATURES)


def name(line: str) -> str | None:
    match = SIGS.match(line)
    return match.name if match else None


def test_builtin_lines_from_the_reference():
    assert name("torch.AcceleratorError: CUDA error: an illegal instruction was encountered") == "cuda_illegal_instruction"
    assert name("RuntimeError: CUDA error: an illegal memory access was encountered") == "cuda_illegal_memory_access"
    assert name("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 448.00 MiB.") == "cuda_oom"
    assert name("[2025-01-01 00:00:00] Not enough memory. Please try to increase --mem-fraction-static.") == "cuda_oom"
    assert name("[rank1]:[E512 19:01:18] ProcessGroupNCCL.cpp:1595] Process group watchdog thread terminated "
                "with exception: NCCL error: unhandled system error") == "nccl_error"
    assert name("[2025-02-21 22:59:28 TP0] Scheduler hit an exception: Traceback (most recent call last):") \
        == "scheduler_exception"
    assert name("[2025-02-21 22:59:28] Received sigquit from a child proces. It usually mea...") == "sigquit_from_child"
    assert name("[2026-01-01 00:00:00] Received sigquit from a child process. It usually means the child failed.") \
        == "sigquit_from_child"
    assert name("scheduler_TP0 watchdog timeout (self.watchdog_timeout=300, self.soft=False)") == "watchdog_timeout"
    assert name("Traceback (most recent call last):") == "python_traceback"


def test_ordinary_lines_do_not_match():
    for line in ("[2026-10-01 12:00:00] Decode batch, #running-req: 8, #token: 4096, token usage: 0.02, "
                 "gen throughput (token/s): 1234.56, #queue-req: 0",
                 "CUDA kernel errors might be asynchronously reported at some other API call",
                 "The server is fired up and ready to roll!", "", "\x00\ufffd[/crash]"):
        assert SIGS.match(line) is None, line


def test_more_specific_wins_over_python_traceback():
    lines = ["Traceback (most recent call last):", '  File "x.py", line 1, in f',
             "torch.AcceleratorError: CUDA error: an illegal instruction was encountered"]
    matches = [m for m in map(SIGS.match, lines) if m]
    assert [m.name for m in matches] == ["python_traceback", "cuda_illegal_instruction"]
    assert most_specific(matches).name == "cuda_illegal_instruction"
    scheduler = SIGS.match("Scheduler hit an exception: Traceback (most recent call last):")
    cuda = SIGS.match("RuntimeError: CUDA error: an illegal memory access was encountered")
    assert most_specific([scheduler, cuda]).name == "cuda_illegal_memory_access"


def test_sweep_signatures_extend_and_win():
    sigs = SignatureSet([("draft_vocab_mismatch", r"vocab size mismatch"), ("my_cuda", r"CUDA error: an illegal")],
                        SGLANG_SIGNATURES)
    assert sigs.match("ValueError: draft vocab size mismatch 151936 != 32000").name == "draft_vocab_mismatch"
    assert sigs.match("CUDA error: an illegal instruction was encountered").name == "my_cuda"
    assert "python_traceback" in sigs.names


def test_line_levels():
    assert line_level("CUDA error: an illegal instruction was encountered", SIGS) == LEVEL_FATAL
    assert line_level("[2026] ERROR: something") == LEVEL_ERROR
    assert line_level("UserWarning: 'python -m sglang.launch_server' is still supported") == LEVEL_WARNING
    assert line_level("[2026] Load weight begin. avail mem=137.29 GB") == LEVEL_INFO
