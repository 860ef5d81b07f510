"""tools/gpu_probe.py: the script that shows the real NVML backend and the fingerprint on a GPU machine.

Here (no GPU) it runs on the scripted fake box and on the no-driver path; its hold check is driven through the
fake backend, whose memory outlives a killed process by ``release_delay_s`` as a dying CUDA context does.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from repo_paths import REPO
from specbench_tui.engine.gpus import FakeBackend

ROOT = REPO
PROBE = ROOT / "tools" / "gpu_probe.py"


def _probe_module():
    spec = importlib.util.spec_from_file_location("gpu_probe", PROBE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(PROBE), *args], capture_output=True, text=True, timeout=120,
                          check=False)


def _fingerprint(stdout: str) -> dict:
    fingerprint: dict = json.loads(stdout[stdout.index("env.json:\n") + len("env.json:\n"):stdout.index("\n}\n") + 2])
    return fingerprint


def test_fake_box_with_the_hold_check(tmp_path: Path) -> None:
    sweep = tmp_path / "s.toml"
    sweep.write_text("[sweep]\nname = 'x'\n")
    done = _run("--fake", "--hold-gib", "1", "--gpu", "5", "--sweep", str(sweep))
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "GPUs: 8" in out and "sm_120" in out
    assert "pid 4242" in out  # the scripted demo-tp4 server's process on GPUs 0-3
    doc = _fingerprint(out)
    assert doc["gpus"]["count"] == 8 and doc["gpus"]["sm"] == ["sm_120"]
    assert len(doc["sweep"]["sha256"]) == 64
    assert "lists our pid" in out and "memory released" in out


def test_no_driver_is_a_hint_and_exit_0() -> None:
    nvml = pytest.importorskip("pynvml")
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:
        pass
    else:
        nvml.nvmlShutdown()
        pytest.skip("this machine has an NVIDIA driver")
    done = _run("--hold-gib", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "hint: no NVIDIA driver found" in done.stdout
    assert _fingerprint(done.stdout)["gpus"]["count"] == 0


def test_memory_held_past_the_timeout_fails_the_check(capsys: pytest.CaptureFixture[str]) -> None:
    probe = _probe_module()
    backend = FakeBackend(load_s=0.0, release_delay_s=30.0)
    assert probe.hold_check(backend, sys.executable, 1, 1.0, 0.3, fake=True) == 1
    assert "still holds GPU 1" in capsys.readouterr().out


def test_memory_released_in_time_passes(capsys: pytest.CaptureFixture[str]) -> None:
    probe = _probe_module()
    backend = FakeBackend(load_s=0.0, release_delay_s=0.2)
    assert probe.hold_check(backend, sys.executable, 1, 1.0, 5.0, fake=True) == 0
    out = capsys.readouterr().out
    assert "lists our pid" in out and "memory released" in out


def test_an_interpreter_without_torch_is_said(capsys: pytest.CaptureFixture[str]) -> None:
    """Not fake: the hold script imports torch, which this test environment lacks (or CUDA, if it has torch)."""
    probe = _probe_module()
    backend = FakeBackend(load_s=0.0)
    assert probe.hold_check(backend, sys.executable, 1, 0.001, 1.0) == 1
    assert "could not take" in capsys.readouterr().out


def test_another_pid_namespace_is_recognised_and_its_pids_watched(capsys: pytest.CaptureFixture[str]) -> None:
    probe = _probe_module()
    backend = FakeBackend(load_s=0.0, release_delay_s=0.2, pid_offset=4_000_000)
    assert probe.hold_check(backend, sys.executable, 3, 1.0, 5.0, fake=True) == 0
    out = capsys.readouterr().out
    assert "another pid namespace" in out and "memory released" in out
