"""One reader of the run directory: only the run-directory package names its files.

The package is :mod:`specbench_tui.rundir` (with its ``store`` and ``lock`` modules). Any other module that spells ``events.jsonl``, ``results.jsonl``, ``run.json``, ``plan.json``, ``sweep.toml``, ``env.json``
or ``.owner.lock`` (in code, a message or a docstring) fails here, unless it is on :data:`REMAINING`: the modules
still to move, each with what is left. The list only shrinks: an entry that no longer names a file fails too, so
that it is taken off.
"""

from __future__ import annotations

import re
from pathlib import Path
from repo_paths import REPO

PACKAGE = REPO / "specbench_tui"
FILES = ("events.jsonl", "results.jsonl", "run.json", "plan.json", "sweep.toml", "env.json", ".owner.lock")
NAMES = re.compile("|".join(re.escape(name) for name in FILES))
OWNER_PACKAGES = ("rundir/",)
"""The run-directory package (paths relative to ``specbench_tui/``): every module under these folders."""


def _owned(rel: str) -> bool:
    return rel.startswith(OWNER_PACKAGES)


REMAINING: dict[str, str] = {
    # core is pure (it may not import the run-directory package's names), and these notes tell a user which
    # file of their run is missing, by the name they will look for:
    "core/analysis.py": "two notes of the analysis naming plan.json (a report prints them)",
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
    outside = {rel: hits for rel, hits in found.items() if not _owned(rel) and rel not in REMAINING}
    assert not outside, ("modules outside the run-directory package name its files; read them through "
                         "specbench_tui.rundir instead:\n"
                         + "\n".join(hit for hits in outside.values() for hit in hits))


def test_the_list_of_what_remains_only_shrinks() -> None:
    found = _naming_modules()
    stale = sorted(rel for rel in REMAINING if not _owned(rel) and rel not in found)
    assert not stale, f"these modules no longer name a run-directory file: take them off REMAINING: {stale}"


def test_the_check_sees_a_module_that_names_a_file(tmp_path: Path) -> None:
    """The pattern catches each name as modules spell it (so the check above can fail)."""
    for name in FILES:
        assert NAMES.search(f'open(run_dir / "{name}")'), name
    assert not NAMES.search("def run_analysis(plan_json: dict) -> None: ...")
