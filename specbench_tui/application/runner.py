"""The engine on a thread of its own, for the TUI.

The orchestrator runs on a private asyncio loop in a dedicated thread, so a slow terminal or a busy
render never delays a measurement's timestamps. Events reach subscribers on that thread (readers must hand
them over to their own thread); control requests from any thread are marshalled onto the engine's loop.
The thread that launches the servers lives exactly as long as the sweep, which matters because each server
is tied to it by ``PR_SET_PDEATHSIG``. The run and its orchestrator come from
:mod:`specbench_tui.application.host`, as for the headless run and the engine process; the TUI reads Ctrl-C as a
key, so this host installs no signal handler.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

from specbench_tui.core.engines import simulator
from specbench_tui.core.results import RunAnalysis
from specbench_tui.core.events import Event, Notice, SweepFinished
from specbench_tui.core.plan import Plan
from specbench_tui.core.records import Measurement
from specbench_tui.engine.control import Answer
from specbench_tui.engine.orchestrator import Orchestrator, SweepOutcome
from specbench_tui.application.host import OwnedRun
from specbench_tui.application.session import RunRequest
from specbench_tui.rundir.store import RunDir

Subscriber = Callable[[Event], None]


class EngineThread:
    """A running sweep with a thread-safe :class:`~specbench_tui.engine.control.SweepControl` surface."""

    def __init__(self, plan: Plan, run_dir: RunDir, *, resumed: bool = False, retry_crashed: bool = False,
                 port_base: int | None = None) -> None:
        self.plan = plan
        self._run_dir = run_dir
        self._owned = OwnedRun(plan, run_dir, resumed=resumed, retry_crashed=retry_crashed, port_base=port_base)
        self._subscribers: list[Subscriber] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._orchestrator: Orchestrator | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._main, name="specbench-engine", daemon=True)
        self.outcome: SweepOutcome | None = None
        """How the sweep ended, once it has."""
        self.error: BaseException | None = None
        """An unexpected exception that ended the engine, if any."""
        self.read_only = False
        """This process runs the sweep: its view may always steer it."""
        self.engine_pid: int | None = None
        """None: the sweep runs in this process (no engine process of its own to detach from)."""
        self.live = False
        """The history is a resumed run's past, not a live sweep's."""

    @property
    def hosted(self) -> OwnedRun:
        """The run this thread hosts (its notification URLs and metrics port are set before :meth:`start`)."""
        return self._owned

    @property
    def run_dir(self) -> Path:
        return self._run_dir.path

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def subscribe(self, subscriber: Subscriber) -> None:
        """Receive every event (on the engine thread); call before :meth:`start`."""
        self._subscribers.append(subscriber)

    def start(self) -> None:
        self._thread.start()
        self._started.wait(timeout=30)

    def stop(self, timeout: float) -> bool:
        """Abort now, tear every server down and wait for the engine to finish; True when it did in time."""
        self.abort(now=True)
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def summary_table(self) -> str:
        """The end-of-run table over the run directory (earlier runs of a resumed one included)."""
        from specbench_tui.engine.ending import render_summary

        return render_summary(self.analysis(), simulated=simulator.simulated(self.plan.sweep.engine))

    def analysis(self) -> RunAnalysis:
        """The run directory's ledger analysed (what the summary and the exit code rest on)."""
        return self._owned.analysis()

    def history(self) -> tuple[list[Measurement], list[Event]]:
        """What the run directory already holds (a resumed run's earlier results), for a view to start from."""
        return self._run_dir.read_measurements(), self._run_dir.read_events()

    def detach(self) -> None:
        """Nothing to detach from: the sweep runs in this process and ends with it."""
        raise RuntimeError("the sweep runs in this process: stop it instead of detaching")

    # -- control, from any thread -------------------------------------------------------------------------

    @property
    def paused(self) -> bool:
        return self._orchestrator.paused if self._orchestrator is not None else False

    def pause(self) -> Answer:
        return self._call("pause")

    def resume(self) -> Answer:
        return self._call("resume")

    def skip(self, config_id: str) -> Answer:
        return self._call("skip", config_id)

    def retry(self, config_id: str) -> Answer:
        return self._call("retry", config_id)

    def abort(self, now: bool = False) -> Answer:
        return self._call("abort", now)

    def _call(self, method: str, *args: object) -> Answer:
        """Run the orchestrator's command on its loop; the future gets its :class:`Outcome` (None when the sweep
        is over and no loop runs to answer)."""
        future: Answer = Future()
        loop, orchestrator = self._loop, self._orchestrator
        if loop is None or orchestrator is None or loop.is_closed():
            future.set_result(None)
            return future

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(getattr(orchestrator, method)(*args))
            except Exception as exc:  # noqa: BLE001 - the caller sees the refusal; the engine goes on
                future.set_exception(exc)

        try:
            loop.call_soon_threadsafe(run)
        except RuntimeError:  # the loop closed between the check and the call: the sweep is over
            future.set_result(None)
        return future

    # -- the engine thread ----------------------------------------------------------------------------------

    def _main(self) -> None:
        try:
            asyncio.run(self._run())
        except BaseException as exc:  # noqa: BLE001 - reported to the UI, never lost silently
            self.error = exc
            self._publish(Notice(level="error", text=f"the engine stopped unexpectedly: {exc!r}"))
            self._publish(SweepFinished(state="failed", reason=f"engine error: {exc!r}"))
        finally:
            self._started.set()

    async def _run(self) -> None:
        orchestrator = self._owned.orchestrator()
        for subscriber in self._subscribers:
            orchestrator.subscribe(subscriber)
        self._orchestrator = orchestrator
        self._loop = asyncio.get_running_loop()
        self._started.set()
        try:
            self.outcome = await self._owned.run(orchestrator)
        finally:
            self._owned.release()

    def _publish(self, event: Event) -> None:
        for subscriber in list(self._subscribers):
            try:
                subscriber(event)
            except Exception:  # noqa: BLE001 - a reader's bug must not hide the engine's error
                pass


def make_engine(request: RunRequest | object) -> EngineThread | int:
    """The engine for ``specbench run`` (not started), or an exit code after printing why it cannot run.

    ``request`` is a :class:`RunRequest`, or the command line's parsed options as the TUI's entry point still
    passes them (:meth:`RunRequest.of` reads their names; nothing here imports the parser)."""
    owned = OwnedRun.prepare(RunRequest.of(request))
    if isinstance(owned, int):
        return owned
    engine = EngineThread(owned.plan, owned.run_dir, resumed=owned.resumed, retry_crashed=owned.retry_crashed,
                          port_base=owned.port_base)
    engine.hosted.notify_urls, engine.hosted.metrics_port = owned.notify_urls, owned.metrics_port
    engine.hosted.otlp_endpoint = owned.otlp_endpoint
    return engine
