"""The environment fingerprint written into every run (its environment document): what hardware and software made the numbers.

``simulated`` is true when the simulator made the figures (its launcher, or the fake GPU box): every view that
shows hardware then says SIMULATED. It holds the GPUs (names, count, compute capability with SM120 spelled "sm_120", driver and CUDA driver
versions), the versions of sglang, torch, triton and friends in the *server's* Python environment (asked
from that interpreter in one subprocess with a timeout: none of them is ever imported here, and a missing
package or interpreter is recorded, not raised), the host, this process's Python and specbench version, the
sweep file's sha256, and the inference-relevant environment variables.

Secrets never reach the file: variables whose names look secret (TOKEN, KEY, SECRET, PASSWORD,
CREDENTIAL, AUTH...) are replaced by ``<redacted>``, token-shaped strings (``hf_...``, ``sk-...``,
``ghp_...``, AWS key ids, JWTs, passwords in URLs) are masked wherever they appear, and as a last guard
every secret value of the environment is scrubbed from the whole document.

How the orchestrator calls it::

    doc = await collect_async(backend=backend, sweep_path=sweep.path, python=sweep.engine.python,
                              extra={"concurrent": sweep.concurrent, "gpu_pool": list(pool.indices)})
    run_dir.write_env(doc)       # already redacted
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import hashlib
import json
import os
import platform
import re
import socket
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import overload

from specbench_tui import __version__
from specbench_tui.core.engines import simulator
from specbench_tui.core.engines.sglang import SGLANG
from specbench_tui.engine.gpus import GpuBackend, architecture, describe_backend

REDACTED = "<redacted>"

SERVER_PACKAGES = SGLANG.python_packages
"""Distributions whose versions are asked from the server's interpreter when the caller names none (each engine
names its own: ``EngineProfile.python_packages``)."""

ENV_PREFIXES = ("CUDA_", "NCCL_", "NVIDIA_", "SGLANG_", "SGL_", "TORCH", "PYTORCH_", "TRITON_", "FLASHINFER_",
                "HF_", "HUGGING", "TRANSFORMERS_", "SPECBENCH_", "OMP_NUM_THREADS", "TOKENIZERS_PARALLELISM",
                "LD_LIBRARY_PATH", "MKL_", "NVTE_", "TORCHINDUCTOR_")
"""Environment variables worth recording: they change what a server does or how fast it is."""

_SECRET_NAME = re.compile(
    r"TOKEN|KEY|SECRET|PASSW(?:OR)?D|PASSPHRASE|CREDENTIAL|AUTH|COOKIE|PRIVATE|SIGNATURE|(?:^|_)PWD$|(?:^|_)PAT$"
    r"|(?:^|_)DSN$|(?:^|_)SALT$",
    re.IGNORECASE)
_NOT_SECRET = frozenset({"TOKENIZERS_PARALLELISM", "PWD", "OLDPWD"})

_SECRET_VALUE = re.compile(
    r"hf_[A-Za-z0-9]{20,}"                       # Hugging Face
    r"|sk-[A-Za-z0-9_\-]{16,}"                   # OpenAI, Anthropic
    r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|glpat-[A-Za-z0-9_\-]{16,}"                # GitLab
    r"|xox[abpors]-[A-Za-z0-9\-]{10,}"           # Slack
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"                # AWS access key id
    r"|eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"  # JWT
)
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@]*:)(?P<password>[^/\s@]+)(?P<tail>@)")

_MIN_SECRET_LEN = 6
"""Shorter secret values are not scrubbed from free text (they would mangle unrelated words)."""


def is_secret_name(name: str) -> bool:
    """Whether a variable or key called ``name`` probably holds a secret."""
    return name.upper() not in _NOT_SECRET and bool(_SECRET_NAME.search(name))


def scrub_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with token-shaped strings, URL passwords and the given secret values masked."""
    for secret in sorted((s for s in secrets if len(s) >= _MIN_SECRET_LEN), key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    text = _SECRET_VALUE.sub(REDACTED, text)
    return _URL_PASSWORD.sub(lambda m: f"{m['head']}{REDACTED}{m['tail']}", text)


def secret_values(environ: Mapping[str, str]) -> set[str]:
    """The values of every secret-named variable of ``environ``."""
    return {value for name, value in environ.items() if is_secret_name(name) and value}


def redact_env(environ: Mapping[str, str], secrets: Iterable[str] | None = None) -> dict[str, str]:
    """A copy of ``environ`` safe to write: secret-named values replaced, secrets in other values masked."""
    secrets = secret_values(environ) if secrets is None else set(secrets)
    return {name: REDACTED if is_secret_name(name) else scrub_text(value, secrets)
            for name, value in sorted(environ.items())}


@overload
def redact(data: Mapping[str, object], secrets: Iterable[str] = ()) -> dict[str, object]: ...
@overload
def redact(data: object, secrets: Iterable[str] = ()) -> object: ...
def redact(data: object, secrets: Iterable[str] = ()) -> object:
    """``data`` (JSON-like) with secret-named keys' scalar values replaced and every string scrubbed."""
    secrets = tuple(secrets)
    if isinstance(data, Mapping):
        out: dict[object, object] = {}
        for key, value in data.items():
            if is_secret_name(str(key)) and isinstance(value, (str, int, float)) and not isinstance(value, bool):
                out[key] = REDACTED
            else:
                out[key] = redact(value, secrets)
        return out
    if isinstance(data, (list, tuple)):
        return [redact(item, secrets) for item in data]
    if isinstance(data, str):
        return scrub_text(data, secrets)
    return data


def relevant_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of :data:`ENV_PREFIXES`, redacted."""
    chosen = {k: v for k, v in environ.items() if k.startswith(ENV_PREFIXES)}
    return redact_env(chosen, secret_values(environ))


# --------------------------------------------------------------------------------------------------- server Python

_PROBE = r"""
import os, sys
sys.path[:] = [p for p in sys.path if p and os.path.realpath(p) != os.path.realpath(os.getcwd())]
import json, platform
out = {"python": platform.python_version(), "executable": sys.executable, "packages": {}, "torch_cuda": None}
try:
    from importlib import metadata
except ImportError:
    metadata = None
for name in NAMES:
    try:
        out["packages"][name] = metadata.version(name) if metadata else None
    except Exception:
        out["packages"][name] = None
try:
    import ast
    text = metadata.distribution("torch").locate_file("torch/version.py").read_text()
    for line in text.splitlines():
        if line.startswith("cuda") and "=" in line:
            out["torch_cuda"] = ast.literal_eval(line.split("=", 1)[1].strip())
except Exception:
    pass
sys.stdout.write("SPECBENCH-PROBE " + json.dumps(out) + "\n")
"""
"""Runs in the server's interpreter: reads distribution metadata (and torch's version.py as text) without
importing any package, so it takes a fraction of a second even where importing torch takes ten. Its first
line takes the working directory (``''``, which ``-c`` puts first on ``sys.path``) off the path before anything
is imported (``os`` and ``sys`` are loaded at start-up): no module or metadata planted there is read."""

_version_cache: dict[str, dict[str, object]] = {}


def _kept(python: str) -> list[str]:
    """The keeper's argv prefix (:mod:`specbench_tui.keeper`): the server's Python may be a wrapper that starts
    processes of its own (a daemon); they end with the probe instead of outliving it and holding its output.
    None for a path that cannot be executed, so that the error is the interpreter's own."""
    import shutil

    found = shutil.which(python)
    if not sys.platform.startswith("linux") or found is None or os.path.isdir(found):
        return []
    from specbench_tui.engine.processes import keeper_argv

    return [*keeper_argv("--parent", str(os.getpid())), "--"]


def _empty_versions(python: str, packages: tuple[str, ...], error: str) -> dict[str, object]:
    return {"interpreter": python, "python": None, "executable": None,
            "packages": {name: None for name in packages}, "torch_cuda": None, "error": error}


def server_versions(python: str | None = None, timeout_s: float = 30.0, refresh: bool = False,
                    env: Mapping[str, str] | None = None,
                    packages: tuple[str, ...] = SERVER_PACKAGES) -> dict[str, object]:
    """Versions of ``packages`` (None when absent) in ``python`` (default: this interpreter), asked once per
    interpreter in a subprocess; failures come back in ``"error"``, never as exceptions."""
    python = python or sys.executable
    cache_key = f"{python}\0{','.join(packages)}"
    if not refresh and cache_key in _version_cache:
        return _version_cache[cache_key]
    code = _PROBE.replace("NAMES", repr(tuple(packages)))
    try:
        with subprocess.Popen([*_kept(python), python, "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, errors="replace",
                              env=dict(env) if env is not None else None) as proc:
            try:
                stdout, stderr = proc.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.terminate()  # the keeper ends the probe's whole tree on SIGTERM (SIGKILL would orphan it)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.communicate(timeout=5)
                proc.kill()
                return _empty_versions(python, packages,
                                       f"{python} did not answer within {timeout_s:g} s")  # not cached: retry
            done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    except OSError as exc:
        result = _empty_versions(python, packages, f"cannot run the server's Python {python}: {exc.strerror or exc}")
        _version_cache[cache_key] = result
        return result
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("SPECBENCH-PROBE ")), None)
    if done.returncode != 0 or line is None:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        result = _empty_versions(python, packages, f"{python} exited with {done.returncode}: " + " | ".join(tail))
    else:
        try:
            probed = json.loads(line.removeprefix("SPECBENCH-PROBE "))
        except json.JSONDecodeError as exc:
            result = _empty_versions(python, packages, f"{python} answered garbage: {exc}")
        else:
            result = {"interpreter": python, "python": probed.get("python"), "executable": probed.get("executable"),
                      "packages": {n: probed.get("packages", {}).get(n) for n in packages},
                      "torch_cuda": probed.get("torch_cuda"), "error": None}
    _version_cache[cache_key] = result
    return result


# --------------------------------------------------------------------------------------------------- the document

def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def gpu_section(backend: GpuBackend | None) -> dict[str, object]:
    """The GPUs as the backend describes them (empty, with the hint, when none is visible)."""
    if backend is None:
        return {"backend": None, "count": 0, "names": {}, "devices": [], "hint": "no GPU backend"}
    box = describe_backend(backend)
    devices = []
    names: dict[str, int] = {}
    for gpu in box.gpus:
        devices.append({"index": gpu.index, "name": gpu.name, "uuid": gpu.uuid, "pci_bus_id": gpu.pci_bus_id,
                        "mem_total_mib": gpu.mem_total_mib, "power_limit_w": gpu.power_limit_w,
                        "compute_capability": gpu.compute_capability, "sm": gpu.sm,
                        "architecture": architecture(gpu.compute_capability)})
        key = gpu.name or "unknown"
        names[key] = names.get(key, 0) + 1
    return {"backend": box.backend, "simulated": box.backend == "fake", "count": len(devices), "names": names,
            "driver_version": box.driver_version, "cuda_driver_version": box.cuda_driver_version,
            "nvml_version": box.nvml_version, "sm": sorted({d["sm"] for d in devices if d["sm"]}),
            "devices": devices, "hint": box.hint}


def collect(*, backend: GpuBackend | None = None, sweep_path: Path | str | None = None, python: str | None = None,
            timeout_s: float = 30.0, environ: Mapping[str, str] | None = None,
            extra: Mapping[str, object] | None = None, packages: tuple[str, ...] = SERVER_PACKAGES) -> dict[str, object]:
    """The whole environment document, redacted. Blocks for the subprocess: use :func:`collect_async`
    from the event loop."""
    environ = dict(os.environ if environ is None else environ)
    sweep: dict[str, object] = {"path": None, "sha256": None}
    if sweep_path is not None:
        sweep["path"] = str(sweep_path)
        try:
            sweep["sha256"] = sha256_file(Path(sweep_path))
        except OSError as exc:
            sweep["error"] = f"cannot read the sweep file: {exc.strerror or exc}"
    gpus = gpu_section(backend)
    doc: dict[str, object] = {
        "schema": 1,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "specbench_version": __version__,
        "host": {"name": socket.gethostname(), "platform": platform.platform(), "machine": platform.machine(),
                 "cpu": _cpu_model(), "cpu_count": os.cpu_count(),
                 # the cores this process may run on and the load when the run began: each workload and load
                 # point records the load over its own window (core/measuring_host.py)
                 "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
                 "load_avg_at_start": [round(x, 2) for x in os.getloadavg()]},
        "python": {"version": platform.python_version(), "implementation": platform.python_implementation(),
                   "executable": sys.executable},
        "gpus": gpus,
        "server_python": server_versions(python, timeout_s, env=environ, packages=packages),
        "sweep": sweep,
        "env": relevant_env(environ),
    }
    if extra:
        doc["extra"] = dict(extra)
    # The simulator's servers, or the scripted GPU box, make invented figures: said at the top of the document.
    doc["simulated"] = bool(gpus.get("simulated") or (extra or {}).get("launcher") == simulator.LAUNCHER)
    return redact(doc, secret_values(environ))


async def collect_async(*, backend: GpuBackend | None = None, sweep_path: Path | str | None = None,
                        python: str | None = None, timeout_s: float = 30.0, environ: Mapping[str, str] | None = None,
                        extra: Mapping[str, object] | None = None,
                        packages: tuple[str, ...] = SERVER_PACKAGES) -> dict[str, object]:
    """:func:`collect` in a worker thread, so the subprocess and NVML never block the event loop."""
    return await asyncio.to_thread(lambda: collect(backend=backend, sweep_path=sweep_path, python=python,
                                                   timeout_s=timeout_s, environ=environ, extra=extra,
                                                   packages=packages))


def dumps(doc: Mapping[str, object]) -> str:
    """``doc`` as the text of the run's environment document (redacted once more, for documents built by hand)."""
    return json.dumps(redact(doc, secret_values(os.environ)), indent=2, sort_keys=False) + "\n"
