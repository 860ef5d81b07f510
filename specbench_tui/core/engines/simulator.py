"""The SGLang simulator (``specbench_tui.sim``): how a sweep reaches it and what the rest of the program must
know about a run on it.

The simulator is not an engine of its own: it speaks SGLang 0.5.23's wire, prints its log lines and takes its
flags, so everything about talking to it is the SGLang engine's (:mod:`.sglang`). It is a *launcher* of that
engine (``[engine] launcher = "simulator"``, the default), and a run on it is *simulated*: its figures are
invented (every view says so), and on a machine without GPUs it runs on a scripted GPU box. This module is the
one place that knows those facts.
"""

from __future__ import annotations

from typing import Protocol

LAUNCHER = "simulator"
"""The ``[engine] launcher`` value that starts the simulator."""
MODULE = "specbench_tui.sim"
"""What ``python -m`` runs."""
PROFILE_ENV = "SPECBENCH_SIM_PROFILE"
"""The environment variable that hands the simulator its profile file (``[engine] sim_profile``)."""


class LaunchedBy(Protocol):
    """What is asked of an ``[engine]`` table here (``core.sweep.schema.EngineSpec``)."""

    @property
    def launcher(self) -> str: ...

    @property
    def sim_profile(self) -> str | None: ...


def simulated(engine: LaunchedBy) -> bool:
    """Whether the sweep's servers are the simulator (their figures are invented)."""
    return engine.launcher == LAUNCHER


def launch_env(engine: LaunchedBy) -> dict[str, str]:
    """The environment that hands a server the simulator's profile file when the sweep names one (whatever
    starts it: a ``launcher = "command"`` wrapper around the simulator gets it too), else nothing."""
    return {PROFILE_ENV: engine.sim_profile} if engine.sim_profile else {}
