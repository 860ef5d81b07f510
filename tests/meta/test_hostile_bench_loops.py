"""The benches' busy loops die with the bench (issue 49, point 8): a bench killed by a timeout leaves none running,
though each loop runs in a session of its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from repo_paths import REPO

BENCH = REPO / "bench"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_busy_loops_die_with_a_bench_killed_by_a_timeout() -> None:
    bench = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(BENCH)!r})
        from _busy import start_busy_loops
        loops = start_busy_loops(2)
        print(*(loop.pid for loop in loops), flush=True)
        time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert bench.stdout is not None
    pids = [int(p) for p in bench.stdout.readline().split()]
    try:
        assert len(pids) == 2 and all(_alive(p) for p in pids)
        assert all(os.getsid(p) == p for p in pids), "each loop in a session of its own"
        time.sleep(0.5)  # the loops have set their guard
        bench.kill()  # as a timeout kills it: no chance to clean up
        bench.wait()
        deadline = time.monotonic() + 5
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [p for p in pids if _alive(p)], "a busy loop outlived its bench"
    finally:
        for pid in pids:  # never leave one behind, whatever happened
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
