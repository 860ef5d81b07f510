"""Config ids are stable: only what the server is given changes them (resume depends on it)."""

from __future__ import annotations

from pathlib import Path

from specbench_tui.core.plan import build_plan, config_id
from specbench_tui.core.sweep.loader import parse_sweep

A = '''
[[configs]]
name = "a-tp{tp}"
matrix = { tp = [1, 2] }
args = { tp-size = "{tp}", page-size = 1 }
'''
B = '''
[[configs]]
name = "b"
args = { tp-size = 1, speculative-algorithm = "DFLASH", speculative-draft-model-path = "/d" }
env = { X = "1" }
'''
C = '''
[[configs]]
name = "c-b{budget}"
matrix = { budget = [8, 16] }
args = { speculative-algorithm = "DDTREE", speculative-draft-model-path = "/d" }
fork_args = { speculative-ddtree-budget = "{budget}" }
'''
HEAD = '''
[sweep]
name = "ids"
[server.args]
model-path = "/m"
[[workloads]]
kind = "code"
'''


def ids(tmp_path: Path, *blocks: str, head: str = HEAD) -> dict[str, str]:
    plan = build_plan(parse_sweep(head + "".join(blocks), tmp_path / "s.toml"))
    return {c.name: c.id for c in plan.configs}


def test_ids_are_short_hex(tmp_path: Path) -> None:
    for value in ids(tmp_path, A, B, C).values():
        assert len(value) == 12 and int(value, 16) >= 0


def test_other_configurations_never_change_an_id(tmp_path: Path) -> None:
    base = ids(tmp_path, A, B, C)
    edited_b = B.replace('X = "1"', 'X = "2"').replace("tp-size = 1", "tp-size = 2")
    assert ids(tmp_path, A, edited_b, C)["a-tp1"] == base["a-tp1"]           # editing another
    assert ids(tmp_path, A, C)["c-b8"] == base["c-b8"]                         # removing another
    added = ids(tmp_path, B.replace('"b"', '"z"').replace('"1"', '"9"'), A, B, C)
    assert {k: added[k] for k in base} == base                                 # adding and reordering
    assert ids(tmp_path, C, B, A) == base                                      # reordering


def test_names_comments_and_key_order_do_not_matter(tmp_path: Path) -> None:
    base = ids(tmp_path, B)
    renamed = ids(tmp_path, "# a comment\n" + B.replace('name = "b"', 'name = "renamed"'))
    assert renamed["renamed"] == base["b"]
    reordered = B.replace('tp-size = 1, speculative-algorithm = "DFLASH"',
                          'speculative-algorithm = "DFLASH", tp-size = 1')
    assert ids(tmp_path, reordered) == base


def test_a_changed_flag_value_or_env_changes_the_id(tmp_path: Path) -> None:
    base = ids(tmp_path, B)["b"]
    assert ids(tmp_path, B.replace('"/d"', '"/other"'))["b"] != base
    assert ids(tmp_path, B.replace('X = "1"', 'X = "2"'))["b"] != base
    assert ids(tmp_path, B.replace("tp-size = 1", "tp-size = 1, page-size = 1"))["b"] != base
    # Shared flags reach every configuration, so they change every id.
    assert ids(tmp_path, B, head=HEAD.replace('"/m"', '"/m2"'))["b"] != base


def test_each_matrix_point_has_its_own_id(tmp_path: Path) -> None:
    found = ids(tmp_path, A, C)
    assert len(set(found.values())) == len(found) == 4


def test_config_id_is_a_pure_function_of_engine_flags_and_env() -> None:
    argv = ("--tp-size", "4", "--cuda-graph-bs-decode", "1", "2", "--trust-remote-code")
    shuffled = ("--trust-remote-code", "--cuda-graph-bs-decode", "1", "2", "--tp-size", "4")
    env = (("A", "1"), ("B", "2"))
    assert config_id("sglang", argv, env) == config_id("sglang", shuffled, tuple(reversed(env)))
    assert config_id("sglang", argv, env) != config_id("sglang", ("--tp-size", "4", "--cuda-graph-bs-decode", "2",
                                                                  "1", "--trust-remote-code"), env)
    assert config_id("sglang", argv, env) != config_id("other", argv, env)
    # Pinned: a change to the hashing scheme would orphan every recorded result.
    assert config_id("sglang", ("--tp-size", "1"), ()) == config_id("sglang", ["--tp-size", "1"], ())
    assert config_id("sglang", ("--tp-size", "1"), ()) == PINNED


PINNED = "e5b4dd781f7c"
