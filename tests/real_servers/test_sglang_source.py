"""The simulator and the parsers against SGLang 0.5.23's own source: strings extracted from the installed wheel.

The wheel lives in the parser environment (``.venv-sglang``, made by ``bash tools/setup_sglang_parser_env.sh``;
CI requires it). Its files are parsed with ``ast`` (``tests/sglang_source.py``), never imported, and nothing of
their text is copied here: each check takes the template SGLang's code has (log formats, ``meta_info`` keys, the
400 and abort messages, the reserved-token rule, process titles, SIGQUIT texts, the KV-pool warning, crash
lines) and checks that a running simulator emits exactly that and that the product reads it.

The facts of issue 26 (``tests/sglang_facts.py``: ``/v1/models``' ``max_model_len``, every handler's reset of
``max_running_requests`` to 48 and UNO's lack of one, the adaptive tiers and their 8-token reserve, the NGRAM and
DSPARK defaults, ``num_retractions`` and the retraction warning, ``/flush_cache``'s refusal, the cap in
``/server_info``) are compared with what the product's SGLang profile states and what the simulator does, never
with the simulator alone. The last tests feed a modified copy of a source file, or change the product's or the
simulator's statement, and show the checks fail, so a change on either side cannot pass silently.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import json
import os
import re
import shutil
import signal
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import httpx
import pytest
import sglang_facts as facts
import sglang_source as src
from narrowing import present

from repo_paths import REPO
from specbench_tui.core import measure_notes
from specbench_tui.core.acceptance import histogram_accept_length
from specbench_tui.core.engines import sglang as sglang_profile
from specbench_tui.core.engines.sglang import (
    RESERVING_ALGORITHMS,
    SGLANG,
    SGLANG_ALGORITHMS,
    SGLANG_SIGNATURES,
    parse_batch_line,
)
from specbench_tui.core.metrics import Chunk
from specbench_tui.core.signatures import SignatureSet
from specbench_tui.engine.client import GenerateResult, ServerClient, _take_abort
from specbench_tui.engine.leftovers import SGLANG_TITLE_PREFIX
from specbench_tui.engine.workloads import Labels, measurement_from
from specbench_tui.sim import adaptive as sim_adaptive
from specbench_tui.sim import args as sim_args
from specbench_tui.sim import kvpool as sim_kvpool
from specbench_tui.sim import logs as sim_logs
from specbench_tui.sim import spec_hook as sim_spec_hook
from specbench_tui.sim.testing import SimProcess, group_pids

pytestmark = pytest.mark.sglang

SETUP = "bash tools/setup_sglang_parser_env.sh"
SIM_ROOT = REPO / "specbench_tui" / "sim"
PROFILE = ("[model]\ncontext_length = 8192\nkv_bytes_per_token = 100000000\ngpu_memory_gb = 80\nweights_gb = 10\n"
           "default_mem_fraction_static = 0.9\n")
"""A KV pool of about 1400 tokens per rank: smaller than the context, so the scheduler's own limit shows."""
SPEC = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d", "--speculative-num-steps", "5",
        "--speculative-eagle-topk", "8", "--speculative-num-draft-tokens", "32"]
RESERVED = 40
_TS = re.compile(r"^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{3})?(?P<prefix>[^\]]*)\] (?P<message>.*)$")


@pytest.fixture(scope="module")
def root() -> Path:
    python = src.sglang_python()
    if python is None:
        message = (f"SGLANG 0.5.23 PARSER ENVIRONMENT MISSING: the simulator was NOT checked against SGLang's "
                   f"source. Install it with: {SETUP}")
        if os.environ.get("SPECBENCH_REQUIRE_SGLANG_PARSER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    path = src.sglang_root(python)
    assert (path / "version.py").exists(), path
    return path


def _flush_busy_then_idle(url: str) -> tuple[tuple[int, str], tuple[int, str]]:
    """``/flush_cache`` asked while a request streams, then (the stream closed) until the server is idle again."""
    body = {"text": "Tell a long story.", "stream": True,
            "sampling_params": {"max_new_tokens": 1000, "ignore_eos": True, "temperature": 0}}
    with httpx.stream("POST", f"{url}/generate", json=body, timeout=30) as resp:
        lines = resp.iter_lines()  # held: a dropped line iterator closes the stream, and SGLang aborts the request
        assert any(line.startswith("data: {") for line in lines)
        busy = httpx.post(f"{url}/flush_cache")
    idle = busy
    for _ in range(300):  # the closed stream aborts the request; a state to wait for, not a time
        idle = httpx.post(f"{url}/flush_cache")
        if idle.status_code == 200:
            break
        time.sleep(0.1)
    return (busy.status_code, busy.text), (idle.status_code, idle.text)


def _messages(stderr: str) -> list[tuple[str, str]]:
    """(prefix, message) of every log line."""
    return [(m.group("prefix"), m.group("message")) for m in map(_TS.match, stderr.splitlines()) if m]


@pytest.fixture(scope="module")
def observed(root: Path) -> dict[str, Any]:
    """One simulated EAGLE3 TP2 server, provoked into each case; what it said on the wire and in its log."""
    out: dict[str, Any] = {}
    with SimProcess(["--tp-size", "2", "--decode-log-interval", "5", *SPEC], model="meta-llama/Llama-3.1-8B",
                    profile_toml=PROFILE) as sim:
        sim.wait_ready(30)
        url = sim.url
        info = httpx.get(f"{url}/server_info").json()
        out["info"] = info
        out["freeze_gc"] = httpx.post(f"{url}/freeze_gc").text
        body = {"text": "Write a quicksort in Python.", "stream": True,
                "sampling_params": {"max_new_tokens": 64, "ignore_eos": True, "temperature": 0}}
        with httpx.stream("POST", f"{url}/generate", json=body, timeout=30) as resp:
            chunks = [json.loads(line[5:]) for line in resp.iter_lines() if line.startswith("data: {")]
        out["final_meta"] = chunks[-1]["meta_info"]
        out["info_after"] = httpx.get(f"{url}/server_info").json()
        out["all_meta_keys"] = {k for c in chunks for k in c["meta_info"]}
        limit = info["max_req_input_len"]
        long_input = "word " * (limit + 40)  # past the scheduler's limit, within the context
        with httpx.stream("POST", f"{url}/generate", timeout=30,
                          json={"text": long_input, "stream": True, "sampling_params": {"max_new_tokens": 8}}) as resp:
            out["abort_chunks"] = [line[6:] for line in resp.iter_lines() if line.startswith("data: ")]
        over = httpx.post(f"{url}/generate", json={"text": "word " * 9000}).json()
        out["too_long"] = over["error"]["message"]
        total = httpx.post(f"{url}/generate", json={"text": "Hello there.", "sampling_params": {"max_new_tokens": 8180}})
        out["total"] = total.json()["error"]["message"]
        out["stream_error"] = None
        with httpx.stream("POST", f"{url}/generate", json={"text": "word " * 9000, "stream": True}) as resp:
            out["stream_error"] = json.loads(next(line[6:] for line in resp.iter_lines() if line.startswith("data: {")))
        titles = []
        for pid in group_pids(sim.pgid):
            try:
                titles.append(Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode())
            except OSError:
                pass
        out["titles"] = titles
        out["models"] = httpx.get(f"{url}/v1/models").json()
        out["flush_busy"], out["flush_idle"] = _flush_busy_then_idle(url)
        scheduler = next(pid for pid in group_pids(sim.pgid)
                         if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sglang::scheduler_TP1"))
        os.kill(scheduler, signal.SIGKILL)
        sim.wait_exit(10)
        out["stderr"] = sim.stderr
    return out


# ------------------------------------------------------------------------------------------------- checks
# Each check takes the package root, so the last tests can run it on a modified copy.


def check_ready_line(root: Path, observed: dict[str, Any]) -> None:
    ready = src.template(src.find_string(src.tree(root, "http_server"), "ready to roll"))
    assert any(ready.fullmatch(message) for _, message in _messages(observed["stderr"]))
    assert SGLANG.ready_line is not None and SGLANG.ready_line.search(ready.pattern.replace("\\", ""))


PRODUCT_STATS_KEYS = ("#running-req", "#queue-req", "#token", "token usage", "accept len", "accept rate",
                      "gen throughput (token/s)", "#new-token", "input throughput (token/s)", "#full token",
                      "full token usage", "swa token usage", "mamba usage")
"""The fields ``core.logparse`` reads by name."""
_LABEL = re.compile(r"(?:^|, )([#A-Za-z][A-Za-z0-9 _\-/()]*): ")


def check_batch_lines(root: Path, observed: dict[str, Any]) -> None:
    reporter = src.tree(root, "metrics_reporter")
    known = src.labels(reporter) | src.labels(src.tree(root, "pool_stats"))
    graph = next(n.value for n in ast.walk(reporter) if isinstance(n, ast.Assign)
                 and ast.unparse(n.targets[0]) == "self._graph_backend_label")  # "{label}: {bool}" per device
    known |= {c.value for c in ast.walk(graph) if isinstance(c, ast.Constant) and isinstance(c.value, str)
              and " graph" in c.value}
    assert set(PRODUCT_STATS_KEYS) <= known, set(PRODUCT_STATS_KEYS) - known
    lines = [m for _, m in _messages(observed["stderr"]) if m.startswith(("Decode batch, ", "Prefill batch, "))]
    assert any(m.startswith("Decode batch, ") and "accept len: " in m for m in lines), "no speculative decode line"
    for pool in ("full", "swa", "mamba"):
        lines.append(sim_logs.format_decode("comma", 3, 900, 0.25, 3.5, 0.6, True, 401.0, 2, pool))
        lines.append(sim_logs.format_prefill("comma", 1, 28, 0, 0.25, 0, 0, 0, False, 1234.5, pool))
    for line in lines:
        emitted = set(_LABEL.findall(line.split(" batch, ", 1)[1]))
        assert emitted <= known, (line, emitted - known)
        parsed = parse_batch_line(f"[2026-01-01 00:00:00] {line}")
        assert parsed is not None and parsed.token_usage is not None and parsed.running_req is not None, line
        if line.startswith("Decode"):
            assert parsed.num_token is not None and parsed.gen_throughput is not None, line


def check_scheduler_prefixes(root: Path, observed: dict[str, Any]) -> None:
    """Every rank prefix SGLang's scheduler can print is read as what it is (``MOE_DP1`` is no DP rank)."""
    configure = src.function(src.tree(root, "scheduler"), "configure_scheduler_process")
    names = [src.const_str(p).strip() for n in ast.walk(configure) if isinstance(n, ast.JoinedStr) for p in n.values
             if isinstance(p, ast.Constant) and re.fullmatch(r" [A-Z_]+", src.const_str(p))]
    assert {"DP", "TP"} <= set(names) and len(names) >= 4, names
    for name in names:
        parsed = parse_batch_line(f"[2026-01-01 00:00:00 {name}1 TP2] Decode batch, #running-req: 1, #token: 5, "
                                  "token usage: 0.01, cuda graph: True, gen throughput (token/s): 9.00, #queue-req: 0")
        assert parsed is not None and parsed.tp_rank == 2, name
        assert parsed.dp_rank == (1 if name == "DP" else None), name
    prefixes = {p for p, m in _messages(observed["stderr"]) if m.startswith("Decode batch")}
    assert prefixes and all(re.fullmatch(r"( (?:" + "|".join(names) + r")\d+)+", p) for p in prefixes), prefixes


def check_meta_info(root: Path, observed: dict[str, Any]) -> None:
    written = src.subscript_keys(src.tree(root, "tokenizer_manager"), "meta_info")
    assert observed["all_meta_keys"] <= written, observed["all_meta_keys"] - written
    read = {"completion_tokens", "prompt_tokens", "cached_tokens", "finish_reason", "spec_verify_ct",
            "spec_accept_length", "spec_accept_rate"}  # what engine.workloads reads
    assert read <= written, read - written
    spec = src.function(src.tree(root, "tokenizer_manager"), "_calculate_spec_decoding_metrics")
    assert {k for k in observed["final_meta"] if k.startswith("spec_")} <= src.subscript_keys(spec, "meta_info")
    assert observed["final_meta"]["spec_verify_ct"] > 0


def _validation_templates(root: Path) -> list[re.Pattern[str]]:
    """The two context-length ``ValueError`` texts of the tokenizer manager (raised, not logged)."""
    validate = src.function(src.tree(root, "tokenizer_manager"), "_validate_one_request")
    raised = [n.exc.args[0] for n in ast.walk(validate)
              if isinstance(n, ast.Raise) and isinstance(n.exc, ast.Call) and n.exc.args]
    names = {t.id: n.value for n in ast.walk(validate) if isinstance(n, ast.Assign) for t in n.targets
             if isinstance(t, ast.Name)}
    exprs = [names.get(a.id, a) if isinstance(a, ast.Name) else a for a in raised]
    return [src.template(e) for e in exprs if "context length" in src.literal_text(e)]


def check_messages(root: Path, observed: dict[str, Any]) -> None:
    templates = _validation_templates(root)
    assert len(templates) == 2, [t.pattern for t in templates]
    too_long = next(t for t in templates if t.fullmatch(observed["too_long"]))
    total = next(t for t in templates if t.fullmatch(observed["total"]))
    # The reserved tokens count as input in both (40 here): what the product's budget now leaves free.
    n_input = int(too_long.fullmatch(observed["too_long"]).group(1))  # type: ignore[union-attr]
    assert n_input >= 9000 + RESERVED
    parts = total.fullmatch(observed["total"]).groups()  # type: ignore[union-attr]
    assert int(parts[1]) == int(parts[2]) + 8180 and int(parts[2]) > RESERVED
    stream = src.function(src.tree(root, "http_server"), "stream_results")
    inner = next(v for n in ast.walk(stream) if isinstance(n, ast.Dict) for k, v in zip(n.keys, n.values)
                 if isinstance(k, ast.Constant) and k.value == "error" and isinstance(v, ast.Dict))
    assert set(observed["stream_error"]) == {"error"} and set(observed["stream_error"]["error"]) == src.dict_keys(inner)
    assert observed["stream_error"]["error"]["message"] == observed["too_long"]
    # The scheduler's abort: message, finish_reason shape and defaults, then the product's record of it.
    abort_text = src.template(src.find_string(src.function(src.tree(root, "managers_utils"), "validate_input_length"),
                                              "allowed length"))
    chunks = observed["abort_chunks"]
    assert chunks[-1] == "[DONE]"
    reason = json.loads(chunks[-2])["meta_info"]["finish_reason"]
    assert abort_text.fullmatch(reason["message"]), (abort_text.pattern, reason["message"])
    limit = int(abort_text.fullmatch(reason["message"]).group(2))  # type: ignore[union-attr]
    assert limit == observed["info"]["max_req_input_len"]
    batch = src.tree(root, "schedule_batch")
    to_json = next(f for f in ast.walk(batch) if isinstance(f, ast.ClassDef) and f.name == "FINISH_ABORT")
    assert set(reason) == src.dict_keys(to_json)
    setter = src.function(batch, "set_finish_with_abort")
    defaults = dict(zip([a.arg for a in setter.args.args][-len(setter.args.defaults):], setter.args.defaults))
    assert reason["err_type"] == defaults["err_type"].value  # type: ignore[attr-defined]
    assert ast.unparse(defaults["status_code"]).endswith("BAD_REQUEST") and reason["status_code"] == 400
    result = GenerateResult(rid="r", started_at=0.0, start=0.0, meta_info={"finish_reason": reason})
    _take_abort(result)
    assert result.error is not None and reason["message"] in result.error and result.http_status == 400


def check_reserved_rule(root: Path, observed: dict[str, Any]) -> None:
    rule = src.function(src.tree(root, "managers_utils"), "compute_num_reserved_tokens")
    returns = [present(n.value) for n in sorted((n for n in ast.walk(rule) if isinstance(n, ast.Return) and n.value),
                                       key=lambda n: n.lineno)]
    assert [ast.unparse(r) for r in returns[:-1]] == ["0"], "every other algorithm reserves nothing"
    final = returns[-1]  # max(topk * steps, max_speculative_num_draft_tokens())
    assert isinstance(final, ast.Call) and ast.unparse(final.func) == "max" and len(final.args) == 2
    product, drafts = final.args
    assert isinstance(product, ast.BinOp) and isinstance(product.op, ast.Mult)
    assert sorted(ast.unparse(side).split(".")[-1] for side in (product.left, product.right)) == [
        "speculative_eagle_topk", "speculative_num_steps"]
    assert ast.unparse(drafts) == "max_speculative_num_draft_tokens()"
    gate = next(n for n in ast.walk(rule) if isinstance(n, ast.If))
    assert ast.unparse(gate.test) == "not algorithm.is_eagle()"
    is_eagle = src.function(src.tree(root, "spec_info"), "is_eagle")
    members = {n.attr for n in ast.walk(is_eagle) if isinstance(n, ast.Attribute)
               and isinstance(n.value, ast.Name) and n.value.id == "SpeculativeAlgorithm"}
    assert members == set(RESERVING_ALGORITHMS) - {"NEXTN"}, members
    validate = src.function(src.tree(root, "tokenizer_manager"), "_validate_one_request")
    assert any(isinstance(n, ast.AugAssign) and ast.unparse(n.value) == "self.num_reserved_tokens"
               for n in ast.walk(validate))
    assert SGLANG.reserved_tokens(observed["info"]) == RESERVED


def check_process_titles(root: Path, observed: dict[str, Any]) -> None:
    fixed = [src.literal_text(a) for key in ("detokenizer", "dp_controller")
             for a in src.call_args(src.tree(root, key), "setproctitle")]
    scheduler = src.call_args(src.tree(root, "scheduler"), "setproctitle")
    assert len(scheduler) == 1 and isinstance(scheduler[0], ast.JoinedStr)
    head = scheduler[0].values[0].value  # type: ignore[attr-defined]
    suffix = ast.unparse(scheduler[0].values[1])
    assert re.search(r"prefix\.replace\(' ', '_'\)", suffix), suffix
    for title in [*fixed, head]:
        assert title.startswith(SGLANG_TITLE_PREFIX), title
    titles = observed["titles"]
    assert fixed[0] in titles, titles
    assert {t for t in titles if t.startswith(head)} == {head + "_TP0", head + "_TP1"}, titles
    ours = [c.value for a in src.call_args(ast.parse((SIM_ROOT / "procs.py").read_text()), "set_process_title")
            for c in ast.walk(a) if isinstance(c, ast.Constant) and isinstance(c.value, str)]
    assert set(fixed) | {head} <= set(ours), ours


def check_sigquit_texts(root: Path, observed: dict[str, Any]) -> None:
    running = src.template(src.find_string(src.function(src.tree(root, "tokenizer_manager"),
                                                        "running_phase_sigquit_handler"), "SIGQUIT"))
    launch = src.template(src.find_string(src.tree(root, "engine"), "Received sigquit"))
    messages = [m for _, m in _messages(observed["stderr"])]
    line = next((m for m in messages if running.fullmatch(m)), None)
    assert line is not None, running.pattern
    assert running.fullmatch(line).groups() == ("None", "None")  # type: ignore[union-attr]
    assert not any(launch.fullmatch(m) for m in messages)  # the warm-up made it the running phase
    sim_server = ast.parse((SIM_ROOT / "server.py").read_text())
    assert any(launch.fullmatch(src.literal_text(n)) for n in src.string_exprs(sim_server))
    signatures = SignatureSet(builtins=SGLANG_SIGNATURES)
    rendered_launch = launch.pattern.replace("\\", "")
    for text in (line, rendered_launch):
        match = signatures.match(f"[2026-01-01 00:00:00] {text}")
        assert match is not None and match.name == "sigquit_from_child", text
    tree_line = src.template(src.find_string(_common(root), "kill_process_tree called"))
    assert any(tree_line.fullmatch(m) for m in messages[messages.index(line):])


def _common(root: Path) -> ast.Module:
    return ast.parse((root / "srt/utils/common.py").read_text(encoding="utf-8"))


def check_kv_warning(root: Path, observed: dict[str, Any]) -> None:
    worker = src.tree(root, "tp_worker")
    warning = src.percent_template(src.find_string(worker, "KV pool holds").value)  # type: ignore[attr-defined]
    found = [m for _, m in _messages(observed["stderr"]) if warning.fullmatch(m)]
    assert found, warning.pattern
    kv, ctx = map(int, warning.fullmatch(found[0]).groups())  # type: ignore[union-attr]
    assert kv < ctx == 8192
    subtract = next(n.value for n in ast.walk(worker) if isinstance(n, ast.Assign)
                    and ast.unparse(n.targets[0]) == "max_req_input_len")
    assert isinstance(subtract, ast.BinOp) and isinstance(subtract.op, ast.Sub)
    assert observed["info"]["max_req_input_len"] == min(ctx - 1, kv - 1) - subtract.right.value  # type: ignore[attr-defined]


def _render(node: ast.AST, values: list[str]) -> str:
    pending = iter(values)
    return "".join(src.const_str(p) if isinstance(p, ast.Constant) else next(pending) for p in src._pieces(node) or ())


def check_crash_lines(root: Path, observed: dict[str, Any]) -> None:
    signatures = SignatureSet(builtins=SGLANG_SIGNATURES)
    watchdog = src.find_string(src.tree(root, "watchdog"), "watchdog timeout")
    hard = _render(watchdog, ["Scheduler", "300", "False"])
    soft = _render(watchdog, ["Scheduler", "300", "True"])
    assert (signatures.match(hard) or None) and signatures.match(hard).name == "watchdog_timeout"  # type: ignore[union-attr]
    assert signatures.match(soft) is None, "a soft watchdog dumps debug information; the server goes on"
    prefill = src.find_string(src.tree(root, "prefill_graph"), "failed")
    match = signatures.match("Exception: " + _render(prefill, ["CUDA out of memory.", ""]))
    assert match is not None and match.name == "cuda_graph_capture_failed"
    died = src.find_string(src.tree(root, "engine"), "died during initialization")
    match = signatures.match("RuntimeError: " + _render(died, ["1", "-9"]))
    assert match is not None and match.name == "scheduler_died_at_init"


def check_algorithms(root: Path, observed: dict[str, Any]) -> None:
    enum = next(n for n in ast.walk(src.tree(root, "spec_info")) if isinstance(n, ast.ClassDef)
                and n.name == "SpeculativeAlgorithm")
    members = {t.id for n in enum.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    assert members | {"NEXTN"} == set(SGLANG_ALGORITHMS), members
    assert "DDTREE" not in members  # a fork's algorithm: the plan says so, the parser takes any string


def check_freeze_gc(root: Path, observed: dict[str, Any]) -> None:
    server = src.tree(root, "http_server")
    handler = src.function(server, "freeze_gc_async")
    routes = [d for d in handler.decorator_list if isinstance(d, ast.Call) and d.args]
    assert any(src.literal_text(d.args[0]) == "/freeze_gc" for d in routes)
    body = next(k.value for n in ast.walk(handler) if isinstance(n, ast.Call) for k in n.keywords
                if k.arg == "content")
    assert observed["freeze_gc"] == src.literal_text(body)
    warmup = src.function(server, "_freeze_gc_after_server_warmup")
    assert any("/freeze_gc" in src.literal_text(n) for n in src.string_exprs(warmup))


def check_accept_length_totals(root: Path, observed: dict[str, Any]) -> None:
    """``avg_spec_accept_length`` exists only once a decode line added its interval to the totals."""
    average = src.function(src.tree(root, "internal_state"), "_average_accept_length")
    assert "metrics_reporter.spec_total_num_forward_ct <= 0" in ast.unparse(average)
    report = src.function(src.tree(root, "metrics_reporter"), "report_decode_stats")
    added = {ast.unparse(n.target) for n in ast.walk(report) if isinstance(n, ast.AugAssign)}
    assert {"self.spec_total_num_forward_ct", "self.spec_total_num_accept_tokens"} <= added
    interval = next(n for n in ast.walk(report) if isinstance(n, ast.Compare) and "decode_log_interval" in ast.unparse(n))
    assert "forward_ct_decode" in ast.unparse(interval)
    sim_engine = ast.parse((SIM_ROOT / "engine.py").read_text())
    log_decode = src.function(sim_engine, "_log_decode")
    assert {ast.unparse(n.target) for n in ast.walk(log_decode) if isinstance(n, ast.AugAssign)} >= {
        "self.spec_total_accept_tokens", "self.spec_total_forward_ct"}
    assert "avg_spec_accept_length" in observed["info_after"]["internal_states"][0]


# ------------------------------------------------------------------- issue 26: the product and the simulator
# Each fact is read from SGLang's source (tests/sglang_facts.py) and compared with what the product's SGLang
# profile states and what the simulator does: a fact checked against the simulator alone is checked against
# ourselves.

_SPEC_EXTRAS = {"UNO": ["--uno-lora-path", "lora", "--speculative-num-draft-tokens", "4"], "NGRAM": []}
"""What each algorithm needs besides its name to resolve (a draft model for the others)."""


def _product_fact(name: str, issue_value: Any) -> Any:
    """The product's constant ``name`` in ``core/engines/sglang.py``; while it has none, issue 26's value, so the
    source is still held to it (TODO: each caller names the constant the product is to expose)."""
    if not hasattr(sglang_profile, name):
        warnings.warn(f"core/engines/sglang.py has no {name}: SGLang's source is compared with issue 26's value "
                      f"{issue_value!r} instead", UserWarning, stacklevel=2)
    return getattr(sglang_profile, name, issue_value)


def _sim_resolved(*flags: str) -> Any:
    """The simulator's resolution of a command line (``sim.args``: SGLang's ``speculative_hook`` replayed)."""
    return sim_args.resolve(sim_args.parse_args(["--model-path", "meta-llama/Llama-3.1-8B", *flags]))


def _algorithm_argv(algorithm: str) -> list[str]:
    extras = _SPEC_EXTRAS.get(algorithm, ["--speculative-draft-model-path", "d"])
    return ["--speculative-algorithm", algorithm, *extras]


def check_models_context(root: Path, observed: dict[str, Any]) -> None:
    """``/v1/models`` ``data[0].max_model_len`` is the context the tokenizer manager enforces, and the product
    sizes prompts from it."""
    path, value = facts.models_context(root)
    enforced = facts.enforced_context(root)  # self.model_config.context_len
    assert value.endswith("tokenizer_manager." + enforced.removeprefix("self.")), (value, enforced)
    assert SGLANG.models_path == path
    served = {"object": "list", "data": [{"id": "m", "object": "model", "max_model_len": 5000}]}

    async def ask() -> int | None:
        client = ServerClient("http://sglang.invalid", SGLANG)
        await client.aclose()
        client._http = httpx.AsyncClient(base_url="http://sglang.invalid", transport=httpx.MockTransport(
            lambda request: httpx.Response(200, json=served if request.url.path == path else {"context_length": None})))
        try:
            return await client.context_length({"context_length": None})
        finally:
            await client.aclose()

    assert asyncio.run(ask()) == 5000  # what SGLang enforces, while /server_info says null
    card = observed["models"]["data"][0]
    assert card["max_model_len"] == 8192 and observed["info"]["context_length"] is None  # PROFILE's context


def check_running_cap_reset(root: Path, observed: dict[str, Any]) -> None:
    """Every speculative algorithm but UNO resets an unset ``--max-running-requests`` to 48 and says so."""
    handlers = facts.algorithm_handlers(root)
    resets = facts.cap_resets(root)
    caps = facts.cap_per_algorithm(root)
    assert set(caps) == set(SGLANG_ALGORITHMS) - {"NONE"}, set(caps) ^ set(SGLANG_ALGORITHMS)
    for reset in resets.values():  # the warning names the value it set
        assert reset.warning.fullmatch(reset.warning.pattern.replace("\\", "")), reset.handler
        assert f" {reset.value} " in reset.warning.pattern.replace("\\", ""), reset.handler
    # The product: one cap, and per algorithm the cap it plans for from the argv alone.
    assert {v for v in caps.values() if v is not None} == {sglang_profile.SPECULATIVE_RESET_CAP}
    for algorithm, value in caps.items():
        argv = _algorithm_argv(algorithm)
        assert SGLANG.planned_running_cap(argv) == value, (algorithm, value)  # what validate warns with
        assert SGLANG.planned_running_cap([*argv, "--max-running-requests", "64"]) == 64, algorithm
    # The simulator: per algorithm, the same value and SGLang's own warning, once; UNO keeps the flag unset.
    for algorithm, value in caps.items():
        resolved = _sim_resolved(*_algorithm_argv(algorithm))
        assert resolved.max_running_requests == value, (algorithm, resolved.max_running_requests, value)
        warned = [w for w in resolved.warnings if "max running requests" in w.lower()]
        if value is None:
            assert not warned, (algorithm, warned)
        else:
            own = resets[str(handlers[algorithm])].warning
            assert len(warned) == 1 and own.fullmatch(warned[0]), (algorithm, warned)
    explicit = _sim_resolved(*_algorithm_argv("EAGLE3"), "--max-running-requests", "64")
    assert explicit.max_running_requests == 64 and not any("reset to" in w for w in explicit.warnings)
    # The running EAGLE3 simulator logged it and reports it where SGLang does.
    reset = resets[str(handlers["EAGLE3"])]
    assert any(reset.warning.fullmatch(m) for _, m in _messages(observed["stderr"]))
    assert SGLANG.running_cap(observed["info"]) == caps["EAGLE3"]


def check_server_info_cap(root: Path, observed: dict[str, Any]) -> None:
    """``/server_info`` carries the cap as the resolved ServerArgs field and per DP rank; the product reads both."""
    keys = facts.running_cap_keys(root)
    assert keys.default is None  # unset unless passed: the speculative reset applies
    info = observed["info"]
    assert info.get(keys.field) == 48 and [s.get(keys.per_dp) for s in info.get(keys.states, ())] == [48]
    assert SGLANG.running_cap({keys.field: 37}) == 37
    assert SGLANG.running_cap({keys.field: None, keys.states: [{keys.per_dp: 37}]}) == 37


def check_adaptive(root: Path, observed: dict[str, Any]) -> None:
    """``--speculative-adaptive``'s tiers of candidate steps per batch size, and the context it reserves."""
    tiers = facts.adaptive_tiers(root)
    assert tiers == sglang_profile.ADAPTIVE_TIERS
    config = facts.adaptive_config(root)
    assert sim_adaptive.DEFAULT_ADAPTIVE_CONFIG == config  # the simulator's EMA slots use every field
    for batch in range(1, 2 * tiers[-1][0] + 2):
        steps = facts.adaptive_steps(root, batch)
        assert SGLANG.adaptive_steps is not None and SGLANG.adaptive_steps(batch) == steps, batch
        assert tuple(sim_adaptive.tier_steps(config, batch)) == steps, batch
    assert SGLANG.adaptive_flag == "--" + facts.adaptive_field(root).replace("_", "-")
    for algorithm in ("NGRAM", "DFLASH"):
        assert algorithm not in facts.adaptive_algorithms(root)
        off = _sim_resolved(*_algorithm_argv(algorithm), "--speculative-adaptive")
        assert off.speculative_adaptive is False and any("speculative_adaptive disabled" in w for w in off.warnings)


def _histogram_offset(root: Path) -> int:
    """Where ``Req.update_spec_correct_drafts_histogram`` counts a verify step that accepted ``n`` drafts:
    ``histogram[n + offset] += 1``; the offset (0 in 0.5.23) read from the one augmented assignment there."""
    method = src.function(src.tree(root, "schedule_batch"), "update_spec_correct_drafts_histogram")
    param = method.args.args[1].arg
    bumps = [n for n in ast.walk(method) if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Subscript)
             and isinstance(n.op, ast.Add)]
    assert len(bumps) == 1, [ast.unparse(b) for b in bumps]
    target = bumps[0].target
    assert isinstance(target, ast.Subscript)
    index = target.slice
    if isinstance(index, ast.Name) and index.id == param:
        return 0
    assert (isinstance(index, ast.BinOp) and isinstance(index.left, ast.Name) and index.left.id == param
            and isinstance(index.right, ast.Constant) and isinstance(index.right.value, int)), ast.unparse(index)
    return index.right.value if isinstance(index.op, ast.Add) else -index.right.value


def check_histogram_index(root: Path, observed: dict[str, Any]) -> None:
    """``spec_correct_drafts_histogram[j]`` counts the verify steps that accepted exactly ``j`` drafts (the bonus
    token excluded): the product's acceptance length and per-position acceptance read it so, and the simulator
    writes it so (its histogram's weighted sum is the request's ``spec_num_correct_drafts``)."""
    offset = _histogram_offset(root)
    for accepted in range(5):
        one_step = [0] * (accepted + offset) + [1]
        assert histogram_accept_length(one_step) == 1 + accepted, (offset, one_step)
    meta = observed["final_meta"]
    histogram = meta["spec_correct_drafts_histogram"]
    assert sum((j - offset) * h for j, h in enumerate(histogram)) == meta["spec_num_correct_drafts"], meta
    assert sum(histogram) == meta["spec_verify_ct"], meta


def _index_value(node: ast.expr, candidates: list[int]) -> int:
    """The value of SGLang's ``candidate_steps[...]`` expression (names, ``len``, ``//``, ``+``, ``-`` only)."""
    if isinstance(node, ast.Subscript):
        assert ast.unparse(node.value) == "candidate_steps", ast.unparse(node)
        return int(candidates[_index_value(node.slice, candidates)])
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_index_value(node.operand, candidates)
    if isinstance(node, ast.Call) and ast.unparse(node) == "len(candidate_steps)":
        return len(candidates)
    assert isinstance(node, ast.BinOp), ast.unparse(node)
    left, right = _index_value(node.left, candidates), _index_value(node.right, candidates)
    if isinstance(node.op, ast.FloorDiv):
        return left // right
    assert isinstance(node.op, (ast.Add, ast.Sub)), ast.unparse(node)
    return left + right if isinstance(node.op, ast.Add) else left - right


def check_adaptive_start_step(root: Path, observed: dict[str, Any]) -> None:
    """Without ``--speculative-num-steps`` an adaptive server starts at the middle of its candidate steps
    (``_init_adaptive_speculative_params``: ``candidate_steps[len(candidate_steps) // 2]``), and any other value
    outside them is refused at start-up: the product's start step, its candidate steps and ``validate``'s rule."""
    init = src.function(src.tree(root, "speculative_hook"), "_init_adaptive_speculative_params")
    chosen = [kw.value for n in ast.walk(init) if isinstance(n, ast.Call) for kw in n.keywords
              if kw.arg == "speculative_num_steps"]
    assert len(chosen) == 1 and isinstance(chosen[0], ast.Subscript), [ast.unparse(c) for c in chosen]
    candidates = tuple(sorted({s for _, steps in facts.adaptive_tiers(root) for s in steps}))
    assert candidates == sglang_profile.ADAPTIVE_CANDIDATE_STEPS, candidates
    start = _index_value(chosen[0], list(candidates))
    assert start == sglang_profile.ADAPTIVE_START_STEPS, (ast.unparse(chosen[0]), start)
    refused = [n for n in ast.walk(init) if isinstance(n, ast.Compare) and isinstance(n.ops[0], ast.NotIn)
               and ast.unparse(n.left) == "cfg.speculative_num_steps" and ast.unparse(n.comparators[0]) == "candidate_steps"]
    assert refused, "SGLang no longer refuses steps outside the candidates"
    on = _sim_resolved(*_algorithm_argv("EAGLE3"), "--speculative-adaptive")
    assert on.values["speculative_num_steps"] == start, on.values["speculative_num_steps"]


def check_adaptive_reservation(root: Path, observed: dict[str, Any]) -> None:
    """An adaptive server sizes drafts for its largest candidate step: it reserves 8 context tokens, not the 4 its
    resolved ``speculative_num_draft_tokens`` says."""
    reserved = facts.adaptive_reserved_tokens(root)
    on = _sim_resolved(*_algorithm_argv("EAGLE3"), "--speculative-adaptive")
    assert on.speculative_adaptive and on.max_speculative_num_draft_tokens == facts.adaptive_draft_width(root)
    served = {k: on.values[k] for k in ("speculative_algorithm", "speculative_adaptive", "speculative_eagle_topk",
                                        "speculative_num_steps", "speculative_num_draft_tokens")}
    assert SGLANG.reserved_tokens(served) == reserved, served
    assert SGLANG.planned_reserved(["--speculative-algorithm", "EAGLE3", "--speculative-adaptive"]) == reserved


def check_ngram_and_dspark_defaults(root: Path, observed: dict[str, Any]) -> None:
    """NGRAM: 12 draft tokens, topk = the max BFS breadth, steps = drafts // topk; DSPARK: drafts = gamma + 1."""
    ngram = facts.ngram_defaults(root)
    resolved = _sim_resolved(*_algorithm_argv("NGRAM"))
    assert {k: resolved.values[k] for k in ngram} == ngram
    breadth = "--" + facts.ngram_topk_field(root).replace("_", "-")
    narrow = _sim_resolved(*_algorithm_argv("NGRAM"), breadth, "4")
    assert (narrow.speculative_eagle_topk, narrow.speculative_num_steps) == (
        4, ngram["speculative_num_draft_tokens"] // 4)
    # TODO(issue 26): the product's constant NGRAM_DEFAULT_DRAFT_TOKENS.
    assert _product_fact("NGRAM_DEFAULT_DRAFT_TOKENS", 12) == ngram["speculative_num_draft_tokens"]
    gamma, extra = facts.dspark_rule(root)
    assert _sim_resolved(*_algorithm_argv("DSPARK")).speculative_num_draft_tokens == gamma + extra
    five = _sim_resolved(*_algorithm_argv("DSPARK"), "--speculative-dspark-block-size", "5")
    assert five.speculative_num_draft_tokens == 5 + extra
    assert "--speculative-dspark-block-size" in SGLANG.budget_flags


def check_retraction(root: Path, observed: dict[str, Any]) -> None:
    """``meta_info.num_retractions`` reaches the record; the simulator's KV-full warning is the scheduler's, and the
    product reads it from the log."""
    from specbench_tui.core.logparse import RETRACT

    key = facts.retraction_key(root)
    assert key in observed["final_meta"]
    meta = {key: 2, "completion_tokens": 5, "prompt_tokens": 3, "finish_reason": {"type": "length"}}
    result = GenerateResult(rid="r", started_at=0.0, start=0.0, end=1.0, meta_info=meta)
    result.chunks = [Chunk(0.1, 1), Chunk(0.9, 5)]
    record = measurement_from(Labels("c", "cfg", "w"), "q", 0, [result])
    assert record.num_retractions == 2 and record.retracted
    pattern, _ = facts.retract_line(root)
    line = _render_pattern(pattern, ["3", "1234", "0.7000", "0.8500"])
    parsed = SGLANG.parse_stats_line(f"[2026-01-01 00:00:00 TP0] {line}")
    assert parsed is not None and parsed.kind == RETRACT and parsed.num_token == 3, (line, parsed)
    assert pattern.fullmatch(sim_kvpool.retract_message(3, 1234, 0.7, 0.85))  # the simulator's warning


def _render_pattern(pattern: re.Pattern[str], values: list[str]) -> str:
    """A template pattern (escaped literals, ``(.+?)`` groups) with its groups filled in order."""
    pending = iter(values)
    text = re.sub(re.escape("(.+?)"), lambda _: next(pending), pattern.pattern)
    return re.sub(r"\\(.)", r"\1", text)


def check_flush_cache(root: Path, observed: dict[str, Any]) -> None:
    """``/flush_cache`` refuses (400, its text) while a request runs and flushes once idle."""
    flush = facts.flush_endpoint(root)
    assert SGLANG.flush_cache_path == flush.path and "POST" in flush.methods
    assert observed["flush_busy"] == (flush.refused_status, flush.refused), observed["flush_busy"]
    assert observed["flush_idle"] == (200, flush.done), observed["flush_idle"]
    # The product retries SGLang's refusal until SGLang's answer of a flush that ran.
    answers = [(flush.refused_status, flush.refused)] * 2 + [(200, flush.done)]
    asked: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(f"{request.method} {request.url.path}")
        status, text = answers[min(len(asked), len(answers)) - 1]
        return httpx.Response(status, text=text)

    async def flush_through_the_product() -> bool:
        client = ServerClient("http://sglang.invalid", SGLANG)
        await client.aclose()
        client._http = httpx.AsyncClient(base_url="http://sglang.invalid", transport=httpx.MockTransport(answer))
        try:
            return await client.flush_cache(attempts=5, pause_s=0.0)
        finally:
            await client.aclose()

    assert asyncio.run(flush_through_the_product()) and asked == [f"POST {flush.path}"] * 3, asked
    assert {a.split()[0] for a in asked} <= flush.methods



def check_graph_ceiling_product(root: Path, observed: dict[str, Any]) -> None:
    """The product reads the decode graph ceiling where SGLang serves it: the captured batch sizes of each scheduler
    state, or ``cuda_graph_config.decode.max_bs``; ``cuda_graph_max_bs_decode`` is null unless the flag was passed."""
    where = facts.graph_ceiling_keys(root)
    field, phase, key = where.config
    captured = {"cuda_graph_max_bs_decode": None, "internal_states": [{where.captured: [1, 2, 4, 8, 16, 24, 40]}]}
    assert SGLANG.graph_ceiling(captured) == 40, captured
    resolved = {"cuda_graph_max_bs_decode": None, field: {phase: {key: 160, "bs": [1, 2, 4, 8, 16, 32, 160]}}}
    assert SGLANG.graph_ceiling(resolved) == 160, resolved


def check_graph_ceiling_simulator(root: Path, observed: dict[str, Any]) -> None:
    """The simulator serves the ceiling as SGLang does: the flag's own field null (not passed), the batch sizes it
    logged capturing in each scheduler state, the resolved ceiling in ``cuda_graph_config``'s decode phase."""
    where = facts.graph_ceiling_keys(root)
    field, phase, key = where.config
    info = observed["info"]
    assert info.get("cuda_graph_max_bs_decode") is None, info.get("cuda_graph_max_bs_decode")
    logged = next(m for _, m in _messages(observed["stderr"]) if re.match(r"Capture target \w+ CUDA graph end\. bs=", m))
    captured = json.loads(logged.split(" bs=", 1)[1].split("], ", 1)[0] + "]")
    assert [s.get(where.captured) for s in info["internal_states"]] == [captured]
    served = (info.get(field) or {}).get(phase) or {}
    assert isinstance(served.get(key), int) and served[key] > 0, info.get(field)


def check_server_info_keys(root: Path, observed: dict[str, Any]) -> None:
    """Every key of the simulator's ``/server_info`` (and of its scheduler states) is one SGLang's can have; the
    fork's flags are the only others."""
    top, states = facts.server_info_keys(root)
    forks = {flag.replace("-", "_") for flag in SGLANG.flags().known_fork_flags}
    info = observed["info"]
    assert set(info) - top - forks == set(), sorted(set(info) - top - forks)
    for state in info["internal_states"]:
        assert set(state) - states == set(), sorted(set(state) - states)


def check_simulated_acceptance_env(root: Path, observed: dict[str, Any]) -> None:
    """The variable that fakes acceptance on a real server is the one ``validate`` warns about and the simulator
    honours, off by default."""
    name, default = facts.simulated_acceptance_env(root)
    assert default <= 0  # off unless set
    assert measure_notes.SIMULATED_ACCEPTANCE_ENV == name
    engine = ast.parse((SIM_ROOT / "engine.py").read_text(encoding="utf-8"))
    read = [src.literal_text(a) for a in src.call_args(engine, "_env_float")]
    assert name in read, read


def check_adaptive_lines(root: Path, observed: dict[str, Any]) -> None:
    """The lines an adaptive server logs its steps with: the product reads the steps from them and the simulator
    writes them as SGLang does."""
    from specbench_tui.core.logparse import STEPS

    switch = facts.adaptive_line(root, "switch")
    line = _render(switch, ["3", "5", "4", "6"])  # steps 3 -> 5, draft tokens 4 -> 6
    parsed = SGLANG.parse_stats_line(f"[2026-01-01 00:00:00 TP0] {line}")
    assert parsed is not None and parsed.kind == STEPS and parsed.num_token == 5, (line, parsed)
    initialized = _render(facts.adaptive_line(root, "initialized"), ["3", "[0, 1, 3, 5, 7]"])
    parsed = SGLANG.parse_stats_line(f"[2026-01-01 00:00:00 TP0] {initialized}")
    assert parsed is not None and parsed.kind == STEPS and parsed.num_token == 3, (initialized, parsed)
    ours = list(src.string_exprs(ast.parse((SIM_ROOT / "adaptive.py").read_text(encoding="utf-8"))))
    for which in facts.ADAPTIVE_LINES:
        fragment = facts.ADAPTIVE_LINES[which][2]
        theirs = src.template(facts.adaptive_line(root, which)).pattern
        written = [src.template(n).pattern for n in ours if src.literal_text(n).startswith(fragment)]
        assert written == [theirs], (which, written, theirs)


def check_flush_clears_caches(root: Path, observed: dict[str, Any]) -> None:
    """A flush empties the prefix cache and NGRAM's corpus (what ``cache = "cold"`` relies on); the simulator's
    flush does both, only when idle."""
    assert facts.flush_clears(root) == ("prefix cache", "kv pool", "draft pool", "ngram corpus")
    flush = src.function(ast.parse((SIM_ROOT / "engine.py").read_text(encoding="utf-8")), "flush_cache")
    first = flush.body[1] if isinstance(flush.body[0], ast.Expr) else flush.body[0]  # after the docstring
    assert isinstance(first, ast.If) and "self.in_flight" in ast.unparse(first.test) \
        and isinstance(first.body[-1], ast.Return) and ast.unparse(first.body[-1]) == "return False", ast.unparse(first)
    calls = {ast.unparse(n.func) for n in ast.walk(flush) if isinstance(n, ast.Call)}
    assert {"self.prefix.reset", "self.corpus.reset"} <= calls, calls

CHECKS = [check_ready_line, check_batch_lines, check_scheduler_prefixes, check_meta_info, check_messages,
          check_reserved_rule, check_process_titles, check_sigquit_texts, check_kv_warning, check_crash_lines,
          check_algorithms, check_freeze_gc, check_accept_length_totals, check_models_context,
          check_running_cap_reset, check_server_info_cap, check_adaptive, check_adaptive_reservation,
          check_histogram_index, check_adaptive_start_step,
          check_ngram_and_dspark_defaults, check_retraction, check_flush_cache, check_graph_ceiling_product,
          check_graph_ceiling_simulator, check_server_info_keys, check_simulated_acceptance_env,
          check_adaptive_lines, check_flush_clears_caches]

KNOWN_GAPS: dict[Any, str] = {
}
"""Checks the product does not pass yet, each with what is missing (strict: a fix makes the mark fail)."""


def _params(rows: list[Any]) -> list[Any]:
    """Rows (a check, or a tuple starting with one) as parameters, a known gap's marked as an expected failure."""
    out = []
    for row in rows:
        check = row[0] if isinstance(row, tuple) else row
        values = row if isinstance(row, tuple) else (row,)
        marks = [pytest.mark.xfail(reason=KNOWN_GAPS[check], strict=True)] if check in KNOWN_GAPS else []
        out.append(pytest.param(*values, marks=marks))
    return out


@pytest.mark.parametrize("check", _params(CHECKS), ids=lambda c: c.__name__)
def test_simulator_and_parsers_match_sglangs_source(check: Any, root: Path, observed: dict[str, Any]) -> None:
    check(root, observed)


# ------------------------------------------------------------------------------ the checks can fail


def _modified_copy(root: Path, tmp: Path, key: str, old: str, new: str) -> Path:
    """The wheel's files the checks read, copied under ``tmp`` with ``old`` replaced by ``new`` in one of them."""
    copy = tmp / "sglang"
    for rel in src.FILES.values():
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / rel, copy / rel)
    path = copy / src.FILES[key]
    text = path.read_text(encoding="utf-8")
    assert text.count(old) >= 1, f"{old!r} is not in {src.FILES[key]}"
    path.write_text(text.replace(old, new), encoding="utf-8")
    time.sleep(0.01)
    return copy


MODIFICATIONS = [
    # (check, file, a fragment of SGLang's code as it is, the same fragment changed)
    (check_messages, "managers_utils", "exceeds \"\n                f\"the maximum allowed",
     "is above \"\n                f\"the maximum allowed"),
    (check_process_titles, "scheduler", "replace(' ', '_')", "replace(' ', '-')"),
    (check_reserved_rule, "managers_utils", "spec.speculative_eagle_topk * spec.speculative_num_steps",
     "spec.speculative_eagle_topk * spec.speculative_num_steps + 1"),
    (check_batch_lines, "pool_stats", "swa token usage:", "swa usage:"),
    (check_kv_warning, "tp_worker", "max_req_len - 5", "max_req_len - 6"),
    (check_sigquit_texts, "tokenizer_manager", 'f"SIGQUIT received. {signum=}', 'f"SIGQUIT caught. {signum=}'),
    # issue 26: each fact the product and the simulator rely on
    (check_models_context, "http_server", "max_model_len=_global_state.tokenizer_manager.model_config.context_len",
     "max_model_len=None"),
    *[(check_running_cap_reset, "speculative_hook", f'"{handler}",\n            max_running_requests=48',
       f'"{handler}",\n            max_running_requests=32')
      for handler in ("_handle_eagle_family", "_handle_ngram", "_handle_dflash", "_handle_dspark",
                      "_handle_frozen_kv_mtp")],
    (check_running_cap_reset, "speculative_hook",
     '"_handle_ngram",\n            max_running_requests=48,\n        )\n        logger.warning(\n'
     '            "Max running requests is reset to 48',
     '"_handle_ngram",\n            max_running_requests=48,\n        )\n        logger.warning(\n'
     '            "Max running requests is set to 48'),
    (check_running_cap_reset, "speculative_hook",  # UNO gains the reset
     "def _handle_uno(server_args: ServerArgs) -> None:\n    cfg = resolving_view(server_args)\n",
     "def _handle_uno(server_args: ServerArgs) -> None:\n    cfg = resolving_view(server_args)\n"
     "    if cfg.max_running_requests is None:\n"
     "        declare_resolution(server_args, '_handle_uno', max_running_requests=48)\n"
     "        logger.warning('Max running requests is reset to 48 for speculative decoding.')\n"),
    (check_running_cap_reset, "spec_info", "elif self.is_uno():", "elif self.is_uno() or self.is_ngram():"),
    (check_server_info_cap, "internal_state", '"effective_max_running_requests_per_dp"',
     '"max_running_requests_per_dp"'),
    (check_server_info_cap, "schedule_fields", "max_running_requests: A[", "max_running_reqs: A["),
    (check_adaptive, "adaptive", '"candidate_steps": [0, 1, 3],', '"candidate_steps": [0, 1, 3, 5],'),
    (check_adaptive, "adaptive", '"32": {', '"24": {'),
    (check_adaptive, "adaptive", "bisect.bisect_right(self._bs_list, target) - 1",
     "bisect.bisect_left(self._bs_list, target)"),
    (check_adaptive_reservation, "spec_info", "return max(candidate_steps) + 1", "return max(candidate_steps) + 2"),
    (check_adaptive_reservation, "speculative_hook",
     '"_init_adaptive_speculative_params",\n            speculative_eagle_topk=1,',
     '"_init_adaptive_speculative_params",\n            speculative_eagle_topk=2,'),
    (check_adaptive, "adaptive", 'not in ("EAGLE", "EAGLE3")', 'not in ("EAGLE", "EAGLE3", "NGRAM")'),
    (check_ngram_and_dspark_defaults, "speculative_hook", "speculative_num_draft_tokens=12,",
     "speculative_num_draft_tokens=16,"),
    (check_ngram_and_dspark_defaults, "speculative_hook",
     "speculative_eagle_topk=cfg.speculative_ngram_max_bfs_breadth", "speculative_eagle_topk=1"),
    (check_ngram_and_dspark_defaults, "spec_fields",
     'maximum breadth for BFS (Breadth-First Search) in ngram speculative decoding.",\n    ] = 10',
     'maximum breadth for BFS (Breadth-First Search) in ngram speculative decoding.",\n    ] = 8'),
    (check_ngram_and_dspark_defaults, "speculative_hook", "verify_window = int(gamma) + 1",
     "verify_window = int(gamma) + 2"),
    (check_ngram_and_dspark_defaults, "dspark_config", "DEFAULT_DSPARK_GAMMA = 7", "DEFAULT_DSPARK_GAMMA = 6"),
    (check_retraction, "tokenizer_manager", '"num_retractions": recv_obj.retraction_counts[i]',
     '"retractions": recv_obj.retraction_counts[i]'),
    (check_retraction, "scheduler", '"KV cache pool is full. Retract requests. "',
     '"KV cache pool is full. Retracting requests. "'),
    (check_flush_cache, "http_server", '@app.api_route("/flush_cache"', '@app.api_route("/flush"'),
    (check_flush_cache, "http_server", "else HTTPStatus.BAD_REQUEST", "else HTTPStatus.SERVICE_UNAVAILABLE"),
    (check_flush_cache, "http_server", 'content = ret.message or "Flush cache failed.\\n"',
     'content = ret.message or "Cache not flushed.\\n"'),
    (check_flush_cache, "scheduler", "if self.is_fully_idle(ignore_waiting=self._engine_paused):", "if True:"),
    (check_simulated_acceptance_env, "spec_utils", "SIMULATE_ACC_LEN = envs.SGLANG_SIMULATE_ACC_LEN.get()",
     "SIMULATE_ACC_LEN = envs.SGLANG_SIMULATED_ACCEPT_LEN.get()"),
    (check_simulated_acceptance_env, "environ", "SGLANG_SIMULATE_ACC_LEN = EnvFloat(-1)",
     "SGLANG_SIMULATE_ACC_LEN = EnvFloat(2.5)"),
    (check_adaptive_lines, "eagle_worker_v2", '"Switch adaptive runtime state: "', '"Switched adaptive state: "'),
    (check_adaptive_lines, "eagle_worker_v2", 'f"steps {self.speculative_num_steps} -> {state.speculative_num_steps}, "',
     'f"draft_tokens {self.speculative_num_draft_tokens} -> {state.speculative_num_draft_tokens}, "'),
    (check_adaptive_lines, "adaptive", 'f"AdaptiveSpeculativeParams initialized: "',
     'f"AdaptiveSpeculativeParams ready: "'),
    (check_adaptive_lines, "adaptive", 'f"(ema_accept_len={self.ema_accept_len:.2f})"',
     'f"(ema={self.ema_accept_len:.2f})"'),
    (check_flush_clears_caches, "ngram_worker", "        self.ngram_corpus.reset()\n", "        pass\n"),
    (check_flush_clears_caches, "scheduler", "            self.tree_cache.reset()\n", ""),
    (check_graph_ceiling_simulator, "internal_state", 'state["decode_cuda_graph_bs"]', 'state["captured_bs"]'),
    (check_graph_ceiling_simulator, "cuda_graph_config", "    max_bs: Optional[int] = None\n",
     "    max_batch: Optional[int] = None\n"),
    (check_server_info_keys, "schedule_fields", "max_queued_requests: A[", "max_queue_requests: A["),
    (check_server_info_keys, "internal_state", 'state["last_gen_throughput"]', 'state["gen_throughput"]'),
    (check_graph_ceiling_product, "cuda_graph_hook", '_set(Phase.DECODE, "max_bs", cfg.cuda_graph_max_bs_decode)',
     'declare_resolution(server_args, "x", cuda_graph_max_bs_decode=cfg.cuda_graph_max_bs_decode)'),
    (check_graph_ceiling_product, "cuda_graph_config", "    max_bs: Optional[int] = None\n",
     "    max_batch: Optional[int] = None\n"),
    # issue 50: the histogram's index and the adaptive start step
    (check_histogram_index, "schedule_batch", "self.spec_correct_drafts_histogram[num_correct_drafts] += 1",
     "self.spec_correct_drafts_histogram[num_correct_drafts + 1] += 1"),
    (check_adaptive_start_step, "speculative_hook", "speculative_num_steps=candidate_steps[len(candidate_steps) // 2],",
     "speculative_num_steps=candidate_steps[-1],"),
]


@pytest.mark.parametrize(("check", "key", "old", "new"), _params(MODIFICATIONS),
                         ids=lambda v: getattr(v, "__name__", None))
def test_a_changed_source_string_fails_the_check(check: Any, key: str, old: str, new: str, root: Path,
                                                 observed: dict[str, Any], tmp_path: Path) -> None:
    check(root, observed)  # the original passes...
    text = (root / src.FILES[key]).read_text(encoding="utf-8")
    if old not in text:  # the fragment is written across lines differently: use its first line
        pytest.fail(f"the modification's fragment {old!r} no longer occurs in {src.FILES[key]}; update it")
    copy = _modified_copy(root, tmp_path, key, old, new)
    with pytest.raises(AssertionError):
        check(copy, observed)  # ...and the same check on the changed copy fails


def _replaced_profile(**changes: Any) -> Any:
    return dataclasses.replace(SGLANG, **changes)


OUR_MODIFICATIONS = [
    # (check, module, attribute, a wrong value): the product's or the simulator's statement changed instead
    (check_models_context, "profile", "models_path", "/v1/model"),
    (check_server_info_cap, "profile", "running_cap", lambda info: info.get("max_running_requests")),
    (check_running_cap_reset, "spec_hook", "RESET_48", "Max running requests is reset to 48."),
    (check_running_cap_reset, "sglang_profile", "SPECULATIVE_RESET_CAP", 32),
    (check_running_cap_reset, "profile", "planned_running_cap", lambda argv: 48),
    (check_simulated_acceptance_env, "measure_notes", "SIMULATED_ACCEPTANCE_ENV", "SGLANG_SIMULATE_ACCEPT"),
    (check_adaptive, "sglang_profile", "ADAPTIVE_TIERS", ((1, (1, 3, 5, 7)), (8, (0, 1, 3)), (24, (0, 1)),
                                                          (64, (0,)))),
    (check_adaptive, "sim_adaptive", "DEFAULT_ADAPTIVE_CONFIG", {"1": {"candidate_steps": [1, 3, 5, 7]}}),
    (check_ngram_and_dspark_defaults, "profile", "budget_flags", ("--speculative-num-draft-tokens",)),
    (check_retraction, "profile", "parse_stats_line", parse_batch_line),
    (check_adaptive_lines, "profile", "parse_stats_line", parse_batch_line),
    (check_retraction, "sim_kvpool", "retract_message", lambda *a: "KV cache pool is full. Retracting."),
    (check_flush_cache, "profile", "flush_cache_path", "/flush"),
    (check_adaptive_reservation, "profile", "reserved_tokens", lambda info: 4),
    (check_adaptive_reservation, "profile", "planned_reserved", lambda argv: 4),
    (check_graph_ceiling_product, "profile", "graph_ceiling", lambda info: info.get("cuda_graph_max_bs_decode")),
]


@pytest.mark.parametrize(("check", "where", "name", "value"), _params(OUR_MODIFICATIONS),
                         ids=lambda v: getattr(v, "__name__", None) if callable(v) else None)
def test_a_changed_product_or_simulator_fails_the_check(check: Any, where: str, name: str, value: Any, root: Path,
                                                        observed: dict[str, Any],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    check(root, observed)  # as they are, they agree with SGLang...
    if where == "profile":
        monkeypatch.setattr(sys.modules[__name__], "SGLANG", _replaced_profile(**{name: value}))
    else:
        monkeypatch.setattr({"spec_hook": sim_spec_hook, "sglang_profile": sglang_profile, "measure_notes": measure_notes,
                             "sim_adaptive": sim_adaptive, "sim_kvpool": sim_kvpool}[where], name, value)
    with pytest.raises(AssertionError):
        check(root, observed)  # ...and a product or simulator that says otherwise fails
