"""``specbench logs RUN [--follow]``: a run's events as headless lines, each with the progress count and an ETA.

The past comes from the run directory; with ``--follow`` and a live engine the lines go on from its stream
(attached read-only, exactly where the file ended) until the sweep ends. Each line reads
``[HH:MM:SS 12/200 cfg 1,234 meas ETA 1h02m] text``: configurations finished of the plan's, measurements on
record, and the time left at the pace of the configurations finished so far in this run.
"""

from __future__ import annotations

import queue
import sys
import time
from pathlib import Path
from typing import TextIO

from specbench_tui.core.events import ConfigFinished, Event, MeasurementRecorded, SweepFinished, SweepStarted
from specbench_tui.core.plan import Plan
from specbench_tui.application.headless import Printer


def eta_text(seconds: float | None) -> str:
    if seconds is None:
        return "ETA ?"
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"ETA {hours}h{rest // 60:02d}m" if hours else f"ETA {rest // 60}m{rest % 60:02d}s"


class ProgressPrinter(Printer):
    """The headless printer, its lines stamped with the event's time, progress and ETA."""

    def __init__(self, plan: Plan, out: TextIO = sys.stdout) -> None:
        super().__init__(plan, out)
        self.total = sum(1 for c in plan.configs if not c.skip_reason)
        self.finished: set[str] = set()
        self.measurements = 0
        self.started_at: float | None = None
        self.finished_this_run = 0
        self._ts = time.time()

    def __call__(self, event: Event) -> None:
        self._ts = event.ts
        if isinstance(event, SweepStarted):
            self.started_at = event.ts
            self.finished_this_run = 0
        elif isinstance(event, ConfigFinished):
            if event.config_id not in self.finished and event.state.final:
                self.finished_this_run += 1
            self.finished.add(event.config_id)
        elif isinstance(event, MeasurementRecorded):
            self.measurements += 1
        super().__call__(event)

    def eta(self) -> float | None:
        left = max(0, self.total - len(self.finished))
        if left == 0:
            return 0.0
        if self.started_at is None or self.finished_this_run == 0:
            return None
        return (self._ts - self.started_at) / self.finished_this_run * left

    def _say(self, text: str) -> None:
        stamp = time.strftime("%H:%M:%S", time.localtime(self._ts))
        self.write(f"[{stamp} {len(self.finished)}/{self.total} cfg {self.measurements:,} meas "
                   f"{eta_text(self.eta())}] {text}")


def follow(run_dir: Path, *, live: bool, out: TextIO = sys.stdout) -> int:
    """Print the run's events (and, ``live``, the engine's until the sweep ends); the exit code."""
    from specbench_tui.core.events import event_from_json
    from specbench_tui.engine.attached import AttachedEngine, AttachError, client_name, load_plan, read_prefix

    try:
        plan = load_plan(run_dir)
    except Exception as exc:  # noqa: BLE001 - an unreadable run directory is said, not raised
        print(f"specbench logs: cannot read {run_dir}: {exc}", file=sys.stderr)
        return 2
    printer = ProgressPrinter(plan, out)
    engine = None
    if live:
        try:
            engine = AttachedEngine(run_dir, role="view", name=client_name("specbench logs"))
        except AttachError as exc:
            printer.write(f"(no live engine: {exc}; printing what the run directory holds)")
    limit = engine.events_bytes if engine is not None else None
    try:
        for data in read_prefix(run_dir / "events.jsonl", limit):  # in the order the engine published them
            try:
                printer(event_from_json(data))
            except (ValueError, TypeError):
                continue
    except OSError as exc:
        print(f"specbench logs: cannot read {run_dir}: {exc}", file=sys.stderr)
        return 2
    if engine is None:
        return 0
    inbox: queue.SimpleQueue[Event] = queue.SimpleQueue()
    engine.subscribe(inbox.put)
    engine.start()
    try:
        while True:
            try:
                event = inbox.get(timeout=0.5)
            except queue.Empty:
                if engine.closed.is_set():
                    break
                continue
            printer(event)
            if isinstance(event, SweepFinished):
                break
    except KeyboardInterrupt:
        pass
    finally:
        engine.detach()
    return 0
