"""One reader of the run directory: only the run-directory package names its files.

The package is :mod:`specbench_tui.store`, :mod:`specbench_tui.runlock` and :mod:`specbench_tui.rundir`. Any other
module that spells ``events.jsonl``, ``results.jsonl``, ``run.json``, ``plan.json``, ``sweep.toml``, ``env.json``
or ``.owner.lock`` (in code, a message or a docstring) fails here, unless it is on :data:`REMAINING`: the modules
still to move, each with what is left. The list only shrinks: an entry that no longer names a file fails too, so
that it is taken off.
"""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "specbench_tui"
FILES = ("events.jsonl", "results.jsonl", "run.json", "plan.json", "sweep.toml", "env.json", ".owner.lock")
NAMES = re.compile("|".join(re.escape(name) for name in FILES))
OWNERS = {"store.py", "runlock.py", "rundir/__init__.py", "rundir/files.py"}
"""The run-directory package (paths relative to ``specbench_tui/``)."""

REMAINING: dict[str, str] = {
    # Modules of other owners that still name the files, nearly all in docstrings and messages (the lead moves
    # them to the package's constants and readers):
    "application/viewmodel.py": "a docstring (run.json's sweep_path)",
    "core/analysis.py": "docstrings and a note naming plan.json",
    "core/crossover/__init__.py": "docstring",
    "core/engines/base.py": "docstring",
    "core/engines/registry.py": "docstring (sweep.toml as an example argument)",
    "core/events.py": "docstrings",
    "core/load.py": "docstring",
    "core/nodes.py": "docstrings",
    "core/plan.py": "docstring",
    "core/state.py": "comments and a docstring",
    "core/sweep/flags.py": "an error message naming plan.json",
    "engine/cluster/node.py": "docstrings",
    "engine/fingerprint.py": "docstrings and an example writing env.json by name",
    "report/compare.py": "a message naming env.json",
    "report/tables.py": "docstrings naming env.json",
}


def _naming_modules() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        hits = [f"{rel}:{number}: {line.strip()}" for number, line in
                enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if NAMES.search(line)]
        if hits:
            found[rel] = hits
    return found


def test_only_the_run_directory_package_names_its_files() -> None:
    found = _naming_modules()
    outside = {rel: hits for rel, hits in found.items() if rel not in OWNERS and rel not in REMAINING}
    assert not outside, ("modules outside the run-directory package name its files; read them through "
                         "specbench_tui.rundir / specbench_tui.store instead:\n"
                         + "\n".join(hit for hits in outside.values() for hit in hits))


def test_the_list_of_what_remains_only_shrinks() -> None:
    found = _naming_modules()
    stale = sorted(rel for rel in REMAINING if rel not in OWNERS and rel not in found)
    assert not stale, f"these modules no longer name a run-directory file: take them off REMAINING: {stale}"


def test_the_check_sees_a_module_that_names_a_file(tmp_path: Path) -> None:
    """The pattern catches each name as modules spell it (so the check above can fail)."""
    for name in FILES:
        assert NAMES.search(f'open(run_dir / "{name}")'), name
    assert not NAMES.search("def run_analysis(plan_json: dict) -> None: ...")
