"""Busy loops beside a bench that die with it: each runs in a session of its own, as the engine starts each
server (with scheduler autogroups CPU is shared between sessions first), and asks the kernel to kill it when
the process that started it dies (``PR_SET_PDEATHSIG``), so a bench killed by a timeout leaves none running."""

from __future__ import annotations

import os
import subprocess
import sys

LOOP = "while 1: pass"
"""What each loop runs (as the bench's records name it)."""
_GUARDED = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit(0)  # the bench died before the guard was set\n"
    + LOOP + "\n")


def start_busy_loops(count: int) -> list[subprocess.Popen[bytes]]:
    """``count`` busy loops, each in a session of its own, killed by the kernel when this process dies."""
    return [subprocess.Popen([sys.executable, "-c", _GUARDED, str(os.getpid())], start_new_session=True,
                             stdin=subprocess.DEVNULL) for _ in range(count)]
