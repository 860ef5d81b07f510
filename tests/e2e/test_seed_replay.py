"""The seed campaign replayed on the simulator, as it went wrong: DDTree b8 crashes in the server's warm-up, b12
crashes mid-workload inside a long-context item, and decode speed depends on the context (long prompts decode
slower), so an all-item speedup and a same-item one differ. The report must tell it as it was."""

from __future__ import annotations

import pytest
from engine_helpers import headless_engine, plan_for, run_plan, wait_no_processes, write_sweep

from specbench_tui.core.records import ERROR_KIND_CRASH
from specbench_tui.core.results import COVERAGE_COMPLETE, COVERAGE_NOT_RUN, COVERAGE_PARTIAL, aggregate
from specbench_tui.report.load import load_run

pytestmark = pytest.mark.e2e

PROFILE = """
time_scale = 0.1
seed = 7
[output]
eos = false
[shutdown]
poll_s = 0.05
[speed]
kv_ms_per_1k_ctx = 1.5
[[crash]]
algorithm = "DDTREE"
budget = 8
when = "warmup"
signature = "cuda_illegal_instruction"
[[crash]]
algorithm = "DDTREE"
budget = 12
when = "after_requests"
after_requests = 4
signature = "cuda_illegal_instruction"
"""
"""b12: the code warm-up and item, the long-context warm-up and its 1024-token item finish; the next request
(the 16000-token item) is in flight when the scheduler dies."""

SWEEP = """
[sweep]
name = "seed-replay"
baseline = "ar-tp{tp}"
gpus = 1
repeats = 1
warmup = 1

[engine]
launcher = "simulator"
sim_profile = "sim_profile.toml"
port_base = {port}
startup_timeout_s = 60
stall_timeout_s = 30
shutdown_grace_s = 5
gpu_release_timeout_s = 1

[server.args]
model-path = "Qwen/Qwen3.6-27B"
context-length = 32768

[[configs]]
name = "ar-tp{tp}"
algorithm = "autoregressive"
matrix = { tp = [1] }
args = { tp-size = "{tp}" }

[[configs]]
name = "ddtree-b{budget}-tp{tp}"
algorithm = "ddtree"
matrix = { budget = [8, 12, 16], tp = [1] }
[configs.args]
tp-size = "{tp}"
speculative-algorithm = "DDTREE"
speculative-draft-model-path = "z-lab/Qwen3.6-27B-DFlash-b16"
disable-overlap-schedule = true
page-size = 1
[configs.fork_args]
speculative-ddtree-budget = "{budget}"

[[workloads]]
name = "code"
kind = "code"
items = ["fibonacci"]
max_new_tokens = 48

[[workloads]]
name = "long-context"
kind = "long_context"
prompt_tokens = [1024, 16000, "max"]
max_new_tokens = 48
"""


async def test_the_seed_campaign_is_told_as_it_went(tmp_path):
    plan = plan_for(write_sweep(tmp_path, SWEEP, PROFILE))
    outcome, _, run_dir, _ = await run_plan(plan, tmp_path / "runs")
    assert outcome.state == "completed"
    analysis = load_run(run_dir.path).analysis  # what `specbench report` reads
    ids = {c.name: c.id for c in analysis.configs}
    ar, b8, b12, b16 = (ids[n] for n in ("ar-tp1", "ddtree-b8-tp1", "ddtree-b12-tp1", "ddtree-b16-tp1"))
    assert {c.name: c.state for c in analysis.configs} == {
        "ar-tp1": "done", "ddtree-b8-tp1": "crashed", "ddtree-b12-tp1": "crashed", "ddtree-b16-tp1": "done"}

    # b12's cut workload is partial: the item it measured, and the request in flight at the crash as an error.
    cut = analysis.row(b12, "long-context")
    assert cut is not None and cut.coverage == COVERAGE_PARTIAL, cut
    assert cut.coverage_text() == "partial (1 of 3 items)"
    assert (cut.n_ok, cut.n_error, cut.n_crash) == (1, 1, 1)
    assert "cuda_illegal_instruction" in cut.errors[0] or "died" in cut.errors[0], cut.errors
    records = [m for m in (run_dir.read_measurements()) if m.config_id == b12 and m.workload == "long-context"]
    assert {(m.item, m.status, m.error_kind) for m in records} == {("1024", "ok", None),
                                                                  ("16000", "error", ERROR_KIND_CRASH)}
    assert analysis.row(b12, "code").coverage == COVERAGE_COMPLETE
    assert [w for w, _ in analysis.config(b12).workloads_not_run] == []

    # Speeds depend on the context, so pairing items matters: the speedup is the same-item ratio.
    by_item = {(m.config_id, m.item): m.decode_tps for m in run_dir.read_measurements()
               if m.workload == "long-context" and m.status == "ok"}
    assert by_item[(ar, "1024")] > 1.15 * by_item[(ar, "max")], by_item
    same_item = by_item[(b12, "1024")] / by_item[(ar, "1024")]
    ar_row = analysis.row(ar, "long-context")
    assert ar_row is not None and ar_row.decode_tps is not None
    all_item = by_item[(b12, "1024")] / ar_row.decode_tps.median
    assert cut.speedup is not None and cut.speedup.median == pytest.approx(same_item, rel=1e-9)
    assert abs(all_item - same_item) > 0.05 * same_item, (all_item, same_item)
    full = analysis.row(b16, "long-context")
    assert full is not None and full.speedup is not None and full.paired == 3

    # No crashed or partial configuration in any mean or "best".
    for crashed in (b8, b12):
        assert aggregate(analysis, crashed, "speedup") is None
        assert aggregate(analysis, crashed, "speedup", ["code"]) is None
        assert analysis.totals_for(crashed).speedup is None
    assert aggregate(analysis, b16, "speedup") is not None
    assert all(best.config_id not in (b8, b12) for best in analysis.best)

    # No acceptance (nor any server figure) on a workload that did not run.
    for workload in ("code", "long-context"):
        never = analysis.row(b8, workload)
        assert never is not None and never.coverage == COVERAGE_NOT_RUN
        assert never.accept_length is None and never.server_log_accept_length is None
    assert not wait_no_processes(str(tmp_path))


EMPTY = """
time_scale = 0.05
[deterministic]
enabled = true
tok_s = 200.0
[output]
eos = false
[shutdown]
poll_s = 0.05
[[empty_output]]
algorithm = "NONE"
"""

SILENT_SWEEP = """
[sweep]
name = "silent"
gpus = 1
warmup = 0
[engine]
launcher = "simulator"
sim_profile = "sim_profile.toml"
port_base = {port}
startup_timeout_s = 30
shutdown_grace_s = 2
gpu_release_timeout_s = 1
[server.args]
model-path = "Qwen/Qwen3-8B"
[[configs]]
name = "ar"
algorithm = "autoregressive"
[[workloads]]
name = "math"
kind = "arithmetic"
count = 2
max_new_tokens = 16
"""


def test_a_sweep_whose_server_returns_no_tokens_exits_1(tmp_path):
    """Nothing crashed and the sweep completed, but every request came back empty: a CI script must see 1."""
    path = write_sweep(tmp_path, SILENT_SWEEP, EMPTY)
    engine = headless_engine([str(path), "--runs-dir", str(tmp_path / "runs")], tmp_path)
    output, _ = engine.communicate(timeout=120)
    text = output.decode(errors="replace")
    assert engine.returncode == 1, text
    assert "ZERO OUTPUT" in text and "hardware: SIMULATED" in text
    assert "SIMULATED: the SGLang simulator on a scripted GPU box made these figures" in text  # the summary
    assert not wait_no_processes(str(tmp_path))


def test_a_failed_pre_flight_is_history_once_a_resume_got_past_it(tmp_path):
    """A configuration crashed; the first resume's pre-flight failed (the model directory was gone, exit 2); once
    it is back, the next resume completes, and its summary and report carry the old error as an earlier attempt's,
    not as the run's state."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    text = SILENT_SWEEP.replace('model-path = "Qwen/Qwen3-8B"', f'model-path = "{model}"')
    healthy = EMPTY.replace('[[empty_output]]\nalgorithm = "NONE"\n', "")
    path = write_sweep(tmp_path, text, healthy + '[[crash]]\nalgorithm = "NONE"\nwhen = "warmup"\n')
    runs = tmp_path / "runs"

    def run(*args: str) -> tuple[int, str]:
        engine = headless_engine(list(args), tmp_path)
        output, _ = engine.communicate(timeout=120)
        return engine.returncode, output.decode(errors="replace")

    code, output = run(str(path), "--runs-dir", str(runs))
    assert code == 1, output
    run_dir = next(runs.iterdir())
    (tmp_path / "sim_profile.toml").write_text(healthy)  # the crash is fixed...
    (model / "config.json").unlink()
    model.rmdir()  # ...but the model directory went away (a reboot emptied /dev/shm)
    code, output = run("--resume", str(run_dir), "--retry-crashed")
    assert code == 2 and "does not exist" in output, output
    model.mkdir()
    (model / "config.json").write_text("{}")
    code, output = run("--resume", str(run_dir), "--retry-crashed")
    assert code == 0, output
    summary = output.split("sweep completed", 1)[1]
    assert "note: error: pre-flight" not in summary and "earlier attempt: error: pre-flight" in summary, summary
    analysis = load_run(run_dir).analysis
    assert [c.state for c in analysis.configs] == ["done"]
    # (a parallel test holding the shared GPU may add a "pre-flight: the whole GPU pool is taken" warning; the
    # old attempt's error is what must not be current)
    assert not any("error: pre-flight" in n for n in analysis.notes), analysis.notes
    assert any("error: pre-flight" in n for n in analysis.history), analysis.history
    assert not wait_no_processes(str(tmp_path))
