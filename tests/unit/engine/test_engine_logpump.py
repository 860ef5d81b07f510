"""The log pump survives what servers print: progress bars, huge lines, invalid UTF-8, a failing reader."""

from __future__ import annotations

import asyncio
import io
import os
from pathlib import Path

from specbench_tui.engine.logpump import LogPump, PipeReader


async def _pump(chunks: list[bytes], tmp_path, fail: bool = False) -> tuple[list[str], list[str], str]:
    reader = asyncio.StreamReader()
    for chunk in chunks:
        reader.feed_data(chunk)
    reader.feed_eof()
    lines: list[str] = []
    progress: list[str] = []

    def on_line(number: int, text: str) -> None:
        lines.append(text)
        if fail:
            raise RuntimeError("reader bug")

    log = tmp_path / "logs" / "server.log"
    pump = LogPump(reader, log, on_line, on_progress=progress.append, progress_interval_s=0.0, max_line=1 << 20)
    await pump.run()
    return lines, progress, log.read_text(encoding="utf-8")


def _feeder(max_line: int = 1 << 20) -> tuple[LogPump, list[str], list[str], io.BytesIO]:
    """A pump fed by hand, chunk by chunk, as reads would deliver them."""
    lines: list[str] = []
    progress: list[str] = []
    # feed() never reads the stream, so none is needed
    pump = LogPump(None, Path("unused"), lambda n, t: lines.append(t),  # type: ignore[arg-type]
                   on_progress=progress.append, progress_interval_s=0.0, max_line=max_line)
    return pump, lines, progress, io.BytesIO()


def test_progress_bars_collapse_to_the_last_state():
    pump, lines, progress, log = _feeder()
    for chunk in (b"[t] start\n", b"\rCapturing batches:   0%|  | 0/36", b"\rCapturing batches:  50%|# | 18/36",
                  b"\rCapturing batches: 100%|##| 36/36", b"\n", b"done\r", b"\n"):
        pump.feed(chunk, log)
    assert lines == ["[t] start", "Capturing batches: 100%|##| 36/36", "done"]
    assert progress == ["Capturing batches:   0%|  | 0/36", "Capturing batches:  50%|# | 18/36"]
    assert log.getvalue().decode().splitlines() == lines


async def test_lines_over_64_kib_and_invalid_utf8(tmp_path):
    huge = b"x" * (3 * 65536) + b"\n"
    bad = b"caf\xc3 \xff\xfe end\n"
    lines, _, _ = await _pump([huge[:70000], huge[70000:], bad, b"tail without newline"], tmp_path)
    assert len(lines[0]) == 3 * 65536
    assert lines[1] == "caf\ufffd \ufffd\ufffd end"
    assert lines[2] == "tail without newline"


def test_a_pending_line_beyond_the_cap_is_cut_not_fatal():
    pump, lines, _, log = _feeder(max_line=1024)
    pump.feed(b"y" * 5000, log)
    pump.feed(b"\nz\n", log)
    assert [len(x) for x in lines] == [1024] * 4 + [5000 - 4096, 1]


async def test_a_failing_reader_does_not_stop_the_pump(tmp_path):
    lines, _, log = await _pump([b"a\nb\nc\n"], tmp_path, fail=True)
    assert lines == ["a", "b", "c"] and log == "a\nb\nc\n"


async def test_the_pipe_reader_yields_to_the_loop_in_a_flood_and_a_close_ends_a_waiting_read() -> None:
    """The watch reads a server's pipe straight (no StreamReader): data always waiting must not starve the loop
    (the measurement client and the crash's excerpt timer run on it), and a close (a teardown while a daemon
    still holds the pipe) wakes a read that waits, with an end of file."""
    read_end, write_end = os.pipe()
    reader = PipeReader(read_end)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    for _ in range(20):
        os.write(write_end, b"line\n" * 100)
        assert await reader.read(1 << 20) == b"line\n" * 100
    assert ticks >= 19, "the reader never let the loop run while data was waiting"
    task.cancel()
    waiting = asyncio.create_task(reader.read(1 << 20))
    for _ in range(10):  # a few turns of the loop: the read finds the pipe empty and waits
        await asyncio.sleep(0)
    assert reader._waiter is not None
    reader.close()
    assert await asyncio.wait_for(waiting, 30) == b""
    reader.close()  # twice is fine
    os.close(write_end)

    read_end, write_end = os.pipe()
    reader = PipeReader(read_end)
    os.write(write_end, b"last words")
    os.close(write_end)
    assert await reader.read(1 << 20) == b"last words"
    assert await reader.read(1 << 20) == b""
    reader.close()
