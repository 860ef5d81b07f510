"""How fast a server's output is drained: the log pump alone, and the whole watch of a server (pump + crash
signatures + ready line + stats reader + one LogLines event per batch of lines, on to the TUI's log feed), fed by a
real child process through a real pipe.

A server that logs faster than we drain blocks on its full pipe: the figure must be well above what any server
prints (SGLang at start-up, a debug flood, a flood of warnings). Two mixes of SGLang lines (weights, CUDA graphs,
KV cache, a progress bar, a warning every 20 lines):

- **flood** (the target, issue 32: >= 200 MB/s with the signatures on): start-up and debug lines, no stats line;
- **decode-heavy** (reported): a ``Decode batch`` line every 20 lines, each parsed by the stats reader as in a
  measured window (a real server prints one every 40 decode steps; this is 5% of a flood).

Each figure is the median of 3 runs, from the child's spawn to its exit (start-up included), with MB per CPU
second of this process beside it (the figure to optimise on a busy box). The events go to the TUI's
:class:`~specbench_tui.application.logview.LogFeed` with its own formatting thread, as in the app: the bench checks
that the log panel's newest line is the log's last one once the child is gone (how long after), and that the feed
never queued more than its byte cap (plus one batch).

    .venv/bin/python bench/bench_logpump.py          # ~20 s
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from _common import figure, verdict

from specbench_tui.application.logview import MAX_QUEUED_BYTES, LogFeed
from specbench_tui.core.events import Event, LogLines
from specbench_tui.core.signatures import SignatureSet
from specbench_tui.core.engines.sglang import SGLANG_SIGNATURES
from specbench_tui.engine.logpump import LogPump
from specbench_tui.core.engines.sglang import SGLANG
from specbench_tui.engine.server import ServerProcess

TARGET_MB_S = 50.0
WATCH_TARGET_MB_S = 200.0
PUMP_MB = 64
SERVER_MB = 128

LINES = [
    b"[2026-05-04 10:12:07 TP0] Load weight begin. avail mem=78.12 GB, model shard model-00003-of-00011.safetensors",
    b"[2026-05-04 10:12:07 TP0] Capture cuda graph bs [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96]",
    b"Loading safetensors checkpoint shards:  45% Completed | 5/11 [00:03<00:04,  1.43it/s]",
    b"[2026-05-04 10:12:07 TP0] KV Cache is allocated. #tokens: 1153600, K size: 35.20 GB, V size: 35.20 GB",
] * 5
LINES[7] = (b"[2026-05-04 10:12:07 TP0] Decode batch. #running-req: 1, #token: 1411, token usage: 0.01, "
            b"accept len: 3.12, gen throughput (token/s): 141.52, #queue-req: 0")
LINES[13] = b"[2026-05-04 10:12:07 TP0] WARNING: the torch compile cache is stale, recompiling"
BLOCK = b"\n".join(LINES) + b"\n"
FLOOD = LINES.copy()
FLOOD[7] = b"[2026-05-04 10:12:07 TP0] DEBUG scheduler: no request is waiting, the event loop idles (3 ms)"
FLOOD_BLOCK = b"\n".join(FLOOD) + b"\n"

_WRITER = r"""
import sys
block = bytes.fromhex(sys.argv[2]) * 500
out = sys.stdout.buffer
for _ in range(int(sys.argv[1]) * (1 << 20) // len(block)):
    out.write(block)
out.flush()
"""


async def pump_alone(folder: Path) -> float:
    """MB/s of :class:`LogPump` (read, split, decode, write the log file, hand on) with a no-op reader."""
    data = BLOCK * (PUMP_MB * (1 << 20) // len(BLOCK))
    reader = asyncio.StreamReader(limit=1 << 20)
    pump = LogPump(reader, folder / "pump.log", lambda number, text: None, on_lines=lambda first, lines: None)

    async def feed() -> None:
        for start in range(0, len(data), 1 << 16):
            reader.feed_data(data[start:start + (1 << 16)])
            await asyncio.sleep(0)
        reader.feed_eof()

    started = time.perf_counter()
    await asyncio.gather(feed(), pump.run())
    return len(data) / (time.perf_counter() - started) / 1e6


@dataclass
class Watch:
    """One run of the whole watch."""

    mb_s: float
    events: int
    lines: int
    """Lines in the log file (every one written must be there)."""
    mb_per_cpu_s: float
    """MB per CPU second of this process (the pump, the watch, the log feed's thread): the watch's own cost,
    which the box's load does not inflate as it does wall time."""
    panel_lag_s: float | None
    """From the child's exit to the log feed's formatting its last line (None: never shown)."""
    queued_max: int
    """The most bytes the log feed held waiting to be formatted (capped at ``MAX_QUEUED_BYTES``)."""
    shown: int
    dropped: int


async def whole_watch(folder: Path, block: bytes = BLOCK) -> Watch:
    """A child that writes ``block`` as fast as it can through a real pipe into a :class:`ServerProcess`, whose
    events go to the TUI's :class:`LogFeed` (its own formatting thread, as in the app): MB/s, the events, the lines
    in the log file, MB per CPU second, and whether the log panel's newest line is the log's last one (and how long
    after the child's exit it was formatted)."""
    taken: list[str] = []
    counts = {"events": 0, "queued": 0}
    formatted = threading.Event()
    ready_at: list[float] = []

    def on_ready() -> None:
        ready_at.append(time.monotonic())
        formatted.set()

    feed = LogFeed(on_ready=on_ready)

    def publish(event: Event) -> None:
        counts["events"] += isinstance(event, LogLines)
        feed.put(event)
        counts["queued"] = max(counts["queued"], feed.queued_bytes)

    server = ServerProcess("bench", [sys.executable, "-c", _WRITER, str(SERVER_MB), block.hex()], {},
                           folder / "server.log", SGLANG, SignatureSet(builtins=SGLANG_SIGNATURES), publish,
                           on_stats=lambda s: None)
    started, cpu = time.perf_counter(), time.process_time()
    await server.start()
    await asyncio.wait_for(server.death, 300)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    exited = time.monotonic()
    await server.stop(1.0)
    last = block.rstrip(b"\n").rsplit(b"\n", 1)[-1].decode().split("] ", 1)[-1]  # the panel shortens the stamp
    lag, dropped = None, 0
    while time.monotonic() - exited < 30:  # the feed formats at most every 0.25 s: its last frame follows
        formatted.wait(1.0)
        formatted.clear()
        burst = feed.take()
        taken.extend(burst.lines)
        dropped += burst.dropped
        if taken and taken[-1].endswith(last) and len(taken) + dropped >= feed.received:
            lag = max(0.0, ready_at[-1] - exited)
            break
    feed.close()
    log = folder / "server.log"
    size = log.stat().st_size
    with log.open("rb") as file:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: file.read(1 << 20), b""))
    return Watch(size / elapsed / 1e6, counts["events"], lines, size / max(cpu, 1e-9) / 1e6, lag, counts["queued"],
                 len(taken), dropped)


def main() -> int:
    load_before = os.getloadavg()[0]
    pump: list[float] = []
    flood: list[Watch] = []
    heavy: list[Watch] = []
    for _ in range(3):
        with tempfile.TemporaryDirectory() as tmp:
            pump.append(asyncio.run(pump_alone(Path(tmp))))
        with tempfile.TemporaryDirectory() as tmp:
            flood.append(asyncio.run(whole_watch(Path(tmp), FLOOD_BLOCK)))
        with tempfile.TemporaryDirectory() as tmp:
            heavy.append(asyncio.run(whole_watch(Path(tmp), BLOCK)))
    pump_mb = statistics.median(pump)
    flood_mb, heavy_mb = (statistics.median(w.mb_s for w in runs) for runs in (flood, heavy))
    flood_cpu, heavy_cpu = (statistics.median(w.mb_per_cpu_s for w in runs) for runs in (flood, heavy))
    print(f"{'what':<58} {'MB/s (median of 3)':>20}   runs")
    for name, value, runs in (("log pump alone (engine/logpump.py)", pump_mb, pump),
                              ("whole server watch, child + pipe, flood", flood_mb, [w.mb_s for w in flood]),
                              ("whole server watch, child + pipe, decode-heavy (5% parsed)", heavy_mb,
                               [w.mb_s for w in heavy])):
        print(f"{name:<58} {value:>20.1f}   {', '.join(f'{v:.0f}' for v in runs)}")
    watch = flood[-1]
    print(f"flood: {watch.lines} lines in the log file, {watch.events} events published (one per batch); "
          f"{flood_cpu:.0f} MB per CPU second of the watch's process (decode-heavy {heavy_cpu:.0f}), median of 3; "
          f"load average {load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, on {os.cpu_count()} "
          "cores")
    lags = [w.panel_lag_s for w in (*flood, *heavy)]
    queued = max(w.queued_max for w in (*flood, *heavy))
    worst_lag = max((lag for lag in lags if lag is not None), default=None)
    print(f"log panel (LogFeed, its own thread): the newest line shown is the log's last in {sum(lag is not None for lag in lags)} "
          f"of {len(lags)} runs, at most {worst_lag if worst_lag is None else round(worst_lag * 1000)} ms after the "
          f"child's exit; {watch.shown} lines shown, {watch.dropped} dropped from the display (the file has them); "
          f"at most {queued / 1e6:.1f} MB queued for formatting (cap {MAX_QUEUED_BYTES / 1e6:.1f} MB)")
    failures = []
    expected = SERVER_MB * (1 << 20) // (len(FLOOD_BLOCK) * 500) * 500 * len(FLOOD)
    if watch.lines < expected:
        failures.append(f"the log file has {watch.lines} lines of the {expected} written")
    if any(lag is None for lag in lags):
        failures.append("the log panel never showed the log's last line")
    if queued > MAX_QUEUED_BYTES + (1 << 20) * 2:
        failures.append(f"the log feed queued {queued / 1e6:.1f} MB (cap {MAX_QUEUED_BYTES / 1e6:.1f} MB + a batch)")
    figure("log pump throughput", f"{pump_mb:.0f} MB/s", f">= {TARGET_MB_S:.0f} MB/s", pump_mb >= TARGET_MB_S)
    if pump_mb < TARGET_MB_S:
        failures.append(f"the log pump drains {pump_mb:.1f} MB/s (< {TARGET_MB_S:.0f})")
    figure("whole watch through a pipe, signatures on", f"{flood_mb:.0f} MB/s", f">= {WATCH_TARGET_MB_S:.0f} MB/s",
           flood_mb >= WATCH_TARGET_MB_S)
    if flood_mb < WATCH_TARGET_MB_S:
        failures.append(f"the whole watch drains {flood_mb:.1f} MB/s (< {WATCH_TARGET_MB_S:.0f})")
    print(f"FIGURE|whole watch, flood, per CPU second of its process|{flood_cpu:.0f} MB/s|reported|info")
    print(f"FIGURE|whole watch, decode-heavy (every stats line parsed)|{heavy_mb:.0f} MB/s|reported|info")
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
