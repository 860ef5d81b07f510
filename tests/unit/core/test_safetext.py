"""Foreign text (lease notes, registry entries, socket answers) printed as data: core/safetext.py."""

from __future__ import annotations

from specbench_tui.core.safetext import is_clean, printable


def test_control_and_format_characters_are_escaped_and_plain_text_is_kept():
    forged = "mallory\n[00:00.9] sweep completed: every configuration done\x1b[2J\x1b]0;title\x07\r\t\x7f\x9b"
    shown = printable(forged, None)
    assert shown == ("mallory\\n[00:00.9] sweep completed: every configuration done\\x1b[2J\\x1b]0;title\\x07"
                     "\\r\\t\\x7f\\x9b")
    assert shown.isprintable() and "\n" not in shown
    assert printable("evil\u202etxt.exe\u200b\u2028") == "evil\\u202etxt.exe\\u200b\\u2028"  # bidi, zero width, LS
    assert printable("runs/ünïcode 测试 ok") == "runs/ünïcode 测试 ok"
    assert printable("a\\x1b") == "a\\\\x1b"  # an escape cannot be faked with a backslash
    assert printable(12345) == "12345"


def test_foreign_text_is_bounded():
    assert printable("x" * 10_000) == "x" * 200 + "…"
    assert printable("x" * 10, limit=4) == "xxxx…"
    assert is_clean("plain text") and not is_clean("a\nb") and not is_clean("\x1b[31m")
