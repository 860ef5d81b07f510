"""What ``validate`` warns about how a plan will measure, beyond what makes it invalid: the cache policy an engine
forces, a speculative configuration whose server will cap the running requests below a load point (SGLang
resets an unset ``--max-running-requests`` to 48), a simulator-only acceleration variable on a real server, and
prompts that look like random tokens.
Each warning names the file and line."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from specbench_tui.core.sweep.load_axis import rate_warnings
from specbench_tui.core.tomlpos import KeyLocator

if TYPE_CHECKING:
    from specbench_tui.core.engines.base import EngineProfile
    from specbench_tui.core.sweep.schema import Sweep


class PlannedConfig(Protocol):
    """What the warnings read of a planned configuration (:class:`specbench_tui.core.plan.PlannedConfig`)."""

    @property
    def name(self) -> str: ...
    @property
    def argv(self) -> tuple[str, ...]: ...
    @property
    def baseline(self) -> str | None: ...
    @property
    def speculative(self) -> bool | None: ...
    @property
    def skipped(self) -> bool: ...

SIMULATED_ACCEPTANCE_ENV = "SGLANG_SIMULATE_ACC_LEN"
"""SGLang's environment variable that makes the verifier accept a fixed length: acceptance and speedup are then
invented, on a real server as on ours."""


def plan_warnings(sweep: Sweep, configs: Sequence[PlannedConfig], profile: EngineProfile) -> list[str]:
    """Every warning, as ``file:line: warning: ...`` lines (nothing when the plan measures what it says)."""
    locator = KeyLocator(sweep.text)
    where = sweep.shown_path
    out: list[str] = []
    if sweep.measure_note:
        line = locator.line(("measure",)) or locator.line(("engine", "profile")) or 1
        out.append(f"{where}:{line}: warning: {sweep.measure_note}")
    out.extend(_cap_warnings(sweep, configs, profile, locator))
    out.extend(_simulated_acceptance(sweep, locator))
    out.extend(rate_warnings(sweep, locator))
    out.extend(random_token_warnings(sweep, locator))
    return out


def random_token_warnings(sweep: Sweep, locator: KeyLocator) -> list[str]:
    """A ``prompt_dataset`` or ``prompts_file`` workload whose prompts look like random tokens (they overstate
    speculative speedups; :func:`specbench_tui.core.prompt_datasets.random_token_warning`)."""
    from specbench_tui.core.prompt_datasets import dataset_path, load_dataset, random_token_warning
    from specbench_tui.core.prompts import PromptsFileError, load_prompts_file

    out: list[str] = []
    for index, workload in enumerate(sweep.workloads):
        if workload.kind not in ("prompt_dataset", "prompts_file"):
            continue
        params = dict(workload.params)
        try:
            if workload.kind == "prompts_file":
                prompts = load_prompts_file(str(params.get("path") or ""), params.get("categories") or (),
                                            int(params.get("limit") or 0))
            else:
                prompts = load_dataset(dataset_path(str(params.get("path") or "")),
                                       str(params.get("format") or "spec_bench"), params.get("categories") or (),
                                       int(params.get("limit") or 0), int(params.get("per_category") or 0),
                                       str(params.get("category_field") or "category"))
        except (OSError, PromptsFileError):
            continue  # the loader said so already
        warning = random_token_warning(workload.name, [p.text for p in prompts])
        if warning:
            line = locator.line(("workloads", index, "path")) or locator.line(("workloads", index)) or 1
            out.append(f"{sweep.shown_path}:{line}: warning: {warning}")
    return out


def _cap_warnings(sweep: Sweep, configs: Sequence[PlannedConfig], profile: EngineProfile,
                  locator: KeyLocator) -> list[str]:
    by_name = {c.name: c for c in configs}
    out: list[str] = []
    for index, workload in enumerate(sweep.workloads):
        if workload.load is None or not workload.load.concurrency:
            continue
        top = max(workload.load.concurrency)
        line = locator.line(("workloads", index, "concurrency")) or 1
        for config in configs:
            if config.skipped or not config.speculative or "--max-running-requests" in config.argv:
                continue
            cap = profile.planned_running_cap(config.argv)
            if cap is None or top <= cap:
                continue
            base = by_name.get(config.baseline) if config.baseline else None
            out.append(f"{sweep.shown_path}:{line}: warning: '{config.name}' is speculative and runs "
                       f"'{workload.name}' at concurrency {top} without max-running-requests: its server caps the "
                       f"running requests at {cap}, so every point above {cap} queues on the server"
                       f"{_baseline_cap(base, profile)}; set max-running-requests = {top} in its args to compare "
                       "equal servers")
    return out


def _baseline_cap(base: PlannedConfig | None, profile: EngineProfile) -> str:
    if base is None:
        return ""
    cap = profile.planned_running_cap(base.argv)
    shown = f"{cap}" if cap is not None else "sized from its KV pool at start (usually thousands)"
    return f", while its baseline '{base.name}' has cap {shown}"


def _simulated_acceptance(sweep: Sweep, locator: KeyLocator) -> list[str]:
    if sweep.engine.launcher == "simulator":
        return []
    out: list[str] = []
    if any(name == SIMULATED_ACCEPTANCE_ENV for name, _ in sweep.server_env):
        line = locator.line(("server", "env", SIMULATED_ACCEPTANCE_ENV)) or 1
        out.append(f"{sweep.shown_path}:{line}: warning: {SIMULATED_ACCEPTANCE_ENV} in [server.env] makes a real "
                   f"server ({sweep.engine.launcher} launcher) accept a fixed length: its acceptance and speedup "
                   "are invented, not measured; remove it")
    for spec in sweep.configs:
        if any(name == SIMULATED_ACCEPTANCE_ENV for name, _ in spec.env):
            line = locator.line(("configs", spec.index, "env", SIMULATED_ACCEPTANCE_ENV)) or spec.line or 1
            out.append(f"{sweep.shown_path}:{line}: warning: {SIMULATED_ACCEPTANCE_ENV} in configs[{spec.index}].env "
                       "makes a real server accept a fixed length: its acceptance and speedup are invented; remove it")
    return out
