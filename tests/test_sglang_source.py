"""The simulator and the parsers against SGLang 0.5.23's own source: strings extracted from the installed wheel.

The wheel lives in the parser environment (``.venv-sglang``, made by ``bash tools/setup_sglang_parser_env.sh``;
CI requires it). Its files are parsed with ``ast`` (``tests/sglang_source.py``), never imported, and nothing of
their text is copied here: each check takes the template SGLang's code has (log formats, ``meta_info`` keys, the
400 and abort messages, the reserved-token rule, process titles, SIGQUIT texts, the KV-pool warning, crash
lines) and checks that a running simulator emits exactly that and that the product reads it. The last tests
feed a modified copy of a source file and show the checks fail, so a change in SGLang cannot pass silently.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import sglang_source as src

from specbench_tui.core.engines.sglang import RESERVING_ALGORITHMS
from specbench_tui.core.engines.sglang import SGLANG_ALGORITHMS
from specbench_tui.core.engines.sglang import parse_batch_line
from specbench_tui.core.engines.sglang import SGLANG_SIGNATURES
from specbench_tui.core.signatures import SignatureSet
from specbench_tui.engine.client import GenerateResult, _take_abort
from specbench_tui.engine.leftovers import SGLANG_TITLE_PREFIX
from specbench_tui.core.engines.sglang import SGLANG
from specbench_tui.sim import logs as sim_logs
from specbench_tui.sim.testing import SimProcess, group_pids

pytestmark = pytest.mark.sglang

SETUP = "bash tools/setup_sglang_parser_env.sh"
SIM_ROOT = Path(__file__).resolve().parent.parent / "specbench_tui" / "sim"
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
    names = [p.value.strip() for n in ast.walk(configure) if isinstance(n, ast.JoinedStr) for p in n.values
             if isinstance(p, ast.Constant) and re.fullmatch(r" [A-Z_]+", p.value)]
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
    returns = [n.value for n in sorted((n for n in ast.walk(rule) if isinstance(n, ast.Return) and n.value),
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
    line = next(m for m in messages if running.fullmatch(m))
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
    return "".join(p.value if isinstance(p, ast.Constant) else next(pending) for p in src._pieces(node) or ())


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


CHECKS = [check_ready_line, check_batch_lines, check_scheduler_prefixes, check_meta_info, check_messages,
          check_reserved_rule, check_process_titles, check_sigquit_texts, check_kv_warning, check_crash_lines,
          check_algorithms, check_freeze_gc, check_accept_length_totals]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_simulator_and_parsers_match_sglangs_source(check: Any, root: Path, observed: dict[str, Any]) -> None:
    check(root, observed)


# ------------------------------------------------------------------------------ the checks can fail


def _modified_copy(root: Path, tmp: Path, key: str, old: str, new: str) -> Path:
    """The wheel's files the checks read, copied under ``tmp`` with ``old`` replaced by ``new`` in one of them."""
    copy = tmp / "sglang"
    for rel in [*src.FILES.values(), "srt/utils/common.py"]:
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
]


@pytest.mark.parametrize(("check", "key", "old", "new"), MODIFICATIONS, ids=lambda v: getattr(v, "__name__", None))
def test_a_changed_source_string_fails_the_check(check: Any, key: str, old: str, new: str, root: Path,
                                                 observed: dict[str, Any], tmp_path: Path) -> None:
    check(root, observed)  # the original passes...
    text = (root / src.FILES[key]).read_text(encoding="utf-8")
    if old not in text:  # the fragment is written across lines differently: use its first line
        pytest.fail(f"the modification's fragment {old!r} no longer occurs in {src.FILES[key]}; update it")
    copy = _modified_copy(root, tmp_path, key, old, new)
    with pytest.raises(AssertionError):
        check(copy, observed)  # ...and the same check on the changed copy fails
