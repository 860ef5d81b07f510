"""Ctrl-C at any moment ends specbench without a traceback (start-up included: a real subprocess interrupted at
several moments, from its first imports to its servers' start), and `specbench stop` stops any sweep of one's
own: a plugin engine's sweep too, from a shell without SPECBENCH_ENGINES."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import pytest
from reliability_helpers import wait_for
from test_toy_engine import _sweep as toy_sweep

from repo_paths import REPO, TESTS
from specbench_tui.engine.control_socket import SOCKET_NAME

MOMENTS_S = (0.02, 0.1, 0.25, 0.5, 0.9, 1.5, 2.5)
"""When SIGINT is sent, after the program's first line has run: during the imports, the parser, the plan, the
servers' launch. (The interpreter's own start, before any line of the program runs, is outside what a program
can handle: Python itself prints "Could not import runpy module" and a traceback. The child runs with
``-X importtime`` and each moment counts from :func:`_program_started`.)"""


def _program_started(output: IO[bytes], seen: list[bytes]) -> bool:
    """Read the child's ``-X importtime`` lines until its program runs: the first top-level import after the
    package ``specbench_tui`` is ``__main__``'s own (``signal``, whose handler it sets next) or the CLI's. Every
    line read goes to ``seen``; False when the output ended first (a child that died, or a format not read)."""
    package_seen = False
    for line in iter(output.readline, b""):
        seen.append(line)
        name = line.rpartition(b"|")[2].rstrip(b"\n")
        if line.startswith(b"import time:") and not name.startswith(b"  "):
            if package_seen:
                return True
            package_seen = name.strip() == b"specbench_tui"
    return False


def _interrupted_at(argv: list[str], delay_s: float, env: dict[str, str] | None = None) -> tuple[int, str]:
    child = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "specbench_tui", *argv], cwd=REPO,
                             env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)
    seen: list[bytes] = []
    try:
        assert child.stdout is not None
        started = _program_started(child.stdout, seen)
        assert started, b"".join(seen)[-2000:].decode(errors="replace")  # else the moments count from nothing
        time.sleep(delay_s)
        child.send_signal(signal.SIGINT)
        rest = child.communicate(timeout=120)[0]
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(5)
    lines = (b"".join(seen) + rest).decode(errors="replace").splitlines(keepends=True)
    return child.returncode, "".join(line for line in lines if not line.startswith("import time:"))


@pytest.mark.parametrize("delay_s", MOMENTS_S)
def test_ctrl_c_while_validating_ends_without_a_traceback(delay_s: float) -> None:
    code, output = _interrupted_at(["validate", str(REPO / "sweeps" / "crossover-demo.toml")], delay_s)
    assert "Traceback" not in output and "KeyboardInterrupt" not in output, output[-3000:]
    assert code in (0, 130), (code, output[-2000:])


@pytest.mark.e2e
@pytest.mark.parametrize("delay_s", MOMENTS_S)
def test_ctrl_c_while_a_headless_run_starts_ends_without_a_traceback(tmp_path: Path, delay_s: float) -> None:
    sweep = toy_sweep(tmp_path / "sweep", "", port=39700 + MOMENTS_S.index(delay_s) * 10)
    env = {**os.environ, "SPECBENCH_ENGINES": "toy_engine", "SPECBENCH_ENGINES_DIR": str(tmp_path / "engines"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))}
    code, output = _interrupted_at(["run", str(sweep), "--headless", "--runs-dir", str(tmp_path / "runs")],
                                   delay_s, env)
    assert "Traceback" not in output and "KeyboardInterrupt" not in output, output[-3000:]
    assert code in (0, 130), (code, output[-2000:])


@pytest.mark.e2e
def test_stop_ends_a_plugin_engines_sweep_from_a_shell_without_specbench_engines(tmp_path: Path) -> None:
    sweep = toy_sweep(tmp_path / "sweep", "", port=39790)
    sweep.write_text(sweep.read_text().replace("max_new_tokens = 24", "max_new_tokens = 4000"))  # 40 s a request
    plugin = {**os.environ, "SPECBENCH_ENGINES": "toy_engine", "SPECBENCH_ENGINES_DIR": str(tmp_path / "engines"),
              "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))}
    runs = tmp_path / "runs"
    started = subprocess.run([sys.executable, "-m", "specbench_tui", "run", str(sweep), "--headless", "--detach",
                              "--runs-dir", str(runs)], env=plugin, capture_output=True, text=True, timeout=120,
                             stdin=subprocess.DEVNULL)
    assert started.returncode == 0, started.stdout + started.stderr
    wait_for(lambda: any(runs.glob(f"*/{SOCKET_NAME}")), 60, what="the engine's socket")
    run_dir = next(runs.glob(f"*/{SOCKET_NAME}")).parent
    shell = {k: v for k, v in plugin.items() if k not in ("SPECBENCH_ENGINES", "PYTHONPATH")}
    listed = subprocess.run([sys.executable, "-m", "specbench_tui", "ps"], env=shell, capture_output=True,
                            text=True, timeout=60, cwd=REPO)
    assert "toy-sweep" in listed.stdout, listed.stdout + listed.stderr
    stopped = subprocess.run([sys.executable, "-m", "specbench_tui", "stop", str(run_dir), "--now"], env=shell,
                             capture_output=True, text=True, timeout=120, cwd=REPO)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert "stopping the sweep" in stopped.stdout and "Traceback" not in stopped.stderr, stopped.stdout
    assert not any(runs.glob(f"*/{SOCKET_NAME}")), "the engine still listens"
