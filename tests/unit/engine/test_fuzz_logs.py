"""Hostile server output: the log pump and every log parser take random bytes, ``\\r`` storms, 1 MB lines,
ANSI and Rich markup, NUL and invalid UTF-8 without a crash and without a hang.

Hangs are caught by running the giants in a child process with a deadline: a parser that goes quadratic
holds the GIL (and, in the engine, the event loop that times every measurement), so no in-process timer
could stop it.
"""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
import time

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from specbench_tui.core.engines.sglang import line_timestamp, parse_batch_line
from specbench_tui.core.logparse import summarize_decode
from specbench_tui.core.signatures import SignatureSet, line_level
from specbench_tui.core.engines.sglang import SGLANG_SIGNATURES
from specbench_tui.engine.logpump import LogPump
from specbench_tui.core.engines.sglang import SGLANG

HOSTILE_PIECES = [
    b"\r", b"\n", b"\r\n", b"\x00", b"\xff\xfe", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\x1b[31m", b"\x1b[0m",
    b"\x1b]8;;http://x\x1b\\", b"[/bold]", b"[bold red]", b"[link=file:///etc/passwd]", b"\x08", b"\x7f",
    b"Decode batch, #running-req: 1, accept len: 3.5, gen throughput (token/s): 12.0, #queue-req: 0",
    b"[2025-01-01 12:00:00] ", b"[2025-13-45 99:99:99.9999999 TP0 DP1] Prefill batch. #new-token: -1, ",
    b"Traceback (most recent call last):", b"RuntimeError: CUDA error: an illegal instruction was encountered",
    b"ProcessGroupNCCL.cpp", b"The server is fired up and ready to roll!", "\u2028\u0085\ufeff".encode(),
    b"Capturing batches (bs=8 avail_mem=10.00 GB):  50%|\xe2\x96\x88\xe2\x96\x88   | 2/4",
]

chunks = st.lists(st.one_of(st.binary(max_size=300), st.sampled_from(HOSTILE_PIECES)), max_size=60)


class _Collector:
    def __init__(self) -> None:
        self.lines: list[tuple[int, str]] = []
        self.progress: list[str] = []

    def on_line(self, number: int, text: str) -> None:
        self.lines.append((number, text))
        # The engine's own per-line work, as ServerProcess._on_line does it.
        SignatureSet(builtins=SGLANG_SIGNATURES).match(text)
        line_level(text)
        SGLANG.parse_stats_line(text)
        assert SGLANG.ready_line is not None
        SGLANG.ready_line.search(text)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunks, st.sampled_from([64, 1000, 1 << 20]))
# Found by Hypothesis in CI: a line's pending part just under the limit, then its end in the next read (65 > 64).
@example([b"\x00" * 10, b"\x00" * 11, b"\x00" * 20, b"\x00" * 25, b"\x00" * 25, b"\x00" * 34, b"\x00" * 4 + b"\n"], 64)
@example([b"x" * 200 + b"\nshort\n"], 64)  # a long line that ends in the same read
def test_pump_takes_any_bytes(pieces: list[bytes], max_line: int) -> None:
    collector = _Collector()
    pump = LogPump(None, None, collector.on_line, on_progress=collector.progress.append,  # type: ignore[arg-type]
                   max_line=max_line, progress_interval_s=0.0)
    log = io.BytesIO()
    for piece in pieces:
        pump.feed(piece, log)
    numbers = [n for n, _ in collector.lines]
    assert numbers == list(range(1, len(numbers) + 1))
    assert all("\n" not in text for _, text in collector.lines)
    assert all(len(text) <= max_line for _, text in collector.lines)
    written = log.getvalue()
    assert written.count(b"\n") == pump.lines == len(collector.lines)
    written.decode("utf-8")  # the log file is always valid UTF-8
    assert pump.handler_errors == 0


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=400), st.binary(max_size=400).map(lambda b: b.decode("utf-8", "replace")),
                 st.lists(st.sampled_from([p.decode("utf-8", "replace") for p in HOSTILE_PIECES]), max_size=12)
                 .map("".join)))
def test_parsers_take_any_line(text: str) -> None:
    for line in (text, "[2025-01-01 00:00:00] Decode batch, " + text, "[2025-01-01 00:00:00 TP0] " + text):
        batch = parse_batch_line(line)
        if batch is not None:
            summarize_decode([batch])
        line_timestamp(line)
        SignatureSet([("mine", r"boom\d+")]).match(line)
        assert line_level(line) in ("info", "warning", "error", "fatal")


async def test_pump_run_reads_a_stream_in_random_pieces(tmp_path) -> None:
    import asyncio
    import random

    rng = random.Random(5)
    data = b"".join(rng.choice(HOSTILE_PIECES) + bytes(rng.randrange(256) for _ in range(rng.randrange(50)))
                    for _ in range(3000))
    reader = asyncio.StreamReader()
    collector = _Collector()
    pump = LogPump(reader, tmp_path / "x.log", collector.on_line)
    task = asyncio.create_task(pump.run())
    position = 0
    while position < len(data):
        step = rng.randrange(1, 5000)
        reader.feed_data(data[position:position + step])
        position += step
        await asyncio.sleep(0)
    reader.feed_eof()
    await asyncio.wait_for(task, 10)
    assert (tmp_path / "x.log").read_bytes().count(b"\n") == pump.lines > 0


# ------------------------------------------------------------------------------------------------- giants

_PIPELINE = textwrap.dedent(r"""
    import asyncio, sys, time
    from pathlib import Path
    from specbench_tui.core.events import log_lines
    from specbench_tui.core.signatures import SignatureSet
    from specbench_tui.core.engines.sglang import SGLANG
    from specbench_tui.engine.server import ServerProcess

    FEEDER = r'''
    import sys
    out = sys.stdout.buffer
    kind = sys.argv[1]
    MB = 1 << 20
    if kind == "line_1mb":
        out.write(b"x" * MB + b"\n")
    elif kind == "no_newline_8mb":
        for _ in range(8):
            out.write(b"y" * MB)
    elif kind == "cr_storm":
        for _ in range(4):
            out.write(b"\r" * MB)
        out.write(b"\n" + (b"\r\r\n" * 100000) + b"progress 1%\r" * 50000 + b"\n")
    elif kind == "many_lines":
        out.write(b"[2025-01-01 00:00:00] Decode batch, #running-req: 1, accept len: 2.00, gen throughput (token/s): 1.0, #queue-req: 0\n" * 20000)
    elif kind == "nul_and_invalid_utf8":
        out.write((b"\x00\xff\xfe\xc3\x28\xed\xa0\x80" * (MB // 8)) + b"\n")
    elif kind == "ansi_and_markup":
        out.write((b"\x1b[1;31m[/bold][bold]\x1b]8;;x\x1b\\[link=x]\x1b[0m" * (MB // 40)) + b"\n")
    elif kind == "newline_storm":
        out.write(b"\n" * (MB // 8))
    elif kind == "crash_after_junk":
        out.write(b"\xff" * MB + b"\nRuntimeError: CUDA error: an illegal instruction was encountered\n")
    out.flush()
    '''

    async def main(kind):
        lines = []
        server = ServerProcess("c", [sys.executable, "-c", FEEDER, kind], {}, Path(sys.argv[2]) / f"{kind}.log",
                               SGLANG, SignatureSet(builtins=SGLANG.crash_signatures), lambda e: lines.extend(log_lines([e])), on_stats=lambda s: None)
        await server.start()
        death = await asyncio.wait_for(server.death, 60)
        await server.stop(1.0)
        crash = await server.crash_report()
        print(kind, len(lines), death.kind, crash.signature if crash else None, flush=True)

    started = time.monotonic()
    for kind in sys.argv[3:]:
        t = time.monotonic()
        asyncio.run(main(kind))
        print(f"{kind}: {time.monotonic() - t:.2f} s", flush=True)
""")

GIANTS = ["line_1mb", "no_newline_8mb", "cr_storm", "many_lines", "nul_and_invalid_utf8", "ansi_and_markup",
          "newline_storm", "crash_after_junk"]


def _bounded(argv: list[str], limit_s: float) -> tuple[str, float]:
    started = time.monotonic()
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=limit_s, check=False)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"no answer within {limit_s:g} s (a hang): {(exc.stdout or b'').decode(errors='replace')}")
    output = proc.stdout.decode(errors="replace") + proc.stderr.decode(errors="replace")
    assert proc.returncode == 0, output
    return output, time.monotonic() - started


def test_giant_outputs_through_the_real_pump_and_crash_watch(tmp_path) -> None:
    output, _ = _bounded([sys.executable, "-c", _PIPELINE, "-", str(tmp_path), *GIANTS], limit_s=60)
    results = {line.split()[0]: line.split() for line in output.splitlines() if line and not line.endswith(" s")}
    assert set(results) == set(GIANTS), output
    assert all(r[2] in ("exit", "crash") for r in results.values()), output
    assert results["crash_after_junk"][3] == "cuda_illegal_instruction", output
    assert int(results["many_lines"][1]) >= 20000
    for kind in GIANTS:
        assert (tmp_path / f"{kind}.log").read_bytes().decode("utf-8")  # valid UTF-8, whatever came in


_ONE_PARSE = textwrap.dedent("""
    import sys, time
    line = sys.stdin.read()
    from specbench_tui.core.signatures import SignatureSet, line_level
    from specbench_tui.core.engines.sglang import SGLANG
    t = time.monotonic()
    SGLANG.parse_stats_line(line); SignatureSet(builtins=SGLANG.crash_signatures).match(line); line_level(line)
    print(f"{time.monotonic() - t:.3f}")
""")

PUMP_MAX_LINE = 1 << 20
"""The longest line the pump hands on (LogPump's default ``max_line``)."""


def _parse_within(line: str, limit_s: float) -> float:
    started = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-c", _ONE_PARSE], input=line.encode(), capture_output=True, check=False,
                              timeout=limit_s)
    except subprocess.TimeoutExpired:
        pytest.fail(f"parsing one {len(line)}-character line took over {limit_s:g} s (a hang of the engine loop)")
    assert proc.returncode == 0, proc.stderr.decode()
    return time.monotonic() - started


def test_a_plain_giant_line_parses_in_bounded_time() -> None:
    _parse_within("z" * PUMP_MAX_LINE, limit_s=10)


def test_a_giant_decode_batch_line_parses_in_bounded_time() -> None:
    _parse_within("[2025-01-01 00:00:00] Decode batch, " + "accept len " * (PUMP_MAX_LINE // 11), limit_s=3)


def test_a_giant_line_of_repeated_signature_prefixes_matches_in_bounded_time() -> None:
    _parse_within("ProcessGroupNCCL.cpp " * (PUMP_MAX_LINE // 21), limit_s=3)
