"""One test per private Textual name the app uses (:data:`specbench_tui.tui.textual_private.PRIVATE_NAMES`): each
fails on a Textual upgrade that removes the name or changes its signature or kind, naming it. Checked on Textual
8.2.0 and 8.2.8 (``pyproject.toml`` pins ``textual==8.2.8``)."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path
from typing import Any

import pytest

from specbench_tui.tui.textual_private import PRIVATE_NAMES

SIGNATURES = {
    ('textual.widgets.DataTable', '_render_line'):
        "(self, y: 'int', x1: 'int', x2: 'int', base_style: 'Style') -> 'Strip'",
    ('textual.widgets.DataTable', '_render_cell'):
        "(self, row_index: 'int', column_index: 'int', base_style: 'Style', width: 'int', cursor: 'bool' = False, hover: 'bool' = False) -> 'SegmentLines'",
    ('textual.widgets.DataTable', '_update_dimensions'):
        "(self, new_rows: 'Iterable[RowKey]') -> 'None'",
    ('textual.widgets.DataTable', '_get_offsets'):
        "(self, y: 'int') -> 'tuple[RowKey, int]'",
    ('textual._segment_tools', 'line_crop'):
        "(segments: 'list[Segment]', start: 'int', end: 'int', total: 'int') -> 'list[Segment]'",
    ('textual.widgets.DataTable', '_get_styles_to_render_cell'):
        "(self, is_header_cell: 'bool', is_row_label_cell: 'bool', is_fixed_style_cell: 'bool', hover: 'bool', cursor: 'bool', show_cursor: 'bool', show_hover_cursor: 'bool', has_css_foreground_priority: 'bool', has_css_background_priority: 'bool') -> 'tuple[Style, Style]'",
    ('textual.widgets.DataTable', '_render_line_in_row'):
        "(self, row_key: 'RowKey', line_no: 'int', base_style: 'Style', cursor_location: 'Coordinate', hover_location: 'Coordinate') -> 'tuple[SegmentLines, SegmentLines]'",
    ('textual.widgets.DataTable', '_get_row_style'):
        "(self, row_index: 'int', base_style: 'Style') -> 'Style'",
    ('textual.widgets.DataTable', '_on_mouse_move'):
        "(self, event: 'events.MouseMove')",
    ('textual.widgets.DataTable', '_on_click'):
        "(self, event: 'events.Click') -> 'None'",
    ('textual.widget.Widget', '_get_virtual_dom'):
        "(self) -> 'Iterable[Widget]'",
    ('textual.app.App', '_refresh_notifications'):
        "(self) -> 'None'",
    ('textual.app.App', '_unnotify'):
        "(self, notification: 'Notification', refresh: 'bool' = True) -> 'None'",
    ('textual.app.App', '_begin_batch'):
        "(self) -> 'None'",
    ('textual.app.App', '_display'):
        "(self, screen: 'Screen', renderable: 'RenderableType | None') -> 'None'",
    ('textual.app.App', '_end_batch'):
        "(self) -> 'None'",
    ('textual.screen.Screen', '_extend_compose'):
        "(self, widgets: 'list[Widget]') -> 'None'",
    ('textual.widgets._toast.Toast', '_expire'):
        "(self) -> 'None'",
    ('textual.app.App', '_start_widget'):
        "(self, parent: 'Widget', widget: 'Widget') -> 'None'",
    ('textual.css.stylesheet.Stylesheet', '_process_component_classes'):
        "(self, node: 'DOMNode') -> 'None'",
    ('textual.dom.DOMNode', '_get_default_css'):
        "(self) -> 'list[tuple[CSSLocation, str, int, str]]'",
}
"""The signature of every private method used or overridden, as Textual 8.2 has it."""

KINDS = {
    ('textual.widgets.DataTable', '_data'): 'builtins.dict',
    ('textual.widgets.DataTable', '_header_row_key'): 'textual.widgets._data_table.RowKey',
    ('textual.widgets.DataTable', '_row_locations'): 'textual._two_way_dict.TwoWayDict',
    ('textual.widgets.DataTable', '_column_locations'): 'textual._two_way_dict.TwoWayDict',
    ('textual.widgets.DataTable', '_update_count'): 'builtins.int',
    ('textual.widgets.DataTable', '_updated_cells'): 'builtins.set',
    ('textual.widgets.DataTable', '_new_rows'): 'builtins.set',
    ('textual.widgets.DataTable', '_require_update_dimensions'): 'builtins.bool',
    ('textual.widgets.DataTable', '_show_hover_cursor'): 'builtins.bool',
    ('textual.widgets.DataTable', '_labelled_row_exists'): 'builtins.bool',
    ('textual.widgets.DataTable', '_row_label_column_width'): 'builtins.int',
    ('textual.widgets.DataTable', '_row_render_cache'): 'textual.cache.LRUCache',
    ('textual.widgets.DataTable', '_cell_render_cache'): 'textual.cache.LRUCache',
    ('textual.widgets.DataTable', '_row_renderable_cache'): 'textual.cache.LRUCache',
    ('textual.widgets.DataTable', '_line_cache'): 'textual.cache.LRUCache',
    ('textual.css.stylesheet.Stylesheet', '_variables'): 'builtins.dict',
    ('textual.css.stylesheet.Stylesheet', '_rules'): 'builtins.list',
    ('textual.css.stylesheet.Stylesheet', '_rules_map'): 'builtins.NoneType',
    ('textual.css.stylesheet.Stylesheet', '_require_parse'): 'builtins.bool',
    ('textual.css.styles.Styles', '_rules'): 'builtins.dict',
    ('textual.dom.DOMNode', '_selector_names'): 'builtins.set',
    ('textual.dom.DOMNode', '_component_styles'): 'builtins.dict',
    ('textual.dom.DOMNode', '_id'): 'builtins.NoneType',
    ('textual.dom.DOMNode', '_classes'): 'builtins.set',
    ('textual.dom.DOMNode', '_has_hover_style'): 'builtins.bool',
    ('textual.dom.DOMNode', '_has_focus_within'): 'builtins.bool',
    ('textual.dom.DOMNode', '_has_order_style'): 'builtins.bool',
    ('textual.dom.DOMNode', '_has_odd_or_even'): 'builtins.bool',
    ('textual.message_pump.MessagePump', '_parent'): 'builtins.NoneType',
    ('textual.widgets._toast.Toast', '_notification'): 'textual.notifications.Notification',
    ('textual.app.App', '_notifications'): 'textual.notifications.Notifications',
    ('textual.app.App', '_batch_count'): 'builtins.int',
    ('textual.screen.Screen', '_callbacks'): 'builtins.list',
    ('textual.screen.Screen', '_dirty_widgets'): 'builtins.set',
    ('textual.widget.Widget', '_layout_required'): 'builtins.bool',
    ('textual.widget.Widget', '_vertical_scrollbar'): 'builtins.NoneType',
    ('textual.widget.Widget', '_horizontal_scrollbar'): 'builtins.NoneType',
    ('textual.widget.Widget', '_scrollbar_corner'): 'builtins.NoneType',
    ('textual.widget.Widget', '_repaint_required'): 'builtins.bool',
    ('textual.widget.Widget', '_scroll_required'): 'builtins.bool',
    ('textual.message_pump.MessagePump', '_message_queue'): 'textual._queue.Queue',
    ('textual.message_pump.MessagePump', '_timers'): '_weakrefset.WeakSet',
}
"""The type of every private attribute read or written, on a fresh instance."""


def _resolve(where: str) -> Any:
    parts = where.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            found = getattr(found, part)
        return found
    raise ImportError(where)


def _instance(where: str) -> Any:
    from textual.notifications import Notification
    from textual.widgets._toast import Toast

    if where == "textual.widgets._toast.Toast":
        return Toast(Notification("message", "title"))
    if where == "textual.message_pump.MessagePump":
        from textual.widget import Widget

        return Widget()
    return _resolve(where)()


def test_every_private_name_is_checked_here() -> None:
    checked = set(SIGNATURES) | set(KINDS) | {("textual.widgets._toast", "Toast"), ("textual.widgets._toast", "ToastRack")}
    assert set(PRIVATE_NAMES) == checked


@pytest.mark.parametrize(("where", "name"), sorted(SIGNATURES))
def test_private_method_keeps_its_signature(where: str, name: str) -> None:
    owner = _resolve(where)
    assert hasattr(owner, name), f"Textual no longer has {where}.{name}: see tui/textual_private.py"
    assert str(inspect.signature(getattr(owner, name))) == SIGNATURES[(where, name)], f"{where}.{name} changed"


@pytest.mark.parametrize(("where", "name"), sorted(KINDS))
def test_private_attribute_keeps_its_kind(where: str, name: str) -> None:
    value = getattr(_instance(where), name, AttributeError)
    assert value is not AttributeError, f"Textual no longer sets {where}.{name}: see tui/textual_private.py"
    kind = type(value)
    assert f"{kind.__module__}.{kind.__qualname__}" == KINDS[(where, name)], f"{where}.{name} changed kind"


@pytest.mark.parametrize("name", ["Toast", "ToastRack"])
def test_private_toast_module_keeps_its_widgets(name: str) -> None:
    from textual.widget import Widget

    assert issubclass(getattr(importlib.import_module("textual.widgets._toast"), name), Widget)


def test_no_other_module_names_a_private_textual_module() -> None:
    """``textual.<x>._<y>`` imports (the toast widgets) only in tui/textual_private.py."""
    root = Path(__file__).resolve().parents[1]
    offenders = []
    for path in [*(root / "specbench_tui").rglob("*.py"), *(root / "tests").glob("*.py")]:
        if path.name == "textual_private.py" or path == Path(__file__).resolve():
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            if module and module.startswith("textual") and any(p.startswith("_") for p in module.split(".")):
                offenders.append(f"{path.relative_to(root)}: {module}")
    assert offenders == []
