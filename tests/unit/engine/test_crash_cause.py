"""One crash cause everywhere (issue 46, point 2): the traceback's exception line, or the signature's own line,
is the cause the final reason, the headless line and every view read (``CrashDetected.cause``)."""

from __future__ import annotations

import asyncio

from specbench_tui.core.events import CrashDetected
from specbench_tui.core.signatures import crash_cause
from specbench_tui.engine.attempt import final_reason

TRACEBACK = (
    "[2026-12-06 09:00:01 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/sglang/srt/managers/scheduler.py", line 3121, in run_scheduler_process',
    "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank)",
    '  File "/sglang/srt/speculative/spec_info.py", line 88, in from_string',
    '    raise ValueError(f"Unknown speculative algorithm name: {name}")',
    "ValueError: Unknown speculative algorithm name: DDTRE",
    "",
    "[2026-12-06 09:00:01] Received sigquit from a child process. It usually means the child failed.",
)


def test_an_announcing_signature_takes_the_tracebacks_exception_line() -> None:
    for name in ("python_traceback", "scheduler_exception", "sigquit_from_child"):
        assert crash_cause(name, TRACEBACK[0], TRACEBACK) == "ValueError: Unknown speculative algorithm name: DDTRE"
    # the last exception line wins: a chained traceback ends with the one that killed the process
    chained = (*TRACEBACK[:6], "During handling of the above exception, another exception occurred:",
               "RuntimeError: the scheduler could not start")
    assert crash_cause("python_traceback", TRACEBACK[0], chained) == "RuntimeError: the scheduler could not start"


def test_a_naming_signature_keeps_its_own_line() -> None:
    line = "RuntimeError: CUDA error: an illegal instruction was encountered "
    assert crash_cause("cuda_illegal_instruction", line, (*TRACEBACK, line)) == line.strip()
    # no exception line in sight: the announcing line itself, not an empty cause
    assert crash_cause("python_traceback", "Traceback (most recent call last):", ("x",)) == \
        "Traceback (most recent call last):"


class _Server:
    def __init__(self, crash: CrashDetected) -> None:
        self.crash = crash

    async def crash_report(self) -> CrashDetected:
        return self.crash


def test_the_final_reason_says_the_cause_not_the_traceback_header() -> None:
    crash = CrashDetected(config_id="c", signature="python_traceback", line="Traceback (most recent call last):",
                          excerpt=TRACEBACK, cause=crash_cause("python_traceback", TRACEBACK[0], TRACEBACK))
    reason = asyncio.run(final_reason(_Server(crash), None))  # type: ignore[arg-type]
    assert reason == "python_traceback: ValueError: Unknown speculative algorithm name: DDTRE"
    # a record written before the cause existed reads its matched line
    old = CrashDetected(config_id="c", signature="cuda_oom", line="CUDA out of memory ", excerpt=())
    assert old.shown_cause == "CUDA out of memory"
