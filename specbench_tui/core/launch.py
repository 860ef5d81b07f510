"""The exact command line of a server: launcher prefix + the configuration's argv + host and port."""

from __future__ import annotations

from specbench_tui.core.engines import engine_flags
from specbench_tui.core.plan import PlannedConfig
from specbench_tui.core.sweep import EngineSpec

SIMULATOR_MODULE = "specbench_tui.sim"
SGLANG_MODULE = "sglang.launch_server"


def launcher_prefix(engine: EngineSpec, this_python: str) -> list[str]:
    """What starts a server: ``python -m sglang.launch_server``, the simulator, or a user command."""
    if engine.launcher == "command":
        return list(engine.command)
    python = engine.python or this_python
    module = SIMULATOR_MODULE if engine.launcher == "simulator" else SGLANG_MODULE
    return [python, "-m", module]


def server_argv(engine: EngineSpec, config: PlannedConfig, this_python: str, port: int,
                api_key: str | None = None) -> list[str]:
    """The full argv of one launch; the API key, when given, is only ever placed here (never logged)."""
    always = [flag for flag in engine_flags(engine.profile).launch_args if flag not in config.argv]
    argv = [*launcher_prefix(engine, this_python), *config.argv, *always, "--host", engine.host, "--port", str(port)]
    if api_key:
        argv += ["--api-key", api_key]
    return argv


def redact_argv(argv: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """``argv`` with the value after ``--api-key`` replaced, for events, logs and screens."""
    out = list(argv)
    for i, part in enumerate(out[:-1]):
        if part == "--api-key":
            out[i + 1] = "***"
    return tuple(out)
