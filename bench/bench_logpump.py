"""How fast a server's output is drained: the log pump alone, and the whole watch of a server (pump + crash
signatures + line levels + ready line + stats + one LogLine event per line), fed by a real child process
through a real pipe.

A server that logs faster than we drain blocks on its full pipe: the figure must be well above what any server
prints (SGLang at start-up, a flood of warnings). Lines are a mix of SGLang start-up lines (weights, CUDA
graphs, KV cache, a progress bar), with a decode line and a warning every 20 lines. Median of 3 runs each.

    .venv/bin/python bench/bench_logpump.py          # ~15 s
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import figure, verdict

from specbench_tui.core.signatures import SignatureSet
from specbench_tui.core.engines.sglang import SGLANG_SIGNATURES
from specbench_tui.engine.logpump import LogPump
from specbench_tui.core.engines.sglang import SGLANG
from specbench_tui.engine.server import ServerProcess

TARGET_MB_S = 50.0
PUMP_MB = 64
SERVER_MB = 64

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


async def whole_watch(folder: Path) -> float:
    """MB/s through a real pipe from a child that writes as fast as it can, into a :class:`ServerProcess`."""
    published: list[object] = []
    server = ServerProcess("bench", [sys.executable, "-c", _WRITER, str(SERVER_MB), BLOCK.hex()], {},
                           folder / "server.log", SGLANG, SignatureSet(builtins=SGLANG_SIGNATURES), published.append, on_stats=lambda s: None)
    started = time.perf_counter()
    await server.start()
    await asyncio.wait_for(server.death, 300)
    elapsed = time.perf_counter() - started
    await server.stop(1.0)
    size = (folder / "server.log").stat().st_size
    return size / elapsed / 1e6


def main() -> int:
    pump, watch = [], []
    for _ in range(3):
        with tempfile.TemporaryDirectory() as tmp:
            pump.append(asyncio.run(pump_alone(Path(tmp))))
            watch.append(asyncio.run(whole_watch(Path(tmp))))
    pump_mb, watch_mb = statistics.median(pump), statistics.median(watch)
    print(f"{'what':<44} {'MB/s (median of 3)':>20}   runs")
    print(f"{'log pump alone (engine/logpump.py)':<44} {pump_mb:>20.1f}   {', '.join(f'{v:.0f}' for v in pump)}")
    print(f"{'whole server watch, child process + pipe':<44} {watch_mb:>20.1f}   {', '.join(f'{v:.0f}' for v in watch)}")
    failures = []
    figure("log pump throughput", f"{pump_mb:.0f} MB/s", f">= {TARGET_MB_S:.0f} MB/s", pump_mb >= TARGET_MB_S)
    if pump_mb < TARGET_MB_S:
        failures.append(f"the log pump drains {pump_mb:.1f} MB/s (< {TARGET_MB_S:.0f})")
    print(f"FIGURE|server watch throughput|{watch_mb:.0f} MB/s|reported|info")
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
