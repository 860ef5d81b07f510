"""What SGLang 0.5.23's real server showed that the product had assumed away (issue 50), each held by a test:
no CUDA graph captured, adaptive speculation switched off by the server, the data-parallel flush and cap, and the
adaptive steps SGLang refuses at start-up.

``tests/data/sglang_real/server_info.json`` is the real server's ``/server_info`` on CPU (tests/real_servers/test_sglang_real.py
checks a live one against the facts read here).
"""

from __future__ import annotations

import asyncio
import json

import pytest
from engine_helpers import of_type, plan_for, run_plan, write_sweep

from repo_paths import REPO, TESTS
from specbench_tui.core.engines.sglang import (
    ADAPTIVE_CANDIDATE_STEPS,
    SGLANG,
    flush_caveat,
    graph_ceiling,
    graphs_captured,
    planned_running_cap,
    running_cap,
    served_adaptive,
    user_errors,
)
from specbench_tui.core.events import Notice, ServerReady, WorkloadFinished

DATA = TESTS / "data" / "sglang_real"


def _real_info() -> dict:
    info: dict = json.loads((DATA / "server_info.json").read_text())
    return info


def test_no_cuda_graph_captured_is_said_as_such():
    """The real CPU server resolves ``cuda_graph_config.decode.max_bs`` 32 but captured nothing
    (``decode_cuda_graph_bs: []``): no ceiling of 32, and the profile says none was captured."""
    info = _real_info()
    assert info["cuda_graph_config"]["decode"]["max_bs"] == 32
    assert info["internal_states"][0]["decode_cuda_graph_bs"] == []
    assert graph_ceiling(info) is None
    assert graphs_captured(info) is False
    captured = {**info, "internal_states": [{**info["internal_states"][0], "decode_cuda_graph_bs": [1, 2, 4, 8]}]}
    assert graph_ceiling(captured) == 8 and graphs_captured(captured) is True
    assert graphs_captured({}) is None and graph_ceiling({"cuda_graph_config": {"decode": {"max_bs": 16}}}) == 16


def test_real_server_info_facts():
    """Context from /v1/models (``/server_info`` says null), the cap from the scheduler state, adaptive off."""
    info = _real_info()
    assert info["context_length"] is None and info["max_running_requests"] is None
    assert running_cap(info) == 2500
    assert served_adaptive(info) is False
    assert json.loads((DATA / "models.json").read_text())["data"][0]["max_model_len"] == 4096


def test_dp_flush_is_rank_zeros_answer():
    assert flush_caveat(["--dp-size", "2"]) is not None and "rank 0" in (flush_caveat(["--dp-size", "2"]) or "")
    assert flush_caveat(["--data-parallel-size", "4"]) is not None
    assert flush_caveat([]) is None and flush_caveat(["--dp-size", "1"]) is None
    assert SGLANG.flush_caveat(["--dp-size", "2"]) == flush_caveat(["--dp-size", "2"])


def test_plain_dp_caps_at_48_per_rank():
    ngram = ["--speculative-algorithm", "NGRAM"]
    assert planned_running_cap(ngram) == 48
    assert planned_running_cap([*ngram, "--dp-size", "4"]) == 48 * 4
    assert planned_running_cap([*ngram, "--dp-size", "4", "--enable-dp-attention"]) == 48
    assert planned_running_cap(["--max-running-requests", "10", "--dp-size", "2"]) == 20
    assert planned_running_cap([]) is None


@pytest.mark.parametrize("steps", [2, 4, 6, 8])
def test_adaptive_steps_outside_the_candidates_are_a_user_error(steps):
    args = {"speculative-algorithm": "EAGLE3", "speculative-adaptive": True, "speculative-num-steps": steps}
    errors = user_errors(args)
    assert [flag for flag, _, _ in errors] == ["speculative-num-steps"], errors
    _, message, fix = errors[0]
    assert "0, 1, 3, 5, 7" in message and "0, 1, 3, 5, 7" in fix


@pytest.mark.parametrize("args", [
    {"speculative-algorithm": "EAGLE3", "speculative-adaptive": True, "speculative-num-steps": 3},
    {"speculative-algorithm": "EAGLE3", "speculative-adaptive": True},
    {"speculative-algorithm": "EAGLE3", "speculative-num-steps": 4},  # not adaptive
    {"speculative-algorithm": "NGRAM", "speculative-adaptive": True, "speculative-num-steps": 4},  # switched off
    {"speculative-algorithm": "EAGLE", "speculative-adaptive": True, "speculative-num-steps": 4,
     "speculative-eagle-topk": 2},  # switched off (topk > 1)
])
def test_adaptive_steps_sglang_accepts_pass(args):
    assert user_errors(args) == []
    assert ADAPTIVE_CANDIDATE_STEPS == (0, 1, 3, 5, 7)


def test_validate_names_file_line_and_fix_for_adaptive_steps(tmp_path):
    """``specbench validate`` on a sweep with adaptive steps SGLang refuses: the file, the line and the fix."""
    import subprocess
    import sys
    sweep = tmp_path / "s.toml"
    sweep.write_text('[sweep]\nname = "x"\ngpus = 1\n[engine]\nlauncher = "simulator"\n[server.args]\n'
                     'model-path = "Qwen/Qwen3-8B"\n[[configs]]\nname = "e"\n'
                     'args = { speculative-algorithm = "EAGLE3", speculative-draft-model-path = "d/e", '
                     'speculative-adaptive = true, speculative-num-steps = 4, speculative-eagle-topk = 1, '
                     'speculative-num-draft-tokens = 5 }\n[[workloads]]\nkind = "code"\n')
    done = subprocess.run([sys.executable, "-m", "specbench_tui", "validate", str(sweep)], capture_output=True,
                          text=True, timeout=120, cwd=REPO, check=False)
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert f"{sweep}:10" in out or "s.toml:10" in out, out
    assert "speculative-num-steps 4 with --speculative-adaptive" in out and "0, 1, 3, 5, 7" in out, out


_ADAPTIVE_OFF = """[sweep]
name = "adaptive-off"
gpus = 2
repeats = 1
warmup = 0
[engine]
launcher = "simulator"
startup_timeout_s = 60
[server.args]
model-path = "Qwen/Qwen3-8B"
context-length = 4096
decode-log-interval = 2
[[configs]]
name = "eagle-topk2-adaptive"
args = { speculative-algorithm = "EAGLE3", speculative-draft-model-path = "d/e", speculative-num-steps = 3, speculative-eagle-topk = 2, speculative-num-draft-tokens = 4, speculative-adaptive = true }
[[configs]]
name = "ar-dp2"
args = { dp-size = 2 }
[[workloads]]
kind = "code"
items = ["fibonacci"]
max_new_tokens = 16
"""


def test_adaptive_switched_off_by_the_server_reports_no_step_tiers(tmp_path):
    """``--speculative-adaptive`` with topk 2: SGLang (and the simulator, which follows it) switch adaptive off
    and ``/server_info`` says ``speculative_adaptive: false``. The product believes the server, says so, and
    reports no step tiers for its windows. Beside it, a ``--dp-size 2`` configuration measured cold is told that
    its flush's 200 is rank 0's answer only."""
    plan = plan_for(write_sweep(tmp_path / "sweep", _ADAPTIVE_OFF))
    outcome, events, _, _ = asyncio.run(run_plan(plan, tmp_path / "runs", timeout_s=120))
    assert outcome.state == "completed", outcome
    assert of_type(events, ServerReady)
    texts = [n.text for n in of_type(events, Notice)]
    assert any("speculative_adaptive: false" in text for text in texts), texts
    ids = {c.name: c.id for c in plan.configs}
    logs = [e.server_log or {} for e in of_type(events, WorkloadFinished) if e.config_id == ids["eagle-topk2-adaptive"]]
    assert logs and all("adaptive" not in log and log.get("spec_steps") is None for log in logs), logs
    dp = [n.text for n in of_type(events, Notice) if n.config_id == ids["ar-dp2"]]
    assert any("rank 0's result only" in text for text in dp), dp
    assert not any("rank 0" in n.text for n in of_type(events, Notice) if n.config_id != ids["ar-dp2"])


_CPU_SWEEP = """[sweep]
name = "cpu"
[engine]
launcher = "sglang"
python = "PYTHON"
[server.args]
model-path = "MODEL"
DEVICE
[[configs]]
name = "ar"
[[workloads]]
kind = "code"
"""


@pytest.mark.parametrize(("device", "on_cpu"), [('device = "cpu"', True), ("", False), ('device = "cuda"', False)])
def test_the_sglang_profile_runs_on_cpu_when_its_args_say_device_cpu(tmp_path, device, on_cpu):
    """Pre-flight on a machine without GPUs: ``device = "cpu"`` in ``[server.args]`` runs SGLang there (each
    configuration takes no GPU); without it, "no GPUs to run on" as before."""
    import sys

    from specbench_tui.engine.gpus import NullBackend
    from specbench_tui.engine.machine import Machine
    from specbench_tui.engine.preflight import preflight
    from specbench_tui.rundir.store import RunDir

    (tmp_path / "model").mkdir()
    text = _CPU_SWEEP.replace("PYTHON", sys.executable).replace("MODEL", str(tmp_path / "model")).replace(
        "DEVICE", device)
    plan = plan_for(write_sweep(tmp_path / "sweep", text))
    machine = Machine(NullBackend(), plan.sweep, lambda event: None)
    assert machine.on_cpu() is on_cpu
    run_dir = RunDir.create(tmp_path / "runs", plan.sweep.name, plan.sweep.text, plan.to_json())
    try:
        problems = preflight(plan, {c.id for c in plan.configs}, machine, run_dir)
    finally:
        run_dir.close()
    assert any("no GPUs to run on" in p for p in problems) is not on_cpu, problems


def test_a_crashed_server_gets_a_short_grace():
    """Once a crash signature matched, the teardown does not wait the sweep's whole grace for a server that is
    dying anyway (SGLang's crash handler may sleep 65 s in diagnostics first, serving no signal)."""
    from types import SimpleNamespace

    from specbench_tui.core.outcomes import DEATH_CRASH, DEATH_EXIT
    from specbench_tui.engine.local_executor import CRASHED_GRACE_S, _grace
    from specbench_tui.engine.server import Death

    loop = asyncio.new_event_loop()
    try:
        def server(death: Death | None) -> SimpleNamespace:
            future = loop.create_future()
            if death is not None:
                future.set_result(death)
            return SimpleNamespace(dead=death is not None, death=future)

        crashed = server(Death(DEATH_CRASH, "crash signature scheduler_exception: ...", "scheduler_exception"))
        assert _grace(crashed, 60.0) == CRASHED_GRACE_S == 3.0
        assert _grace(crashed, 1.0) == 1.0
        assert _grace(server(Death(DEATH_EXIT, "exited")), 60.0) == 60.0
        assert _grace(server(None), 60.0) == 60.0
    finally:
        loop.close()


def test_sglang_is_launched_with_crash_diagnostics_off_unless_the_sweep_sets_them():
    assert SGLANG.default_env == {"SGLANG_PYSPY_DUMP_BEFORE_CRASH": "0", "SGLANG_CUDA_COREDUMP_BEFORE_CRASH": "0"}
    source = (REPO / "specbench_tui/engine/local_executor.py").read_text()
    defaults, sweep = source.index("env.update(self.profile.default_env)"), source.index("env.update(launch_env(")
    assert defaults < sweep  # the sweep's [server.env] is applied after the defaults: it wins
