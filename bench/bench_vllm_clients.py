"""Our client beside vLLM's own ``vllm bench serve`` on ONE real vLLM server, at concurrency 1, 8 and 64.

One ``vllm serve`` (the CPU build in ``.venv-vllm`` and the tiny model ``tools/setup_vllm.sh`` prepares; no
speculation, ``--enforce-eager``) is started once; both clients then measure it in turn, at each concurrency,
with the same prompts in the same order (the ``code`` workload's items, cycled as our load points cycle them,
written as vLLM's ``sharegpt`` dataset file with ``--disable-shuffle``: its ``custom`` JSONL reader needs pandas,
which the vLLM venv lacks; both send the prompt text as a plain completion, no chat template), the same output
length (``--sharegpt-output-len`` = our ``max_new_tokens``, ``--ignore-eos``, greedy), the same number of
requests and a warm-up each:

- **ours**: the product's own measuring code (``engine.loadrun.run_point`` over ``ServerClient`` and
  ``Session`` with the ``vllm`` profile: the streaming ``/v1/completions`` client with kernel receive stamps that
  the orchestrator uses), closed loop, N in flight, with the ``stream_options`` of a sweep without speculation
  (``include_usage``, as ``vllm bench serve`` asks: ``continuous_usage_stats`` cost this server 6-12 % of its tok/s
  at c = 64, a usage object built per chunk on the cores the clients share);
- **vLLM**: ``vllm bench serve --backend vllm --dataset-name sharegpt --max-concurrency N`` (vLLM 0.32.0's
  ``vllm/benchmarks/serve.py``), run as ``python -m vllm.entrypoints.cli.main`` from ``.venv-vllm``, with
  ``--save-detailed`` so its per-request TTFT, ITLs and latencies can be summarised exactly as ours are.

Two more rows: **raw**, bench/_wire.py's minimal client on the same prompts (a kept-alive connection per request in
flight, no parsing: the server's capacity through a client that costs almost nothing), and, where this runs as
root, the **wire**: bench/_wire.py's packet sniffer on the loopback interface times ours' requests as they crossed
the interface, the truth ours is judged against. The server runs in this process's session, as the engine starts
servers (in a session of its own, Linux schedules it as another group and a client is woken only when it yields:
TTFT = e2e, TPOT 0, tok/s 0.23-0.9x).

Both clients run on the same CPUs, away from those ``vllm serve`` binds its compute to: vLLM's CPU build pins its
worker to a core (``VLLM_CPU_OMP_THREADS_BIND=auto``: core 0 on 2 cores, the other left to the API server and the
rest) and a client that shares that core changes how the server streams, whatever the client: on 2 cores, an
aiohttp client written as ``vllm bench serve``'s, pinned there, got its answers in one burst (TTFT p50 94-192 ms,
TTFT = e2e) and pinned to the other core streamed (TTFT 16-34 ms). Unpinned, where each client runs is the
scheduler's choice, and the long-lived bench process and each new ``vllm bench serve`` process can be measuring two
different servers (``--no-pin`` leaves it so, to see it). The bench pins every thread of its own process (ours; the
``vllm bench serve`` child inherits it) to the CPUs no server thread is bound to, once the server is up.

Per concurrency and client: output tok/s (all completion tokens ÷ the first send to the last answer; vLLM: its
``output_throughput``), TTFT p50 (median over requests), TPOT p50 (median over requests of (e2e − TTFT) ÷
(tokens − 1), vLLM's own definition), ITL (median over requests of each request's mean inter-token gap),
``burst``: the requests whose whole answer reached the client at one instant (TTFT = e2e, TPOT 0: a starved
client, or a server that held the stream) and the client's CPU per request (ours: this process; vLLM's: its
process's rusage). Judged (issue 44): ours ÷ vLLM's tok/s ≥ 1.0 at c = 1 and 8 and ≥ 0.95 at c = 64; ours ≥ 0.9×
the raw client at c = 8; against the wire, ours within 0.5 % of its tok/s, 0.5 ms of its TTFT p50 and 0.05 ms of
its TPOT p50.

The two clients cannot measure the same seconds of the server, and on 2 cores this server's speed drifts from one
round to the next by more than the clients differ (16 requests at c = 1: e2e 169-190 ms between rounds, ours and
the raw client within 1 % of each other in each round; with 8 requests a round, ours ÷ vLLM's read 0.88-0.99 over
four runs while the wire agreed with ours to 0.15 %). So each round measures the three clients back to back, in an
order that rotates, and the judged ratio is the median over the rounds of each round's own ratio (the drift
between rounds cancels), with the rounds' range printed beside it; rounds are long enough (``REQUESTS``) that one
slow second of the server is a small part of any of them. Before the first level the server is warmed until its
decode step holds (:func:`warm_server`): a fresh server on 2 cores decoded c = 1 at 5.8 ms a step in its first rounds
and at 2.8 ms two minutes later, whatever client measured it.

Without ``.venv-vllm`` or the model it prints SKIP lines (exit 0). About 11 minutes on 2 cores (server start
30-60 s, each of the 15 ``vllm bench serve`` runs ~15 s of imports). Every figure line carries the load average.

    .venv/bin/python bench/bench_vllm_clients.py [--concurrency 1,8,64] [--tokens 64] [--repeats 5] [--no-pin]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _wire  # noqa: E402
from _common import ROOT, figure, verdict  # noqa: E402

from specbench_tui.core.engines.vllm import VLLM  # noqa: E402
from specbench_tui.core.load import point_item  # noqa: E402
from specbench_tui.core.records import STATUS_OK, Measurement  # noqa: E402
from specbench_tui.core.sweep.loader import load_sweep  # noqa: E402
from specbench_tui.core.plan import build_plan  # noqa: E402
from specbench_tui.engine.client import ServerClient  # noqa: E402
from specbench_tui.engine.loadrun import run_point, warm_up  # noqa: E402
from specbench_tui.engine.server import find_free_port  # noqa: E402
from specbench_tui.engine.workloads import Labels, Session, Workload, build_workload  # noqa: E402

REQUESTS = {1: 32, 8: 64, 64: 256}
"""Requests per concurrency: 8 one at a time, 4 waves of 8, 2 waves of 64."""
BURST_S = 0.001
"""An answer whose last token came within this of its first arrived in one burst (64 tokens: under 16 µs a token)."""
STARTUP_TIMEOUT_S = 600.0
ITEMS = ("fibonacci", "quicksort", "binary_search", "lru_cache", "merge_intervals", "trie")


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def vllm_paths() -> dict[str, str] | str:
    """What tools/setup_vllm.sh prepared (it installs nothing with --print-paths), or why not."""
    done = subprocess.run(["bash", str(ROOT / "tools/setup_vllm.sh"), "--print-paths"], capture_output=True,
                          text=True, check=False, timeout=120)
    if done.returncode != 0:
        return (done.stderr.strip().splitlines() or ["tools/setup_vllm.sh --print-paths failed"])[-1]
    paths = {}
    for line in done.stdout.splitlines():
        key, _, value = line.partition("=")
        if key and value:
            paths[key] = shlex.split(value)[0]
    missing = [k for k in ("VLLM_BIN", "VLLM_PYTHON", "VLLM_TINY_MODEL") if not Path(paths.get(k, "")).exists()]
    return f"missing {', '.join(missing)}: run tools/setup_vllm.sh" if missing else paths


@contextlib.contextmanager
def vllm_server(paths: dict[str, str], port: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """One ``vllm serve`` in its own process group, in this process's session (as the engine launches servers: in a
    session of its own it is another scheduling group, which starves the clients), stopped (SIGTERM, then SIGKILL
    of the group) on exit."""
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "LD_PRELOAD": paths.get("VLLM_LIBIOMP", "")}
    argv = [paths["VLLM_BIN"], "serve", paths["VLLM_TINY_MODEL"], "--served-model-name", "tiny", "--host",
            "127.0.0.1", "--port", str(port), "--max-model-len", "2048", "--dtype", "float32", "--enforce-eager"]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, process_group=0)
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


async def wait_ready(client: ServerClient, proc: subprocess.Popen[bytes]) -> float:
    started = time.monotonic()
    while time.monotonic() - started < STARTUP_TIMEOUT_S:
        if proc.poll() is not None:
            raise RuntimeError(f"vllm serve exited with {proc.returncode} before it was ready")
        if await client.healthy(timeout_s=2.0):
            return time.monotonic() - started
        await asyncio.sleep(0.5)
    raise RuntimeError(f"vllm serve not ready after {STARTUP_TIMEOUT_S:.0f} s")


def server_bound_cpus(pgid: int) -> set[int]:
    """The CPUs that some thread of the server's process group is bound to (an affinity narrower than ours):
    vLLM's CPU worker and its OpenMP threads."""
    ours = os.sched_getaffinity(0)
    bound: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            if os.getpgid(int(entry)) != pgid:
                continue
            for tid in os.listdir(f"/proc/{entry}/task"):
                with contextlib.suppress(OSError):
                    cpus = os.sched_getaffinity(int(tid))
                    if cpus < ours:
                        bound |= cpus
    return bound


def pin_clients(server_pgid: int) -> str:
    """Bind every thread of this process (ours, and the ``vllm bench serve`` children it starts) to the CPUs the
    server's compute is not bound to; what was done, for the header line."""
    ours = os.sched_getaffinity(0)
    bound = server_bound_cpus(server_pgid)
    free = ours - bound
    if not bound or not free:
        return f"clients unpinned (server bound to {sorted(bound) or 'no CPU'} of {sorted(ours)})"
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(int(tid), free)
    return f"both clients on CPUs {sorted(free)} (vLLM's worker bound to {sorted(bound)})"


@dataclass(frozen=True)
class Side:
    """One client's figures at one concurrency."""

    requests: int
    tok_s: float
    ttft_ms: float
    tpot_ms: float | None
    itl_ms: float | None
    seconds: float
    bursts: int = 0
    """Requests whose whole answer arrived at one instant (TTFT = e2e: no gap between any of its tokens)."""
    cpu_ms: float | None = None
    """The client's CPU time per request (ours: this process; vLLM's: its process, from the children's rusage)."""
    since: float = 0.0
    """When the measured requests began, after the warm-up (monotonic; ours only): the wire's share of a round."""


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def sweep_text(tokens: int) -> str:
    items = ", ".join(f'"{item}"' for item in ITEMS)
    return f"""
[sweep]
name = "vllm-clients"
warmup = 1
[engine]
profile = "vllm"
launcher = "command"
command = ["vllm", "serve"]
[server.args]
model = "tiny"
[[configs]]
name = "baseline"
[[workloads]]
name = "code"
kind = "code"
items = [{items}]
max_new_tokens = {tokens}
temperature = 0.0
ignore_eos = true
"""


async def ours(session: Session, workload: Workload, concurrency: int, count: int) -> Side:
    """The product's closed-loop load point: ``count`` requests, ``concurrency`` in flight."""
    records: list[Measurement] = []
    label = f"c{concurrency}"
    labels = Labels(config_id="baseline", config="baseline", workload="code")
    await warm_up(workload, session, label)
    await session.client.reserve(concurrency)
    since = time.monotonic()
    cpu = time.process_time()
    run = await run_point(workload, session, labels, label, 1, count, 0, records.append, set())
    cpu = time.process_time() - cpu
    ok = [m for m in records if m.status == STATUS_OK and m.completion_tokens]
    if len(ok) != count:
        why = sorted({f"{m.status}: {m.error or m.http_status or 'no tokens'}" for m in records if m not in ok})
        raise RuntimeError(f"ours at c={concurrency}: {count - len(ok)} of {count} requests failed ({'; '.join(why)})")
    tokens = sum(m.completion_tokens or 0 for m in ok)
    tpot = [((m.e2e_s or 0) - (m.ttft_s or 0)) / (m.completion_tokens - 1) * 1000 for m in ok
            if m.completion_tokens and m.completion_tokens > 1]
    bursts = sum(1 for m in ok if (m.e2e_s or 0) - (m.ttft_s or 0) < BURST_S)
    return Side(len(ok), tokens / run.wall_s, 1000 * statistics.median(m.ttft_s or 0 for m in ok), _median(tpot),
                _median([m.itl_mean_s * 1000 for m in ok if m.itl_mean_s is not None]), run.wall_s, bursts,
                cpu * 1000 / len(ok), since)


def theirs(paths: dict[str, str], port: int, prompts: Path, tokens: int, concurrency: int, count: int,
           out_dir: Path, round_: int = 0) -> Side:
    """``vllm bench serve`` with the same prompts, length and concurrency; its own detailed result file."""
    name = f"vllm-c{concurrency}-{round_}.json"
    argv = [paths["VLLM_PYTHON"], "-m", "vllm.entrypoints.cli.main", "bench", "serve", "--backend", "vllm",
            "--base-url", f"http://127.0.0.1:{port}", "--endpoint", "/v1/completions", "--model", "tiny",
            "--tokenizer", paths["VLLM_TINY_MODEL"], "--dataset-name", "sharegpt", "--dataset-path", str(prompts),
            "--disable-shuffle", "--sharegpt-output-len", str(tokens), "--ignore-eos",
            "--temperature", "0", "--num-prompts", str(count), "--max-concurrency", str(concurrency),
            "--num-warmups", str(concurrency), "--percentile-metrics", "ttft,tpot,itl,e2el", "--disable-tqdm",
            "--save-result", "--save-detailed", "--result-dir", str(out_dir), "--result-filename", name]
    env = {**os.environ, "LD_PRELOAD": ""}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False, timeout=900)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if done.returncode != 0:
        raise RuntimeError(f"vllm bench serve at c={concurrency} exited {done.returncode}:\n"
                           + "\n".join((done.stdout + done.stderr).splitlines()[-15:]))
    result = json.loads((out_dir / name).read_text())
    ttfts = [t * 1000 for t in result["ttfts"]]
    lens = result["output_lens"]
    tpot = [(lat - ttft) / (n - 1) * 1000 for lat, ttft, n in zip(result["latencies"], result["ttfts"], lens)
            if n > 1]
    itl = [statistics.fmean(gaps) * 1000 for gaps in result["itls"] if gaps]
    if result["completed"] != count or any(n != tokens for n in lens):
        raise RuntimeError(f"vllm bench serve at c={concurrency}: {result['completed']} of {count} completed, "
                           f"output lengths {sorted(set(lens))}")
    bursts = sum(1 for lat, ttft in zip(result["latencies"], result["ttfts"]) if lat - ttft < BURST_S)
    return Side(result["completed"], float(result["output_throughput"]), statistics.median(ttfts), _median(tpot),
                _median(itl), float(result["duration"]), bursts, cpu_s * 1000 / max(result["completed"], 1))


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


@dataclass(frozen=True)
class Level:
    """One concurrency to measure on the running server."""

    paths: dict[str, str]
    port: int
    work: Path
    tokens: int
    concurrency: int
    repeats: int


def _row(c: int, who: str, side: Side) -> str:
    cpu = "-" if side.cpu_ms is None else f"{side.cpu_ms:.2f}"
    return (f"{c:>3} {who:7} {side.requests:>4} {side.tok_s:>9.1f} {side.ttft_ms:>12.2f} {_fmt(side.tpot_ms):>12} "
            f"{_fmt(side.itl_ms):>8} {side.seconds:>7.2f} {side.bursts:>6} {cpu:>9}")


def _med(sides: Sequence[Side], key: str) -> float | None:
    return _median([v for v in (getattr(s, key) for s in sides) if v is not None])


def _paired(ours_: Sequence[Side], theirs_: Sequence[Side]) -> list[float]:
    """Each round's ours ÷ theirs tok/s (the two measured back to back in that round), sorted."""
    return sorted(a.tok_s / b.tok_s for a, b in zip(ours_, theirs_) if b.tok_s)


def _from_wire(f: _wire.Figures) -> Side:
    return Side(f.requests, f.tok_s, f.ttft_ms, f.tpot_ms, None, 0.0, f.bursts)


async def raw_side(port: int, texts: list[str], tokens: int, concurrency: int,
               extra: dict[str, object] | None = None) -> Side:
    """The minimal client (bench/_wire.py) on the same prompts: the server's capacity through a client that costs
    almost nothing (``extra``: more fields of every request, such as ``stream_options``)."""
    client = _wire.RawClient(port, VLLM.generate_path)
    bodies: list[dict[str, object]] = [{"model": "tiny", "prompt": t, "max_tokens": tokens, "stream": True,
                                        "ignore_eos": True, "temperature": 0.0, **(extra or {})} for t in texts]
    try:
        await client.run(bodies[:concurrency], concurrency)  # warm-up: a connection per slot
        cpu = time.process_time()
        times = await client.run(bodies, concurrency)
        f = _wire.figures(times, tokens, time.process_time() - cpu)
    finally:
        client.close()
    return Side(f.requests, f.tok_s, f.ttft_ms, f.tpot_ms, None, 0.0, f.bursts, f.cpu_ms_per_request)


WARM_MAX_S = 180.0
WARM_STEADY = 0.05


async def warm_server(port: int, texts: list[str], tokens: int) -> str:
    """Rounds of the raw client at c = 1 until the server's decode step holds (two rounds' TPOT p50 within 5 %, three
    rounds at least) or :data:`WARM_MAX_S` pass, then one at c = 64: on 2 cores a fresh ``vllm serve`` decoded
    c = 1 at 5.8 ms a step in the first rounds and 2.8 ms two minutes later, whichever client measured it, so the
    first level's first rounds judged the server's warm-up rather than the clients. What it saw, for the header."""
    start, seen = time.monotonic(), []
    batch = (texts * (16 // max(1, len(texts)) + 1))[:16]
    while time.monotonic() - start < WARM_MAX_S:
        side = await raw_side(port, batch, tokens, 1)
        seen.append(side.tpot_ms or 0.0)
        if len(seen) >= 3 and seen[-2] and abs(seen[-1] - seen[-2]) / seen[-2] < WARM_STEADY:
            break
    await raw_side(port, (texts * 64)[:128], tokens, 64)
    steps = ", ".join(f"{t:.2f}" for t in seen)
    return f"server warmed for {time.monotonic() - start:.0f} s (raw client, c = 1 TPOT p50 by round: {steps} ms; then c = 64)"


async def _round(level: Level, session: Session, workload: Workload, texts: list[str], prompts: Path, who: str,
                 round_: int, tap: bool) -> tuple[Side, Side | None]:
    """One client's round at one concurrency; with the wire's figures for ours when the sniffer can run (it runs
    beside every client's rounds alike: its CPU is on the same cores)."""
    c, count = level.concurrency, len(texts)
    with _wire.WireTap(level.port) if tap else contextlib.nullcontext() as wire:  # every client beside the sniffer
        if who == "vLLM":
            return await asyncio.to_thread(theirs, level.paths, level.port, prompts, level.tokens, c, count,
                                           level.work, round_), None
        if who == "raw":
            return await raw_side(level.port, texts, level.tokens, c), None
        side = await ours(session, workload, c, count)
    if wire is None:
        return side, None
    seen = [r for r in wire.requests() if r.sent >= side.since and r.first and r.done]
    if len(seen) < count:  # the sniffer dropped a segment: medians over other requests than ours would be no truth
        print(f"    (the wire saw {len(seen)} of {count} requests of this round: the round is not judged)")
        return side, None
    return side, _from_wire(_wire.wire_figures(seen, level.tokens, side.since))


def _judge(name: str, value: float | None, ok: bool, target: str, failures: list[str], shown: str) -> None:
    if value is None:
        print(f"FIGURE|{name}: not measured|-|{target}|info")
        return
    figure(f"{name} ({shown}; {load()})", f"{value:.3f}", target, ok)
    if not ok:
        failures.append(f"{name}: {value:.3f} outside {target}")


async def compare_level(level: Level, session: Session, workload: Workload, texts: dict[str, str],
                        failures: list[str], tap: bool, against: _wire.AgainstWire) -> None:
    """``repeats`` rounds of ours, vLLM's client and the raw client at one concurrency, in an order that rotates
    (the server's drift over the rounds falls on all), the wire timing ours; figures: the clients' medians."""
    c, count = level.concurrency, REQUESTS.get(level.concurrency, 2 * level.concurrency)
    # vLLM's client gets the same prompts in the same order: ours cycles the items (point_item).
    ordered = [texts[point_item(workload.items(), i)[0]] for i in range(count)]
    prompts = level.work / f"prompts-c{c}.json"
    prompts.write_text(json.dumps([
        {"conversations": [{"from": "human", "value": text},
                           {"from": "gpt", "value": "unused: --sharegpt-output-len sets the length"}]}
        for text in ordered]))
    sides: dict[str, list[Side]] = {"ours": [], "wire": [], "ours-judged": [], "vLLM": [], "raw": []}
    order = ("ours", "vLLM", "raw")
    for round_ in range(level.repeats):
        for who in order[round_ % 3:] + order[:round_ % 3]:
            side, wire = await _round(level, session, workload, ordered, prompts, who, round_, tap)
            sides[who].append(side)
            print(_row(c, who, side))
            if wire is not None:
                sides["wire"].append(wire)
                sides["ours-judged"].append(side)  # ours in the rounds the wire saw whole: the pairs judged
                print(_row(c, "wire", wire))
    med = {who: {key: _med(got, key) for key in ("tok_s", "ttft_ms", "tpot_ms", "cpu_ms")}
           for who, got in sides.items() if got}
    ours_, theirs_, raw_ = med["ours"], med["vLLM"], med["raw"]
    print(f"    CPU per request: ours {_fmt(ours_['cpu_ms'])} ms, vLLM's client {_fmt(theirs_['cpu_ms'])} ms "
          "(its process, start-up included), "
          f"raw {_fmt(raw_['cpu_ms'])} ms; {load()}")
    paired = _paired(sides["ours"], sides["vLLM"])
    ratio = statistics.median(paired)
    floor = 1.0 if c < 64 else 0.95
    _judge(f"real vLLM c={c}: tok/s ours / vLLM bench serve, median over {len(paired)} rounds of each round's "
           f"ratio (rounds {paired[0]:.3f}-{paired[-1]:.3f})", ratio, ratio >= floor, f">= {floor:.2f}", failures,
           f"medians {ours_['tok_s']:.0f} / {theirs_['tok_s']:.0f}")
    raw_paired = _paired(sides["ours"], sides["raw"])
    raw_ratio = statistics.median(raw_paired)
    shown = f"rounds {raw_paired[0]:.3f}-{raw_paired[-1]:.3f}; medians {ours_['tok_s']:.0f} / {raw_['tok_s']:.0f}"
    if c == 8:
        _judge(f"real vLLM c={c}: tok/s ours / raw client, median of the rounds' ratios", raw_ratio,
               raw_ratio >= 0.9, ">= 0.90", failures, shown)
    else:
        print(f"FIGURE|real vLLM c={c}: tok/s ours / raw client, median of the rounds' ratios ({shown})|"
              f"{raw_ratio:.3f}|info|info")
    for what, key in (("TTFT p50", "ttft_ms"), ("TPOT p50", "tpot_ms")):
        x, y = ours_[key], theirs_[key]
        print(f"FIGURE|real vLLM c={c}: {what} ours / vLLM bench serve ({_fmt(x)} / {_fmt(y)} ms)|"
              f"{_fmt(_ratio(x, y))}|~1 (info)|info")
    if "wire" not in med:
        print(f"FIGURE|real vLLM c={c}: ours against the wire: not measured ({_wire.available()})|-|-|info")
        return
    as_figures = {who: _wire.Figures(count, got["tok_s"] or 0.0, got["ttft_ms"] or 0.0, got["tpot_ms"], 0)
                  for who, got in (("ours", med["ours-judged"]), ("wire", med["wire"]))}
    if not against.add(f"real vLLM c={c}", str(c), as_figures["ours"], as_figures["wire"]):
        failures.append(f"real vLLM c={c}: ours against the wire (see its three lines)")


async def measure(paths: dict[str, str], levels: Sequence[int], tokens: int, repeats: int,
                  failures: list[str], pin: bool = True) -> None:
    work = Path(tempfile.mkdtemp(prefix="bench-vllm-clients-"))
    path = work / "sweep.toml"
    path.write_text(sweep_text(tokens))
    workload = build_workload(build_plan(load_sweep(path)).workloads[0])
    texts = {p.item: p.text for p in workload.prompts}
    port = find_free_port("127.0.0.1", 39300)
    client = ServerClient(f"http://127.0.0.1:{port}", VLLM, request_timeout_s=600.0)
    tap = _wire.available() is None
    try:
        with vllm_server(paths, port, work / "server.log") as proc:
            startup = await wait_ready(client, proc)
            placement = pin_clients(proc.pid) if pin else "clients unpinned (--no-pin)"
            print(await warm_server(port, list(texts.values()), tokens))
            info = await client.server_info() or {}
            context = await client.context_length(info)
            session = Session(client=client, on_progress=lambda: None, context_length=context,
                              notice=lambda level, text: None)
            print(f"vllm serve ready in {startup:.1f} s (one server for every row; {load()}); "
                  f"{tokens} output tokens per request, prompts: the code workload's {len(workload.prompts)}; "
                  f"{placement}; wire truth: {'the loopback packet sniffer' if tap else _wire.available()}")
            print(f"{'c':>3} {'client':7} {'reqs':>4} {'tok/s':>9} {'TTFT p50 ms':>12} {'TPOT p50 ms':>12} "
                  f"{'ITL ms':>8} {'wall s':>7} {'burst':>6} {'CPU ms/rq':>9}")
            against = _wire.AgainstWire("real vLLM")
            for c in levels:
                await compare_level(Level(paths, port, work, tokens, c, repeats), session, workload, texts,
                                    failures, tap, against)
            against.summary()
    finally:
        await client.aclose()
    print(f"server log and vLLM's result files: {work}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="1,8,64", help="comma-separated concurrencies (default 1,8,64)")
    parser.add_argument("--tokens", type=int, default=64, help="output tokens per request (default 64)")
    parser.add_argument("--repeats", type=int, default=5, help="rounds of the clients per concurrency (default 5)")
    parser.add_argument("--no-pin", action="store_true",
                        help="leave the clients where the scheduler puts them (see the module docstring)")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    paths = vllm_paths()
    if isinstance(paths, str):
        print(f"SKIP: no vLLM on this box ({paths})")
        print(f"FIGURE|real vLLM: ours / vLLM bench serve: not measured ({paths})|-|-|info")
        return 0
    failures: list[str] = []
    try:
        asyncio.run(measure(paths, levels, args.tokens, args.repeats, failures, pin=not args.no_pin))
    except RuntimeError as error:
        failures.append(str(error))
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
