"""Show what specbench sees of this machine's GPUs through NVML, then the env.json fingerprint.

    .venv/bin/python tools/gpu_probe.py [--python /path/to/server/python] [--sweep sweep.toml] [--fake]

Prints every GPU with every field (n/a where the driver cannot say), its compute processes, how long one
sampling round takes, then the fingerprint JSON (secrets redacted). Without a driver it prints the hint and
exits 0: that is a supported machine, not an error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specbench_tui.engine import fingerprint  # noqa: E402
from specbench_tui.engine.gpus import FakeBackend, NvmlBackend, architecture, describe_backend, fmt  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", help="the server's interpreter (default: this one)")
    parser.add_argument("--sweep", type=Path, help="a sweep file to hash into the fingerprint")
    parser.add_argument("--fake", action="store_true", help="show the scripted 8-GPU fake box instead of NVML")
    args = parser.parse_args(argv)

    backend = FakeBackend(load_s=0.0) if args.fake else NvmlBackend()
    if args.fake:
        backend.attach("demo-tp4", (0, 1, 2, 3), (4242,))
        backend.set_busy((0, 1, 2, 3), True)
    box = describe_backend(backend)
    print(f"backend: {box.backend}   driver {box.driver_version or 'n/a'}   CUDA (driver) "
          f"{box.cuda_driver_version or 'n/a'}   NVML {box.nvml_version or 'n/a'}   GPUs: {backend.device_count()}")
    if backend.hint:
        print(f"hint: {backend.hint}")
    started = time.perf_counter()
    samples = backend.sample()
    took_ms = (time.perf_counter() - started) * 1000
    info = {g.index: g for g in box.gpus}
    for s in samples:
        gpu = info.get(s.index)
        cc = gpu.compute_capability if gpu else None
        print(f"GPU {s.index}: {s.name or 'n/a'}  cc {cc or 'n/a'} ({gpu.sm if gpu and gpu.sm else 'n/a'}, "
              f"{architecture(cc) or 'n/a'})  {gpu.pci_bus_id if gpu and gpu.pci_bus_id else ''}  "
              f"{gpu.uuid if gpu and gpu.uuid else ''}")
        print(f"    util {fmt(s.util_pct, ' %')}   mem {fmt(s.mem_used_mib, '')}/{fmt(s.mem_total_mib, ' MiB')}   "
              f"temp {fmt(s.temp_c, ' C')}   power {fmt(s.power_w, '')}/{fmt(s.power_limit_w, ' W')}   "
              f"SM clock {fmt(s.sm_clock_mhz, ' MHz')}")
        for pid, mem in s.pids:
            print(f"    pid {pid}: {fmt(mem, ' MiB')}")
        if not s.pids:
            print("    no compute process")
    if samples:
        print(f"one sampling round of {len(samples)} GPUs took {took_ms:.1f} ms")
    doc = fingerprint.collect(backend=backend, sweep_path=args.sweep, python=args.python)
    print("env.json:")
    print(json.dumps(doc, indent=2))
    close = getattr(backend, "close", None)
    if callable(close):
        close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
