"""The orchestrator and the scheduler meet at a seam (issue 30): the orchestrator calls the scheduler's small
interface and never its queue or signals; the scheduler sees the orchestrator as a ``Sweep`` protocol and never
imports it; neither touches the other's private attributes."""

from __future__ import annotations

import ast
from repo_paths import REPO

ENGINE = REPO / "specbench_tui" / "engine"
INTERFACE = {"paused", "pause", "resume", "abort", "aborting", "stopping_now", "queued", "skip", "requeue",
             "record_duration", "seed_durations", "open", "opened", "placer", "queue_initial", "drain",
             "search_rounds"}
"""What the orchestrator may use of its scheduler."""


def _uses(source: str, names: set[str]) -> list[tuple[int, str]]:
    """``(line, attribute)`` of every ``X.attr`` where X is one of ``names`` or ``self.<name>``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in names or \
                isinstance(owner, ast.Attribute) and owner.attr in names and isinstance(owner.value, ast.Name):
            found.append((node.lineno, node.attr))
    return found


def _imports(source: str) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return out


def test_the_orchestrator_calls_only_the_schedulers_interface() -> None:
    source = (ENGINE / "orchestrator.py").read_text(encoding="utf-8")
    used = _uses(source, {"scheduler"})
    assert used, "the check finds the orchestrator's uses of its scheduler"
    outside = [(line, attr) for line, attr in used if attr not in INTERFACE]
    assert not outside, f"the orchestrator reaches into the scheduler: {outside}"


def test_the_scheduler_touches_nothing_private_of_the_orchestrator_and_does_not_import_it() -> None:
    source = (ENGINE / "scheduler.py").read_text(encoding="utf-8")
    private = [(line, attr) for line, attr in _uses(source, {"orch"}) if attr.startswith("_")]
    assert not private, f"the scheduler reaches into the orchestrator's private attributes: {private}"
    assert "specbench_tui.engine.orchestrator" not in _imports(source)
    orchestrator = (ENGINE / "orchestrator.py").read_text(encoding="utf-8")
    assert not [u for u in _uses(orchestrator, {"scheduler"}) if u[1].startswith("_")]


def test_the_check_sees_a_reach_into_the_queue() -> None:
    assert _uses("self.scheduler.queue.append(x)", {"scheduler"}) == [(1, "queue")]
    assert _uses("orch._attempts[1] = 2", {"orch"}) == [(1, "_attempts")]
