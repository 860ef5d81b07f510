"""The run host (specbench_tui/application/host.py): the request that crosses into the engine process, the stop
signals every host shares, and the ending. Runs of whole sweeps through the hosts are in test_engine_headless.py,
test_detach.py and test_engine_control.py."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import pytest

from specbench_tui.application import daemon
from specbench_tui.application.host import SUMMARY_EXCLUDED, StopSignals, summary_plan
from specbench_tui.application.session import RunRequest


def test_a_request_crosses_into_the_engine_process_unchanged() -> None:
    request = RunRequest(sweep="sweeps/demo.toml", resume=Path("/runs/a b\udcff"), runs_dir=Path("runs"),
                         retry_crashed=True, port_base=31000, ray_address="10.0.0.1:6379")
    assert RunRequest.from_json(json.loads(json.dumps(request.to_json()))) == request
    assert RunRequest.from_json(RunRequest().to_json()) == RunRequest()


@pytest.mark.parametrize("data", [{"sweep": 3}, {"port_base": "31000"}, {"port_base": True},
                                  {"retry_crashed": "yes"}, {"sweep": "x", "theme": "dark"}])
def test_a_request_that_is_not_what_to_json_wrote_is_refused_by_name(data: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="run request"):
        RunRequest.from_json(data)


def test_the_engine_process_reads_its_request_and_the_command_typed() -> None:
    payload = json.dumps({"request": RunRequest(sweep="demo").to_json(), "argv": ["specbench", "run", "demo"]})
    assert daemon._parse(["--status-fd", "7", payload]) == (7, RunRequest(sweep="demo"), ["specbench", "run", "demo"])


@pytest.mark.parametrize("argv", [[], ["--status-fd", "x", "{}"], ["--status-fd", "7", "not json"],
                                  ["--status-fd", "7", "{}"], ["--status-fd", "7", '{"request": {"sweep": 1}}']])
def test_the_engine_process_started_by_hand_says_how_it_is_started(argv: list[str],
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert daemon.main(argv) == 2
    assert "usage: python -m specbench_tui.application.daemon --status-fd FD REQUEST" in capsys.readouterr().err


class _Orchestrator:
    def __init__(self) -> None:
        self.aborts: list[tuple[float, bool]] = []
        self.started = 0.0

    def abort(self, now: bool = False) -> None:
        self.aborts.append((asyncio.get_running_loop().time() - self.started, now))


def _signalled(signals: list[signal.Signals], *, interactive: bool) -> tuple[list[tuple[float, bool]], list[str],
                                                                             bool]:
    """The aborts (seconds after the first signal, now?) and lines that ``signals``, sent 0.1 s apart, make; the
    grace is 0.3 s."""
    said: list[str] = []
    orchestrator = _Orchestrator()

    async def main() -> bool:
        orchestrator.started = asyncio.get_running_loop().time()
        handled = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        with StopSignals(orchestrator, said.append, handled, interactive=interactive, grace_s=0.3) as stop:  # type: ignore[arg-type]
            for sig in signals:
                os.kill(os.getpid(), sig)
                await asyncio.sleep(0.1)
            await asyncio.sleep(0.8)
        return stop.hung_up

    hung_up = asyncio.run(main())
    return orchestrator.aborts, said, hung_up


def test_a_ctrl_c_at_the_terminal_waits_for_a_second_one() -> None:
    aborts, said, hung_up = _signalled([signal.SIGINT], interactive=True)
    assert [now for _, now in aborts] == [False], aborts  # no grace: it waits for the person
    assert said == ["stopping after the request in flight (Ctrl-C again to abort now)"] and not hung_up
    aborts, said, _ = _signalled([signal.SIGINT, signal.SIGINT], interactive=True)
    assert [now for _, now in aborts] == [False, True] and aborts[1][0] >= 0.1, aborts
    assert said[-1] == "aborting now"


@pytest.mark.parametrize(("sig", "interactive"), [(signal.SIGTERM, True), (signal.SIGHUP, True),
                                                  (signal.SIGINT, False)])
def test_a_signal_nobody_can_repeat_gets_the_grace_then_everything_is_torn_down(sig: signal.Signals,
                                                                                 interactive: bool) -> None:
    aborts, said, hung_up = _signalled([sig], interactive=interactive)
    assert [now for _, now in aborts] == [False, True] and aborts[1][0] >= 0.3, aborts
    assert said == [f"{sig.name}: stopping after the request in flight (at most 0.3 s more), then tearing "
                    "everything down"]
    assert hung_up == (sig == signal.SIGHUP)


def test_the_handlers_go_with_the_block() -> None:
    async def main() -> None:
        with StopSignals(_Orchestrator(), print, (signal.SIGTERM,), interactive=False):  # type: ignore[arg-type]
            pass
        assert not asyncio.get_running_loop().remove_signal_handler(signal.SIGTERM)

    asyncio.run(main())


def test_the_table_leaves_out_excluded_configurations_past_the_first_few() -> None:
    configs = [{"id": f"c{n}", "skip_reason": "excluded"} for n in range(SUMMARY_EXCLUDED + 5)] + [{"id": "run"}]
    summarised, left_out = summary_plan({"configs": configs})
    kept = summarised["configs"]
    assert left_out == 5 and isinstance(kept, list) and len(kept) == SUMMARY_EXCLUDED + 1
    assert summary_plan({"configs": configs[-3:]}) == ({"configs": configs[-3:]}, 0)
