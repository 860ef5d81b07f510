"""Sweep files: TOML in, a frozen, validated :class:`Sweep` out, or a :class:`SweepError` naming every problem.

The schema is documented in ``docs/sweep-format.md``. Validation collects all issues in one pass so a user
fixes a file in one edit, and each issue names the file, the line, the key, what was expected and, for a
misspelt key, the closest valid one.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench_tui.core.engines import ENGINE_NAMES
from specbench_tui.core.errors import SweepError, SweepIssue, did_you_mean
from specbench_tui.core.tomlpos import KeyLocator, KeyPath, format_path
from specbench_tui.core.workload_kinds import COMMON_PARAMS, KINDS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

Scalar = str | int | float | bool
ArgValue = Scalar | tuple[Scalar, ...]

LAUNCHERS = ("simulator", "sglang", "command")
"""How a server is started: the built-in simulator, real SGLang, or a user command prefix."""

_NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+\-]*$")
_PARAM_OK = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ENV_OK = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class EngineSpec:
    """How servers are launched, watched and stopped."""

    profile: str = "sglang"
    launcher: str = "simulator"
    python: str | None = None
    """Interpreter that runs the server (None: the one running specbench)."""
    command: tuple[str, ...] = ()
    """argv prefix when ``launcher = "command"``."""
    host: str = "127.0.0.1"
    port_base: int = 30000
    startup_timeout_s: float = 900.0
    stall_timeout_s: float = 120.0
    request_timeout_s: float = 900.0
    shutdown_grace_s: float = 30.0
    gpu_release_timeout_s: float = 60.0
    sim_profile: str | None = None
    """Simulator profile file (absolute), passed as SPECBENCH_SIM_PROFILE."""
    api_key_env: str | None = None
    """Name of the environment variable holding the server's API key (never the key itself)."""
    crash_signatures: tuple[tuple[str, str], ...] = ()
    """Extra (name, regex) crash signatures beside the built-in ones."""


@dataclass(frozen=True)
class ExcludeRule:
    """Removes the matrix points whose parameters all equal ``match``, recording ``reason``."""

    match: tuple[tuple[str, Scalar], ...]
    reason: str
    line: int | None = None


@dataclass(frozen=True)
class ConfigSpec:
    """One ``[[configs]]`` block: a name template, a matrix and the flags it resolves to."""

    index: int
    name: str
    algorithm: str
    matrix: tuple[tuple[str, tuple[Scalar, ...]], ...]
    args: tuple[tuple[str, ArgValue], ...]
    fork_args: tuple[tuple[str, ArgValue], ...]
    env: tuple[tuple[str, str], ...]
    exclude: tuple[ExcludeRule, ...]
    line: int | None = None


@dataclass(frozen=True)
class WorkloadSpec:
    """One ``[[workloads]]`` block."""

    name: str
    kind: str
    max_new_tokens: int
    repeats: int
    warmup: int
    temperature: float
    ignore_eos: bool
    params: tuple[tuple[str, Any], ...]

    def param(self, key: str) -> Any:
        """A kind-specific parameter (defaults already applied)."""
        return dict(self.params)[key]


@dataclass(frozen=True)
class Sweep:
    """A validated sweep file."""

    path: Path
    text: str
    name: str
    description: str
    baseline: str | None
    runs_dir: Path
    gpus: tuple[int, ...] | None
    """The GPU pool; None means all visible GPUs (known only at run time)."""
    concurrent: bool
    lossless_check: bool
    engine: EngineSpec
    server_args: tuple[tuple[str, ArgValue], ...]
    server_env: tuple[tuple[str, str], ...]
    configs: tuple[ConfigSpec, ...]
    workloads: tuple[WorkloadSpec, ...]


# --------------------------------------------------------------------------------------------- reading


class _Reader:
    """Typed access to the parsed TOML that records issues instead of raising."""

    def __init__(self, path: str, locator: KeyLocator) -> None:
        self.path = path
        self.locator = locator
        self.issues: list[SweepIssue] = []

    def error(self, key: KeyPath, message: str, hint: str | None = None) -> None:
        self.issues.append(SweepIssue(self.path, self.locator.line(key), format_path(key), message, hint))

    def table(self, data: Any, key: KeyPath, allowed: Mapping[str, Any] | set[str] | tuple[str, ...]) -> dict:
        """``data`` as a table, reporting keys outside ``allowed``."""
        if not isinstance(data, dict):
            self.error(key, f"expected a table, got {_type_name(data)}")
            return {}
        for name in data:
            if name not in allowed:
                self.error((*key, name), "unknown key", did_you_mean(name, allowed))
        return data

    def get(self, data: dict, key: KeyPath, name: str, types: tuple[type, ...], default: Any = None,
            required: bool = False) -> Any:
        if name not in data:
            if required:
                self.error(key, f"missing required key '{name}'")
            return default
        value = data[name]
        if not _is_type(value, types):
            self.error((*key, name), f"expected {_types_text(types)}, got {_type_name(value)} {_short(value)}")
            return default
        return value

    def positive(self, data: dict, key: KeyPath, name: str, types: tuple[type, ...], default: Any,
                 allow_zero: bool = False) -> Any:
        value = self.get(data, key, name, types, default)
        if value is not None and (value < 0 or (value == 0 and not allow_zero)):
            self.error((*key, name), f"expected a {'non-negative' if allow_zero else 'positive'} number, got {value}")
            return default
        return value


def _is_type(value: Any, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool):
        return bool in types
    if float in types and isinstance(value, int):
        return True
    return isinstance(value, types)


def _type_name(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array",
            dict: "a table"}.get(type(value), type(value).__name__)


def _types_text(types: tuple[type, ...]) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array",
             dict: "a table"}
    return " or ".join(dict.fromkeys(names.get(t, t.__name__) for t in types))


def _short(value: Any) -> str:
    text = repr(value)
    return f"({text[:40]}…)" if len(text) > 40 else f"({text})"


# ------------------------------------------------------------------------------------------ the schema

_TOP_KEYS = ("sweep", "engine", "server", "configs", "workloads")
_SWEEP_KEYS = ("name", "description", "baseline", "runs_dir", "gpus", "concurrent", "lossless_check",
               "repeats", "warmup")
_ENGINE_KEYS = ("profile", "launcher", "python", "command", "host", "port_base", "startup_timeout_s",
                "stall_timeout_s", "request_timeout_s", "shutdown_grace_s", "gpu_release_timeout_s",
                "sim_profile", "api_key_env", "crash_signatures")
_SERVER_KEYS = ("args", "env")
_CONFIG_KEYS = ("name", "algorithm", "matrix", "args", "fork_args", "env", "exclude")
_WORKLOAD_KEYS = ("name", "kind", *COMMON_PARAMS)


def load_sweep(path: str | Path, display_path: str | None = None) -> Sweep:
    """Read and validate a sweep file; raise :class:`SweepError` listing every issue."""
    path = Path(path)
    shown = display_path or str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SweepError([SweepIssue(shown, None, "", f"cannot read the sweep file: {exc.strerror or exc}")]) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SweepError([SweepIssue(shown, line, "", "the file is not valid UTF-8",
                                     "save it as UTF-8")]) from None
    return parse_sweep(text, path, shown)


def parse_sweep(text: str, path: Path, shown: str | None = None) -> Sweep:
    """Validate sweep ``text`` that was read from ``path`` (used to resolve relative paths)."""
    shown = shown or str(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        match = re.search(r"\(at line (\d+), column (\d+)\)", message)
        line = int(match.group(1)) if match else None
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", message)
        if match:
            message += f" (column {match.group(2)})"
        raise SweepError([SweepIssue(shown, line, "", f"invalid TOML: {message}",
                                     "see docs/sweep-format.md for the syntax")]) from None
    reader = _Reader(shown, KeyLocator(text))
    sweep = _build(reader, data, text, path)
    if reader.issues:
        raise SweepError(reader.issues)
    assert sweep is not None
    return sweep


def _build(r: _Reader, data: dict, text: str, path: Path) -> Sweep | None:
    r.table(data, (), _TOP_KEYS)
    base_dir = path.parent
    sweep_t = r.table(data.get("sweep", {}), ("sweep",), _SWEEP_KEYS)
    name = r.get(sweep_t, ("sweep",), "name", (str,), required=True) or path.stem
    if isinstance(name, str) and not _NAME_OK.match(name):
        r.error(("sweep", "name"), f"'{name}' is not a usable name", "use letters, digits, '.', '_', '-' and '+'")
    description = r.get(sweep_t, ("sweep",), "description", (str,), "")
    baseline = r.get(sweep_t, ("sweep",), "baseline", (str,))
    runs_dir = Path(r.get(sweep_t, ("sweep",), "runs_dir", (str,), "runs")).expanduser()
    gpus = _gpus(r, sweep_t)
    concurrent = r.get(sweep_t, ("sweep",), "concurrent", (bool,), False)
    lossless = r.get(sweep_t, ("sweep",), "lossless_check", (bool,), False)
    repeats = r.positive(sweep_t, ("sweep",), "repeats", (int,), 1)
    warmup = r.positive(sweep_t, ("sweep",), "warmup", (int,), 1, allow_zero=True)

    engine = _engine(r, data.get("engine", {}), base_dir)
    server_t = r.table(data.get("server", {}), ("server",), _SERVER_KEYS)
    server_args = _args(r, server_t.get("args", {}), ("server", "args"))
    server_env = _env(r, server_t.get("env", {}), ("server", "env"))

    configs_raw = data.get("configs")
    configs: list[ConfigSpec] = []
    if configs_raw is None:
        r.error((), "no [[configs]]: a sweep needs at least one configuration", "add a [[configs]] block")
    elif not isinstance(configs_raw, list) or not all(isinstance(c, dict) for c in configs_raw):
        r.error(("configs",), "expected an array of tables: write each configuration as [[configs]]")
    else:
        if not configs_raw:
            r.error(("configs",), "no configurations", "add a [[configs]] block")
        configs = [_config(r, i, c) for i, c in enumerate(configs_raw)]

    workloads_raw = data.get("workloads")
    workloads: list[WorkloadSpec] = []
    if workloads_raw is None:
        r.error((), "no [[workloads]]: a sweep needs at least one workload", "add a [[workloads]] block")
    elif not isinstance(workloads_raw, list) or not all(isinstance(w, dict) for w in workloads_raw):
        r.error(("workloads",), "expected an array of tables: write each workload as [[workloads]]")
    else:
        seen: dict[str, int] = {}
        for i, w in enumerate(workloads_raw):
            spec = _workload(r, i, w, repeats, warmup, base_dir)
            if spec is None:
                continue
            if spec.name in seen:
                r.error(("workloads", i, "name"), f"duplicate workload name '{spec.name}' "
                        f"(also workloads[{seen[spec.name]}])", "give each workload its own name")
            seen[spec.name] = i
            workloads.append(spec)
    if r.issues:
        return None
    return Sweep(
        path=path, text=text, name=name, description=description, baseline=baseline, runs_dir=runs_dir,
        gpus=gpus, concurrent=concurrent, lossless_check=lossless, engine=engine,
        server_args=server_args, server_env=server_env, configs=tuple(configs), workloads=tuple(workloads),
    )


def _gpus(r: _Reader, sweep_t: dict) -> tuple[int, ...] | None:
    value = sweep_t.get("gpus", "all")
    key = ("sweep", "gpus")
    if value == "all":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        if value <= 0:
            r.error(key, f"expected a positive GPU count, got {value}")
            return None
        return tuple(range(value))
    if isinstance(value, list) and value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        if any(v < 0 for v in value) or len(set(value)) != len(value):
            r.error(key, "GPU indices must be distinct and non-negative", f"got {value}")
            return None
        return tuple(value)
    r.error(key, f"expected \"all\", a GPU count or a list of GPU indices, got {_type_name(value)} {_short(value)}")
    return None


def _engine(r: _Reader, raw: Any, base_dir: Path) -> EngineSpec:
    key: KeyPath = ("engine",)
    t = r.table(raw, key, _ENGINE_KEYS)
    profile = r.get(t, key, "profile", (str,), "sglang")
    if profile not in ENGINE_NAMES:
        r.error((*key, "profile"), f"unknown engine profile '{profile}'", did_you_mean(profile, ENGINE_NAMES))
    launcher = r.get(t, key, "launcher", (str,), "simulator")
    if launcher not in LAUNCHERS:
        r.error((*key, "launcher"), f"unknown launcher '{launcher}'", did_you_mean(launcher, LAUNCHERS))
    command = r.get(t, key, "command", (list,), [])
    if command and not all(isinstance(c, str) for c in command):
        r.error((*key, "command"), "expected an array of strings (an argv prefix, no shell)")
        command = []
    if launcher == "command" and not command:
        r.error((*key, "command"), "launcher = \"command\" needs command = [\"/path/to/server\", ...]")
    sim_profile = r.get(t, key, "sim_profile", (str,))
    if sim_profile is not None:
        resolved = (base_dir / Path(sim_profile).expanduser()).resolve()
        if not resolved.is_file():
            r.error((*key, "sim_profile"), f"simulator profile not found: {resolved}",
                    "paths are relative to the sweep file")
        sim_profile = str(resolved)
    api_key_env = r.get(t, key, "api_key_env", (str,))
    if api_key_env is not None and not _ENV_OK.match(api_key_env):
        r.error((*key, "api_key_env"), "expected the NAME of an environment variable holding the key",
                "never put the key itself in a sweep file")
    signatures_raw = r.table(t.get("crash_signatures", {}), (*key, "crash_signatures"),
                             set(t.get("crash_signatures", {}) if isinstance(t.get("crash_signatures"), dict) else ()))
    signatures: list[tuple[str, str]] = []
    for sig_name, pattern in signatures_raw.items():
        if not isinstance(pattern, str):
            r.error((*key, "crash_signatures", sig_name), "expected a regular expression string")
            continue
        try:
            re.compile(pattern)
        except re.error as exc:
            r.error((*key, "crash_signatures", sig_name), f"invalid regular expression: {exc}")
            continue
        signatures.append((sig_name, pattern))
    port_base = r.get(t, key, "port_base", (int,), 30000)
    if port_base is not None and not 1024 <= port_base <= 65000:
        r.error((*key, "port_base"), f"expected a port between 1024 and 65000, got {port_base}")
        port_base = 30000
    timeouts = {name: r.positive(t, key, name, (int, float), getattr(EngineSpec, name))
                for name in ("startup_timeout_s", "stall_timeout_s", "request_timeout_s", "shutdown_grace_s",
                             "gpu_release_timeout_s")}
    return EngineSpec(
        profile=profile, launcher=launcher, python=r.get(t, key, "python", (str,)), command=tuple(command),
        host=r.get(t, key, "host", (str,), "127.0.0.1"), port_base=port_base, sim_profile=sim_profile,
        api_key_env=api_key_env, crash_signatures=tuple(signatures), **{k: float(v) for k, v in timeouts.items()},
    )


def _args(r: _Reader, raw: Any, key: KeyPath) -> tuple[tuple[str, ArgValue], ...]:
    """Flag table: ``tp-size = 4``, ``trust-remote-code = true``, ``cuda-graph-bs-decode = [1, 2, 4]``."""
    if not isinstance(raw, dict):
        r.error(key, f"expected a table of flags, got {_type_name(raw)}")
        return ()
    out: list[tuple[str, ArgValue]] = []
    for flag, value in raw.items():
        name = flag[2:] if flag.startswith("--") else flag
        if not name or name.startswith("-") or " " in name:
            r.error((*key, flag), "a flag name is written without dashes, e.g. tp-size = 4")
            continue
        if isinstance(value, dict):
            r.error((*key, flag), "a flag value cannot be a table", "use a string, number, boolean or array")
            continue
        if isinstance(value, list):
            if not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
                r.error((*key, flag), "array flag values hold strings or numbers only")
                continue
            out.append((name, tuple(value)))
        else:
            out.append((name, value))
    return tuple(out)


def _env(r: _Reader, raw: Any, key: KeyPath) -> tuple[tuple[str, str], ...]:
    if not isinstance(raw, dict):
        r.error(key, f"expected a table of environment variables, got {_type_name(raw)}")
        return ()
    out = []
    for name, value in raw.items():
        if not _ENV_OK.match(name):
            r.error((*key, name), "not a valid environment variable name")
            continue
        if isinstance(value, bool):
            value = "1" if value else "0"
        if not isinstance(value, (str, int, float)):
            r.error((*key, name), f"expected a string or number, got {_type_name(value)}")
            continue
        out.append((name, str(value)))
    return tuple(out)


def _config(r: _Reader, index: int, raw: dict) -> ConfigSpec:
    key: KeyPath = ("configs", index)
    t = r.table(raw, key, _CONFIG_KEYS)
    name = r.get(t, key, "name", (str,), f"config{index}", required=True)
    algorithm = r.get(t, key, "algorithm", (str,), "")
    matrix_raw = r.get(t, key, "matrix", (dict,), {})
    matrix: list[tuple[str, tuple[Scalar, ...]]] = []
    for param, values in matrix_raw.items():
        pkey = (*key, "matrix", param)
        if not _PARAM_OK.match(param):
            r.error(pkey, "a parameter name is a Python-style identifier", "e.g. budget, tp, topk")
            continue
        if not isinstance(values, list):
            values = [values]
        if not values:
            r.error(pkey, "empty matrix axis: it would expand to no configuration", "give at least one value")
            continue
        if any(isinstance(v, (dict, list)) for v in values):
            r.error(pkey, "matrix values are strings, numbers or booleans")
            continue
        if len(set(map(repr, values))) != len(values):
            r.error(pkey, f"duplicate values in {values}")
            continue
        matrix.append((param, tuple(values)))
    excludes: list[ExcludeRule] = []
    exclude_raw = t.get("exclude", [])
    if not isinstance(exclude_raw, list):
        r.error((*key, "exclude"), "expected an array of tables: [[configs.exclude]] or exclude = [{...}]")
        exclude_raw = []
    params = {p for p, _ in matrix}
    for j, rule in enumerate(exclude_raw):
        rkey = (*key, "exclude", j)
        if not isinstance(rule, dict):
            r.error(rkey, "expected a table such as { budget = 8, tp = 1, reason = \"...\" }")
            continue
        reason = rule.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            r.error(rkey, "an exclude rule needs a reason = \"...\" (it is shown in the plan)")
        match = tuple((k, v) for k, v in rule.items() if k != "reason")
        if not match:
            r.error(rkey, "an exclude rule needs at least one parameter to match", "e.g. budget = 8")
        for k, _ in match:
            if k not in params:
                r.error((*rkey, k), f"'{k}' is not a matrix parameter of this configuration",
                        did_you_mean(k, params))
        excludes.append(ExcludeRule(match, reason if isinstance(reason, str) else "", r.locator.line(rkey)))
    return ConfigSpec(
        index=index, name=name, algorithm=algorithm, matrix=tuple(matrix),
        args=_args(r, t.get("args", {}), (*key, "args")),
        fork_args=_args(r, t.get("fork_args", {}), (*key, "fork_args")),
        env=_env(r, t.get("env", {}), (*key, "env")), exclude=tuple(excludes), line=r.locator.line(key),
    )


def _workload(r: _Reader, index: int, raw: dict, repeats: int, warmup: int, base_dir: Path) -> WorkloadSpec | None:
    key: KeyPath = ("workloads", index)
    if not isinstance(raw, dict):
        r.error(key, "expected a table")
        return None
    kind = r.get(raw, key, "kind", (str,), required=True)
    if kind is None:
        return None
    if kind not in KINDS:
        r.error((*key, "kind"), f"unknown workload kind '{kind}'", did_you_mean(kind, KINDS))
        return None
    kind_params = KINDS[kind]
    r.table(raw, key, (*_WORKLOAD_KEYS, *kind_params))
    name = r.get(raw, key, "name", (str,), kind)
    if not _NAME_OK.match(name):
        r.error((*key, "name"), f"'{name}' is not a usable name", "use letters, digits, '.', '_', '-' and '+'")
    common = {}
    for pname, spec in COMMON_PARAMS.items():
        default = {"repeats": repeats, "warmup": warmup}.get(pname, spec.default)
        if spec.positive:
            common[pname] = r.positive(raw, key, pname, spec.types, default)
        elif pname == "warmup":
            common[pname] = r.positive(raw, key, pname, spec.types, default, allow_zero=True)
        else:
            common[pname] = r.get(raw, key, pname, spec.types, default)
    temperature = common["temperature"]
    if temperature is not None and temperature < 0:
        r.error((*key, "temperature"), f"expected a temperature >= 0, got {temperature}")
    params: dict[str, Any] = {}
    for pname, spec in kind_params.items():
        pkey = (*key, pname)
        required = spec.default is None
        value = r.get(raw, key, pname, spec.types, spec.default, required=required)
        if value is None:
            continue
        if spec.positive and value <= 0:
            r.error(pkey, f"expected a positive integer, got {value}")
        if isinstance(value, list):
            if spec.item_types and not all(_is_type(v, spec.item_types) for v in value):
                r.error(pkey, f"expected an array of {_types_text(spec.item_types)}")
                continue
            if spec.choices:
                for v in value:
                    if v not in spec.choices:
                        r.error(pkey, f"unknown item '{v}'", did_you_mean(str(v), map(str, spec.choices)))
            if not value and pname in ("items", "prompt_tokens"):
                r.error(pkey, "empty list: this workload would send nothing")
            value = tuple(value)
        elif spec.choices and value not in spec.choices:
            r.error(pkey, f"unknown value '{value}'", did_you_mean(str(value), map(str, spec.choices)))
        params[pname] = value
    if kind == "long_context":
        for v in params.get("prompt_tokens", ()):
            if isinstance(v, str) and v != "max":
                r.error((*key, "prompt_tokens"), f"'{v}' is neither a token count nor \"max\"")
            elif isinstance(v, int) and v <= 0:
                r.error((*key, "prompt_tokens"), f"expected positive token counts, got {v}")
    if kind == "prompts_file" and "path" in params:
        resolved = (base_dir / Path(params["path"]).expanduser()).resolve()
        if not resolved.is_file():
            r.error((*key, "path"), f"prompts file not found: {resolved}", "paths are relative to the sweep file")
        params["path"] = str(resolved)
    return WorkloadSpec(
        name=name, kind=kind, max_new_tokens=common["max_new_tokens"] or 256, repeats=common["repeats"] or 1,
        warmup=common["warmup"] if common["warmup"] is not None else 1, temperature=float(temperature or 0.0),
        ignore_eos=bool(common["ignore_eos"]), params=tuple(sorted(params.items())),
    )
