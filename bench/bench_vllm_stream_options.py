"""What a request's ``stream_options`` cost a real vLLM server: tok/s at one concurrency asked three ways.

One ``vllm serve`` (as ``bench_vllm_clients.py`` starts it: the tiny model, no speculation, ``--enforce-eager``,
clients pinned off the worker's core, warmed until its decode step holds) is measured by the minimal raw client
(bench/_wire.py: no parsing, a kept-alive connection per request in flight), whose requests differ only in their
``stream_options``:

- **none**: no ``stream_options`` (no usage chunk at all);
- **usage**: ``{"include_usage": true}``, what ``vllm bench serve`` asks and the ``vllm`` profile asks of a sweep
  whose chunks carry one token each;
- **running**: ``{"include_usage": true, "continuous_usage_stats": true}``, a usage object on every chunk, which
  the profile asks only of a sweep whose chunks can carry several tokens (speculation, ``--stream-interval``).

Rounds rotate the three (the server drifts between rounds more than one round lasts); per variant the median tok/s
over the rounds, and the judged figure: the median over rounds of running ÷ usage, each round's own pair. It is
``info``: it says why the profile asks the running count only where it must (on 2 cores at c = 64 it read 0.94),
not a target the product can move. Without ``.venv-vllm`` it prints SKIP lines (exit 0). About 2 minutes.

    .venv/bin/python bench/bench_vllm_stream_options.py [--concurrency 64] [--rounds 4] [--tokens 64]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_vllm_clients as clients  # noqa: E402

VARIANTS: dict[str, dict[str, object]] = {
    "none": {},
    "usage": {"stream_options": {"include_usage": True}},
    "running": {"stream_options": {"include_usage": True, "continuous_usage_stats": True}},
}


async def measure(paths: dict[str, str], concurrency: int, rounds: int, tokens: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="bench-vllm-stream-options-"))
    path = work / "sweep.toml"
    path.write_text(clients.sweep_text(tokens))
    workload = clients.build_workload(clients.build_plan(clients.load_sweep(path)).workloads[0])
    texts = {p.item: p.text for p in workload.prompts}
    count = clients.REQUESTS.get(concurrency, 4 * concurrency)
    ordered = [texts[clients.point_item(workload.items(), i)[0]] for i in range(count)]
    port = clients.find_free_port("127.0.0.1", 39400)
    client = clients.ServerClient(f"http://127.0.0.1:{port}", clients.VLLM, request_timeout_s=600.0)
    try:
        with clients.vllm_server(paths, port, work / "server.log") as proc:
            startup = await clients.wait_ready(client, proc)
            placement = clients.pin_clients(proc.pid)
            print(await clients.warm_server(port, list(texts.values()), tokens))
            print(f"vllm serve ready in {startup:.1f} s; c = {concurrency}, {count} requests of {tokens} tokens a "
                  f"round; {placement}; {clients.load()}")
            got: dict[str, list[float]] = {name: [] for name in VARIANTS}
            names = list(VARIANTS)
            for round_ in range(rounds):
                for name in names[round_ % 3:] + names[:round_ % 3]:
                    tok_s = (await clients.raw_side(port, ordered, tokens, concurrency, VARIANTS[name])).tok_s
                    got[name].append(tok_s)
                    print(f"  round {round_ + 1} {name:8} {tok_s:8.0f} tok/s", flush=True)
    finally:
        await client.aclose()
    for name, values in got.items():
        print(f"FIGURE|real vLLM c={concurrency}: raw client tok/s, stream_options {name} (median of {rounds} "
              f"rounds: {', '.join(f'{v:.0f}' for v in values)}; {clients.load()})|{statistics.median(values):.0f}|"
              "info|info")
    paired = sorted(r / u for r, u in zip(got["running"], got["usage"]))
    print(f"FIGURE|real vLLM c={concurrency}: tok/s with continuous_usage_stats / with include_usage alone, median "
          f"of each round's ratio (rounds {paired[0]:.3f}-{paired[-1]:.3f})|{statistics.median(paired):.3f}|info|info")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=64, help="requests in flight (default 64)")
    parser.add_argument("--rounds", type=int, default=4, help="rounds of the three variants (default 4)")
    parser.add_argument("--tokens", type=int, default=64, help="output tokens per request (default 64)")
    args = parser.parse_args()
    paths = clients.vllm_paths()
    if isinstance(paths, str):
        print(f"SKIP: no vLLM on this box ({paths})")
        print(f"FIGURE|real vLLM: stream_options cost: not measured ({paths})|-|-|info")
        return 0
    asyncio.run(measure(paths, args.concurrency, args.rounds, args.tokens))
    return 0


if __name__ == "__main__":
    sys.exit(main())
