"""Every prompt is sized against the server's context before it is sent (issue 49, point 3): a prompt_dataset
prompt of 800k tokens against a 4,096-token context is refused with a record, never sent to get a 400; the
tokens the server reserves for speculative decoding count."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from engine_helpers import plan_for, run_plan, write_sweep
from sweep_builder import dumps, sim_profile, sim_sweep

from specbench_tui.core.engines.sglang import SGLANG
from specbench_tui.core.events import Notice
from specbench_tui.core.sweep.schema import WorkloadSpec
from specbench_tui.engine.client import GenerateResult
from specbench_tui.engine.workloads import ERROR_KIND_TOO_LONG, Session

SPEC = WorkloadSpec(name="w", kind="prompt_dataset", max_new_tokens=64, repeats=1, warmup=0, temperature=0.0,
                    ignore_eos=True, params=())


class CountingClient:
    """Counts a token per byte; records what was sent."""

    profile = SGLANG

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.counted = 0

    async def tokenize(self, text: str) -> tuple[int, None]:
        self.counted += 1
        return len(text.encode()), None

    async def generate(self, text: str, params: dict[str, object], on_progress: object = None) -> GenerateResult:
        self.sent.append(text)
        return GenerateResult(rid="r", started_at=0.0, start=0.0, end=0.0, text="ok",
                              meta_info={"completion_tokens": 1})


def _session(client: CountingClient, reserved: int) -> tuple[Session, list[str]]:
    notices: list[str] = []
    session = Session(client, lambda: None, 1000, lambda level, text: notices.append(text),  # type: ignore[arg-type]
                      reserved_tokens=reserved)
    return session, notices


@pytest.mark.parametrize("reserved, sent", [(0, True), (100, False)])
def test_the_reserved_speculative_tokens_count_against_the_context(reserved: int, sent: bool) -> None:
    client = CountingClient()
    session, notices = _session(client, reserved)
    result = asyncio.run(session.generate("x" * 850, 64, SPEC))
    assert bool(client.sent) == sent and result.ok == sent
    if not sent:
        assert result.error_kind == ERROR_KIND_TOO_LONG and "not sent" in (result.error or "")
        assert "850 tokens" in (result.error or "") and "100 reserved" in (result.error or "")
        assert len(notices) == 1


def test_a_text_is_counted_once_and_a_huge_one_never() -> None:
    client = CountingClient()
    session, notices = _session(client, 0)
    for _ in range(3):
        asyncio.run(session.generate("y" * 2000, 64, SPEC))
    asyncio.run(session.generate("z" * 10_000_000, 64, SPEC))
    assert client.sent == [] and client.counted == 1
    assert len(notices) == 1
    short = asyncio.run(session.generate("hello", 64, SPEC))
    assert short.ok and client.sent == ["hello"] and client.counted == 1


@pytest.mark.e2e
def test_an_800k_token_dataset_prompt_is_refused_before_it_is_sent(tmp_path: Path) -> None:
    questions = [{"question_id": 1, "category": "coding", "turns": ["Write a Python function that adds two numbers."]},
                 {"question_id": 2, "category": "huge", "turns": ["word " * 800_000]},
                 {"question_id": 3, "category": "long", "turns": ["Summarise this. " + "tale " * 6_000]}]
    (tmp_path / "q.jsonl").write_text("\n".join(json.dumps(q) for q in questions) + "\n")
    sweep = sim_sweep("too-long", configs=[{"name": "ar", "algorithm": "autoregressive"}],
                      workloads=[{"name": "ds", "kind": "prompt_dataset", "path": "q.jsonl", "max_new_tokens": 16}])
    path = write_sweep(tmp_path, dumps(sweep).replace('"{port}"', "{port}"), dumps(sim_profile()))
    _outcome, events, run_dir, _ = asyncio.run(run_plan(plan_for(path), tmp_path / "runs", timeout_s=300))
    records = {r["item"]: r for r in map(json.loads, (run_dir.path / "results.jsonl").read_text().splitlines())}
    assert records["q1"]["status"] == "ok", records["q1"]
    for item in ("q2", "q3"):
        assert records[item]["status"] == "error" and records[item]["error_kind"] == ERROR_KIND_TOO_LONG, records[item]
        assert records[item].get("http_status") is None and "not sent" in records[item]["error"]
    assert "4,096" in records["q2"]["error"]
    assert sum(1 for e in events if isinstance(e, Notice) and "too long for this server" in e.text) == 1
