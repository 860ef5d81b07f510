"""Which detached engines this user started on this machine: what ``specbench ps`` and ``attach latest`` read.

Each engine writes ``<pid>.json`` (its run directory, sweep and start time) into a private folder
(``$XDG_RUNTIME_DIR/specbench/engines``, else ``/tmp/specbench-engines-<uid>``, mode 0700) when it starts
and removes it when it ends. An entry whose engine died without ending (SIGKILL, OOM, a power cut of the
process) stays behind, and is how such a run is reported as crashed, with the command that resumes it,
until a new engine takes the run directory over.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

ENV_DIR = "SPECBENCH_ENGINES_DIR"
"""Overrides the registry's folder (tests)."""


def registry_dir() -> Path:
    configured = os.environ.get(ENV_DIR)
    if configured:
        path = Path(configured)
    elif os.environ.get("XDG_RUNTIME_DIR") and Path(os.environ["XDG_RUNTIME_DIR"]).is_dir():
        path = Path(os.environ["XDG_RUNTIME_DIR"]) / "specbench" / "engines"
    else:
        path = Path(tempfile.gettempdir()) / f"specbench-engines-{os.getuid()}"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def register(run_dir: Path, sweep: str) -> None:
    """Say that this process is the engine of ``run_dir`` (earlier entries for the same directory go)."""
    folder = registry_dir()
    resolved = str(Path(run_dir).resolve())
    for entry in entries():
        if entry.get("run_dir") == resolved:
            with contextlib.suppress(OSError):
                (folder / f"{entry['pid']}.json").unlink()
    note = {"pid": os.getpid(), "run_dir": resolved, "sweep": sweep, "started": time.time()}
    tmp = folder / f".{os.getpid()}.tmp"
    tmp.write_text(json.dumps(note), encoding="utf-8")
    os.replace(tmp, folder / f"{os.getpid()}.json")


def forget(run_dir: Path) -> None:
    """This engine has ended cleanly: its entry goes."""
    with contextlib.suppress(OSError):
        (registry_dir() / f"{os.getpid()}.json").unlink()


def entries() -> list[dict[str, Any]]:
    """Every entry, oldest first."""
    found = []
    for path in registry_dir().glob("*.json"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("pid"), int) and isinstance(data.get("run_dir"), str):
            found.append(data)
    return sorted(found, key=lambda e: e.get("started") or 0)


def drop(entry: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):
        (registry_dir() / f"{entry['pid']}.json").unlink()
