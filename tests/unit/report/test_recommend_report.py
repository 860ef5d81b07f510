"""The recommendation and the context ladder in every report format (issue 47): txt, md, html and json say per
band the winner and its exact command (the plan's argv, our --decode-log-interval removed), and C* per
configuration with the per rung figures."""

from __future__ import annotations

import dataclasses
import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from specbench_tui.core.analysis import analyse
from specbench_tui.core.load import LoadSpec, point_item
from specbench_tui.core.records import Measurement
from specbench_tui.report.formats import render
from specbench_tui.report.load import LoadedRun

FORMATS = ("txt", "md", "html", "json")


def cfg(cid: str, name: str, speculative: bool) -> dict[str, Any]:
    argv = ["--model-path", "m", "--decode-log-interval", "5"]
    if speculative:
        argv += ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3"]
    return {"id": cid, "name": name, "algorithm": "eagle3" if speculative else "autoregressive", "tp": 1,
            "argv": argv, "params": {}, "baseline": "ar" if speculative else None, "skip_reason": None,
            "speculative": speculative, "draft_budget": 3 if speculative else None}


CONFIGS = [cfg("a0", "ar", False), cfg("s1", "eagle3", True)]
COMMANDS = {c["name"]: shlex.join(["python", "-m", "sglang.launch_server", "--model-path", "m",
                                   *c["argv"][4:]]) for c in CONFIGS}


def point(cid: str, name: str, label: str, tps: float, accept: float | None) -> list[Measurement]:
    return [Measurement(config_id=cid, config=name, workload="w", item=point_item(["a", "b"], j)[1], repeat=1,
                        status="ok", decode_tps=tps, ttft_s=0.01, itl_p99_s=0.01, e2e_s=0.01 + 13 / tps,
                        completion_tokens=13, accept_length=accept, verify_ct=5 if accept else None,
                        started_at=1000.0 + j * 0.001, load=label) for j in range(2)]


def loaded(tmp_path: Path, plan: dict[str, Any], ms: list[Measurement]) -> LoadedRun:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    MADE[tmp_path] = ms
    return LoadedRun(path=tmp_path, analysis=analyse(plan, ms, []), env=None)


def load_run(tmp_path: Path) -> LoadedRun:
    """eagle3 wins at c1 (2×), ar from c16 on (eagle3 at 0.5×): two bands."""
    plan = {"sweep": "s", "engine": "sglang", "configs": CONFIGS,
            "workloads": [{"name": "w", "kind": "code", "temperature": 0.0, "repeats": 1,
                           "load": LoadSpec(concurrency=(1, 16), requests=2, search="grid").to_json()}]}
    ms = [*point("a0", "ar", "c1", 100.0, None), *point("s1", "eagle3", "c1", 200.0, 3.0),
          *point("a0", "ar", "c16", 60.0, None), *point("s1", "eagle3", "c16", 30.0, 3.0)]
    return loaded(tmp_path, plan, ms)


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_gives_each_bands_winner_and_its_exact_command(tmp_path: Path, fmt: str) -> None:
    text = render(load_run(tmp_path), fmt)
    if fmt == "json":
        bands = json.loads(text)["recommendation"]["bands"]
        assert [(b["span"], b["winner"], b["command_line"]) for b in bands] == [
            ("c1", "eagle3", COMMANDS["eagle3"]), ("c16", "ar", COMMANDS["ar"])]
        assert bands[0]["recipe"] == "--speculative-algorithm EAGLE3 --speculative-num-steps 3"
        return
    shown = text.replace("&#x27;", "'").replace("&quot;", '"')
    assert "Recommendation (specbench recommend)" in shown
    if fmt == "html":  # its own section, not only the plain-text report it embeds
        assert '<h2 id="recommendation">' in shown and shown.index('<h2 id="recommendation">') < shown.index("<details>")
    for name, command in COMMANDS.items():
        assert command in shown, (name, command)
    assert "--decode-log-interval" not in shown.split("Recommendation (specbench recommend)")[1].split("Notes")[0]


def test_a_run_without_a_load_axis_has_no_recommendation_section(tmp_path: Path) -> None:
    """One band per workload there: the best-configuration table says it (specbench recommend prints it)."""
    plan = {"sweep": "s", "engine": "sglang", "configs": CONFIGS,
            "workloads": [{"name": "w", "kind": "code", "temperature": 0.0, "repeats": 1}]}
    ms = [*point("a0", "ar", "c1", 100.0, None), *point("s1", "eagle3", "c1", 200.0, 3.0)]
    run = loaded(tmp_path, plan, [dataclasses.replace(m, load=None) for m in ms])
    assert "Recommendation" not in render(run, "txt") and "recommendation" not in json.loads(render(run, "json"))


def ladder_run(tmp_path: Path) -> LoadedRun:
    plan = {"sweep": "s", "engine": "sglang", "configs": CONFIGS,
            "workloads": [{"name": "ladder", "kind": "context_ladder", "temperature": 0.0, "repeats": 1,
                           "params": {"prompt_tokens": [1024, 8192, "max"], "search": "grid"}}]}
    speed = {"1024": 1.8, "8192": 1.2, "max": 0.7}
    ms = [Measurement(config_id=cid, config=name, workload="ladder", item=rung, repeat=1, status="ok",
                      decode_tps=100.0 * (speed[rung] if cid == "s1" else 1.0), completion_tokens=64,
                      prompt_tokens=32000 if rung == "max" else int(rung),
                      accept_histogram=(1, 1, 2) if cid == "s1" else None,
                      accept_length=3.0 if cid == "s1" else None, verify_ct=4 if cid == "s1" else None)
          for cid, name in (("a0", "ar"), ("s1", "eagle3")) for rung in speed]
    return loaded(tmp_path, plan, ms)


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_gives_c_star_and_the_per_rung_figures(tmp_path: Path, fmt: str) -> None:
    text = render(ladder_run(tmp_path), fmt)
    if fmt == "json":
        ladder = json.loads(text)["ladder"]
        (c,) = ladder["c_star"]
        assert c["config"] == "eagle3" and c["interval"] == [8192.0, 32000.0] and c["status"] == "crosses"
        rung = next(r for r in ladder["rungs"] if r["config"] == "eagle3" and r["rung"] == "max")
        assert rung["speedup"] == 0.7 and rung["conditional"] == [0.75, 0.6667] and rung["context"] == 32000
        return
    text = text.replace("\\*", "*")  # Markdown escapes the star
    assert "C* interval" in text and "(8192, 32000]" in text
    if fmt == "html":  # its own tables, not only the plain-text report it embeds
        assert "<h3>ladder: where speculation stops paying along context" in text and "<h3>ladder: per rung" in text
    if fmt == "html":
        assert '<h2 id="recommendation">' not in text  # no load axis: no recommendation section
    assert "0.70x" in text and "0.75 0.67" in text  # the speedup and the acceptance by draft position at a rung


def test_the_map_puts_each_configurations_b_star_and_c_star_side_by_side(tmp_path: Path) -> None:
    """A run that measured both axes: per configuration where it pays along load (B*) and along context (C*)."""
    loaded_run, ladder = load_run(tmp_path / "a"), ladder_run(tmp_path / "b")
    plan = json.loads((tmp_path / "a" / "plan.json").read_text())
    plan["workloads"] += json.loads((tmp_path / "b" / "plan.json").read_text())["workloads"]
    ms = [*(m for r in (tmp_path / "a", tmp_path / "b") for m in _measurements(r))]
    run = loaded(tmp_path, plan, ms)
    (row,) = json.loads(render(run, "json"))["ladder"]["map"]
    assert row["config"] == "eagle3" and row["along_load"].startswith("w: (1, 16]")
    assert row["along_context"].startswith("ladder: (8192, 32000]")
    assert row["pays"].startswith("under ≈") and "requests in flight, under ≈" in row["pays"]
    assert "the map: where each configuration pays" in render(run, "txt")
    assert loaded_run.analysis.ladder is None and ladder.analysis.load is None  # either alone has no map


def _measurements(run_dir: Path) -> list[Measurement]:
    """The measurements the helpers above analysed for ``run_dir`` (kept on the side as they are made)."""
    return MADE[run_dir]


MADE: dict[Path, list[Measurement]] = {}


def test_a_ladders_bands_run_along_context(tmp_path: Path) -> None:
    """Per context band the winner and its command: eagle3 up to 8192 tokens, autoregressive at max."""
    from specbench_tui.core.recommend import recommend

    run = ladder_run(tmp_path)
    rec = recommend(run.analysis, json.loads((tmp_path / "plan.json").read_text()))
    assert [(b.span, b.winner, b.axis) for b in rec.bands] == [
        ("1024–8192 tokens", "eagle3", "context"), ("max tokens", "ar", "context")]
