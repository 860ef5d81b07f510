"""A batched watch: a server's output moves as batches from the pump to the screen, memory stays bounded.

- The whole watch of a real child process through a real pipe publishes one :class:`LogLines` event per read,
  never one per line, and the log file keeps every line (counted, in order).
- A crash line in the middle of a flood is still found, in its batch, by the signatures (RE2, over the batch).
- The log feed between the engine and the screen caps the bytes it queues: a flood drops display lines, counted,
  and the panel shows the newest lines; the lines reach the panel formatted (marker, name), so the UI thread only
  draws them (the app's drain moves a list).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st
from narrowing import present

from specbench_tui.application.logview import LogFeed, _classify, classify
from specbench_tui.core.engines.sglang import SGLANG
from specbench_tui.core.events import CrashDetected, Event, LogLines, ServerLaunching
from specbench_tui.core.launch import secret_redactor
from specbench_tui.core.logparse import BatchLine
from specbench_tui.core.secrets import secret_forms
from specbench_tui.core.signatures import SignatureSet, lines_touched
from specbench_tui.engine.server import ServerProcess

LINES = 200_000
CRASH_AT = 150_000
CRASH = "RuntimeError: CUDA error: an illegal instruction was encountered"

FEEDER = rf"""
import sys
out = sys.stdout.buffer
for i in range({LINES}):
    if i == {CRASH_AT}:
        out.write(b"{CRASH}\n")
    else:
        out.write(b"[2026-05-04 10:12:07 TP0] Load weight begin. avail mem=78.12 GB, line %d\n" % i)
out.flush()
"""


async def _watch(tmp_path: Path) -> tuple[list[Event], Path]:
    events: list[Event] = []
    log = tmp_path / "server.log"
    server = ServerProcess("c", [sys.executable, "-c", FEEDER], {}, log, SGLANG,
                           SignatureSet(builtins=SGLANG.crash_signatures), events.append, on_stats=lambda s: None)
    await server.start()
    await asyncio.wait_for(server.death, 120)
    await asyncio.wait_for(server.crash_report(), 30)
    # A crash does not stop the reading: the rest of the output still goes to the file.
    for _ in range(600):
        if sum(e.count for e in events if isinstance(e, LogLines)) >= LINES:
            break
        await asyncio.sleep(0.05)
    await server.stop(1.0)
    return events, log


async def test_the_watch_publishes_one_event_per_batch_and_the_file_keeps_every_line(tmp_path: Path) -> None:
    events, log = await _watch(tmp_path)
    batches = [e for e in events if isinstance(e, LogLines)]
    lines = sum(b.count for b in batches)
    assert lines == LINES
    assert len(batches) < LINES / 100, f"{len(batches)} events for {LINES} lines: not batched"
    numbers = [b.first for b in batches]
    assert numbers == sorted(numbers) and numbers[0] == 1
    assert all(later.first == earlier.first + earlier.count for earlier, later in zip(batches, batches[1:]))
    written = log.read_bytes().split(b"\n")
    assert len(written) == LINES + 1 and written[-1] == b""
    assert written[CRASH_AT].decode() == CRASH
    assert written[CRASH_AT + 1].endswith(b"line %d" % (CRASH_AT + 1))

    # The crash in the middle of the flood: found, said first, and marked fatal in its batch.
    crashes = [e for e in events if isinstance(e, CrashDetected)]
    assert [c.complete for c in crashes] == [False, True]
    assert crashes[0].signature == "cuda_illegal_instruction" and crashes[0].log_line_number == CRASH_AT + 1
    holder = next(b for b in batches if b.first <= CRASH_AT + 1 < b.first + b.count)
    assert (CRASH_AT + 1 - holder.first, "fatal") in holder.marked
    assert events.index(crashes[0]) < events.index(holder)


def test_a_flood_drops_display_lines_with_a_count_and_keeps_the_newest() -> None:
    feed = LogFeed(frame_lines=500, max_bytes=64 * 1024, keep=1000, threaded=False)
    feed.put(ServerLaunching(config_id="c", name="ddtree-b8", argv=(), gpus=(0,), port=1, pid=2, log_path="x"))
    first = 1
    for _ in range(200):  # 200 batches of 100 lines, ~6 KB each: far more than the 64 KB the feed queues
        text = "\n".join(f"[2026-05-04 10:12:07 TP0] flood line {n}" for n in range(first, first + 100))
        feed.put(LogLines(config_id="c", first=first, text=text, count=100))
        first += 100
    feed.put(LogLines(config_id="c", first=first, text=CRASH, count=1, marked=((0, "fatal"),)))
    assert feed.queued_bytes <= 64 * 1024, "a flood must not queue more than the cap"
    feed.format_pending()
    burst = feed.take()
    assert feed.received == 200 * 100 + 1
    assert len(burst.lines) + burst.dropped == feed.received
    assert 0 < len(burst.lines) <= 500 and burst.dropped > 0
    assert burst.lines[-1].startswith("✖ ddtree-b8") and burst.lines[-1].endswith(CRASH)
    assert burst.lines[-2].endswith(f"flood line {first - 1}")  # the newest lines, in order
    numbers = [int(line.rsplit(" ", 1)[1]) for line in burst.lines[:-1]]
    assert numbers == list(range(numbers[0], first))
    feed.close()


def test_the_feed_formats_on_its_own_thread_and_the_taker_only_takes() -> None:
    import threading

    formatted_on: list[str] = []
    ready = threading.Event()

    def on_ready() -> None:
        formatted_on.append(threading.current_thread().name)
        ready.set()

    feed = LogFeed(frame_s=0.0, on_ready=on_ready)
    feed.put(LogLines(config_id="c", first=1, text="a\nb WARNING: careful", count=2))
    assert ready.wait(30), "the feed's thread never formatted the batch"
    burst = feed.take()
    assert formatted_on and formatted_on[0] == "log-feed" != threading.current_thread().name
    assert burst.lines[0].endswith("│ a") and burst.lines[1].startswith("▲ ")
    feed.close()


# ------------------------------------------------------------------------------- the one pass over a batch

_PIECES = ["Decode batch, #running-req: 1", " batch", "Retract requests", "CUDA error: ", "batch failed", "Trace",
           "Traceback (most recent call last):", "[2026-05-04 10:12:07 TP0] ", "NCCL error", "é ü", "\ufffd",
           "adaptive runtime state", "ProcessGroupNCCL.cpp x Exception", "boom", "\t", " "]
_EXTRA = [("batch_failed", r"batch failed"), ("spans", r"boom\s+Trace"), ("boom_eol", r"boom$"),
          ("at_start", r"^ batch"), ("tab", r"\t\S")]
"""User signatures that overlap the stats hints (``batch failed`` starts inside `` batch``'s match), one that can
cross a line break in the joined text and anchored ones."""


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_PIECES), max_size=6).map("".join), min_size=1, max_size=30))
@example(["x boom", "Traceback (most recent call last):", "y"])  # a match across a line break hides the next
@example(["[2026-05-04 10:12:07 TP0] Prefill batch failed"])  # a hint's match hides a signature's
def test_the_one_pass_touches_every_line_a_signature_or_a_hint_matches(lines: list[str]) -> None:
    """What the watch relies on to skip the other lines of a batch: the lines the one RE2 pass touches hold every
    line one of the signatures matches (line by line, as :meth:`SignatureSet.match` decides) and every line
    holding a stats hint, each cut out exactly as it is."""
    signatures = SignatureSet(_EXTRA, SGLANG.crash_signatures)
    hints = SGLANG.stats_hints
    block = "\n".join(lines).encode()
    pass_ = present(signatures.scanner(hints))
    touched = lines_touched(pass_, block)
    assert [index for index, _ in touched] == sorted({index for index, _ in touched})
    assert all(line == lines[index].encode() for index, line in touched)
    wanted = {index for index, line in enumerate(lines)
              if signatures.match(line) is not None or any(hint in line for hint in hints)}
    assert wanted <= {index for index, _ in touched}
    assert all(signatures.may_match(lines[index].encode()) for index, line in enumerate(lines)
               if signatures.match(line) is not None)


STATS_FEEDER = r"""
import sys
out = sys.stdout.buffer
decode = b"[2026-05-04 10:12:07 TP0] Decode batch, #running-req: %d, #token: 1411, token usage: 0.01, accept len: 3.12, gen throughput (token/s): 141.52, #queue-req: 0\n"
for i in range(20000):
    out.write(decode % i if i % 20 == 7 else b"[2026-05-04 10:12:07 TP0] Load weight begin. line %d\n" % i)
    if i == 10000:
        out.write(b"[2026-05-04 10:12:07 TP0] The server is fired up and ready to roll!\n")
out.write(b"[2026-05-04 10:12:07 TP0] Retract requests. KV cache pool is full. Retract requests. #retracted_reqs: 3\n")
out.write(b"[2026-05-04 10:12:07 TP0] Prefill batch failed: the draft vocab does not fit\n")
out.flush()
"""


async def test_the_watch_reads_every_stats_line_in_order_the_ready_line_and_an_overlapping_crash(
        tmp_path: Path) -> None:
    """Through a real child and pipe: every stats line reaches the stats reader, in order, and nothing else does;
    the ready line is seen; a user signature whose match starts inside a stats hint's (``batch failed`` in
    ``Prefill batch failed``) still names the crash."""
    stats: list[BatchLine] = []
    events: list[Event] = []
    server = ServerProcess("c", [sys.executable, "-c", STATS_FEEDER], {}, tmp_path / "server.log", SGLANG,
                           SignatureSet([("batch_failed", r"batch failed")], SGLANG.crash_signatures),
                           events.append, on_stats=stats.append)
    await server.start()
    death = await asyncio.wait_for(server.death, 120)
    crash = await asyncio.wait_for(server.crash_report(), 30)
    await server.stop(1.0)
    assert server._ready_line.is_set()
    assert [s.running_req for s in stats if s.kind == "decode"] == list(range(7, 20000, 20))
    assert [(s.kind, s.num_token) for s in stats if s.kind != "decode"] == [("retract", 3)]
    assert death.signature == "batch_failed" and crash is not None and crash.signature == "batch_failed"
    assert crash.log_line_number == 20000 + 1 + 2


_WORDS = ["ERROR", "CRITICAL", "Error", "Exception", "error:", "error", "WARN", "WARNING", "Warning", "warning:",
          "deprecated", "Traceback (most recent call last)", "CUDA error", "CUDA out of memory", "NCCL error",
          "Segmentation fault", "core dumped", "Fatal Python error", "FATAL", "illegal instruction", "failed",
          "GGML_ASSERT(x) failed", "Scheduler hit an exception", "EngineCore encountered a fatal error",
          "AcceleratorError", "ValueError", "Err", "Warn", "fail", "[2026-05-04 10:12:07 TP0] ", "x", " ", ":", "_",
          "é", "\x1b[31m"]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_WORDS), max_size=6).map("".join),
       st.sampled_from([None, "", "info", "warning", "error", "fatal"]))
def test_the_panel_classifies_a_line_as_its_full_rule_does(line: str, level: str | None) -> None:
    """The live panel's pre-filter (a line holding none of the words of the level patterns is ``info`` without a
    search) never changes a line's level."""
    assert classify(line, level) == _classify(line, level)


@settings(max_examples=300, deadline=None)
@given(st.text(st.sampled_from([*map(chr, range(0x20, 0x7F)), "é", "\t", "\n", "\x00", "\u2028"]), min_size=4,
               max_size=24))
def test_the_watch_redacts_every_form_of_any_secret(secret: str) -> None:
    """The redactor searches a batch for one needle per secret (its longest run that no escaping changes) before
    it runs its regex: every spelling of the secret still goes (repr, JSON, shell quoting, twice escaped)."""
    redact = secret_redactor([secret])
    assert redact is not None
    for form in secret_forms(secret):
        line = f"[2026-05-04 10:12:07] server_args=ServerArgs(api_key={form}, x=1)"
        assert redact(line) != line, form
