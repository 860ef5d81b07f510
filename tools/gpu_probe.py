"""Show what specbench sees of this machine's GPUs through NVML, then the env.json fingerprint.

    .venv/bin/python tools/gpu_probe.py [--python /path/to/server/python] [--sweep sweep.toml] [--fake]
                                        [--hold-gib 4 [--gpu 0]] [--faults [--watch-s 2] [--record seen.json]]

Prints every GPU with every field (n/a where the driver cannot say), its compute processes, how long one
sampling round takes, then the fingerprint JSON (secrets redacted). Without a driver it prints the hint and
exits 0: that is a supported machine, not an error.

``--hold-gib`` also checks, on real hardware, the two things placement relies on: a process of the server's
interpreter (``--python``, with torch) takes that much memory on one GPU, launched as the engine launches a
server (``CUDA_VISIBLE_DEVICES`` with ``CUDA_DEVICE_ORDER=PCI_BUS_ID``); the probe says whether NVML lists it on
the GPU we named, under the pid we started or (in a container with its own pid namespace) under another, and,
after the process is killed, how long NVML takes to show the memory released, timed with the engine's own
``wait_gpus_released`` on the pids that appeared, as the engine does. It exits 1 when the memory was not seen
or not released within ``--release-timeout``.

``--faults`` reads every GPU's total-energy counter (NVML's, in millijoules) over ``--watch-s`` seconds, with the
mean power it gives, registers for Xid critical-error events and says which came (``--record`` keeps it as
JSON). Without a GPU it says there is no counter and no event registration, and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specbench_tui.core.gpu_faults import kernel_xid_cause, kernel_xids, xid_cause  # noqa: E402
from specbench_tui.engine import fingerprint  # noqa: E402
from specbench_tui.engine.gpus.energy import read_energy_mj  # noqa: E402
from specbench_tui.engine.gpus.faults import FaultLedger, KernelLog  # noqa: E402
from specbench_tui.engine.gpus import (  # noqa: E402
    FakeBackend,
    GpuBackend,
    NvmlBackend,
    architecture,
    describe_backend,
    fmt,
    wait_gpus_released,
)

HOLD_SCRIPT = """
import sys
import torch
size = int(float(sys.argv[1]) * (1 << 30))
block = torch.ones(size, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
print(f"holding {size} bytes on {torch.cuda.get_device_name()}", flush=True)
sys.stdin.read()
"""
"""Run by the server's interpreter: take the memory, say so, hold it until stdin closes (or a kill)."""

FAKE_HOLD_SCRIPT = """
import sys
print("holding (fake)", flush=True)
sys.stdin.read()
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", help="the server's interpreter (default: this one)")
    parser.add_argument("--sweep", type=Path, help="a sweep file to hash into the fingerprint")
    parser.add_argument("--fake", action="store_true", help="show the scripted 8-GPU fake box instead of NVML")
    parser.add_argument("--hold-gib", type=float, default=0.0,
                        help="also hold this many GiB on --gpu with the server's torch and time the release")
    parser.add_argument("--gpu", type=int, default=0, help="the GPU index (NVML's) for --hold-gib")
    parser.add_argument("--release-timeout", type=float, default=60.0,
                        help="seconds to wait for the memory to be released after the kill (default 60)")
    parser.add_argument("--faults", action="store_true",
                        help="also read every GPU's total-energy counter over --watch-s and register for Xid "
                             "critical-error events (the fake box gets an Xid 79 injected on GPU 0)")
    parser.add_argument("--watch-s", type=float, default=2.0, help="how long --faults watches (default 2 s)")
    parser.add_argument("--record", type=Path, help="with --faults, write what it saw to this JSON file")
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
    if args.faults:
        faults_check(backend, args.watch_s, args.record, fake=args.fake)
    doc = fingerprint.collect(backend=backend, sweep_path=args.sweep, python=args.python)
    print("env.json:")
    print(json.dumps(doc, indent=2))
    status = 0
    if args.hold_gib > 0:
        status = hold_check(backend, args.python or sys.executable, args.gpu, args.hold_gib, args.release_timeout,
                            fake=args.fake)
    close = getattr(backend, "close", None)
    if callable(close):
        close()
    return status


def faults_check(backend: GpuBackend, watch_s: float, record: Path | None, *, fake: bool) -> None:
    """The energy counter of every GPU over ``watch_s`` (and the mean power it gives), and the Xid critical-error
    events registered for and watched over the same time; printed, and written to ``record`` when given."""
    gpus = tuple(range(backend.device_count()))
    seen: dict[str, Any] = {"backend": type(backend).__name__, "gpus": list(gpus), "gpu_seen": bool(gpus),
                            "hint": backend.hint, "at": time.time()}
    if not gpus:
        print(f"faults: no GPU ({backend.hint or 'the backend sees none'}): nothing to read or register for")
    start = read_energy_mj(backend, gpus)
    registration = getattr(backend, "xid_registration", None)
    seen["xid_registration"] = registration() if callable(registration) else (
        "the fake box: Xid 79 injected on GPU 0" if fake else "the backend gives no Xid events")
    if fake and gpus:
        backend.inject_xid(0, 79)  # type: ignore[attr-defined]
    time.sleep(max(0.0, watch_s))
    end = read_energy_mj(backend, gpus)
    if start is None or end is None:
        seen["energy"] = None
        print("energy counter: none (no GPU, a GPU older than Volta, or no NVML): reports say 'no energy counter'")
    else:
        seen["energy"] = {str(i): {"start_mj": start[i], "end_mj": end[i],
                                   "mean_w": (end[i] - start[i]) / 1000 / max(watch_s, 1e-9)} for i in gpus}
        print("energy counter: " + ", ".join(f"GPU {i}: {end[i] / 1000:.1f} J "
                                             f"({seen['energy'][str(i)]['mean_w']:.1f} W over {watch_s:g} s)"
                                             for i in gpus))
    faults = FaultLedger(backend).take_faults(gpus)
    causes = [xid_cause(fault.code, fault.gpu) for fault in faults]
    seen["xids"] = causes
    seen["xid_events"] = [{"gpu": f.gpu, "xid": f.code, "seen_at": f.seen_at, "as_placement_says": f.reason()}
                          for f in faults]
    print(f"Xid events: {'; '.join(causes) if causes else 'none in ' + format(watch_s, 'g') + ' s'} "
          f"({seen['xid_registration']})")
    seen["kernel_xids"] = kernel_log_xids(backend)
    watch = KernelLog()  # the engine's own watcher: can the sweep fence on the kernel's lines here?
    watch.read()
    seen["kernel_log_watch"] = watch.problem or "readable: a sweep fences on its NVRM: Xid lines too"
    watch.close()
    print(f"kernel log watch: {seen['kernel_log_watch']}")
    print(f"kernel log: {seen['kernel_xids']}" if isinstance(seen["kernel_xids"], str)
          else "kernel log: " + ("; ".join(seen["kernel_xids"]) or "no NVRM: Xid line"))
    if record is not None:
        record.write_text(json.dumps(seen, indent=2) + "\n", encoding="utf-8")
        print(f"recorded in {record}")


def kernel_log_xids(backend: GpuBackend) -> list[str] | str:
    """The kernel log's ``NVRM: Xid`` lines as causes, or why the log cannot be read (it often needs root)."""
    try:
        result = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=10, errors="replace")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"not readable ({exc})"
    if result.returncode != 0:
        return f"not readable ({result.stderr.strip()[:200] or 'dmesg failed'}): the engine relies on NVML's events"
    buses = {g.pci_bus_id: g.index for g in describe_backend(backend).gpus if g.pci_bus_id}
    return [kernel_xid_cause(bus, code, buses) for bus, code in kernel_xids(result.stdout)]


def hold_check(backend: GpuBackend, python: str, gpu: int, gib: float, release_timeout_s: float, *,
               fake: bool = False) -> int:
    """Hold memory on ``gpu`` from a child process, look for it through the backend, kill it, time the release."""
    if gpu >= backend.device_count():
        print(f"hold: no GPU {gpu} (the backend sees {backend.device_count()})")
        return 1 if not fake and backend.device_count() else 0
    before = _used_mib(backend, gpu)
    pids_before = backend.pids_holding((gpu,))
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    child = subprocess.Popen([python, "-c", FAKE_HOLD_SCRIPT if fake else HOLD_SCRIPT, str(gib)], env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        said = child.stdout.readline().strip() if child.stdout else ""
        if not said.startswith("holding"):
            print(f"hold: {python} could not take {gib:g} GiB on GPU {gpu} (exit {child.wait(30)}); "
                  "is torch with CUDA installed in it?")
            return 1
        if isinstance(backend, FakeBackend):
            backend.load_s = 0.0
            backend.attach("gpu-probe", (gpu,), (child.pid,))
        print(f"hold: pid {child.pid}: {said}")
        new: set[int] = set()
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline and not new:  # NVML may list a new context late
            new = backend.pids_holding((gpu,)) - pids_before
            time.sleep(0.2)
        after = _used_mib(backend, gpu)
        grown = None if before is None or after is None else after - before
        print(f"hold: GPU {gpu} memory used {fmt(before, '')} -> {fmt(after, ' MiB')} "
              f"(+{fmt(grown, ' MiB')} for {gib * 1024:.0f} MiB asked)")
        if child.pid in new:
            print(f"hold: NVML lists our pid {child.pid} on GPU {gpu}: processes map to their configuration")
        elif new:
            print(f"hold: NVML lists pid {sorted(new)} on GPU {gpu}, not ours ({child.pid}): another pid namespace "
                  "(a container); the engine names and watches the pids that appear on a server's GPUs instead")
        else:
            print(f"hold: NVML lists no new process on GPU {gpu}: the GPU panel cannot name owners and the release "
                  "wait cannot see a server's memory")
    finally:
        killed = time.monotonic()
        child.kill()
        child.wait(30)
        if isinstance(backend, FakeBackend):
            backend.detach((gpu,))
    if new:
        holding = asyncio.run(wait_gpus_released(backend, (gpu,), new, release_timeout_s, poll_s=0.05))
        released_s = time.monotonic() - killed
        if holding:
            print(f"hold: pid {sorted(holding)} still holds GPU {gpu} {released_s:.1f} s after SIGKILL")
            return 1
        print(f"hold: NVML showed the memory released {released_s * 1000:.0f} ms after SIGKILL "
              f"(wait_gpus_released, polling every 50 ms)")
    ok = fake or (grown is not None and grown >= 0.9 * gib * 1024)
    if not ok:
        print("hold: the memory taken did not show in NVML's figure for that GPU: CUDA_VISIBLE_DEVICES and NVML "
              "index different GPUs, or the figure is not per process")
    return 0 if ok and new else 1


def _used_mib(backend: GpuBackend, gpu: int) -> float | None:
    for sample in backend.sample():
        if sample.index == gpu:
            return sample.mem_used_mib
    return None


if __name__ == "__main__":
    sys.exit(main())
