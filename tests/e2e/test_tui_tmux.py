"""End to end: the real terminal app (``specbench run sweeps/demo.toml``) inside tmux, driven by keys.

Needs tmux, the shipped demo sweep and the engine runner (``specbench_tui.application.runner``); skips with the
reason when one is missing.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from repo_paths import TESTS
from specbench_tui.paths import resolve_sweep

pytestmark = pytest.mark.e2e

WIDTH, HEIGHT = 120, 36
RUN_TIMEOUT_S = float(os.environ.get("SPECBENCH_E2E_TIMEOUT_S", "240"))
KEY_TIMEOUT_S = 60.0
"""How long a key may take to show on screen: generous, for a loaded 2-core CI box (a wait ends when it shows)."""


def _missing() -> str | None:
    if shutil.which("tmux") is None:
        return "tmux is not installed"
    if importlib.util.find_spec("specbench_tui.application.runner") is None:
        return "specbench_tui.application.runner (make_engine) is not there yet: the TUI cannot start a real run"
    if not resolve_sweep("demo").is_file():
        return "sweeps/demo.toml is not shipped yet"
    return None


class Tmux:
    """One tmux server on a private socket, holding one session."""

    def __init__(self, name: str) -> None:
        self.socket = f"specbench-e2e-{os.getpid()}"
        self.name = name

    def run(self, *args: str) -> str:
        result = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30,
                                check=False)
        return result.stdout

    def start(self, command: str) -> None:
        # The tmux server started here must not inherit a pipe of ours, or waiting for its output never ends.
        subprocess.run(["tmux", "-L", self.socket, "new-session", "-d", "-s", self.name, "-x", str(WIDTH), "-y",
                        str(HEIGHT), command], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=30, check=True)
        self.run("resize-window", "-t", self.name, "-x", str(WIDTH), "-y", str(HEIGHT))

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", self.name, *keys)

    def type(self, text: str) -> None:
        self.run("send-keys", "-t", self.name, "-l", text)

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", self.name)

    def wait_for(self, predicate, timeout: float, what: str) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if predicate(screen):
                return screen
            time.sleep(0.3)
        raise AssertionError(f"timed out waiting for {what}; the screen was:\n{screen}")

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], check=False, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)


def drive_demo(tmux: Tmux, command: str, exit_code: int = 0) -> None:
    """Open the app, pause and resume, wait for the end, find the crash line in the crashed server's log, quit."""
    tmux.start(command)
    tmux.wait_for(lambda s: "Sweep queue" in s and "Results" in s, KEY_TIMEOUT_S, "the app to open")
    tmux.keys("p")
    tmux.wait_for(lambda s: "PAUSED" in s, KEY_TIMEOUT_S, "the queue to pause")
    tmux.keys("p")
    tmux.wait_for(lambda s: "PAUSED" not in s, KEY_TIMEOUT_S, "the queue to resume")
    screen = tmux.wait_for(lambda s: " completed" in s.splitlines()[0], RUN_TIMEOUT_S, "the sweep to complete")
    assert "crashed" in screen, "the demo's crash is not shown"
    assert "zero output" in screen or "zero-out" in screen, "the demo's zero-output case is not shown"
    crashed = re.findall(r"│ ✖\s+(\S+)\s+(?:crashed|failed)\b", screen)
    assert crashed, "no crashed configuration in the queue"
    tmux.keys("C-p")
    tmux.wait_for(lambda s: "Search for commands" in s, KEY_TIMEOUT_S, "the command palette")
    tmux.type(f"log: {crashed[0]}")
    tmux.wait_for(lambda s: s.count(f"log: {crashed[0]}") >= 2, KEY_TIMEOUT_S, "the palette to offer the crashed log")
    time.sleep(0.5)
    tmux.keys("Enter")
    tmux.wait_for(lambda s: s.startswith(" log ") and " lines" in s.splitlines()[0], KEY_TIMEOUT_S, "the full log")
    tmux.keys("/")
    tmux.wait_for(lambda s: "search (Enter" in s, KEY_TIMEOUT_S, "the search box")
    time.sleep(0.3)
    tmux.type("illegal")
    tmux.wait_for(lambda s: "illegal" in s.splitlines()[-3], KEY_TIMEOUT_S, "the search text to be typed")
    tmux.keys("Enter")
    screen = tmux.wait_for(lambda s: "“illegal”: line" in s, KEY_TIMEOUT_S, "the search to find the crash line")
    assert "illegal instruction" in screen
    tmux.keys("Escape")
    tmux.wait_for(lambda s: "Sweep queue" in s, KEY_TIMEOUT_S, "the main screen")
    tmux.keys("q")
    screen = tmux.wait_for(lambda s: "SPECBENCH-EXITED:" in s, 60, "the app to exit")
    assert f"SPECBENCH-EXITED:{exit_code}" in screen
    assert "Sweep queue" not in screen  # the alternate screen is gone: the terminal is restored


@pytest.mark.slow
def test_demo_run_in_tmux(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """The README's first command on the real engine and simulator (the demo takes about two and a half minutes)."""
    reason = _missing()
    if reason:
        pytest.skip(reason)
    chosen = "slow" in (request.config.getoption("markexpr") or "") or os.environ.get("SPECBENCH_TUI_E2E") == "1"
    if not chosen:
        pytest.skip("runs the whole demo sweep (~2.5 min): select it with -m slow or SPECBENCH_TUI_E2E=1")
    demo = resolve_sweep("demo")
    tmux = Tmux("demo")
    try:
        drive_demo(tmux, f"cd {tmp_path} && TERM=xterm-256color {sys.executable} -m specbench_tui run {demo} "
                         f"--runs-dir {tmp_path / 'runs'}; echo SPECBENCH-EXITED:$?; sleep 120",
                   exit_code=1)  # the demo has crashes and a silent server: exit 1, as the README says
    finally:
        tmux.kill()


def test_fake_engine_run_in_tmux(tmp_path: Path) -> None:
    """The same keys against the scripted engine: the terminal side (keys, screen, restore) without servers."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    helper = TESTS / "tui_fakes.py"
    tmux = Tmux("fake")
    try:
        drive_demo(tmux, f"cd {tmp_path} && TERM=xterm-256color {sys.executable} {helper} --delay 0.015; "
                         "echo SPECBENCH-EXITED:$?; sleep 120")
    finally:
        tmux.kill()
