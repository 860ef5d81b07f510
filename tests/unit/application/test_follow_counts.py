"""``specbench logs`` counts as every view does (issue 28): excluded configurations apart, never as finished; a
retried measurement once; an ETA while configurations remain; never ``5:49–5:49``."""

from __future__ import annotations

import io
from pathlib import Path

from engine_helpers import plan_for
from sweep_builder import inline, sim_profile, sim_sweep, write

from specbench_tui.application.follow import ProgressPrinter
from specbench_tui.core.eta import Eta, describe
from specbench_tui.core.events import (ConfigFinished, ConfigState, ConfigStateChanged, MeasurementRecorded,
                                       ServerLaunching, SweepStarted)
from specbench_tui.core.ledger import Ledger
from specbench_tui.core.records import Measurement

SWEEP = sim_sweep(
    "follow", configs=[{"name": "c{n}", "algorithm": "autoregressive", "matrix": inline(n=[1, 2, 3, 4, 5]),
                        "args": inline(**{"max-running-requests": "{n}"}),
                        "exclude": [{"n": 4, "reason": "excluded"}, {"n": 5, "reason": "excluded"}]}],
    workloads=[{"name": "code", "kind": "code", "items": ["fibonacci"]}])


def _measure(config_id: str, status: str) -> MeasurementRecorded:
    m = Measurement(config_id=config_id, config="c", workload="code", item="fibonacci", repeat=1, status=status,
                    completion_tokens=10 if status == "ok" else None)
    return MeasurementRecorded(config_id=config_id, record=m.to_json())


def test_excluded_configurations_are_counted_apart_and_a_retry_once(tmp_path: Path) -> None:
    plan = plan_for(write(tmp_path, SWEEP, sim_profile()))
    c1, c2, c3, c4, c5 = plan.configs
    out = io.StringIO()
    printer = ProgressPrinter(plan, out)
    printer(SweepStarted(sweep="follow", run_dir="r", total_configs=5, ts=100.0))
    for excluded in (c4, c5):  # as the scheduler finishes them at the start
        printer(ConfigFinished(config_id=excluded.id, name=excluded.name, state=ConfigState.SKIPPED,
                               reason="excluded", ts=100.0))
    printer(ServerLaunching(config_id=c1.id, name=c1.name, argv=(), gpus=(0,), port=1, pid=1, log_path="", ts=100.0))
    printer(_measure(c1.id, "error"))
    printer(_measure(c1.id, "ok"))  # the retried request replaces its error
    printer(ConfigFinished(config_id=c1.id, name=c1.name, state=ConfigState.DONE, ts=160.0))
    last = out.getvalue().splitlines()[-1]
    assert last.startswith("[") and "1/3 ran, 2 skipped, 1 meas" in last, last
    assert "ETA 0:00" not in last and "ETA learning" not in last, "two configurations are still to run"
    printer(ConfigStateChanged(config_id=c2.id, name=c2.name, state=ConfigState.SKIPPED, reason="user", ts=170.0))
    printer(ConfigFinished(config_id=c2.id, name=c2.name, state=ConfigState.SKIPPED, reason="user", ts=170.0))
    printer(ConfigFinished(config_id=c3.id, name=c3.name, state=ConfigState.CRASHED, ts=200.0))
    last = out.getvalue().splitlines()[-1]
    assert "1/2 ran, 3 skipped" not in last and "2/2 ran, 3 skipped, 1 meas, ETA 0:00" in last, last
    assert printer.ledger.progress() == Ledger.from_run(plan.to_json(), printer.ledger.measurements.values(),
                                                        printer.ledger.events).progress()


def test_the_estimate_in_words_never_repeats_a_point() -> None:
    assert describe(Eta(low=349, high=349, likely=349, settled=False, samples=1)) == "5:49"
    assert describe(Eta(low=300, high=420, likely=349, settled=False, samples=2)) == "5:00–7:00"
    assert describe(Eta(low=340, high=360, likely=349, settled=True, samples=3)) == "~5:49"
    assert describe(Eta(low=300, high=420, likely=349, settled=True, samples=3)) == "~5:49 (5:00–7:00)"
    assert describe(None) == "learning"
    assert describe(None, left=0) == "0:00"
