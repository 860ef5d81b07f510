"""Failures on demand: each reproduces SGLang's log lines and exit behaviour, and leaves no process behind."""

from __future__ import annotations

import os
import signal
import socket
import time

import httpx
import pytest

from specbench_tui.sim.testing import SimProcess, group_left, group_pids

pytestmark = pytest.mark.e2e

DDTREE_B8 = ["--speculative-algorithm", "DDTREE", "--speculative-draft-model-path", "X",
             "--speculative-ddtree-budget", "8"]
CRASH_B8_WARMUP = """
[[crash]]
algorithm = "DDTREE"
budget = [8, 12]
when = "warmup"
signature = "cuda_illegal_instruction"
"""
ILLEGAL = "torch.AcceleratorError: CUDA error: an illegal instruction was encountered"
ASYNC_NOTE = ("CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
              "might be incorrect.")
SIGQUIT_LINE = "] Received sigquit from a child process. It usually means the child failed."
"""engine.py's launch-phase handler: until the first request (the warm-up is one) creates the handle loop."""
RUNNING_SIGQUIT_LINE = "] SIGQUIT received. signum=None, frame=None. It usually means one child failed."
"""tokenizer_manager.py's running_phase_sigquit_handler, installed by loop.add_signal_handler (no arguments)."""


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _no_processes_left(sim: SimProcess) -> None:
    assert group_left(sim.pgid) == []


def test_ddtree_b8_crashes_in_warmup_like_sglang() -> None:
    with SimProcess([*DDTREE_B8, "--tp-size", "2"], profile_toml=CRASH_B8_WARMUP) as sim:
        code = sim.wait_exit(10)
        log = sim.stderr
    assert code != 0 and code == -signal.SIGKILL
    # Both ranks fail in the same warm-up forward, but SGLang's main process kills the whole tree at the first
    # SIGQUIT: a rank that had not been scheduled yet (a loaded machine) dies without a line, here as on GPUs.
    logged = [rank for rank in ("TP0", "TP1")
              if f" {rank}] Scheduler hit an exception: Traceback (most recent call last):" in log]
    assert logged, log
    assert ILLEGAL in log and ASYNC_NOTE in log and "ddtree_worker.py" in log
    assert log.index("Scheduler hit an exception") < log.index(RUNNING_SIGQUIT_LINE) and SIGQUIT_LINE not in log
    assert "fired up and ready to roll" not in log
    _no_processes_left(sim)


def test_other_budgets_do_not_crash() -> None:
    args = ["--speculative-algorithm", "DDTREE", "--speculative-draft-model-path", "X", "--speculative-ddtree-budget", "15"]
    with SimProcess(args, profile_toml=CRASH_B8_WARMUP) as sim:
        sim.wait_ready()
        assert "hit an exception" not in sim.stderr


def test_crash_after_n_requests() -> None:
    profile = '[[crash]]\nalgorithm = "NONE"\nwhen = "after_requests"\nafter_requests = 2\nsignature = "cuda_illegal_memory_access"'
    with SimProcess(profile_toml=profile) as sim:
        sim.wait_ready()
        body = {"text": "Hello", "sampling_params": {"max_new_tokens": 4}}
        for _ in range(2):
            assert httpx.post(f"{sim.url}/generate", json=body, timeout=5).status_code == 200
        with pytest.raises(httpx.TransportError):
            httpx.post(f"{sim.url}/generate", json=body, timeout=5)
        assert sim.wait_exit(15) == -signal.SIGKILL
        log = sim.stderr
    assert "Scheduler hit an exception: Traceback" in log and "tp_worker.py" in log
    assert "torch.AcceleratorError: CUDA error: an illegal memory access was encountered" in log
    assert RUNNING_SIGQUIT_LINE in log and SIGQUIT_LINE not in log
    assert log.index(RUNNING_SIGQUIT_LINE) < log.index("] kill_process_tree called: parent_pid=")
    _no_processes_left(sim)


def test_out_of_memory_at_start_up() -> None:
    with SimProcess(["--mem-fraction-static", "0.3"]) as sim:  # 54 GB of weights do not fit in 0.3 x 140 GB
        assert sim.wait_exit(10) == -signal.SIGKILL
        log = sim.stderr
    assert "Load weight begin." in log and "Load weight end." not in log
    assert "Scheduler hit an exception: Traceback (most recent call last):" in log
    assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate" in log
    assert SIGQUIT_LINE in log and "Uvicorn running" not in log
    _no_processes_left(sim)


def test_graph_capture_oom_from_profile() -> None:
    profile = '[[crash]]\ntp = 4\nwhen = "startup"\nsignature = "cuda_graph_oom"'
    with SimProcess(["--tp-size", "4"], profile_toml=profile) as sim:
        assert sim.wait_exit(10) == -signal.SIGKILL
        log = sim.stderr
    assert "Exception: Capture cuda graph failed: CUDA out of memory." in log
    assert "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)" in log
    _no_processes_left(sim)


def test_missing_local_model_path() -> None:
    with SimProcess(["--model-path", "/nonexistent/models/Qwen3-27B", "--port", "1"], add_defaults=False) as sim:
        assert sim.wait_exit(10) == 1
        log = sim.stderr
    assert log.startswith("Traceback (most recent call last):")
    assert log.rstrip().endswith("OSError: Incorrect path_or_model_id: '/nonexistent/models/Qwen3-27B'. Please "
                                 "provide either the path to a local folder or the repo_id of a model on the Hub.")


def test_port_already_in_use() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        with SimProcess(port=port) as sim:
            assert sim.wait_exit(10) == 1
            log = sim.stderr
    assert (f"ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', {port}): "
            "address already in use") in log
    assert "Application shutdown complete." in log and "ready to roll" not in log
    _no_processes_left(sim)


def test_hang_stops_tokens_and_fails_health() -> None:
    profile = """
[[hang]]
when = "after_requests"
after_requests = 0
[health]
timeout_s = 0.5
[shutdown]
poll_s = 0.1
"""
    with SimProcess(profile_toml=profile) as sim:
        sim.wait_ready()
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{sim.url}/generate", json={"text": "Hello"}, timeout=1.0)
        t0 = time.monotonic()
        assert httpx.get(f"{sim.url}/health", timeout=30).status_code == 503
        # After the health timeout (0.5 s), not at once and not hanging: 10x that for a loaded 2-core box.
        assert 0.4 < time.monotonic() - t0 < 5.0
        sim.wait_for_line("Health check failed. Server couldn't get a response from detokenizer for last")
        sim.signal(signal.SIGTERM)
        assert sim.wait_exit(15) == -signal.SIGKILL
        assert "Signal SIGTERM received while health check failed. Force exiting." in sim.stderr


def test_empty_outputs_for_chosen_configs() -> None:
    profile = '[[empty_output]]\nalgorithm = "DFLASH"\nbudget = 16'
    args = ["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "X"]
    with SimProcess(args, profile_toml=profile) as sim:
        sim.wait_ready()
        out = httpx.post(f"{sim.url}/generate", json={"text": "Hi", "sampling_params": {"max_new_tokens": 50}},
                         timeout=5).json()
    assert out["text"] == "" and out["meta_info"]["completion_tokens"] == 0
    assert out["meta_info"]["finish_reason"]["type"] == "stop"


def test_slow_start() -> None:
    profile = '[[slow_start]]\nmodel = "Qwen"\ndelay_s = 1.0'
    with SimProcess(profile_toml=profile) as sim:
        time.sleep(0.5)
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{sim.url}/health", timeout=1)
        assert sim.wait_ready(30) > 1.0


def test_children_die_when_the_parent_is_sigkilled() -> None:
    with SimProcess(["--tp-size", "2"]) as sim:
        sim.wait_ready()
        tree = group_pids(sim.pgid)
        assert len(tree) >= 4  # main, two schedulers, detokenizer
        sim.signal(signal.SIGKILL)
        sim.wait_exit(15)
        assert group_left(sim.pgid) == []


def test_data_parallel_controller_tree() -> None:
    with SimProcess(["--dp-size", "2", "--tp-size", "2"]) as sim:
        sim.wait_ready()
        assert len(group_pids(sim.pgid)) >= 7  # main, controller, 4 schedulers, detokenizer
        assert " DP1 TP1] Load weight end." in sim.stderr
        sim.signal(signal.SIGKILL)
        sim.wait_exit(15)
        _no_processes_left(sim)


def test_ctrl_c_kills_the_tree() -> None:
    with SimProcess() as sim:
        sim.wait_ready()
        sim.signal(signal.SIGINT)
        assert sim.wait_exit(15) == -signal.SIGINT
        assert "INFO:     Shutting down" in sim.stderr
        _no_processes_left(sim)


def test_a_scheduler_killed_from_outside_takes_the_server_down() -> None:
    with SimProcess(["--tp-size", "2"]) as sim:
        sim.wait_ready()
        schedulers = [pid for pid in group_pids(sim.pgid) if _comm(pid).startswith("sglang::schedul")]
        assert len(schedulers) == 2
        os.kill(schedulers[1], signal.SIGKILL)
        assert sim.wait_exit(15) == -signal.SIGKILL
        assert "crashed with exit code -9. Triggering SIGQUIT for cleanup..." in sim.stderr
        assert RUNNING_SIGQUIT_LINE in sim.stderr and SIGQUIT_LINE not in sim.stderr
        _no_processes_left(sim)
