"""Our measuring client against the wire and a minimal raw client, on the simulator (up to concurrency 256 and
128K-token prompts) and on a real llama.cpp server.

One server serves every row: ``--server sim`` (default) a simulator subprocess (deterministic: ``TOK_S`` tokens a
second per request whatever the batch, first token after ``TTFT_MS``), ``--server llamacpp`` a real ``llama-server``
on the 8-layer GGUF ``tools/setup_llama_server.sh`` prepares, ``--server sglang`` SGLang 0.5.23's real server on
CPU with the tiny model ``tools/setup_sglang_cpu.sh`` prepares, launched with the tests' CPU arguments
(tests/sglang_real.py) (each SKIP when it is not set up). Each runs in this
process's session, as the engine launches servers. Per concurrency, rounds alternate between

- **ours**: the product's streaming client (``engine.client.ServerClient.generate``: engine/stream.py's kept-alive
  connections and kernel receive stamps), closed loop, N in flight;
- **raw**: bench/_wire.py's minimal client (a connection per request in flight, no parsing): the capacity
  reference;

and, where this runs as root, the **wire** (bench/_wire.py's packet sniffer on the loopback interface) times the
same requests as they crossed the interface: the truth ours is judged against (TTFT p50 within 0.5 ms, TPOT p50
within 0.05 ms, tok/s within 0.5 %), paired with ours by SGLang's ``rid`` on the simulator (medians over the
requests seen on llama.cpp, whose requests carry no id). Printed per concurrency: tok/s, TTFT p50, TPOT p50,
bursts (answers read in one piece: a starved client), the client's CPU per request and per SSE event (this
process's CPU time over the round ÷ its events: on the simulator the judged figure, ≤ 40 µs per event at c = 64,
with the events a second one core can take), the connections ours opened, and the load.

Then, on the simulator, **128K-token prompts**: 8 requests in flight, each with a 128,000-token prompt, against a
131,072 context: ours must not collapse (tok/s ≥ 0.9x the raw client's at the same point: the server's prefill of
those prompts bounds both).

    .venv/bin/python bench/bench_client.py [--server sim|llamacpp|sglang] [--concurrency 1,8,64,256] [--tokens 64]
                                           [--repeats 2] [--no-long]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import ROOT, figure, verdict  # noqa: E402
from _wire import AgainstWire, Figures, RawClient, WireRequest, WireTap, available, figures, load  # noqa: E402

from specbench_tui.core.engines.base import STREAM_OPENAI, EngineProfile  # noqa: E402
from specbench_tui.core.engines.llamacpp import LLAMACPP  # noqa: E402
from specbench_tui.core.engines.sglang import SGLANG  # noqa: E402
from specbench_tui.engine.client import GenerateResult, ServerClient  # noqa: E402
from specbench_tui.sim.testing import SimProcess, free_port  # noqa: E402

TOK_S = 200.0
TTFT_MS = 5.0
PROFILE = f"""
seed = 1
[deterministic]
enabled = true
tok_s = {TOK_S}
accept_length = 1.0
ttft_ms = {TTFT_MS}
"""
REQUESTS = {1: 16, 8: 64, 64: 192, 256: 512}
CPU_PER_EVENT_US = 40.0
LONG_PROMPT_TOKENS = 128_000


def prompt(i: int, tokens: int = 40) -> str:
    words = ("alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta")
    return f"request {i}:" + "".join(f" {words[(i + k) % len(words)]}" for k in range(tokens))


@dataclass(frozen=True)
class Target:
    """The server under measurement and how each client speaks to it."""

    name: str
    url: str
    port: int
    profile: EngineProfile

    def params(self, tokens: int) -> dict[str, object]:
        return {"max_new_tokens": tokens, "temperature": 0.0, "ignore_eos": True}

    def raw_body(self, text: str, tokens: int) -> dict[str, object]:
        """What the raw client posts: the same request in the server's own format."""
        if self.profile.stream_format == STREAM_OPENAI:
            return {"prompt": text, "max_tokens": tokens, "stream": True, "temperature": 0.0, "ignore_eos": True}
        return {"text": text, "sampling_params": self.params(tokens), "stream": True}


async def ours(target: Target, client: ServerClient, texts: list[str], tokens: int,
               concurrency: int) -> tuple[list[GenerateResult], float]:
    queue = iter(texts)
    results: list[GenerateResult] = []

    async def worker() -> None:
        for text in queue:
            results.append(await client.generate(text, target.params(tokens)))

    await client.reserve(concurrency)
    cpu = time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return results, time.process_time() - cpu


def our_figures(results: list[GenerateResult], tokens: int, cpu_s: float) -> Figures:
    bad = [r.error for r in results if not r.ok or r.completion_tokens != tokens]
    if bad:
        raise RuntimeError(f"ours: {len(bad)} of {len(results)} requests failed: {sorted(set(map(str, bad)))[:3]}")
    return figures([_times(r) for r in results], tokens, cpu_s, sum(len(r.chunks) for r in results))


def _times(result: GenerateResult) -> tuple[float, float, float]:
    return result.start, next(c.at for c in result.chunks if c.completion_tokens > 0), result.end


async def raw(target: Target, texts: list[str], concurrency: int, tokens: int) -> Figures:
    client = RawClient(target.port, target.profile.generate_path)
    try:
        cpu = time.process_time()
        times = await client.run([target.raw_body(t, tokens) for t in texts], concurrency)
        return figures(times, tokens, time.process_time() - cpu, len(times) * tokens)
    finally:
        client.close()


def pair(results: list[GenerateResult], seen: list[WireRequest], since: float
         ) -> tuple[list[tuple[float, float, float]], list[tuple[float, float, float]]]:
    """(sent, first token, done) of ours and of the wire: the requests both timed, matched by SGLang's ``rid``;
    where the requests carry no id (OpenAI's format), every request of each side."""
    complete = [r for r in seen if r.sent >= since and r.first and r.done]
    if not any(r.rid for r in complete):
        if len(complete) < len(results):  # a dropped segment: medians over other requests than ours are no truth
            return [], []
        return [_times(r) for r in results if r.ok], [(r.sent, r.first, r.done) for r in complete]  # type: ignore[misc]
    by_rid = {r.rid: r for r in complete}
    ours_times, wire_times = [], []
    for result in results:
        wire = by_rid.get(result.rid)
        if wire is not None and result.ok:
            ours_times.append(_times(result))
            wire_times.append((wire.sent, wire.first, wire.done))
    return ours_times, wire_times  # type: ignore[return-value]


def _row(c: int, who: str, f: Figures, extra: str = "") -> str:
    tpot = "-" if f.tpot_ms is None else f"{f.tpot_ms:.3f}"
    cpu = "-" if f.cpu_ms_per_request is None else f"{f.cpu_ms_per_request:.2f}"
    per_event = "-" if f.cpu_ms_per_request is None or not f.events else \
        f"{f.cpu_ms_per_request * f.requests * 1000 / f.events:.1f}"
    return (f"{c:>4} {who:5} {f.requests:>5} {f.tok_s:>9.1f} {f.ttft_ms:>9.2f} {tpot:>9} {f.bursts:>6} "
            f"{cpu:>9} {per_event:>8} {extra}")


async def level(target: Target, c: int, tokens: int, repeats: int, tap: bool, failures: list[str],
                against: AgainstWire, prompt_tokens: int = 40, label: str = "") -> tuple[Figures, Figures]:
    """One concurrency's rounds; (ours, the raw client), medians over the rounds."""
    count = REQUESTS.get(c, 2 * c)
    if prompt_tokens > 1000:
        count = 2 * c
    texts = [prompt(i, prompt_tokens) for i in range(count)]
    warm = ServerClient(target.url, target.profile, request_timeout_s=600.0)
    try:  # one unmeasured wave first: a fresh server's first answers (slot set-up, first prefill) are no one's figure
        await ours(target, warm, [prompt(10_000 + i, prompt_tokens) for i in range(c)], tokens, c)
    finally:
        await warm.aclose()
    mine: list[Figures] = []
    truth: list[Figures] = []
    paired: list[Figures] = []
    capacity: list[Figures] = []
    for round_ in range(repeats):
        for who in ("ours", "raw") if round_ % 2 == 0 else ("raw", "ours"):
            client = ServerClient(target.url, target.profile, request_timeout_s=600.0)
            since = time.monotonic()
            try:
                with WireTap(target.port) if tap else contextlib.nullcontext() as wire:
                    if who == "ours":
                        results, cpu = await ours(target, client, texts, tokens, c)
                        mine.append(our_figures(results, tokens, cpu))
                        opened = client.stream_pool.opened if client.stream_pool else 0
                        print(_row(c, "ours", mine[-1], f"{opened} conns {label}"))
                    else:
                        capacity.append(await raw(target, texts, c, tokens))
                        print(_row(c, "raw", capacity[-1], label))
                if wire is not None and who == "ours":
                    ours_times, wire_times = pair(results, wire.requests(), since)
                    if not wire_times:
                        print(f"{'':>4} wire  the sniffer dropped segments of this round: not judged {label}")
                        continue
                    paired.append(figures(ours_times, tokens))
                    truth.append(figures(wire_times, tokens))
                    print(_row(c, "wire", truth[-1], f"{len(wire_times)} of {len(results)} requests seen {label}"))
            finally:
                await client.aclose()
    med = _median_figures
    o, r = med(mine), med(capacity)
    per_event = statistics.median(f.cpu_ms_per_request * f.requests * 1000 / f.events for f in mine
                                  if f.cpu_ms_per_request is not None and f.events)
    name = f"{target.name} c={c}{label}"
    rate = f"{1e6 / per_event:,.0f} events/s a core" if per_event else "-"
    if c == 64 and not label and target.name == "simulator":
        ok = per_event <= CPU_PER_EVENT_US
        figure(f"{name}: our client's CPU per SSE event ({rate}; {load()})", f"{per_event:.1f} µs",
               f"<= {CPU_PER_EVENT_US:.0f} µs", ok)
        if not ok:
            failures.append(f"{name}: {per_event:.1f} µs of CPU per event")
    else:
        print(f"FIGURE|{name}: our client's CPU per SSE event ({rate}; {load()})|{per_event:.1f} µs|info|info")
    print(f"FIGURE|{name}: tok/s ours / raw client ({o.tok_s:.0f} / {r.tok_s:.0f})|{o.tok_s / r.tok_s:.3f}|"
          f"info|info")
    if truth:
        w, o = med(truth), med(paired)  # ours over the same requests the wire saw (a dropped segment drops a pair)
        if not against.add(name, str(c) + label, o, w):
            failures.append(f"{name}: ours against the wire (see its three lines)")
    return o, r


def _median_figures(sides: list[Figures]) -> Figures:
    return Figures(sides[0].requests, statistics.median(f.tok_s for f in sides),
                   statistics.median(f.ttft_ms for f in sides),
                   statistics.median(f.tpot_ms for f in sides if f.tpot_ms is not None) if sides[0].tpot_ms else None,
                   max(f.bursts for f in sides),
                   statistics.median(f.cpu_ms_per_request for f in sides if f.cpu_ms_per_request is not None)
                   if sides[0].cpu_ms_per_request is not None else None,
                   int(statistics.median(f.events for f in sides)))


async def measure(server: str, levels: list[int], tokens: int, repeats: int, long: bool,
                  failures: list[str]) -> None:
    why_not = available()
    tap = why_not is None
    header = (f"{'c':>4} {'who':5} {'reqs':>5} {'tok/s':>9} {'TTFT ms':>9} {'TPOT ms':>9} {'burst':>6} "
              f"{'CPU ms/rq':>9} {'µs/event':>8}")
    with serving(server, max(levels)) as target:
        print(f"wire truth: {'the loopback packet sniffer' if tap else f'not measured ({why_not})'}; "
              f"{target.name}; {tokens} tokens per answer; {load()}")
        print(header)
        against = AgainstWire(target.name)
        for c in levels:
            await level(target, c, tokens, repeats, tap, failures, against)
        if long and server == "sim":
            f, capacity = await level(target, 8, tokens, 1, tap, failures, against, LONG_PROMPT_TOKENS,
                                      " 128K prompts")
            # The server's own prefill of 16 x 128K tokens bounds both clients alike: judged against the raw
            # client's capacity at the same point, not against short prompts
            ok = f.tok_s >= 0.9 * capacity.tok_s
            figure(f"simulator c=8: tok/s with 128K-token prompts, ours / raw client ({f.tok_s:.0f} / "
                   f"{capacity.tok_s:.0f}; {load()})", f"{f.tok_s / capacity.tok_s:.3f}", ">= 0.9", ok)
            if not ok:
                failures.append("128K prompts collapse the client's throughput")
        against.summary()


@contextlib.contextmanager
def serving(server: str, width: int) -> Iterator[Target]:
    """The server under measurement, up and ready, killed (its whole group) on exit."""
    if server == "sim":
        with SimProcess(["--context-length", "131072", "--max-running-requests", "512"], profile_toml=PROFILE) as sim:
            sim.wait_ready(60)
            yield Target("simulator", sim.url, sim.port, SGLANG)
        return
    if server == "sglang":
        with sglang_serving() as target:
            yield target
        return
    paths = llama_paths()
    port = free_port()
    argv = [paths["LLAMA_SERVER"], "-m", paths["SPEEDUP_TARGET_GGUF"], "--host", "127.0.0.1", "--port", str(port),
            "-np", str(width), "-c", str(width * 512), "--threads", "1"]
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, process_group=0)
        try:
            deadline = time.monotonic() + 120
            while not _healthy(port):
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError("llama-server did not start:\n" + log.read().decode(errors="replace")[-2000:])
                time.sleep(0.3)
            yield Target("llama.cpp", f"http://127.0.0.1:{port}", port, LLAMACPP)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextlib.contextmanager
def sglang_serving() -> Iterator[Target]:
    """SGLang's own server on CPU, in this process's session (as the engine launches it), killed with its group."""
    sys.path.insert(0, str(ROOT / "tests"))
    import sglang_real  # the tests' CPU arguments and set-up paths: one definition of how it runs here

    done = subprocess.run(["bash", str(ROOT / sglang_real.SETUP), "--print-paths"], capture_output=True, text=True,
                          check=False, timeout=120)
    paths = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    if done.returncode != 0 or not all(paths.get(k) for k in ("SGLANG_PYTHON", "SGLANG_TINY_MODEL")):
        raise LookupError(f"SGLang's CPU server is not set up: run {sglang_real.SETUP}")
    port = free_port()
    env = {**os.environ, **sglang_real.CPU_ENV, "SGLANG_PYSPY_DUMP_BEFORE_CRASH": "0",
           "SGLANG_CUDA_COREDUMP_BEFORE_CRASH": "0"}
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(sglang_real.argv(paths, port), stdout=log, stderr=subprocess.STDOUT, env=env,
                                process_group=0)
        try:
            deadline = time.monotonic() + sglang_real.STARTUP_TIMEOUT_S
            while not _healthy(port):
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError("SGLang did not start:\n" + log.read().decode(errors="replace")[-2000:])
                time.sleep(1.0)
            yield Target("SGLang", f"http://127.0.0.1:{port}", port, SGLANG)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def llama_paths() -> dict[str, str]:
    """What tools/setup_llama_server.sh built (it builds nothing with --print-paths)."""
    done = subprocess.run(["bash", str(ROOT / "tools/setup_llama_server.sh"), "--print-paths"], capture_output=True,
                          text=True, check=False, timeout=60)
    paths = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    if done.returncode != 0 or not all(Path(paths.get(k, "")).exists() for k in ("LLAMA_SERVER", "SPEEDUP_TARGET_GGUF")):
        raise LookupError("llama-server is not built: run tools/setup_llama_server.sh")
    return paths


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", choices=("sim", "llamacpp", "sglang"), default="sim")
    parser.add_argument("--concurrency", default=None,
                        help="default 1,8,64,256 (simulator), 1,8,32 (llama.cpp), 1,8 (SGLang on CPU)")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--no-long", action="store_true", help="leave out the 128K-token prompts")
    args = parser.parse_args()
    failures: list[str] = []
    os.environ.setdefault("PYTHONHASHSEED", "0")
    levels = args.concurrency or {"sim": "1,8,64,256", "llamacpp": "1,8,32", "sglang": "1,8"}[args.server]
    try:
        asyncio.run(measure(args.server, [int(c) for c in levels.split(",")], args.tokens, args.repeats,
                            not args.no_long, failures))
    except LookupError as missing:
        print(f"SKIP: {missing}")
        print(f"FIGURE|{args.server}: ours against the wire: not measured ({missing})|-|-|info")
        return 0
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
