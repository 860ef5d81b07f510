"""A stack sampler for the bench's app process (a bench helper): which code the UI thread runs during a key.

``start(path)`` samples the main thread's stack every millisecond from a thread of its own and, at exit, writes
``(time.monotonic(), stack)`` pairs to ``path`` (pickle); ``bench_ui.py --profile DIR`` pairs them with each
press's window and prints where the UI thread spent it.
"""

from __future__ import annotations

import atexit
import pickle
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence

Stack = tuple[str, ...]


def start(path: str, interval_s: float = 0.001) -> Callable[[], None]:
    """Start sampling; returns the function that stops and writes the samples (also run at exit)."""
    main_id = threading.main_thread().ident
    samples: list[tuple[float, Stack]] = []
    stop = threading.Event()
    names: dict[tuple[int, int], str] = {}
    stacks: dict[Stack, Stack] = {}

    def run() -> None:
        while not stop.is_set():
            frame = sys._current_frames().get(main_id)  # type: ignore[arg-type]
            stack = []
            while frame is not None:
                code = frame.f_code
                key = (id(code), frame.f_lineno)
                name = names.get(key)
                if name is None:
                    name = names[key] = f"{code.co_filename.rsplit('/', 2)[-1]}:{code.co_name}:{frame.f_lineno}"
                stack.append(name)
                frame = frame.f_back
            whole = tuple(stack)
            samples.append((time.monotonic(), stacks.setdefault(whole, whole)))
            time.sleep(interval_s)

    thread = threading.Thread(target=run, name="bench-sampler", daemon=True)
    thread.start()

    def dump() -> None:
        if stop.is_set():
            return
        stop.set()
        thread.join(1)
        with open(path, "wb") as handle:
            pickle.dump(samples, handle)

    atexit.register(dump)
    return dump


IDLE = ("select", "_run_once", "sleep", "poll")


def report(samples: Sequence[tuple[float, Stack]], windows: Sequence[tuple[float, float]], top: int = 25) -> str:
    """The functions on the UI thread's stack during ``windows`` (inclusive counts, busy samples only)."""
    inclusive: Counter[str] = Counter()
    leaf: Counter[str] = Counter()
    busy = total = 0
    i = 0
    ordered = sorted(samples)
    for start, end in sorted(windows):
        while i < len(ordered) and ordered[i][0] < start:
            i += 1
        j = i
        while j < len(ordered) and ordered[j][0] <= end:
            stack = ordered[j][1]
            total += 1
            if stack and not any(stack[0].split(":")[1] == name for name in IDLE):
                busy += 1
                leaf[stack[0]] += 1
                for name in {":".join(f.split(":")[:2]) for f in stack}:
                    inclusive[name] += 1
            j += 1
    lines = [f"  samples {total}, busy {busy}"]
    lines += [f"    {n:5d}  {name}" for name, n in inclusive.most_common(top)]
    lines.append("  leaves:")
    lines += [f"    {n:5d}  {name}" for name, n in leaf.most_common(10)]
    return "\n".join(lines)


def busy_spans(samples: Sequence[tuple[float, Stack]], longer_than_s: float = 0.08,
               gap_s: float = 0.006) -> list[tuple[float, float]]:
    """Stretches where the UI thread was busy without a pause (no idle sample, no gap over ``gap_s``) for more
    than ``longer_than_s``: the long turns of the event loop, key or no key."""
    spans: list[tuple[float, float]] = []
    start = last = None
    for at, stack in sorted(samples):
        busy = bool(stack) and not any(stack[0].split(":")[1] == name for name in IDLE)
        if busy and start is not None and last is not None and at - last <= gap_s:
            last = at
            continue
        if start is not None and last is not None and last - start > longer_than_s:
            spans.append((start, last))
        start, last = (at, at) if busy else (None, None)
    if start is not None and last is not None and last - start > longer_than_s:
        spans.append((start, last))
    return spans


def span_report(samples: Sequence[tuple[float, Stack]], span: tuple[float, float], top: int = 12) -> str:
    """The project's and Textual's own functions on the stack during ``span`` (inclusive counts)."""
    inclusive: Counter[str] = Counter()
    for at, stack in samples:
        if span[0] <= at <= span[1]:
            for name in {":".join(f.split(":")[:2]) for f in stack}:
                inclusive[name] += 1
    generic = ("base_events.py", "events.py", "runners.py", "_flood_app.py", "app.py:run", "_callback.py",
               "message_pump.py:_process_messages", "message_pump.py:_process_messages_loop")
    shown = [(n, name) for name, n in inclusive.most_common() if not name.startswith(generic)][:top]
    return "\n".join(f"    {n:5d}  {name}" for n, name in shown)
