"""A second sweep does not call the first one's live server a leftover (issue 28): a server whose run directory
another live specbench holds is that run's (run name, pid, user), said without a command to end it."""

from __future__ import annotations

import getpass
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from specbench_tui.engine.leftovers import find_leftovers, format_leftovers

SLEEPER = "import time\nwhile True: time.sleep(1)"
HOLDER = (
    "import sys, time\n"
    "from pathlib import Path\n"
    "from specbench_tui.rundir.lock import acquire\n"
    "lock = acquire(Path(sys.argv[1]))\n"
    "print('held', flush=True)\n"
    "while True: time.sleep(1)\n"
)


def _spawn(argv: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, start_new_session=True)


def _run_dir(root: Path, name: str, argv: list[str], pid: int) -> Path:
    run = root / name
    (run / "logs").mkdir(parents=True)
    (run / "sweep.toml").write_text("")
    lines = [{"type": "SweepStarted", "sweep": "x", "run_dir": str(run), "total_configs": 1, "ts": time.time()},
             {"type": "ServerLaunching", "config_id": "c1", "name": "ar", "argv": argv, "gpus": [0], "port": 30000,
              "pid": pid, "log_path": str(run / "logs/ar.log"), "attempt": 1, "ts": time.time()}]
    (run / "events.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return run


def test_a_server_of_another_live_run_is_that_runs_not_a_leftover(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", SLEEPER, "--port", "30000"]
    server = _spawn(argv)
    run = _run_dir(tmp_path / "runs", "20260101-000000_first", argv, server.pid)
    holder = _spawn([sys.executable, "-c", HOLDER, str(run)])  # the first sweep's engine, alive
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        found = find_leftovers([tmp_path / "runs"])
        assert [f.pid for f in found] == [server.pid]
        owner = found[0].owner
        assert owner is not None and owner.run == run.name and owner.pid == holder.pid
        assert owner.user == getpass.getuser()
        (message,) = format_leftovers(found)
        assert f"live run {run.name}'s (specbench pid {holder.pid}, user {owner.user})" in message
        assert "not a leftover" in message and "kill" not in message
        holder.kill()  # the first sweep's engine dies: its server is a leftover now
        holder.wait(5)
        (message,) = format_leftovers(find_leftovers([tmp_path / "runs"]))
        assert f"kill -TERM -- -{server.pid}" in message and "not a leftover" not in message
    finally:
        for proc in (holder, server):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait(5)
