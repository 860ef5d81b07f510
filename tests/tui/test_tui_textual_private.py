"""The fence around private names: one test per private name of Textual or textual-serve that the app uses
(:data:`specbench_tui.tui.textual_private.PRIVATE_NAMES`), failing on an upgrade that removes the name or changes
its signature or kind, and a static check that fails when any other module of the package or the tests names a
private Textual or textual-serve attribute, overrides one, or imports a private module of theirs. Checked on
Textual 8.2.8 with textual-serve 1.1.3 (both pinned in ``pyproject.toml``)."""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import inspect
import textwrap
from pathlib import Path
from typing import Any

import pytest

from repo_paths import REPO
from specbench_tui.tui.textual_private import PRIVATE_NAMES

ROOT = REPO
FENCE = ROOT / "specbench_tui" / "tui" / "textual_private.py"
EXTERNAL = ("textual", "textual_serve")

SIGNATURES = {
    ("textual_serve.app_service.AppService", "_build_environment"):
        "(self, width: 'int' = 80, height: 'int' = 24) -> 'dict[str, str]'",
    ("textual_serve.app_service.AppService", "_open_app_process"):
        "(self, width: 'int' = 80, height: 'int' = 24) -> 'Process'",
    ("textual_serve.server.Server", "_make_app"): "(self) -> 'web.Application'",
    ("textual_serve.server.Server", "_process_messages"):
        "(self, websocket: 'web.WebSocketResponse', app_service: 'AppService') -> 'None'",
}
"""The signature of every private method used or overridden."""

KINDS = {
    ("textual_serve.app_service.AppService", "_process"): "builtins.NoneType",
    ("textual_serve.app_service.AppService", "_stdin"): "builtins.NoneType",
    ("textual_serve.app_service.AppService", "_task"): "builtins.NoneType",
    ("textual_serve.app_service.AppService", "_download_manager"): "textual_serve.download_manager.DownloadManager",
}
"""The type of every private attribute read or written, on a fresh instance."""


def _resolve(where: str) -> Any:
    module, _, name = where.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _instance(where: str) -> Any:
    from textual_serve.download_manager import DownloadManager

    assert where == "textual_serve.app_service.AppService", where
    return _resolve(where)("true", write_bytes=None, write_str=None, close=None, download_manager=DownloadManager())


def test_every_private_name_is_checked_here() -> None:
    assert set(PRIVATE_NAMES) == set(SIGNATURES) | set(KINDS)
    assert len(PRIVATE_NAMES) <= 10  # the budget of issue 45


@pytest.mark.parametrize(("where", "name"), sorted(SIGNATURES))
def test_private_method_keeps_its_signature(where: str, name: str) -> None:
    owner = _resolve(where)
    assert hasattr(owner, name), f"{where}.{name} is gone: see tui/textual_private.py"
    assert str(inspect.signature(getattr(owner, name))) == SIGNATURES[(where, name)], f"{where}.{name} changed"


@pytest.mark.parametrize(("where", "name"), sorted(KINDS))
def test_private_attribute_keeps_its_kind(where: str, name: str) -> None:
    value = getattr(_instance(where), name, AttributeError)
    assert value is not AttributeError, f"{where}.{name} is no longer set: see tui/textual_private.py"
    kind = type(value)
    assert f"{kind.__module__}.{kind.__qualname__}" == KINDS[(where, name)], f"{where}.{name} changed kind"


# ---------------------------------------------------------------------------------------------------- the fence


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _external(cls: type) -> bool:
    return cls.__module__.split(".")[0] in EXTERNAL


@functools.cache
def _defined_by(cls: type) -> frozenset[str]:
    """The private names an external class defines: its own attributes and what its methods set on ``self``."""
    names = {name for name in vars(cls) if _private(name)}
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return frozenset(names)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
                and isinstance(node.ctx, ast.Store) and _private(node.attr)):
            names.add(node.attr)
    return frozenset(names)


@functools.cache
def _external_vocabulary() -> frozenset[str]:
    """Every private name the classes of Textual and textual-serve define."""
    names: set[str] = set()
    for package in EXTERNAL:
        root = Path(importlib.import_module(package).__file__ or "").parent
        for path in root.rglob("*.py"):
            for cls in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(cls, ast.ClassDef):
                    continue
                for node in ast.walk(cls):
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _private(node.name):
                        names.add(node.name)
                    elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                          and node.value.id == "self" and isinstance(node.ctx, ast.Store) and _private(node.attr)):
                        names.add(node.attr)
    return frozenset(names)


def _own_names(paths: list[Path]) -> set[str]:
    """The private names our own code defines (functions, methods, attributes set, class attributes)."""
    names: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and _private(node.name):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _private(node.attr):
                names.add(node.attr)
            elif isinstance(node, (ast.Name, ast.arg)) and _private(getattr(node, "id", getattr(node, "arg", ""))):
                names.add(getattr(node, "id", getattr(node, "arg", "")))
    return names


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _module(path: Path) -> Any:
    """The module of ``path``: the package's by its name, any other file loaded from where it is."""
    if path.is_relative_to(ROOT / "specbench_tui"):
        return importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"))
    spec = importlib.util.spec_from_file_location(f"fence_probe_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _class_offences(path: Path, tree: ast.Module) -> list[str]:
    """Private names of a Textual or textual-serve base class that a class of ``path`` overrides or uses."""
    module = _module(path)
    offences = []
    for node in ast.walk(tree):
        cls = getattr(module, node.name, None) if isinstance(node, ast.ClassDef) else None
        if not isinstance(node, ast.ClassDef) or not isinstance(cls, type):
            continue
        theirs = set().union(*(_defined_by(base) for base in cls.__mro__[1:] if _external(base)))
        for item in ast.walk(node):
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item in node.body and item.name in theirs:
                offences.append(f"{_shown(path)}:{item.lineno}: {node.name} overrides {item.name}")
            elif (isinstance(item, ast.Attribute) and isinstance(item.value, ast.Name) and item.value.id == "self"
                  and item.attr in theirs):
                offences.append(f"{_shown(path)}:{item.lineno}: {node.name} uses self.{item.attr}")
    return offences


def private_uses(paths: list[Path], own: set[str]) -> list[str]:
    """Every use of a private Textual or textual-serve name in ``paths``: an import of a private module, a name of
    an external base class overridden or used on ``self``, any other ``x._name`` that only they define."""
    vocabulary = _external_vocabulary() - own
    offences = []
    for path in paths:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
        for node in ast.walk(tree):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            if isinstance(node, ast.ImportFrom) and module and module.split(".")[0] in EXTERNAL \
                    and any(_private(p) for p in module.split(".")):
                offences.append(f"{_shown(path)}:{node.lineno}: imports {module}")
            if isinstance(node, ast.Attribute) and node.attr in vocabulary:
                offences.append(f"{_shown(path)}:{node.lineno}: .{node.attr}")
        if not path.is_relative_to(ROOT / "tests") and "textual" in source:
            offences += _class_offences(path, tree)
    return offences


def _checked_paths() -> list[Path]:
    return [path for path in [*(ROOT / "specbench_tui").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]
            if path != FENCE and path != Path(__file__).resolve()]


def _own_paths() -> list[Path]:
    """Everything of ours that may define a private name the checked modules use (the benches' helpers too)."""
    return [*_checked_paths(), *(ROOT / "bench").glob("*.py"), *(ROOT / "tools").glob("*.py")]


def test_no_module_outside_the_fence_uses_a_private_textual_name() -> None:
    assert private_uses(_checked_paths(), _own_names(_own_paths())) == []


def test_the_fence_check_finds_each_kind_of_private_use(tmp_path: Path) -> None:
    """The check itself, on a module that does each thing once (it must name all three)."""
    bad = tmp_path / "fence_probe.py"
    bad.write_text(textwrap.dedent('''
        from textual.widgets._toast import Toast
        from textual.widget import Widget


        class Probe(Widget):
            def _on_click(self, event):
                return self._layout_required


        def take(app):
            app._unnotify(None)
    '''), encoding="utf-8")
    found = private_uses([bad], _own_names(_own_paths()))
    assert any("imports textual.widgets._toast" in f for f in found), found
    assert any("overrides _on_click" in f for f in found), found
    assert any("uses self._layout_required" in f for f in found), found
    assert any("._unnotify" in f for f in found), found
