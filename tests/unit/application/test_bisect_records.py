"""What ``specbench run --bisect-crashes`` reads back from the run directory (specbench_tui/application/bisect.py):
the run's environment record and an earlier facts file are read, not trusted; a field of the wrong kind is left
out, never an ``AttributeError`` that ends the bisection after its runs."""

from __future__ import annotations

import json
from pathlib import Path

from specbench_tui.application import bisect
from specbench_tui.core.bisect import FACTS_FILE, Fact


def test_the_box_leaves_out_environment_fields_that_are_not_objects() -> None:
    box = bisect._box({"host": "box-1", "gpus": ["H100"], "server_python": {"packages": ["vllm"]},
                       "simulated": True})
    assert box == {"where": "? (no GPU), simulated", "host": None, "gpus": None, "packages": {}, "driver": None}


def test_the_box_of_a_sound_environment() -> None:
    box = bisect._box({"host": {"name": "box-1"}, "gpus": {"names": {"H100": 2}, "driver_version": "550"},
                       "server_python": {"packages": {"vllm": "0.9", "torch": None}}})
    assert box == {"where": "box-1 (H100 ×2, vllm 0.9)", "host": "box-1", "gpus": {"H100": 2},
                   "packages": {"vllm": "0.9"}, "driver": "550"}


def test_facts_are_written_over_a_facts_file_that_is_not_an_object(tmp_path: Path) -> None:
    (tmp_path / FACTS_FILE).write_text("[1, 2]\n", encoding="utf-8")
    fact = Fact("eagle", 1, 2, 4)
    bisect._write_facts(tmp_path, [fact])
    assert json.loads((tmp_path / FACTS_FILE).read_text(encoding="utf-8")) == {"facts": [fact.to_json()]}


def test_facts_of_other_boundaries_are_kept(tmp_path: Path) -> None:
    other = Fact("ngram", None, 8, 16)
    (tmp_path / FACTS_FILE).write_text(json.dumps({"facts": [other.to_json(), "junk"]}), encoding="utf-8")
    fact = Fact("eagle", 1, 2, 4)
    bisect._write_facts(tmp_path, [fact])
    assert json.loads((tmp_path / FACTS_FILE).read_text(encoding="utf-8")) == {"facts": [other.to_json(),
                                                                                         fact.to_json()]}
