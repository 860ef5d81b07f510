"""Where a real SGLang 0.5.23 server would be misread, tested on the simulator that now does what SGLang does:
reserved speculative tokens, the scheduler's abort chunk, the context length from ``/v1/models``, process titles
that replace the command line, and the spec fields of a conversation whose turn verified nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest
from narrowing import present

from repo_paths import REPO
from specbench_tui.core.budget import fits, plan_budget
from specbench_tui.core.engines.registry import get_profile
from specbench_tui.core.engines.sglang import SGLANG, reserved_speculative_tokens
from specbench_tui.core.launch import server_argv
from specbench_tui.core.plan import build_plan
from specbench_tui.core.records import STATUS_ERROR, STATUS_OK
from specbench_tui.core.sweep.loader import load_sweep
from specbench_tui.engine.client import ERROR_ABORT, GenerateResult, ServerClient
from specbench_tui.engine.leftovers import find_leftovers
from specbench_tui.engine.workloads import Labels, LongContextWorkload, Session, measurement_from
from specbench_tui.sim.testing import SimProcess

EAGLE3 = REPO / "sweeps" / "eagle3.toml"


# ------------------------------------------------------------------------------------------ reserved tokens


def test_reserved_tokens_per_engine_and_algorithm() -> None:
    assert reserved_speculative_tokens("EAGLE3", topk=8, steps=5, draft_tokens=32) == 40
    assert reserved_speculative_tokens("eagle", topk=1, steps=3, draft_tokens=4) == 4
    assert reserved_speculative_tokens("NEXTN", topk=4, steps=5, draft_tokens=8) == 20
    assert reserved_speculative_tokens("FROZEN_KV_MTP", topk=1, steps=2, draft_tokens=3) == 3
    for other in ("DFLASH", "DDTREE", "NGRAM", "STANDALONE", None):
        assert reserved_speculative_tokens(other, topk=8, steps=5, draft_tokens=32) == 0
    served = {"speculative_algorithm": "EAGLE3", "speculative_eagle_topk": 8, "speculative_num_steps": 5,
              "speculative_num_draft_tokens": 32}
    assert SGLANG.reserved_tokens(served) == 40
    for engine in ("vllm", "llamacpp"):  # they shrink the draft to fit instead of reserving
        assert get_profile(engine).reserved_tokens(served) == 0


def test_budget_counts_the_reservation_and_the_scheduler_limit() -> None:
    plain = plan_budget("max", 8192, 256)
    reserved = plan_budget("max", 8192, 256, reserved=40)
    assert reserved.prompt_tokens == plain.prompt_tokens - 40 and not reserved.clamped
    assert not fits(plain.prompt_tokens, 256, 8192 - 32 + 8, reserved=40)  # what the 32-token margin alone hit
    assert fits(reserved.prompt_tokens, 256, 8192, margin=32, reserved=40)
    limited = plan_budget("max", 8192, 256, max_req_input_len=6000)
    assert limited.prompt_tokens + 256 + 32 == 6004 and limited.prompt_tokens < 6000
    clamped = plan_budget(8000, 8192, 256, reserved=40)
    assert clamped.clamped and "40 reserved for speculative decoding" in present(clamped.note)


def _eagle3_worst_config() -> list[str]:
    """The speculative flags of eagle3.toml's configuration that reserves the most (topk 8 × steps 5), exactly as
    the launcher gives them to SGLang."""
    plan = build_plan(load_sweep(EAGLE3))
    config = next(c for c in plan.configs if c.name == "eagle3-s5-k8-d32-tp1")
    argv = server_argv(plan.sweep.engine, config, sys.executable, 30000)
    out: list[str] = []
    for flag in ("--speculative-algorithm", "--speculative-draft-model-path", "--speculative-num-steps",
                 "--speculative-eagle-topk", "--speculative-num-draft-tokens"):
        out += [flag, argv[argv.index(flag) + 1]]
    return out


async def _session(sim: SimProcess, notes: list[str]) -> tuple[ServerClient, Session]:
    client = ServerClient(sim.url, SGLANG)
    info = await client.server_info() or {}
    session = Session(client, lambda: None, await client.context_length(info),
                      lambda level, text: notes.append(text), reserved_tokens=SGLANG.reserved_tokens(info),
                      max_req_input_len=SGLANG.input_limit(info))
    return client, session


async def test_eagle3_max_items_fit_a_server_that_reserves_40_tokens() -> None:
    sweep = load_sweep(EAGLE3)
    spec = next(w for w in sweep.workloads if w.kind == "long_context")
    assert "max" in spec.param("prompt_tokens")
    profile = '[model]\ncontext_length = 8192\n[deterministic]\nenabled = true\ntok_s = 5000\nttft_ms = 1\n'
    with SimProcess(_eagle3_worst_config(), model="meta-llama/Llama-3.1-8B-Instruct", profile_toml=profile) as sim:
        sim.wait_ready(20)
        notes: list[str] = []
        client, session = await _session(sim, notes)
        try:
            assert session.reserved_tokens == 40 and session.context_length == 8192
            workload = LongContextWorkload(spec)
            await workload.prepare(session)
            record = await workload.run("max", 0, session, Labels("c", "eagle3-s5-k8-d32-tp1", spec.name))
            assert record.status == STATUS_OK, record.error
            assert record.prompt_tokens is not None and record.completion_tokens is not None
            assert record.prompt_tokens + 40 + record.completion_tokens <= 8192
            assert record.prompt_tokens > 8192 - 256 - 32 - 40 - 50  # "max" still fills the context
            # The same prompt sized without the reservation is what a real server refuses (the seed's 400).
            unreserved = plan_budget("max", 8192, spec.max_new_tokens)
            sized, count = await workload._size(session, unreserved.prompt_tokens)
            result = await client.generate(sized, {"max_new_tokens": spec.max_new_tokens})
            assert not result.ok and result.http_status == 200 and "stream error 400" in present(result.error)
            assert f"You requested a total of {count + 40 + spec.max_new_tokens} tokens" in present(result.error)
        finally:
            await client.aclose()


# --------------------------------------------------------------------------------------------- abort chunk


async def test_an_abort_chunk_is_an_error_carrying_sglangs_message() -> None:
    # A KV pool smaller than the context: the scheduler's max_req_input_len is below what the context allows.
    profile = "[model]\ncontext_length = 8192\nkv_bytes_per_token = 100000000\ngpu_memory_gb = 80\n" \
              "weights_gb = 10\ndefault_mem_fraction_static = 0.9\n"
    with SimProcess([], profile_toml=profile) as sim:
        sim.wait_ready(20)
        assert "] KV pool holds " in sim.stderr and "fewer than --context-length 8192." in sim.stderr
        info = httpx.get(f"{sim.url}/server_info").json()
        limit = info["max_req_input_len"]
        assert limit == min(8191, info["max_total_num_tokens"] - 1) - 5 and limit < 8000
        assert info["context_length"] is None  # not passed: the model's limit is on /v1/models
        client = ServerClient(sim.url, SGLANG)
        try:
            result = await client.generate("word " * (limit + 50), {"max_new_tokens": 8})
        finally:
            await client.aclose()
        assert not result.ok and result.error_kind == ERROR_ABORT and result.http_status == 400
        error = present(result.error)
        assert "exceeds the maximum allowed length" in error and f"({limit} tokens)" in error
        assert "BadRequestError" in error
        record = measurement_from(Labels("c", "cfg", "long"), "big", 0, [result])
        assert record.status == STATUS_ERROR and record.error == result.error and record.http_status == 400
        assert "no tokens" not in present(record.error)
        sim.wait_for_line("exceeds the maximum allowed length")
        r = httpx.post(f"{sim.url}/generate", json={"text": "word " * (limit + 50)})
        assert r.status_code == 400 and "exceeds the maximum allowed length" in r.json()["error"]["message"]


def test_abort_finish_reason_without_status_is_still_an_error() -> None:
    from specbench_tui.engine.client import _take_abort

    result = GenerateResult(rid="r", started_at=0.0, start=0.0,
                            meta_info={"finish_reason": {"type": "abort", "message": None}, "completion_tokens": 0})
    _take_abort(result)
    assert result.error == "the server aborted the request: Aborted" and result.error_kind == ERROR_ABORT


# --------------------------------------------------------------------------------------- context discovery


async def test_a_sweep_without_context_length_sizes_against_v1_models() -> None:
    profile = "[model]\ncontext_length = 6000\ntokenizer_max_length = 131072\n"
    with SimProcess([], profile_toml=profile) as sim:
        sim.wait_ready(20)
        assert httpx.post(f"{sim.url}/v1/tokenize", json={"prompt": "x"}).json()["max_model_len"] == 131072
        notes: list[str] = []
        client, session = await _session(sim, notes)
        try:
            assert session.context_length == 6000
            assert (await client.server_info() or {})["context_length"] is None
        finally:
            await client.aclose()


async def test_without_any_context_length_sglang_refuses_to_guess_from_the_tokenizer() -> None:
    with SimProcess([]) as sim:
        sim.wait_ready(20)
        client = ServerClient(sim.url, SGLANG)
        try:
            session = Session(client, lambda: None, None, lambda level, text: None)
            from specbench_tui.core.sweep.schema import WorkloadSpec
            from specbench_tui.engine.workloads import WorkloadError

            spec = WorkloadSpec("long", "long_context", 64, 1, 0, 0.0, True, (("prompt_tokens", ("max",)),))
            with pytest.raises(WorkloadError, match="no context length"):
                await LongContextWorkload(spec).prepare(session)
        finally:
            await client.aclose()


# ---------------------------------------------------------------------------------------- process titles


def test_sim_children_carry_sglangs_titles_in_their_command_line() -> None:
    with SimProcess(["--tp-size", "2"]) as sim:
        sim.wait_ready(20)
        from specbench_tui.sim.testing import group_pids

        titles = set()
        for pid in group_pids(sim.pgid):
            try:
                raw = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            titles.add(raw.split(b"\0")[0].decode())
        assert {"sglang::scheduler_TP0", "sglang::scheduler_TP1", "sglang::detokenizer"} <= titles


CHILD = textwrap.dedent("""
    import subprocess, sys, time
    title = ("import sys, time; sys.path.insert(0, {repo!r}); "
             "from specbench_tui.sim.procs import set_process_title; "
             "set_process_title('sglang::scheduler_TP0'); print('titled', flush=True); time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", title], stdout=subprocess.PIPE)
    assert child.stdout.readline() == b"titled\\n"
    print("up", flush=True)
    time.sleep(60)
""")


def test_an_orphaned_sglang_scheduler_titled_by_setproctitle_is_a_leftover(tmp_path: Path) -> None:
    # The main process runs another program than the one recorded, so only the title can tie the child to it.
    argv = [sys.executable, "-c", CHILD.format(repo=str(REPO))]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"up\n"
        run = tmp_path / "runs" / "r"
        (run / "logs").mkdir(parents=True)
        recorded = ["/opt/sglang/bin/python3", "-m", "sglang.launch_server", "--model-path", "meta-llama/X"]
        events = [{"type": "ServerLaunching", "config_id": "c1", "name": "cfg", "argv": recorded, "pid": proc.pid,
                   "gpus": [0], "port": 30000, "log_path": "", "attempt": 1, "ts": time.time()}]
        (run / "events.jsonl").write_text("\n".join(json.dumps(e) for e in events) + "\n")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(5)
        found = find_leftovers([tmp_path / "runs"])
        assert len(found) == 1 and not found[0].main_alive and len(found[0].pids) == 1
        child = found[0].pids[0]
        assert Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")[0] == b"sglang::scheduler_TP0"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass


# ----------------------------------------------------------------------------------- spec fields per turn


def _turn(tokens: int, verify: int | None) -> GenerateResult:
    meta: dict = {"completion_tokens": tokens, "prompt_tokens": 10, "finish_reason": {"type": "length"}}
    if verify is not None:
        meta.update(spec_verify_ct=verify, spec_accept_length=tokens / verify)
    result = GenerateResult(rid="r", started_at=0.0, start=0.0, end=1.0, meta_info=meta)
    from specbench_tui.core.metrics import Chunk

    result.chunks = [Chunk(0.1, 1), Chunk(0.9, tokens)]
    return result


def test_a_turn_without_spec_fields_keeps_the_conversations_acceptance() -> None:
    # SGLang sends spec_* only when the request verified at least once: a one-token turn has none.
    record = measurement_from(Labels("c", "cfg", "mt"), "q", 0, [_turn(30, 10), _turn(1, None), _turn(20, 5)])
    assert record.verify_ct == 15 and record.accept_length == pytest.approx(51 / 15)
    baseline = measurement_from(Labels("c", "cfg", "mt"), "q", 0, [_turn(30, None), _turn(20, None)])
    assert baseline.verify_ct is None and baseline.accept_length is None


def test_sim_sends_no_spec_fields_without_a_verify_step() -> None:
    with SimProcess(["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d"]) as sim:
        sim.wait_ready(20)
        one = httpx.post(f"{sim.url}/generate", json={"text": "Hi", "sampling_params": {"max_new_tokens": 1}}).json()
        many = httpx.post(f"{sim.url}/generate", json={"text": "Hi", "sampling_params": {"max_new_tokens": 40,
                                                                                        "ignore_eos": True}}).json()
    assert not [k for k in one["meta_info"] if k.startswith("spec_")]
    assert many["meta_info"]["spec_verify_ct"] > 0 and "spec_accept_length" in many["meta_info"]


# ------------------------------------------------------------------------------ log lines of SGLang 0.5.23


def test_hybrid_pool_fields_and_new_prefixes_are_read() -> None:
    from specbench_tui.core.engines.sglang import parse_batch_line
    from specbench_tui.sim import logs

    swa = parse_batch_line("[2026-01-01 00:00:00 MOE_DP1 TP2] " + logs.format_decode(
        "comma", 3, 900, 0.25, 3.5, 0.6, True, 401.0, 2, "swa"))
    assert swa is not None and (swa.dp_rank, swa.tp_rank, swa.num_token, swa.token_usage) == (None, 2, 900, 0.25)
    mamba = parse_batch_line("[2026-01-01 00:00:00 ATTN_CP0 DP1] " + logs.format_prefill(
        "comma", 1, 28, 0, 0.5, 0, 0, 0, False, 99.0, "mamba"))
    assert mamba is not None and (mamba.dp_rank, mamba.token_usage, mamba.new_tokens) == (1, 0.5, 28)


def test_crash_lines_of_0_5_23() -> None:
    from specbench_tui.core.engines.sglang import SGLANG_SIGNATURES
    from specbench_tui.core.signatures import SignatureSet

    sigs = SignatureSet(builtins=SGLANG_SIGNATURES)
    hard = sigs.match("[2026-01-01 00:00:00] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)")
    assert hard is not None and hard.name == "watchdog_timeout"
    assert sigs.match("[2026-01-01 00:00:00] Scheduler watchdog timeout (self.watchdog_timeout=60, self.soft=True)") \
        is None
    prefill = sigs.match("Exception: Capture prefill CUDA graph failed: CUDA out of memory.")
    assert prefill is not None and prefill.name == "cuda_graph_capture_failed"
    died = sigs.match("RuntimeError: Rank 1 scheduler died during initialization (exit code: -9). If exit code")
    assert died is not None and died.name == "scheduler_died_at_init"


def test_sim_freezes_gc_after_warmup_and_answers_it() -> None:
    with SimProcess(["--log-level-http", "info"]) as sim:
        sim.wait_ready(20)
        log = sim.stderr
        assert httpx.post(f"{sim.url}/freeze_gc").text == "Garbage collection frozen.\n"
    assert log.index('"POST /generate HTTP/1.1" 200') < log.index('"POST /freeze_gc HTTP/1.1" 200') \
        < log.index("ready to roll")


# ------------------------------------------------------------------------ one prompt for every configuration


def test_planned_reservation_from_argv() -> None:
    from specbench_tui.core.engines.sglang import AUTO_RESERVED, planned_reserved_tokens

    plan = build_plan(load_sweep(EAGLE3))
    assert max(planned_reserved_tokens(c.argv) for c in plan.runnable()) == 40
    assert planned_reserved_tokens(["--speculative-algorithm=EAGLE3", "--speculative-num-steps", "3",
                                    "--speculative-eagle-topk", "2", "--speculative-num-draft-tokens=4"]) == 6
    assert planned_reserved_tokens(["--speculative-algorithm", "EAGLE"]) == AUTO_RESERVED
    assert planned_reserved_tokens(["--speculative-algorithm", "DFLASH"]) == 0
    assert SGLANG.planned_reserved(["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "5"]) == 5
    assert get_profile("vllm").planned_reserved(["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "5"]) == 0


SWEEP = """
[sweep]
name = "reserve"
baseline = "ar"
gpus = 1
repeats = 1

[engine]
launcher = "simulator"
sim_profile = "sim_profile.toml"
port_base = {port}
startup_timeout_s = 60

[server.args]
model-path = "meta-llama/Llama-3.1-8B-Instruct"

[[configs]]
name = "ar"
algorithm = "autoregressive"

[[configs]]
name = "eagle3-s5-k8-d32"
algorithm = "eagle3"
[configs.args]
speculative-algorithm = "EAGLE3"
speculative-draft-model-path = "d"
speculative-num-steps = 5
speculative-eagle-topk = 8
speculative-num-draft-tokens = 32

[[workloads]]
name = "long-context"
kind = "long_context"
prompt_tokens = ["max"]
max_new_tokens = 64
"""


@pytest.mark.e2e
async def test_every_configuration_gets_the_same_max_prompt_sized_for_the_largest_reservation(tmp_path: Path) -> None:
    from engine_helpers import plan_for, run_plan, write_sweep

    from specbench_tui.core.events import MeasurementRecorded, ServerReady

    profile = "[model]\ncontext_length = 6000\n[deterministic]\nenabled = true\ntok_s = 4000\nttft_ms = 2\n"
    plan = plan_for(write_sweep(tmp_path / "sweep", SWEEP, profile))
    outcome, events, _, _ = await run_plan(plan, tmp_path / "runs", timeout_s=120)
    assert outcome.state == "completed"
    assert {e.context_length for e in events if isinstance(e, ServerReady)} == {6000}  # from /v1/models
    records = {m.config: m for m in (present(e.measurement) for e in events if isinstance(e, MeasurementRecorded))}
    assert set(records) == {"ar", "eagle3-s5-k8-d32"}
    assert all(r.status == STATUS_OK for r in records.values()), records
    assert records["ar"].prompt_tokens == records["eagle3-s5-k8-d32"].prompt_tokens  # paired: the same prompt
    assert records["ar"].output_sha == records["eagle3-s5-k8-d32"].output_sha  # speculation is lossless
    assert 6000 - 64 - 32 - 40 - 40 < present(records["ar"].prompt_tokens) <= 6000 - 64 - 32 - 40


def test_avg_spec_accept_length_appears_with_the_first_decode_line() -> None:
    with SimProcess(["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d",
                     "--decode-log-interval", "40"]) as sim:
        sim.wait_ready(20)
        state = httpx.get(f"{sim.url}/server_info").json()["internal_states"][0]
        assert "avg_spec_accept_length" not in state  # the warm-up's few steps logged nothing yet
        httpx.post(f"{sim.url}/generate", timeout=60, json={"text": "Write a long story.", "sampling_params": {
            "max_new_tokens": 400, "ignore_eos": True}})
        state = httpx.get(f"{sim.url}/server_info").json()["internal_states"][0]
        assert state["avg_spec_accept_length"] > 1.0
