"""KeyLocator maps key paths to the lines a user must edit, for every TOML construct sweeps use."""

from __future__ import annotations

import sys

import pytest

from specbench_tui.core.tomlpos import KeyLocator, format_path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DOC = '''\
# a comment line
[sweep]
name = "x"   # trailing comment with [brackets] and = signs

[[configs]]
name = "a"
matrix = { budget = [8, 16], tp = [1] }
[configs.args]
tp-size = "{tp}"
"quoted-key" = 1
'literal.key' = 2
[[configs.exclude]]
budget = 8
reason = "first"
[[configs.exclude]]
budget = 16
reason = """multi
line [not a table]
reason"""

[[configs]]
name = "b"
args.tp-size = 4
args . page-size = 1
cuda = [
  1,
  2,  # comment ]
  "x]",
]
exclude = [
  { budget = 8, reason = "inline" },
  { tp = 1, reason = "second" },
]

[[configs]]
name = "c"
[[configs.exclude]]
tp = 2
reason = "restarted at 0"

[[workloads]]
kind = "code"
'''


@pytest.fixture(scope="module")
def locator() -> KeyLocator:
    tomllib.loads(DOC)  # the document is valid TOML
    return KeyLocator(DOC)


@pytest.mark.parametrize(("path", "line"), [
    (("sweep",), 2),
    (("sweep", "name"), 3),
    (("configs",), 5),
    (("configs", 0), 5),
    (("configs", 0, "name"), 6),
    (("configs", 0, "matrix"), 7),
    (("configs", 0, "matrix", "budget"), 7),
    (("configs", 0, "args"), 8),
    (("configs", 0, "args", "tp-size"), 9),
    (("configs", 0, "args", "quoted-key"), 10),
    (("configs", 0, "args", "literal.key"), 11),
    (("configs", 0, "exclude", 0), 12),
    (("configs", 0, "exclude", 0, "budget"), 13),
    (("configs", 0, "exclude", 1), 15),
    (("configs", 0, "exclude", 1, "reason"), 17),
    (("configs", 1), 21),
    (("configs", 1, "args", "tp-size"), 23),
    (("configs", 1, "args", "page-size"), 24),
    (("configs", 1, "cuda", 1), 27),
    (("configs", 1, "cuda", 2), 28),
    (("configs", 1, "exclude", 0), 31),
    (("configs", 1, "exclude", 0, "reason"), 31),
    (("configs", 1, "exclude", 1), 32),
    (("configs", 1, "exclude", 1, "tp"), 32),
    (("configs", 2), 35),
    (("configs", 2, "exclude", 0), 37),
    (("configs", 2, "exclude", 0, "reason"), 39),
    (("workloads", 0), 41),
    (("workloads", 0, "kind"), 42),
])
def test_exact_lines(locator: KeyLocator, path: tuple, line: int) -> None:
    assert locator.exact(path) == line, format_path(path)


def test_nested_array_of_tables_restarts_per_parent(locator: KeyLocator) -> None:
    """[[configs.exclude]] under the third [[configs]] is that element's exclude[0], not exclude[2]."""
    assert locator.exact(("configs", 2, "exclude", 0, "tp")) == 38
    assert locator.exact(("configs", 0, "exclude", 2)) is None
    assert locator.exact(("configs", 2, "exclude", 1)) is None


def test_unknown_path_falls_back_to_closest_ancestor(locator: KeyLocator) -> None:
    assert locator.line(("configs", 0, "args", "missing-flag")) == 8
    assert locator.line(("configs", 0, "matrix", "budget", 1)) == 7
    assert locator.line(("nothing",)) is None


def test_comment_and_string_brackets_do_not_confuse_lines(locator: KeyLocator) -> None:
    # "multi\nline [not a table]" must not become a table header.
    assert locator.exact(("line [not a table]",)) is None
    assert locator.exact(("not a table",)) is None


@pytest.mark.parametrize("text", ["", "[", "a = ", "[[x]]\n[[x", "a = [1, 2", "a = \"\"\"never closed",
                                  "a = {b = [", "\x00\xff", "[a.\"b\nc\"]"])
def test_never_raises_on_text_it_cannot_follow(text: str) -> None:
    KeyLocator(text).line(("a", "b"))


def test_format_path_quotes_odd_keys() -> None:
    assert format_path(("configs", 2, "matrix", "budget")) == "configs[2].matrix.budget"
    assert format_path(("server", "env", "MY VAR")) == 'server.env."MY VAR"'
    assert format_path(()) == ""
