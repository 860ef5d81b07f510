"""Our measuring client against the wire and a minimal raw client, on the simulator, up to concurrency 256 and
128K-token prompts.

One simulator (a real subprocess, in this process's session as the engine launches servers; deterministic:
``TOK_S`` tokens a second per request whatever the batch, first token after ``TTFT_MS``) serves every row. Per
concurrency, rounds alternate between

- **ours**: the product's streaming client (``engine.client.ServerClient.generate``: engine/stream.py's kept-alive
  connections and kernel receive stamps), closed loop, N in flight;
- **raw**: bench/_wire.py's minimal client (a connection per request in flight, no parsing): the capacity
  reference;

and, where this runs as root, the **wire** (bench/_wire.py's packet sniffer on the loopback interface) times the
same requests as they crossed the interface: the truth ours is judged against (TTFT p50 within 0.5 ms, TPOT p50
within 0.05 ms, tok/s within 0.5 %). Printed per concurrency: tok/s, TTFT p50, TPOT p50, bursts (answers read in
one piece: a starved client), the client's CPU per request and per SSE event (this process's CPU time over the
round ÷ its events: the judged figure, ≤ 40 µs per event at c = 64), the connections ours opened, and the load.

Then **128K-token prompts**: 8 requests in flight, each with a 128,000-token prompt, against a simulator with a
131,072 context: ours must not collapse (tok/s ≥ 0.9x the same point with short prompts).

    .venv/bin/python bench/bench_client_sim.py [--concurrency 1,8,64,256] [--tokens 64] [--repeats 2] [--no-long]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import figure, verdict  # noqa: E402
from _wire import Figures, RawClient, WireRequest, WireTap, available, figures, load  # noqa: E402

from specbench_tui.core.engines.sglang import SGLANG  # noqa: E402
from specbench_tui.engine.client import GenerateResult, ServerClient  # noqa: E402
from specbench_tui.sim.testing import SimProcess  # noqa: E402

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


def bodies(count: int, tokens: int, prompt_tokens: int = 40) -> list[dict[str, object]]:
    return [{"text": prompt(i, prompt_tokens), "stream": True,
             "sampling_params": {"max_new_tokens": tokens, "temperature": 0.0, "ignore_eos": True}}
            for i in range(count)]


async def ours(client: ServerClient, work: list[dict[str, object]], concurrency: int) -> tuple[list[GenerateResult], float]:
    queue = iter(work)
    results: list[GenerateResult] = []

    async def worker() -> None:
        for body in queue:
            results.append(await client.generate(str(body["text"]), body["sampling_params"]))  # type: ignore[arg-type]

    await client.reserve(concurrency)
    cpu = time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return results, time.process_time() - cpu


def our_figures(results: list[GenerateResult], tokens: int, cpu_s: float) -> Figures:
    bad = [r.error for r in results if not r.ok or r.completion_tokens != tokens]
    if bad:
        raise RuntimeError(f"ours: {len(bad)} of {len(results)} requests failed: {sorted(set(map(str, bad)))[:3]}")
    times = [(r.start, next(c.at for c in r.chunks if c.completion_tokens > 0), r.end) for r in results]
    return figures(times, tokens, cpu_s, sum(len(r.chunks) for r in results))


async def raw(port: int, work: list[dict[str, object]], concurrency: int, tokens: int) -> Figures:
    client = RawClient(port, SGLANG.generate_path)
    try:
        cpu = time.process_time()
        times = await client.run(work, concurrency)
        return figures(times, tokens, time.process_time() - cpu, len(times) * tokens)
    finally:
        client.close()


def pair(results: list[GenerateResult], seen: list[WireRequest], since: float
         ) -> tuple[list[tuple[float, float, float]], list[tuple[float, float, float]]]:
    """(sent, first token, done) of the requests both ours and the wire timed, matched by SGLang's ``rid``."""
    by_rid = {r.rid: r for r in seen if r.rid and r.sent >= since and r.first and r.done}
    ours_times, wire_times = [], []
    for result in results:
        wire = by_rid.get(result.rid)
        if wire is None or not result.ok:
            continue
        first = next(c.at for c in result.chunks if c.completion_tokens > 0)
        ours_times.append((result.start, first, result.end))
        wire_times.append((wire.sent, wire.first, wire.done))
    return ours_times, wire_times  # type: ignore[return-value]


def _row(c: int, who: str, f: Figures, extra: str = "") -> str:
    tpot = "-" if f.tpot_ms is None else f"{f.tpot_ms:.3f}"
    cpu = "-" if f.cpu_ms_per_request is None else f"{f.cpu_ms_per_request:.2f}"
    per_event = "-" if f.cpu_ms_per_request is None or not f.events else \
        f"{f.cpu_ms_per_request * f.requests * 1000 / f.events:.1f}"
    return (f"{c:>4} {who:5} {f.requests:>5} {f.tok_s:>9.1f} {f.ttft_ms:>9.2f} {tpot:>9} {f.bursts:>6} "
            f"{cpu:>9} {per_event:>8} {extra}")


async def level(sim: SimProcess, c: int, tokens: int, repeats: int, tap: bool, failures: list[str],
                prompt_tokens: int = 40, label: str = "") -> Figures:
    count = REQUESTS.get(c, 2 * c)
    if prompt_tokens > 1000:
        count = 2 * c
    work = bodies(count, tokens, prompt_tokens)
    mine: list[Figures] = []
    truth: list[Figures] = []
    paired: list[Figures] = []
    capacity: list[Figures] = []
    for round_ in range(repeats):
        for who in ("ours", "raw") if round_ % 2 == 0 else ("raw", "ours"):
            client = ServerClient(sim.url, SGLANG, request_timeout_s=600.0)
            since = time.monotonic()
            try:
                with WireTap(sim.port) if tap else _Nothing() as wire:
                    if who == "ours":
                        results, cpu = await ours(client, work, c)
                        mine.append(our_figures(results, tokens, cpu))
                        opened = client.stream_pool.opened if client.stream_pool else 0
                        print(_row(c, "ours", mine[-1], f"{opened} conns {label}"))
                    else:
                        capacity.append(await raw(sim.port, work, c, tokens))
                        print(_row(c, "raw", capacity[-1], label))
                if tap and who == "ours":
                    ours_times, wire_times = pair(results, wire.requests(), since)
                    paired.append(figures(ours_times, tokens))
                    truth.append(figures(wire_times, tokens))
                    print(_row(c, "wire", truth[-1], f"{len(wire_times)} of {len(results)} requests seen {label}"))
            finally:
                await client.aclose()
    med = _median_figures
    o, r = med(mine), med(capacity)
    per_event = statistics.median(f.cpu_ms_per_request * f.requests * 1000 / f.events for f in mine
                                  if f.cpu_ms_per_request is not None and f.events)
    name = f"simulator c={c}{label}"
    if c == 64 and not label:
        ok = per_event <= CPU_PER_EVENT_US
        figure(f"{name}: our client's CPU per SSE event ({load()})", f"{per_event:.1f} µs",
               f"<= {CPU_PER_EVENT_US:.0f} µs", ok)
        if not ok:
            failures.append(f"{name}: {per_event:.1f} µs of CPU per event")
    else:
        print(f"FIGURE|{name}: our client's CPU per SSE event ({load()})|{per_event:.1f} µs|info|info")
    print(f"FIGURE|{name}: tok/s ours / raw client ({o.tok_s:.0f} / {r.tok_s:.0f})|{o.tok_s / r.tok_s:.3f}|"
          f"info|info")
    if truth:
        w, o = med(truth), med(paired)  # ours over the same requests the wire saw (a dropped segment drops a pair)
        checks = ((f"tok/s ours / wire ({o.tok_s:.1f} / {w.tok_s:.1f})", o.tok_s / w.tok_s,
                   abs(o.tok_s / w.tok_s - 1) <= 0.005, "1 ± 0.005"),
                  (f"TTFT p50 ours − wire ({o.ttft_ms:.3f} − {w.ttft_ms:.3f} ms)", o.ttft_ms - w.ttft_ms,
                   abs(o.ttft_ms - w.ttft_ms) <= 0.5, "± 0.5 ms"),
                  (f"TPOT p50 ours − wire ({o.tpot_ms or 0:.4f} − {w.tpot_ms or 0:.4f} ms)",
                   (o.tpot_ms or 0) - (w.tpot_ms or 0), abs((o.tpot_ms or 0) - (w.tpot_ms or 0)) <= 0.05, "± 0.05 ms"))
        for what, value, ok, target in checks:
            figure(f"{name}: {what}", f"{value:.3f}", target, ok)
            if not ok:
                failures.append(f"{name}: {what}")
    return o


def _median_figures(sides: list[Figures]) -> Figures:
    return Figures(sides[0].requests, statistics.median(f.tok_s for f in sides),
                   statistics.median(f.ttft_ms for f in sides),
                   statistics.median(f.tpot_ms for f in sides if f.tpot_ms is not None) if sides[0].tpot_ms else None,
                   max(f.bursts for f in sides),
                   statistics.median(f.cpu_ms_per_request for f in sides if f.cpu_ms_per_request is not None)
                   if sides[0].cpu_ms_per_request is not None else None,
                   int(statistics.median(f.events for f in sides)))


class _Nothing:
    def __enter__(self) -> _Nothing:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


async def measure(levels: list[int], tokens: int, repeats: int, long: bool, failures: list[str]) -> None:
    why_not = available()
    tap = why_not is None
    print(f"wire truth: {'the loopback packet sniffer' if tap else f'not measured ({why_not})'}; "
          f"simulator {TOK_S:g} tok/s per request, TTFT {TTFT_MS:g} ms; {tokens} tokens per answer; {load()}")
    header = (f"{'c':>4} {'who':5} {'reqs':>5} {'tok/s':>9} {'TTFT ms':>9} {'TPOT ms':>9} {'burst':>6} "
              f"{'CPU ms/rq':>9} {'µs/event':>8}")
    with SimProcess(["--context-length", "131072", "--max-running-requests", "512"], profile_toml=PROFILE) as sim:
        sim.wait_ready(60)
        print(header)
        short: dict[int, Figures] = {}
        for c in levels:
            short[c] = await level(sim, c, tokens, repeats, tap, failures)
        if long:
            c = 8
            f = await level(sim, c, tokens, 1, tap, failures, LONG_PROMPT_TOKENS, " 128K prompts")
            base = short.get(c)
            if base is not None:
                ok = f.tok_s >= 0.9 * base.tok_s
                figure(f"simulator c={c}: tok/s with 128K-token prompts / short prompts ({f.tok_s:.0f} / "
                       f"{base.tok_s:.0f}; {load()})", f"{f.tok_s / base.tok_s:.3f}", ">= 0.9", ok)
                if not ok:
                    failures.append("128K prompts collapse the client's throughput")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="1,8,64,256")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--no-long", action="store_true", help="leave out the 128K-token prompts")
    args = parser.parse_args()
    failures: list[str] = []
    os.environ.setdefault("PYTHONHASHSEED", "0")
    asyncio.run(measure([int(c) for c in args.concurrency.split(",")], args.tokens, args.repeats,
                        not args.no_long, failures))
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
