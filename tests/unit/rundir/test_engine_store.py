"""Store interplay: what resume keeps, reruns and leaves crashed, from a run directory's files alone."""

from __future__ import annotations

from engine_helpers import plan_for, write_sweep
from specbench_tui.core.events import ConfigFinished, ConfigState, ConfigStateChanged, ServerLaunching
from specbench_tui.core.records import Measurement
from specbench_tui.engine.orchestrator import Orchestrator, expected_keys
from specbench_tui.rundir.store import RunDir

SWEEP = """
[sweep]
name = "store"
gpus = 1
repeats = 2
[engine]
launcher = "simulator"
port_base = {port}
[server.args]
model-path = "Qwen/Qwen3-8B"
[[configs]]
name = "c{n}"
algorithm = "autoregressive"
matrix = { n = [1, 2, 3] }
args = { max-running-requests = "{n}" }
[[workloads]]
name = "code"
kind = "code"
items = ["fibonacci", "quicksort"]
"""


def _measure(config, item: str, repeat: int, status: str = "ok") -> Measurement:
    return Measurement(config_id=config.id, config=config.name, workload="code", item=item, repeat=repeat,
                       status=status, completion_tokens=10 if status == "ok" else None,
                       error=None if status == "ok" else "HTTP 503: busy")


def test_resume_reads_states_and_keys(tmp_path):
    plan = plan_for(write_sweep(tmp_path, SWEEP))
    c1, c2, c3 = plan.configs
    run = RunDir.create(tmp_path / "runs", plan.sweep.name, plan.sweep.text, plan.to_json())
    run.append_event(ServerLaunching(config_id=c1.id, name=c1.name, argv=(), gpus=(0,), port=1, pid=1, log_path=""))
    run.append_event(ConfigFinished(config_id=c1.id, name=c1.name, state=ConfigState.DONE))
    run.append_event(ConfigStateChanged(config_id=c2.id, name=c2.name, state=ConfigState.LAUNCHING))
    run.append_event(ConfigFinished(config_id=c3.id, name=c3.name, state=ConfigState.CRASHED, signature="cuda_oom"))
    for item in ("fibonacci", "quicksort"):
        for repeat in (1, 2):
            run.append_measurement(_measure(c1, item, repeat))
    run.append_measurement(_measure(c2, "fibonacci", 1))
    run.append_measurement(_measure(c3, "fibonacci", 1, status="error"))
    run.close()
    with open(run.path / "results.jsonl", "a") as handle:
        handle.write('{"config_id": "torn')  # killed mid-write

    orchestrator = Orchestrator(plan, RunDir.open(run.path), resumed=True)
    orchestrator.load_previous()
    assert orchestrator.states[c1.id] == ConfigState.DONE
    assert orchestrator.states[c2.id] == ConfigState.PENDING  # mid-flight: runs again from its first gap
    assert orchestrator.states[c3.id] == ConfigState.CRASHED  # stays crashed without --retry-crashed
    assert orchestrator._attempts[c1.id] == 1
    workload = orchestrator.workloads[0]
    missing = [k for k in expected_keys(c2.id, workload) if k not in orchestrator.done_keys]
    assert missing == [(c2.id, "code", "quicksort", 1), (c2.id, "code", "fibonacci", 2),
                       (c2.id, "code", "quicksort", 2)]
    assert (c3.id, "code", "fibonacci", 1) in orchestrator.done_keys
    orchestrator._forget_errors(c3.id)  # what --retry-crashed and retry() do
    assert (c3.id, "code", "fibonacci", 1) not in orchestrator.done_keys
    assert orchestrator.all_done(c1) and not orchestrator.all_done(c2)


def test_resume_counts_a_clamped_prompt_filed_under_its_sent_size_as_done(tmp_path):
    """A clamped prompt is filed under the size sent (item "32596", the request 65536 beside it, issue 46); resume
    knows it by the request the plan names, so it is not measured again."""
    plan = plan_for(write_sweep(tmp_path, SWEEP))
    c1 = plan.configs[0]
    run = RunDir.create(tmp_path / "runs", plan.sweep.name, plan.sweep.text, plan.to_json())
    sent = Measurement(config_id=c1.id, config=c1.name, workload="code", item="32596", repeat=1, status="ok",
                       completion_tokens=10, prompt_tokens=32596, requested_prompt_tokens=65536, clamped=True)
    run.append_measurement(sent)
    run.close()
    assert sent.key == (c1.id, "code", "32596", 1) and sent.planned_key == (c1.id, "code", "65536", 1)
    orchestrator = Orchestrator(plan, RunDir.open(run.path), resumed=True)
    orchestrator.load_previous()
    assert (c1.id, "code", "65536", 1) in orchestrator.done_keys
