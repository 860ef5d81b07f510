"""The terminal's alerts (issue 48): an attached client of a real engine process, on a real pseudo-terminal (as over
SSH), rings the bell and sends the desktop notifications (OSC 9 and OSC 777) for a crash and the sweep's end."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from engine_helpers import write_sweep
from notify_helpers import PROFILE
from reliability_helpers import TerminalRun, new_marker, wait_for, wait_gone

from specbench_tui.core.alerts import END, Alert
from specbench_tui.tui.terminal_alerts import EVERY_S, TerminalAlerts

SWEEP = """
[sweep]
name = "bell"
gpus = 1
repeats = 2
warmup = 0
[engine]
launcher = "simulator"
sim_profile = "sim_profile.toml"
startup_timeout_s = 60
shutdown_grace_s = 2
gpu_release_timeout_s = 1
[server.args]
model-path = "Qwen/Qwen3-8B"
context-length = 8192
[notify]
min_interval_s = 0
{terminal}
[[configs]]
name = "ddtree-b8"
algorithm = "ddtree"
[configs.args]
speculative-algorithm = "DDTREE"
speculative-draft-model-path = "z-lab/Qwen3-8B-DFlash-b16"
speculative-num-draft-tokens = 8
page-size = 1
[[workloads]]
name = "code"
kind = "code"
items = ["fibonacci"]
max_new_tokens = 16
"""

OSC = re.compile(rb"\x1b\](9|777);([^\x07\x1b]*)\x07")


def _ended(runs: Path) -> bool:
    return any(b'"SweepFinished"' in path.read_bytes() for path in runs.glob("*/events.jsonl"))


def _notifications(tmp_path: Path, terminal: str) -> list[tuple[bytes, bytes]]:
    """Run the sweep on a pseudo-terminal (an engine process and its attached client) until it ends; the OSC
    notifications the terminal received."""
    marker = new_marker()
    sweep = write_sweep(tmp_path, SWEEP.replace("{terminal}", terminal), PROFILE)
    run = TerminalRun(sweep, tmp_path / "runs", marker, extra=("--port-base", "34100"))
    try:
        wait_for(lambda: _ended(tmp_path / "runs") or run.proc.poll() is not None, 120, poll_s=0.2,
                 what="the end of the sweep")
        if terminal == "":
            wait_for(lambda: b"777;notify;specbench: sweep completed" in run.output, 10, poll_s=0.1,
                     what="the end's notification")
        time.sleep(2 * EVERY_S)  # what a client would write after the end is written by now
        os.write(run.master, b"q")
        run.proc.wait(timeout=60)
    finally:
        if run.proc.poll() is None:
            run.proc.kill()
            run.proc.wait(5)
        run.close()
        wait_gone(marker, run.proc.pid, timeout_s=5)
    return [(m.group(1), m.group(2)) for m in OSC.finditer(run.output)]


@pytest.mark.e2e
def test_an_attached_client_rings_and_notifies_through_its_terminal(tmp_path: Path) -> None:
    found = _notifications(tmp_path, "")
    assert (b"9", b"specbench: ddtree-b8 crashed: bell: ddtree-b8 crashed: cuda_illegal_instruction: "
                  b"torch.AcceleratorError: CUDA error: an illegal instruction was encountered") in found, found
    assert (b"777", b"notify;specbench: ddtree-b8 crashed;bell: ddtree-b8 crashed: cuda_illegal_instruction: "
                    b"torch.AcceleratorError: CUDA error: an illegal instruction was encountered") in found, found
    assert (b"777", b"notify;specbench: sweep completed;bell: sweep completed (1 crashed)") in found, found
    assert len(found) == 4, found  # two alerts, each as OSC 9 and OSC 777, each once


@pytest.mark.e2e
def test_terminal_false_keeps_the_terminal_quiet(tmp_path: Path) -> None:
    assert _notifications(tmp_path, "terminal = false") == []


def test_a_replayed_past_makes_no_alert() -> None:
    from specbench_tui.core.events import SweepFinished

    class App:
        is_headless = True

    written: list[str] = []
    alerts = TerminalAlerts(App(), interval_s=0, sweep="s", write=written.append)  # type: ignore[arg-type]
    alerts.take(SweepFinished(state="completed", ts=alerts.since - 60))
    alerts.flush()
    assert written == []
    alerts.take(SweepFinished(state="completed"))
    alerts.flush()
    assert [a.kind for a in alerts.written] == [END] and written[0].startswith("\x07\x1b]9;specbench: sweep")
    assert isinstance(alerts.written[0], Alert)
