"""The closed vocabularies of how things end, each defined once: a sweep's end and what failed, why a server
can no longer serve, and the process exit codes of every command.

Configuration states are :class:`specbench_tui.core.events.ConfigState`; measurement statuses are
``specbench_tui.core.records.STATUS_*``.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final, Literal

SweepState = Literal["completed", "aborted", "failed"]
"""How a sweep ended: every configuration concluded, the user stopped it, or it could not go on."""

SweepFailure = Literal["preflight", "store", "gpu_release", "cluster"]
"""What failed a sweep: its pre-flight checks, the run directory (cannot be written), a stopped server's
GPUs that stayed held past ``engine.gpu_release_timeout_s``, or the Ray cluster's head, lost mid-sweep."""

DeathKind = Literal["crash", "exit", "stall", "startup_timeout", "unhealthy"]
"""Why a server can no longer serve: a crash (a signature, a fatal exit code), an exit without one, no progress
within ``stall_timeout_s``, not ready within ``startup_timeout_s``, or a failed health check between workloads."""

DEATH_CRASH: Final = "crash"
DEATH_EXIT: Final = "exit"
DEATH_STALL: Final = "stall"
DEATH_STARTUP_TIMEOUT: Final = "startup_timeout"
DEATH_UNHEALTHY: Final = "unhealthy"


class ExitCode(IntEnum):
    """The exit codes of ``specbench`` (``run``, ``validate``, ``report``, ``compare``, ``runs``)."""

    OK = 0
    FAILED = 1
    """``run``: a configuration crashed, failed or returned no tokens at all; ``report``: the output could not
    be written."""
    INVALID = 2
    """Invalid input (a sweep, arguments, a folder that is not a run directory), or a failed pre-flight."""
    STORE = 3
    """The run directory could not be written."""
    GPU_HELD = 4
    """A stopped server's GPUs stayed held."""
    CLUSTER_LOST = 5
    """The Ray cluster's head was lost mid-sweep: continue on a new cluster with ``--resume --ray-address``."""
    HANGUP = 129
    """Stopped by SIGHUP (the terminal or SSH session went away)."""
    INTERRUPTED = 130
    """Stopped on request (Ctrl-C, SIGTERM, quit): continue with ``--resume``."""
