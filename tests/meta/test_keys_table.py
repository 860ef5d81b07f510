"""The README's key table is the app's bindings: every binding the package declares (each screen's and the app's
``BINDINGS``, and the command palette's key) has its row, with its keys, its screen and its key-bar label, and the
table has no row that no binding backs. Adding, removing or changing a binding without the table fails here."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import pytest
from textual.binding import Binding

from repo_paths import REPO
import specbench_tui.tui as tui_package
from specbench_tui.tui.app import SpecbenchApp

ROOT = REPO
README = ROOT / "README.md"

WHERE = {
    "SpecbenchApp": "anywhere",
    "SweepScreen": "main",
    "FullLogScreen": "log",
    "NotificationsScreen": "notices",
    "DetachOrStopScreen": "quit dialog",
    "ConfirmQuitScreen": "quit dialog, `--foreground`",
    "PreflightFailedScreen": "pre-flight",
    "ChartScreen": "chart",
    "AcceptanceScreen": "acceptance",
    "RecommendScreen": "chart",  # over the chart (its ``r``): its Back keys join the chart's row
}
"""The table's "where" for each class that declares bindings (a new screen with keys needs a name here)."""

KEY_NAMES = {"slash": "/", "escape": "esc"}
"""Textual's key names that the table writes as a person reads them."""

PALETTE_LABEL = "Palette"
"""The key bar's word for the command palette's key (tui/key_bar.py)."""

Row = tuple[str, frozenset[str], str]
"""(where, keys, label)"""


def classes_with_bindings() -> list[type]:
    """Every class of the TUI package that declares ``BINDINGS`` itself (imported module by module)."""
    found: dict[str, type] = {}
    for module_info in pkgutil.walk_packages(tui_package.__path__, tui_package.__name__ + "."):
        module = importlib.import_module(module_info.name)
        for _name, value in inspect.getmembers(module, inspect.isclass):
            if value.__module__ == module.__name__ and "BINDINGS" in vars(value):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return [found[name] for name in sorted(found)]


def rows_from_bindings() -> set[Row]:
    """One row per (class, action): the keys bound to it and their label, as the table must show them."""
    by_action: dict[tuple[str, str], tuple[set[str], list[str]]] = {}
    unnamed = []
    for cls in classes_with_bindings():
        where = WHERE.get(cls.__name__)
        if where is None:
            unnamed.append(f"{cls.__module__}.{cls.__qualname__}")
            continue
        for binding in Binding.make_bindings(vars(cls)["BINDINGS"]):
            keys, labels = by_action.setdefault((where, binding.action), (set(), []))
            keys.add(KEY_NAMES.get(binding.key, binding.key))
            if binding.description not in labels:
                labels.append(binding.description)
    assert not unnamed, (f"{unnamed} declare key bindings: name their screen in WHERE (tests/meta/test_keys_table.py) "
                         "and add their keys to the README's key table")
    rows = {(where, frozenset(keys), ", ".join(labels)) for (where, _action), (keys, labels) in by_action.items()}
    if SpecbenchApp.ENABLE_COMMAND_PALETTE:
        rows.add(("anywhere", frozenset({SpecbenchApp.COMMAND_PALETTE_BINDING}), PALETTE_LABEL))
    return rows


def rows_from_readme(text: str) -> list[Row]:
    """The rows of the table between the README's ``keys`` markers: `k` `k2` | where | **Label**: what it does."""
    match = re.search(r"\[start:keys\] -->\n(.*?)\n<!-- --8<-- \[end:keys\]", text, re.S)
    assert match, "README.md: the key table's markers (<!-- --8<-- [start:keys] --> … [end:keys]) are missing"
    rows = []
    for line in match.group(1).splitlines()[2:]:  # after the header and its rule
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        assert len(cells) == 3, f"README.md key table: not three cells: {line!r}"
        keys = frozenset(re.findall(r"`([^`]+)`", cells[0]))
        label = re.match(r"\*\*(.+?)\*\*", cells[2])
        assert keys and label, f"README.md key table: expected `key` | where | **Label**: …, got {line!r}"
        rows.append((cells[1], keys, label.group(1)))
    return rows


def _show(rows: set[Row]) -> str:
    return "\n".join(f"  {' '.join(f'`{k}`' for k in sorted(keys))} | {where} | **{label}**"
                     for where, keys, label in sorted(rows, key=lambda r: (r[0], sorted(r[1]))))


def test_the_readme_key_table_is_the_apps_bindings() -> None:
    table = rows_from_readme(README.read_text(encoding="utf-8"))
    assert len(table) == len(set(table)), "README.md key table: a row appears twice"
    bound = rows_from_bindings()
    missing, extra = bound - set(table), set(table) - bound
    assert not missing and not extra, (
        "README.md's key table and the app's bindings differ.\n"
        f"bound but not in the table (add these rows):\n{_show(missing)}\n"
        f"in the table but bound nowhere (remove or correct these rows):\n{_show(extra)}")


def test_the_check_reads_every_screen() -> None:
    """The discovery finds the screens the table names (a walk that found nothing would pass vacuously)."""
    names = {cls.__name__ for cls in classes_with_bindings()}
    assert names == set(WHERE), f"classes with bindings {sorted(names)} against the table's {sorted(WHERE)}"
    assert len(rows_from_bindings()) >= 30


@pytest.mark.parametrize("change", ["key", "label", "added"])
def test_a_changed_binding_fails_the_check(change: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison above, after a binding of the main screen is changed in place: it must fail."""
    from specbench_tui.tui.sweep_screen import SweepScreen

    bindings = list(vars(SweepScreen)["BINDINGS"])
    pause = next(i for i, b in enumerate(bindings) if isinstance(b, Binding) and b.action == "app.toggle_pause")
    if change == "key":
        bindings[pause] = Binding("P", "app.toggle_pause", "Pause")
    elif change == "label":
        bindings[pause] = Binding("p", "app.toggle_pause", "Hold")
    else:
        bindings.append(Binding("x", "app.export", "Export"))
    monkeypatch.setattr(SweepScreen, "BINDINGS", bindings)
    with pytest.raises(AssertionError, match="bound but not in the table"):
        test_the_readme_key_table_is_the_apps_bindings()
