"""Sweep files: TOML in, a frozen, validated :class:`Sweep` out, or a :class:`SweepError` naming every problem.

The schema is documented in ``docs/sweep-format.md``. Validation collects all issues in one pass so a user
fixes a file in one edit, and each issue names the file, the line, the key, what was expected and, for a
misspelt key, the closest valid one.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench_tui.core.cluster import ClusterSpec, read_cluster
from specbench_tui.core.engines import ENGINE_NAMES
from specbench_tui.core.errors import SweepError, SweepIssue, did_you_mean
from specbench_tui.core.load import SEARCHES, LoadSpec, Slo
from specbench_tui.core.prompts import PromptsFileError, load_prompts_file
from specbench_tui.core.secrets import is_secret_name, looks_like_token
from specbench_tui.core.signatures import pattern_problem
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

_NAME_OK = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+\-]*")
"""Names are checked with ``fullmatch`` (``$`` would accept a trailing newline)."""
_PARAM_OK = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ENV_OK = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def shown_name(name: str) -> str:
    """A name quoted for a message: control characters escaped, a long one cut."""
    text = repr(name) if not name.isprintable() else f"'{name}'"
    return text if len(text) <= 80 else text[:60] + f"…' ({len(name):,} characters)"


def usable_name(name: str) -> bool:
    """Whether ``name`` may name a sweep, configuration or workload (it becomes part of file names)."""
    return len(name) <= MAX_NAME_CHARS and _NAME_OK.fullmatch(name) is not None


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
    item_count: int = 0
    """How many items one repeat sends (the prompts a file holds, counted when it was validated)."""
    load: LoadSpec | None = None
    """The load axis (``concurrency`` / ``request_rate``); None: one request at a time (concurrency 1)."""

    @property
    def requests(self) -> int:
        """Requests one configuration is sent for this workload: items × repeats + warm-up (with a load axis:
        every point's requests × repeats + its warm-up)."""
        if self.load is not None:
            return sum(self.load.requests_at(p) * self.repeats + self.load.warmup_requests(p, self.warmup)
                       for p in self.load.points())
        return self.item_count * self.repeats + self.warmup

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
    display_path: str | None = None
    """The file as the user named it, for messages (None: ``str(path)``)."""
    cluster: ClusterSpec = ClusterSpec()
    """``[cluster]``: where configurations run (:mod:`specbench_tui.core.cluster`)."""

    @property
    def shown_path(self) -> str:
        """The file name to put in messages."""
        return self.display_path or str(self.path)


# --------------------------------------------------------------------------------------------- reading

# Limits: everything that scales with the input is bounded, so that validating any file takes well under a
# second and a few tens of MB, and a run cannot be made to exhaust the machine. docs/sweep-format.md names each.
MAX_SWEEP_BYTES = 1 << 20
"""A sweep file is at most 1 MiB (the largest shipped one is a few KB)."""
MAX_NESTING = 32
"""Tables, arrays and dotted-key parts nest at most this deep (a sweep needs 6)."""
MAX_CONFIGURATIONS = 10_000
"""The whole sweep expands to at most this many configurations (more is almost certainly a typo, and would
take months to run)."""
MAX_EXCLUDE_RULES = 10_000
"""Exclude rules per ``[[configs]]`` block."""
MAX_GPUS = 64
"""GPUs in the pool, and the largest GPU index + 1: more than one machine has."""
MAX_REPEATS = 1_000
"""Measured repeats of each item."""
MAX_WARMUP = 100
"""Unmeasured warm-up requests."""
MAX_ITEMS = 10_000
"""Items of one workload: ``count``, ``items``, ``prompt_tokens`` entries, prompts read from a file."""
MAX_WORKLOADS = 100
"""``[[workloads]]`` blocks."""
MAX_REQUESTS = 100_000
"""Requests one configuration is sent (items × repeats + warm-up, over every workload)."""
MAX_NEW_TOKENS = 1 << 20
"""``max_new_tokens`` (before it is checked against the context length the server reports)."""
MAX_PROMPT_TOKENS = 10_000_000
"""A ``long_context`` prompt size."""
MAX_TURNS = 100
"""Turns of an agentic conversation."""
MAX_TIMEOUT_S = 7 * 24 * 3600.0
"""Any ``*_timeout_s`` or grace (a week)."""
MAX_SIGNATURES = 100
"""User crash signatures."""
MAX_PATTERN_CHARS = 1_000
"""Characters of one crash-signature pattern."""
MAX_NAME_CHARS = 200
"""Characters of a sweep, configuration or workload name."""
MAX_PROMPTS_FILE_BYTES = 32 << 20
"""A prompts file."""
MAX_LOAD_POINTS = 64
"""Values of one load axis (``concurrency`` or ``request_rate``) of a workload."""
MAX_CONCURRENCY = 4096
"""Requests in flight at one closed-loop point."""
MAX_REQUEST_RATE = 100_000.0
"""Requests per second of one open-loop point."""
MAX_WAVES = 1_000
"""``waves`` of a closed-loop point."""
MAX_ISSUES = 100
"""Issues listed for one file (the rest are counted)."""


class _Reader:
    """Typed access to the parsed TOML that records issues instead of raising."""

    def __init__(self, path: str, locator: KeyLocator) -> None:
        self.path = path
        self.locator = locator
        self.issues: list[SweepIssue] = []

    def line_of(self, key: KeyPath) -> int:
        """The line of ``key`` (or its closest ancestor); a document-level problem is on line 1."""
        return self.locator.line(key) or 1

    def error(self, key: KeyPath, message: str, hint: str | None = None) -> None:
        self.issues.append(SweepIssue(self.path, self.line_of(key), format_path(key), message, hint))

    def table(self, data: Any, key: KeyPath, allowed: Mapping[str, Any] | set[str] | tuple[str, ...],
              what: str = "a table") -> dict:
        """``data`` as a table, reporting keys outside ``allowed`` with the closest valid spelling."""
        if not isinstance(data, dict):
            self.error(key, f"expected {what}, got {_type_name(data)} {_short(data)}")
            return {}
        for name in data:
            if name not in allowed:
                where = format_path(key) or "the top level"
                self.error((*key, name), f"unknown key '{name}' in {where}", did_you_mean(name, allowed))
        return data

    def get(self, data: dict, key: KeyPath, name: str, types: tuple[type, ...], default: Any = None,
            required: bool = False) -> Any:
        """``data[name]`` when it has one of ``types``; otherwise record why and return ``default``."""
        if name not in data:
            if required:
                self.error(key, f"missing required key '{name}'", f"add {name} = ... to this table")
            return default
        value = data[name]
        if not _is_type(value, types):
            self.error((*key, name), f"expected {_types_text(types)}, got {_type_name(value)} {_short(value)}")
            return default
        if isinstance(value, float) and not math.isfinite(value):
            self.error((*key, name), f"expected a finite number, got {value}")
            return default
        return value

    def positive(self, data: dict, key: KeyPath, name: str, types: tuple[type, ...], default: Any,
                 allow_zero: bool = False, limit: float | None = None, limit_name: str = "") -> Any:
        """Like :meth:`get` for a number that must be > 0 (or >= 0), and at most ``limit`` when given."""
        value = self.get(data, key, name, types, default)
        if value is not None and (value < 0 or (value == 0 and not allow_zero)):
            self.error((*key, name), f"expected a {'non-negative' if allow_zero else 'positive'} number, got {value}",
                       f"set {name} to a value {'>= 0' if allow_zero else '> 0'}")
            return default
        if value is not None and limit is not None and value > limit:
            self.too_large((*key, name), name, value, limit, limit_name)
            return default
        return value

    def too_large(self, key: KeyPath, what: str, value: float, limit: float, limit_name: str) -> None:
        shown = f"{value:,}" if isinstance(value, int) else f"{value:g}"
        self.error(key, f"{what} = {shown} is over the limit of {limit:,} ({limit_name})",
                   "docs/sweep-format.md lists every limit")


def _is_type(value: Any, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool):
        return bool in types
    if float in types and isinstance(value, int):
        return True
    return isinstance(value, types)


def is_scalar(value: Any) -> bool:
    """A TOML string, integer, finite float or boolean (dates and times are not flag values)."""
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, (str, int, bool))


_TYPE_NAMES: dict[type, str] = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
                                list: "an array", dict: "a table"}


def _type_name(value: Any) -> str:
    return _TYPE_NAMES.get(type(value), f"a TOML {type(value).__name__}")


def _types_text(types: tuple[type, ...]) -> str:
    return " or ".join(dict.fromkeys(_TYPE_NAMES.get(t, t.__name__) for t in types))


def _short(value: Any) -> str:
    text = repr(value)
    return f"({text[:40]}…)" if len(text) > 40 else f"({text})"


def _resolve_path(base_dir: Path, value: str) -> Path:
    """A user path: ``~`` expanded, relative ones taken from the sweep file's folder."""
    return (base_dir / Path(value).expanduser()).resolve()


_ENV_REF = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}")


def expand_env_refs(value: str, environ: Mapping[str, str] | None = None) -> tuple[str, list[str]]:
    """``${NAME}`` and ``${NAME:-default}`` replaced from the environment; also the names that are unset and
    have no default (left as written). A default starting with ``~`` is expanded to the home directory,
    because servers get their argv without a shell. Nothing else (no ``$NAME``, no nesting) is expanded."""
    env = os.environ if environ is None else environ
    missing: list[str] = []

    def one(match: re.Match[str]) -> str:
        name, default = match.group("name"), match.group("default")
        found = env.get(name)
        if found not in (None, ""):
            return found
        if default is not None:
            return os.path.expanduser(default) if default.startswith("~") else default
        missing.append(name)
        return match.group(0)

    return _ENV_REF.sub(one, value), missing


def refers_to_secret(value: str) -> bool:
    """Whether ``value`` holds a ``${NAME}`` reference to a secret-named variable (``${HF_TOKEN}``)."""
    return any(is_secret_name(m.group("name")) for m in _ENV_REF.finditer(value))


def _expand(r: _Reader, key: KeyPath, value: Any) -> Any:
    """A string (or the strings of an array) with environment references expanded; unset ones are errors."""
    if isinstance(value, list):
        return [_expand(r, (*key, i), v) for i, v in enumerate(value)]
    if not isinstance(value, str) or "${" not in value:
        return value
    expanded, missing = expand_env_refs(value)
    for name in dict.fromkeys(missing):
        r.error(key, f"${{{name}}} is not set in the environment",
                f"export {name}=..., or write ${{{name}:-default}}"
                + (" (the shipped llama.cpp sweeps: run set -a; eval \"$(tools/setup_llama_server.sh)\"; set +a first)"
                   if name in _SETUP_VARIABLES else ""))
    return expanded


_SETUP_VARIABLES = ("LLAMA_SERVER", "TINY_TARGET_GGUF", "TINY_DRAFT_GGUF", "SPEEDUP_TARGET_GGUF",
                    "SPEEDUP_DRAFT_GGUF", "TINY_MODEL_DIR")
"""Variables printed by ``tools/setup_llama_server.sh``."""


def _looks_like_secret(value: str) -> bool:
    """True for strings that look like an API key rather than an environment variable's name."""
    if value.lower().startswith(("sk-", "sk_", "hf_", "bearer")):
        return True
    has_lower = any(c.islower() for c in value)
    has_digit = any(c.isdigit() for c in value)
    return len(value) >= 20 and has_lower and has_digit


# ------------------------------------------------------------------------------------------ the schema

_TOP_KEYS = ("sweep", "engine", "server", "configs", "workloads", "cluster")
_SWEEP_KEYS = ("name", "description", "baseline", "runs_dir", "gpus", "concurrent", "lossless_check",
               "repeats", "warmup")
_ENGINE_KEYS = ("profile", "launcher", "python", "command", "host", "port_base", "startup_timeout_s",
                "stall_timeout_s", "request_timeout_s", "shutdown_grace_s", "gpu_release_timeout_s",
                "sim_profile", "api_key_env", "crash_signatures")
_SERVER_KEYS = ("args", "env")
_CONFIG_KEYS = ("name", "algorithm", "matrix", "args", "fork_args", "env", "exclude")
LOAD_KEYS = ("concurrency", "request_rate", "requests", "waves", "search", "arrival_seed", "noise_threshold", "slo")
"""The load axis of a workload (see :mod:`specbench_tui.core.load`)."""
_SLO_KEYS = ("ttft_ms", "itl_ms", "e2e_ms", "percentile")
_WORKLOAD_KEYS = ("name", "kind", *COMMON_PARAMS, *LOAD_KEYS)
_TIMEOUTS = ("startup_timeout_s", "stall_timeout_s", "request_timeout_s", "shutdown_grace_s",
             "gpu_release_timeout_s")


def load_sweep(path: str | Path, display_path: str | None = None) -> Sweep:
    """Read and validate a sweep file; raise :class:`SweepError` listing every issue."""
    path = Path(path)
    shown = display_path or str(path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_SWEEP_BYTES + 1)
    except OSError as exc:
        raise SweepError([SweepIssue(shown, None, "", f"cannot read the sweep file: {exc.strerror or exc}",
                                     "check the path (shipped sweeps can be named by stem, e.g. demo)")]) from None
    if len(raw) > MAX_SWEEP_BYTES:
        line = raw[:MAX_SWEEP_BYTES].count(b"\n") + 1
        raise SweepError([SweepIssue(shown, line, "", f"the file is larger than {MAX_SWEEP_BYTES:,} bytes "
                                     "(MAX_SWEEP_BYTES); this line is past the limit",
                                     "a sweep file is a few KB: is this the right file?")])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise SweepError([SweepIssue(shown, line, "", f"the file is not valid UTF-8 (byte 0x{raw[exc.start]:02x} "
                                     f"at column {column})", "TOML files are UTF-8: re-save the file as UTF-8")]
                         ) from None
    return parse_sweep(text, path, shown)


def parse_sweep(text: str, path: Path, shown: str | None = None) -> Sweep:
    """Validate sweep ``text`` that was read from ``path`` (used to resolve relative paths)."""
    shown = shown or str(path)
    if len(text) > MAX_SWEEP_BYTES:
        line = text.count("\n", 0, MAX_SWEEP_BYTES) + 1
        raise SweepError([SweepIssue(shown, line, "", f"the text is longer than {MAX_SWEEP_BYTES:,} characters "
                                     "(MAX_SWEEP_BYTES)", "a sweep file is a few KB: is this the right file?")])
    # Located first, and limited in depth before tomllib sees the text: tomllib's time grows with the square
    # of a dotted key's length and it recurses once per nested array.
    locator = KeyLocator(text, max_depth=MAX_NESTING)
    deep_line = locator.too_deep or _crude_depth_line(text, locator.stopped_at)
    if deep_line is not None:
        raise SweepError([_too_deep(shown, deep_line)])
    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise SweepError([_too_deep(shown, locator.stopped_at and text.count("\n", 0, locator.stopped_at) + 1 or 1)]
                         ) from None
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        match = re.search(r"\(at line (\d+), column (\d+)\)", message)
        toml_line = int(match.group(1)) if match else None
        if toml_line is None and "end of document" in message:
            toml_line = text.count("\n") + 1
        message = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", message)
        hint = _TOML_HINTS.get(message, "docs/sweep-format.md shows the syntax of every construct")
        if match:
            message += f" at column {match.group(2)}"
        raise SweepError([SweepIssue(shown, toml_line or 1, "", f"invalid TOML: {message}", hint)]) from None
    deep_path = _too_deep_path(data)
    if deep_path is not None:
        raise SweepError([_too_deep(shown, locator.line(deep_path) or 1)])
    reader = _Reader(shown, locator)
    sweep = _build(reader, data, text, path, shown)
    if reader.issues:
        # Report flag-name mistakes too, so one edit fixes the file (late import: plan imports this module).
        from specbench_tui.core.plan import flag_name_issues

        raise SweepError(sort_issues(reader.issues + flag_name_issues(sweep)))
    return sweep


_TOML_HINTS = {
    "Illegal character '\\n'": "is a string missing its closing quote? A \"...\" string ends on its own line",
    "Cannot overwrite a value": "a key is set twice in the same table; keep one",
    "Cannot declare a table twice": "a [table] header appears twice; merge the two",
    "Expected '=' after a key in a key/value pair": "write key = value",
    "Invalid value": "strings need quotes: key = \"text\"",
}
"""Extra advice for tomllib's commonest messages."""


def sort_issues(issues: list[SweepIssue]) -> list[SweepIssue]:
    """Issues in file order, each reported once; past :data:`MAX_ISSUES` the rest are counted in one more."""
    unique = sorted(dict.fromkeys(issues), key=lambda issue: issue.line or 0)
    if len(unique) <= MAX_ISSUES:
        return unique
    rest = unique[MAX_ISSUES:]
    return [*unique[:MAX_ISSUES], SweepIssue(rest[0].path, rest[0].line, "", f"and {len(rest):,} more problems "
                                             "from this line on", "fix the ones above first")]


def _too_deep(shown: str, line: int) -> SweepIssue:
    return SweepIssue(shown, line, "", f"keys or values nest deeper than {MAX_NESTING} levels (MAX_NESTING)",
                      "a sweep needs a few levels: [[configs]], its matrix or args, a flag's table")


def _crude_depth_line(text: str, stopped_at: int | None) -> int | None:
    """Where the locator could not follow the text, the first later line with more dots and brackets than a
    key within the depth limit could have (so that tomllib is never given a key thousands of parts long)."""
    if stopped_at is None:
        return None
    start = text.rfind("\n", 0, stopped_at) + 1
    line = text.count("\n", 0, start) + 1
    for number, chunk in enumerate(text[start:].split("\n"), start=line):
        if chunk.count(".") + chunk.count("[") + chunk.count("{") > 4 * MAX_NESTING:
            return number
    return None


def _too_deep_path(data: Any) -> KeyPath | None:
    """The path of a value nested deeper than :data:`MAX_NESTING`, or None (walked without recursion)."""
    stack: list[tuple[Any, KeyPath]] = [(data, ())]
    while stack:
        value, path = stack.pop()
        if len(path) > MAX_NESTING:
            return path[:MAX_NESTING]
        if isinstance(value, dict):
            stack.extend((v, (*path, k)) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, (*path, i)) for i, v in enumerate(value))
    return None


def _build(r: _Reader, data: dict, text: str, path: Path, shown: str) -> Sweep:
    """The sweep, with defaults standing in for every part that had an issue (recorded in ``r``)."""
    r.table(data, (), _TOP_KEYS)
    base_dir = path.parent
    sweep_t = r.table(data.get("sweep", {}), ("sweep",), _SWEEP_KEYS)
    if "sweep" not in data:
        r.error((), "no [sweep] table", "start the file with [sweep] and name = \"...\"")
    name = r.get(sweep_t, ("sweep",), "name", (str,), required="sweep" in data) or path.stem
    if isinstance(name, str) and not usable_name(name):
        r.error(("sweep", "name"), f"{shown_name(name)} is not a usable name",
                "use letters, digits, '.', '_', '-' and '+': it becomes part of the run directory's name")
        name = path.stem
    description = r.get(sweep_t, ("sweep",), "description", (str,), "")
    baseline = r.get(sweep_t, ("sweep",), "baseline", (str,))
    runs_dir = Path(r.get(sweep_t, ("sweep",), "runs_dir", (str,), "runs")).expanduser()
    gpus = _gpus(r, sweep_t)
    concurrent = r.get(sweep_t, ("sweep",), "concurrent", (bool,), False)
    lossless = r.get(sweep_t, ("sweep",), "lossless_check", (bool,), False)
    repeats = r.positive(sweep_t, ("sweep",), "repeats", (int,), 1, limit=MAX_REPEATS, limit_name="MAX_REPEATS")
    warmup = r.positive(sweep_t, ("sweep",), "warmup", (int,), 1, allow_zero=True, limit=MAX_WARMUP,
                        limit_name="MAX_WARMUP")

    engine = _engine(r, data.get("engine", {}), base_dir)
    server_t = r.table(data.get("server", {}), ("server",), _SERVER_KEYS)
    server_args = _args(r, server_t.get("args", {}), ("server", "args"))
    server_env = _env(r, server_t.get("env", {}), ("server", "env"))
    cluster = read_cluster(r, data.get("cluster", {}))

    configs_raw = data.get("configs")
    configs: list[ConfigSpec] = []
    if configs_raw is None:
        r.error((), "no [[configs]]: a sweep needs at least one configuration",
                "add a [[configs]] block with name = \"...\" and its args")
    elif not isinstance(configs_raw, list) or not all(isinstance(c, dict) for c in configs_raw):
        r.error(("configs",), f"expected an array of tables, got {_type_name(configs_raw)}",
                "write each configuration as its own [[configs]] block, with double brackets")
    elif not configs_raw:
        r.error(("configs",), "no configurations", "add a [[configs]] block")
    else:
        total = 0
        for i, c in enumerate(configs_raw):
            config = _config(r, i, c)
            points = math.prod(len(values) for _, values in config.matrix)
            if total + points > MAX_CONFIGURATIONS:
                r.error(("configs", i), f"the sweep expands to more than {MAX_CONFIGURATIONS:,} configurations "
                        f"from this block on (MAX_CONFIGURATIONS; {total:,} before it)",
                        "split it into smaller sweeps or remove values")
                break
            total += points
            configs.append(config)

    workloads_raw = data.get("workloads")
    workloads: list[WorkloadSpec] = []
    if workloads_raw is None:
        r.error((), "no [[workloads]]: a sweep needs at least one workload",
                "add a [[workloads]] block, e.g. with kind = \"code\"")
    elif not isinstance(workloads_raw, list) or not all(isinstance(w, dict) for w in workloads_raw):
        r.error(("workloads",), f"expected an array of tables, got {_type_name(workloads_raw)}",
                "write each workload as its own [[workloads]] block, with double brackets")
    elif not workloads_raw:
        r.error(("workloads",), "no workloads", "add a [[workloads]] block")
    elif len(workloads_raw) > MAX_WORKLOADS:
        r.error(("workloads", MAX_WORKLOADS), f"more than {MAX_WORKLOADS} workloads (MAX_WORKLOADS)",
                "split the sweep")
    else:
        seen: dict[str, int] = {}
        requests = 0
        for i, w in enumerate(workloads_raw):
            spec = _workload(r, i, w, repeats, warmup, base_dir)
            if spec is None:
                continue
            requests += spec.requests
            if requests > MAX_REQUESTS:
                r.error(("workloads", i), f"each configuration would be sent more than {MAX_REQUESTS:,} requests "
                        f"by the workloads up to this one (MAX_REQUESTS: items × repeats + warm-up, "
                        "or each load point's requests × repeats + warm-up)",
                        "lower repeats, count, the number of items, requests, waves or load points")
                requests = -(1 << 62)  # said once

            if spec.name in seen:
                implicit = "" if "name" in w else " (a workload without a name is named after its kind)"
                r.error(("workloads", i, "name"), f"duplicate workload name '{spec.name}'{implicit}; "
                        f"workloads[{seen[spec.name]}] on line {r.line_of(('workloads', seen[spec.name]))} "
                        "has it too", "give each workload its own name = \"...\"")
            else:
                seen[spec.name] = i
            workloads.append(spec)
    return Sweep(
        path=path, text=text, name=name, description=description, baseline=baseline, runs_dir=runs_dir,
        gpus=gpus, concurrent=concurrent, lossless_check=lossless, engine=engine,
        server_args=server_args, server_env=server_env, configs=tuple(configs), workloads=tuple(workloads),
        display_path=shown, cluster=cluster,
    )


def _gpus(r: _Reader, sweep_t: dict) -> tuple[int, ...] | None:
    value = sweep_t.get("gpus", "all")
    key = ("sweep", "gpus")
    if value == "all":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        if value <= 0:
            r.error(key, f"expected a positive GPU count, got {value}", "write gpus = \"all\" to use every GPU")
            return None
        if value > MAX_GPUS:
            r.error(key, f"gpus = {value:,}: no machine has that many GPUs (MAX_GPUS = {MAX_GPUS})",
                    "write gpus = \"all\", or the number of GPUs this machine has")
            return None
        return tuple(range(value))
    if isinstance(value, list) and value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        if len(value) > MAX_GPUS or any(v >= MAX_GPUS for v in value):
            r.error(key, f"GPU indices go from 0 to {MAX_GPUS - 1} and a pool has at most {MAX_GPUS} (MAX_GPUS)",
                    "list the indices nvidia-smi shows")
            return None
        if any(v < 0 for v in value) or len(set(value)) != len(value):
            r.error(key, f"GPU indices must be distinct and non-negative, got {_short(value)}")
            return None
        return tuple(value)
    r.error(key, f"expected \"all\", a GPU count or a list of GPU indices, got {_type_name(value)} {_short(value)}",
            "e.g. gpus = 8 or gpus = [0, 1, 2, 3]")
    return None


def _engine(r: _Reader, raw: Any, base_dir: Path) -> EngineSpec:
    key: KeyPath = ("engine",)
    t = r.table(raw, key, _ENGINE_KEYS)
    profile = r.get(t, key, "profile", (str,), "sglang")
    if profile not in ENGINE_NAMES:
        r.error((*key, "profile"), f"unknown engine profile '{profile}'", did_you_mean(profile, ENGINE_NAMES))
        profile = "sglang"
    launcher = r.get(t, key, "launcher", (str,), "simulator")
    if launcher not in LAUNCHERS:
        r.error((*key, "launcher"), f"unknown launcher '{launcher}'", did_you_mean(launcher, LAUNCHERS))
        launcher = "simulator"
    command = _expand(r, (*key, "command"), r.get(t, key, "command", (list,), []))
    if command and not all(isinstance(c, str) and c for c in command):
        r.error((*key, "command"), "expected an array of non-empty strings (an argv prefix; no shell is used)")
        command = []
    if command and "/" in command[0] and not Path(command[0]).expanduser().is_absolute():
        command = [str(_resolve_path(base_dir, command[0])), *command[1:]]
    if launcher == "command" and not command:
        r.error((*key, "launcher"), "launcher = \"command\" needs a command",
                "add command = [\"/path/to/server\", \"--its-flag\"] to [engine]")
    python = _expand(r, (*key, "python"), r.get(t, key, "python", (str,)))
    if python is not None and "/" in python and not Path(python).expanduser().is_absolute():
        python = str(_resolve_path(base_dir, python))
    sim_profile = r.get(t, key, "sim_profile", (str,))
    if sim_profile is not None:
        resolved = _resolve_path(base_dir, sim_profile)
        if not resolved.is_file():
            r.error((*key, "sim_profile"), f"simulator profile not found: {resolved}",
                    "relative paths are taken from the sweep file's folder")
        sim_profile = str(resolved)
    api_key_env = r.get(t, key, "api_key_env", (str,))
    if api_key_env is not None and (not _ENV_OK.fullmatch(api_key_env) or _looks_like_secret(api_key_env)):
        r.error((*key, "api_key_env"), "expected the NAME of an environment variable that holds the key, "
                "and this looks like a key itself", "write api_key_env = \"SGLANG_API_KEY\" and export "
                "SGLANG_API_KEY=...; never put a key in a sweep file (it is copied into every run directory)")
        api_key_env = None
    signatures = _crash_signatures(r, t.get("crash_signatures", {}), (*key, "crash_signatures"))
    port_base = r.get(t, key, "port_base", (int,), 30000)
    if not 1024 <= port_base <= 65000:
        r.error((*key, "port_base"), f"expected a port between 1024 and 65000, got {port_base}")
        port_base = 30000
    host = r.get(t, key, "host", (str,), "127.0.0.1")
    if not host.strip():
        r.error((*key, "host"), "expected a host name or address, got an empty string")
        host = "127.0.0.1"
    timeouts = {name: float(r.positive(t, key, name, (int, float), getattr(EngineSpec, name), limit=MAX_TIMEOUT_S,
                                       limit_name="MAX_TIMEOUT_S"))
                for name in _TIMEOUTS}
    return EngineSpec(
        profile=profile, launcher=launcher, python=python, command=tuple(command), host=host,
        port_base=port_base, sim_profile=sim_profile, api_key_env=api_key_env, crash_signatures=signatures,
        **timeouts,
    )


def _crash_signatures(r: _Reader, raw: Any, key: KeyPath) -> tuple[tuple[str, str], ...]:
    """``[engine.crash_signatures]``: name = "regex" pairs, each compiled now so a typo fails validation."""
    if not isinstance(raw, dict):
        r.error(key, f"expected a table of name = \"regex\" pairs, got {_type_name(raw)}")
        return ()
    out: list[tuple[str, str]] = []
    if len(raw) > MAX_SIGNATURES:
        r.error(key, f"more than {MAX_SIGNATURES} crash signatures (MAX_SIGNATURES)", "keep the ones you need")
        return ()
    for sig_name, pattern in raw.items():
        if isinstance(pattern, str) and len(pattern) > MAX_PATTERN_CHARS:
            r.error((*key, sig_name), f"the pattern is {len(pattern):,} characters long (MAX_PATTERN_CHARS = "
                    f"{MAX_PATTERN_CHARS:,})", "match a distinctive part of the line")
            continue
        if not isinstance(pattern, str):
            r.error((*key, sig_name), f"expected a regular expression string, got {_type_name(pattern)}")
            continue
        if not pattern:
            r.error((*key, sig_name), "an empty regular expression matches every log line")
            continue
        problem = pattern_problem(pattern)
        if problem is not None:
            r.error((*key, sig_name), problem,
                    "signatures are RE2 expressions, matched in time linear in the line: no look-around or "
                    "back-references; escape regex characters such as ( [ . * with a backslash, and write the "
                    "pattern as a '...' literal string so TOML keeps backslashes as written")
            continue
        out.append((sig_name, pattern))
    return tuple(out)


def _args(r: _Reader, raw: Any, key: KeyPath) -> tuple[tuple[str, ArgValue], ...]:
    """Flag table: ``tp-size = 4``, ``trust-remote-code = true``, ``cuda-graph-bs-decode = [1, 2, 4]``."""
    if not isinstance(raw, dict):
        r.error(key, f"expected a table of flags, got {_type_name(raw)} {_short(raw)}",
                "write flags as key = value lines, e.g. tp-size = 4")
        return ()
    out: dict[str, ArgValue] = {}
    for flag, value in raw.items():
        fkey = (*key, flag)
        if any(isinstance(v, str) and refers_to_secret(v) for v in (value if isinstance(value, list) else [value])):
            r.error(fkey, "a secret in a flag would be written into the plan, plan.json and the server's command "
                    "line", "pass it in the environment instead ([server.env] NAME = \"${NAME}\"), or the API key "
                    "with engine.api_key_env")
            continue
        value = _expand(r, fkey, value)
        name = flag[2:] if flag.startswith("--") else flag
        if not name or name.startswith("-") or any(c.isspace() or c == "=" for c in name):
            r.error(fkey, f"'{flag}' is not a flag name", "write the flag's long name without dashes, "
                    "e.g. tp-size = 4")
            continue
        if name in out:
            r.error(fkey, f"--{name} is set twice in this table", "keep one of them")
            continue
        if isinstance(value, list):
            if not value:
                r.error(fkey, "an empty array would pass the flag with no value",
                        "remove the key, or give at least one value")
                continue
            if not all(is_scalar(v) and not isinstance(v, bool) for v in value):
                r.error(fkey, "array flag values hold strings or numbers only",
                        "e.g. cuda-graph-bs-decode = [1, 2, 4, 8]")
                continue
            out[name] = tuple(value)
        elif is_scalar(value):
            out[name] = value
        elif isinstance(value, dict):
            problem = _json_problem(value)
            if problem:
                r.error(fkey, f"a table flag value is passed as JSON, but {problem}",
                        "use strings, numbers, booleans, arrays and tables only")
                continue
            # vLLM's --speculative-config and SGLang's --json-model-override-args take a JSON object.
            out[name] = json.dumps(value, separators=(",", ":"))
        else:
            r.error(fkey, f"a flag value is a string, number, boolean, array or table, got {_type_name(value)}",
                    "true passes a bare flag, false leaves it out, an array passes several values, "
                    "a table passes a JSON object")
    return tuple(out.items())


def _json_problem(value: Any, where: str = "") -> str | None:
    """Why ``value`` (from TOML) has no JSON form, or None (dates and times have none)."""
    if isinstance(value, dict):
        for key, item in value.items():
            problem = _json_problem(item, f"{where}.{key}" if where else str(key))
            if problem:
                return problem
        return None
    if isinstance(value, list):
        return next((p for i, item in enumerate(value) if (p := _json_problem(item, f"{where}[{i}]"))), None)
    if is_scalar(value):
        return None
    return f"{where or 'a value'} is {_type_name(value)}"


def _env(r: _Reader, raw: Any, key: KeyPath) -> tuple[tuple[str, str], ...]:
    if not isinstance(raw, dict):
        r.error(key, f"expected a table of environment variables, got {_type_name(raw)} {_short(raw)}",
                "write NAME = \"value\" lines")
        return ()
    out = []
    for name, value in raw.items():
        secret_name = is_secret_name(name)
        if isinstance(value, str) and "${" not in value and looks_like_token(value, secret_name):
            r.error((*key, name), "this looks like a secret written into the sweep file, which is printed by "
                    "validate and copied into every run directory",
                    f"write {name} = \"${{{name}}}\" and export {name}=... before running: a reference is "
                    "passed to the server and redacted from its log")
            continue
        if isinstance(value, str) and (secret_name or refers_to_secret(value)) and "${" in value \
                and _ENV_OK.fullmatch(name):
            # Passed through as written and expanded only at launch, so the secret never reaches the plan,
            # validate's output or the run directory (the server's log is redacted of it).
            _expand(r, (*key, name), value)
            out.append((name, value))
            continue
        value = _expand(r, (*key, name), value)
        if not _ENV_OK.fullmatch(name):
            r.error((*key, name), f"'{name}' is not a valid environment variable name",
                    "use letters, digits and '_', not starting with a digit")
            continue
        if isinstance(value, bool):
            value = "1" if value else "0"
        if not is_scalar(value):
            r.error((*key, name), f"expected a string or number, got {_type_name(value)}")
            continue
        out.append((name, str(value)))
    return tuple(out)


def typed_key(value: Scalar) -> tuple[str, Scalar]:
    """A hashable key that is equal for two values exactly when :func:`same_value` says they are."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("number", value)
    return (type(value).__name__, value)


def same_value(a: Any, b: Any) -> bool:
    """Equality that keeps TOML's types apart: ``true`` is not ``1`` and ``"8"`` is not ``8``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def _config(r: _Reader, index: int, raw: dict) -> ConfigSpec:
    key: KeyPath = ("configs", index)
    t = r.table(raw, key, _CONFIG_KEYS)
    name = r.get(t, key, "name", (str,), f"config{index}", required=True)
    if not name.strip():
        r.error((*key, "name"), "a configuration name cannot be empty", "e.g. name = \"ddtree-b{budget}-tp{tp}\"")
        name = f"config{index}"
    algorithm = r.get(t, key, "algorithm", (str,), "")
    matrix_raw = r.get(t, key, "matrix", (dict,), {})
    matrix: list[tuple[str, tuple[Scalar, ...]]] = []
    points = 1
    for param, values in matrix_raw.items():
        pkey = (*key, "matrix", param)
        if not _PARAM_OK.fullmatch(param):
            r.error(pkey, f"'{param}' is not a usable parameter name",
                    "use a Python-style identifier such as budget, tp or topk")
            continue
        if not isinstance(values, list):
            values = [values]
        if not values:
            r.error(pkey, "empty matrix axis: it would expand to no configuration",
                    "give at least one value, e.g. [8, 16]")
            continue
        if len(values) > MAX_CONFIGURATIONS:
            r.too_large(pkey, "the number of values", len(values), MAX_CONFIGURATIONS, "MAX_CONFIGURATIONS")
            matrix = []
            points = MAX_CONFIGURATIONS + 1
            break
        if not all(is_scalar(v) for v in values):
            r.error(pkey, "matrix values are strings, numbers or booleans")
            continue
        seen_values: set[tuple[str, Scalar]] = set()
        duplicate = next((v for v in values if typed_key(v) in seen_values or _added(seen_values, typed_key(v))), None)
        if duplicate is not None:
            r.error(pkey, f"duplicate value {duplicate!r} in {_short(values)}", "list each value once")
            continue
        matrix.append((param, tuple(values)))
        points *= len(values)
        if points > MAX_CONFIGURATIONS:
            break
    if points > MAX_CONFIGURATIONS:
        r.error((*key, "matrix"), f"the matrix expands to {points:,} configurations (at most "
                f"{MAX_CONFIGURATIONS:,})", "split it into smaller sweeps or remove values")
        matrix = []
    excludes = _excludes(r, key, t.get("exclude", []), dict(matrix), set(matrix_raw))
    return ConfigSpec(
        index=index, name=name, algorithm=algorithm, matrix=tuple(matrix),
        args=_args(r, t.get("args", {}), (*key, "args")),
        fork_args=_args(r, t.get("fork_args", {}), (*key, "fork_args")),
        env=_env(r, t.get("env", {}), (*key, "env")), exclude=tuple(excludes), line=r.line_of(key),
    )


def _excludes(r: _Reader, key: KeyPath, raw: Any, matrix: dict[str, tuple[Scalar, ...]],
              declared: set[str]) -> list[ExcludeRule]:
    """``[[configs.exclude]]`` rules: every key but ``reason`` names a matrix parameter and one of its values."""
    if not isinstance(raw, list):
        r.error((*key, "exclude"), f"expected an array of tables, got {_type_name(raw)}",
                "write each rule as [[configs.exclude]] with the parameters to match and reason = \"...\"")
        return []
    excludes: list[ExcludeRule] = []
    if len(raw) > MAX_EXCLUDE_RULES:
        r.error((*key, "exclude", MAX_EXCLUDE_RULES), f"more than {MAX_EXCLUDE_RULES:,} exclude rules "
                "(MAX_EXCLUDE_RULES)", "exclude a whole axis value with one rule, e.g. { tp = 8, reason = ... }")
        return []
    axes = {k: {typed_key(v) for v in values} for k, values in matrix.items()}
    by_text = {k: {str(v): v for v in reversed(values)} for k, values in matrix.items()}
    for j, rule in enumerate(raw):
        rkey = (*key, "exclude", j)
        if not isinstance(rule, dict):
            r.error(rkey, f"expected a table such as {{ budget = 8, tp = 1, reason = \"...\" }}, "
                    f"got {_type_name(rule)}")
            continue
        reason = rule.get("reason")
        if "reason" not in rule:
            r.error(rkey, "an exclude rule needs a reason, shown in the plan and the report",
                    "add reason = \"why this point is skipped\"")
        elif not isinstance(reason, str) or not reason.strip():
            r.error((*rkey, "reason"), "expected a non-empty string saying why these points are skipped")
        match = tuple((k, v) for k, v in rule.items() if k != "reason")
        if not match:
            r.error(rkey, "an exclude rule needs at least one parameter to match", "e.g. budget = 8")
        ok = True
        for k, v in match:
            if k not in matrix:
                ok = False
                if k in declared:
                    continue  # that axis is invalid and already reported
                if not declared:
                    r.error((*rkey, k), f"'{k}' cannot be matched: this configuration has no matrix",
                            "add a matrix, or remove the exclude rule")
                else:
                    hint = did_you_mean(k, matrix)
                    r.error((*rkey, k), f"'{k}' is not a matrix parameter of this configuration (it has "
                            f"{', '.join(matrix) or 'none'})", hint)
            elif not is_scalar(v) or typed_key(v) not in axes[k]:
                ok = False
                typed = by_text[k].get(str(v)) if is_scalar(v) else None
                hint = (f"{k} = {v!r} is {_type_name(v)} but the matrix has {typed!r}; write it without quotes"
                        if typed is not None else f"use one of {_short(list(matrix[k]))}")
                r.error((*rkey, k), f"{k} = {_short(v)[1:-1]} is not a value of matrix.{k}, so this rule matches "
                        "nothing", hint)
        if ok and match and isinstance(reason, str) and reason.strip():
            excludes.append(ExcludeRule(match, reason.strip(), r.line_of(rkey)))
    return excludes


def _workload(r: _Reader, index: int, raw: dict, repeats: int, warmup: int, base_dir: Path) -> WorkloadSpec | None:
    key: KeyPath = ("workloads", index)
    kind = r.get(raw, key, "kind", (str,), required=True)
    if kind is None:
        return None
    if kind not in KINDS:
        r.error((*key, "kind"), f"unknown workload kind '{kind}'", did_you_mean(kind, KINDS))
        return None
    kind_params = KINDS[kind]
    allowed = (*_WORKLOAD_KEYS, *kind_params)
    for pname in raw:
        if pname not in allowed:
            r.error((*key, pname), f"unknown key '{pname}' for a workload of kind '{kind}'",
                    did_you_mean(pname, allowed))
    name = r.get(raw, key, "name", (str,), kind)
    if not usable_name(name):
        r.error((*key, "name"), f"{shown_name(name)} is not a usable name",
                f"use letters, digits, '.', '_', '-' and '+', at most {MAX_NAME_CHARS} characters")
    common = {}
    for pname, spec in COMMON_PARAMS.items():
        default = {"repeats": repeats, "warmup": warmup}.get(pname, spec.default)
        limit, limit_name = _COMMON_LIMITS.get(pname, (None, ""))
        if spec.positive:
            common[pname] = r.positive(raw, key, pname, spec.types, default, limit=limit, limit_name=limit_name)
        elif pname == "warmup":
            common[pname] = r.positive(raw, key, pname, spec.types, default, allow_zero=True, limit=limit,
                                       limit_name=limit_name)
        else:
            common[pname] = r.get(raw, key, pname, spec.types, default)
    temperature = common["temperature"]
    if temperature is not None and temperature < 0:
        r.error((*key, "temperature"), f"expected a temperature >= 0, got {temperature}", "0 means greedy")
    params: dict[str, Any] = {}
    for pname, spec in kind_params.items():
        pkey = (*key, pname)
        value = r.get(raw, key, pname, spec.types, spec.default, required=spec.default is None)
        if value is None:
            continue
        if isinstance(value, list):
            wrong = [i for i, v in enumerate(value) if spec.item_types and not _is_type(v, spec.item_types)]
            if wrong:
                item = value[wrong[0]]
                r.error((*pkey, wrong[0]), f"expected an array of {_types_text(spec.item_types or ())}, got "
                        f"{_type_name(item)} {_short(item)}")
                continue
            if len(value) > MAX_ITEMS:
                r.error(pkey, f"{len(value):,} items (MAX_ITEMS = {MAX_ITEMS:,})", "split the workload")
                continue
            for i, v in enumerate(value):
                if spec.choices and v not in spec.choices:
                    r.error((*pkey, i), f"unknown item '{v}'", did_you_mean(str(v), map(str, spec.choices)))
            if not value and pname in ("items", "prompt_tokens"):
                r.error(pkey, "empty list: this workload would send nothing", "give at least one item")
            value = tuple(value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and (
                (spec.positive and value <= 0) or value < 0):
            r.error(pkey, f"expected a {'positive' if spec.positive else 'non-negative'} number, got {value}")
        elif isinstance(value, int) and pname in _KIND_LIMITS and value > _KIND_LIMITS[pname][0]:
            r.too_large(pkey, pname, value, *_KIND_LIMITS[pname])
            continue
        elif spec.choices and value not in spec.choices:
            r.error(pkey, f"unknown value '{value}'", did_you_mean(str(value), map(str, spec.choices)))
        params[pname] = value
    if kind == "long_context":
        for i, v in enumerate(params.get("prompt_tokens", ())):
            if isinstance(v, str) and v != "max":
                r.error((*key, "prompt_tokens", i), f"'{v}' is neither a token count nor \"max\"",
                        "\"max\" fills the context up to its limit")
            elif isinstance(v, int) and v <= 0:
                r.error((*key, "prompt_tokens", i), f"expected positive token counts, got {v}")
            elif isinstance(v, int) and v > MAX_PROMPT_TOKENS:
                r.too_large((*key, "prompt_tokens", i), "a prompt size", v, MAX_PROMPT_TOKENS, "MAX_PROMPT_TOKENS")
    item_count = _item_count(kind, params)
    if kind == "prompts_file" and "path" in params:
        resolved = _resolve_path(base_dir, params["path"])
        params["path"] = str(resolved)
        item_count = _check_prompts_file(r, (*key, "path"), resolved, params)
    return WorkloadSpec(
        name=name, kind=kind, max_new_tokens=common["max_new_tokens"] or 256, repeats=common["repeats"] or 1,
        warmup=common["warmup"] if common["warmup"] is not None else 1, temperature=float(temperature or 0.0),
        ignore_eos=bool(common["ignore_eos"]), params=tuple(sorted(params.items())), item_count=item_count,
        load=_load(r, key, raw, kind),
    )


def _load_axis(r: _Reader, key: KeyPath, raw: dict, name: str, types: tuple[type, ...], limit: float,
               limit_name: str) -> tuple[Any, ...]:
    value = raw.get(name)
    if value is None:
        return ()
    if not isinstance(value, list):
        value = [value]  # one value without brackets
    if not value:
        r.error((*key, name), "empty list: no load point to measure", f"e.g. {name} = [1, 4, 16, 64]")
        return ()
    if len(value) > MAX_LOAD_POINTS:
        r.error((*key, name, MAX_LOAD_POINTS), f"{len(value):,} load points (MAX_LOAD_POINTS = {MAX_LOAD_POINTS})",
                "use fewer points: the adaptive search finds the crossover between them")
        return ()
    out: list[Any] = []
    for i, v in enumerate(value):
        if not _is_type(v, types) or (isinstance(v, float) and not math.isfinite(v)):
            r.error((*key, name, i), f"expected {_types_text(types)}, got {_type_name(v)} {_short(v)}")
            return ()
        if v <= 0:
            r.error((*key, name, i), f"expected a positive number, got {v}",
                    "concurrency counts requests in flight; request_rate is requests per second")
            return ()
        if v > limit:
            r.too_large((*key, name, i), name, v, limit, limit_name)
            return ()
        if v in out:
            r.error((*key, name, i), f"{v:g} is listed twice", "list each load point once")
            return ()
        out.append(int(v) if name == "concurrency" else float(v))
    return tuple(out)


def _load(r: _Reader, key: KeyPath, raw: dict, kind: str) -> LoadSpec | None:
    """A workload's load axis, or None when it has neither ``concurrency`` nor ``request_rate``."""
    concurrency = _load_axis(r, key, raw, "concurrency", (int,), MAX_CONCURRENCY, "MAX_CONCURRENCY")
    rate = _load_axis(r, key, raw, "request_rate", (int, float), MAX_REQUEST_RATE, "MAX_REQUEST_RATE")
    present = [k for k in LOAD_KEYS if k in raw and k not in ("concurrency", "request_rate")]
    if not concurrency and not rate:
        if present and "concurrency" not in raw and "request_rate" not in raw:
            r.error((*key, present[0]), f"'{present[0]}' belongs to a load axis, and this workload has none",
                    "add concurrency = [1, 4, 16, 64] (closed loop) or request_rate = [...] (open loop)")
        return None
    if kind == "agentic":
        r.error((*key, "concurrency" if concurrency else "request_rate"),
                "an agentic workload is a conversation, which cannot be put under load", "use a single-turn kind")
        return None
    requests = r.positive(raw, key, "requests", (int,), None, limit=MAX_REQUESTS, limit_name="MAX_REQUESTS")
    waves = r.positive(raw, key, "waves", (int,), None, limit=MAX_WAVES, limit_name="MAX_WAVES")
    if waves is not None and not concurrency:
        r.error((*key, "waves"), "waves counts closed-loop rounds, and this workload has no concurrency",
                "set requests = N for an open-loop point")
    search = r.get(raw, key, "search", (str,), "adaptive")
    if search not in SEARCHES:
        r.error((*key, "search"), f"unknown search '{search}'", did_you_mean(str(search), SEARCHES)
                or "adaptive (bisect on the load axis) or grid (every point)")
        search = "adaptive"
    seed = r.get(raw, key, "arrival_seed", (int,), 0)
    if seed is not None and not 0 <= seed < 1 << 63:
        r.error((*key, "arrival_seed"), f"expected 0 <= arrival_seed < 2**63, got {seed}")
        seed = 0
    noise = r.get(raw, key, "noise_threshold", (int, float), 0.1)
    if noise is not None and not 0 < noise <= 10:
        r.error((*key, "noise_threshold"), f"expected a relative spread in (0, 10], got {noise}",
                "0.1 flags a point whose MAD is over 10 % of its median")
        noise = 0.1
    slo = None
    if "slo" in raw:
        table = r.table(raw["slo"], (*key, "slo"), _SLO_KEYS, "a table such as { ttft_ms = 500, itl_ms = 50 }")
        values: dict[str, float | None] = {}
        for name in _SLO_KEYS:
            values[name] = r.positive(table, (*key, "slo"), name, (int, float), None, limit=MAX_TIMEOUT_S * 1000,
                                      limit_name="MAX_TIMEOUT_S in ms")
        pct = values.pop("percentile")
        if pct is not None and pct > 100:
            r.error((*key, "slo", "percentile"), f"expected a percentile in (0, 100], got {pct}")
            pct = None
        if table and not any(v is not None for v in values.values()):
            r.error((*key, "slo"), "an SLO needs at least one limit", "e.g. slo = { ttft_ms = 500, itl_ms = 50 }")
        slo = Slo(ttft_ms=values["ttft_ms"], itl_ms=values["itl_ms"], e2e_ms=values["e2e_ms"],
                  percentile=float(pct or 99.0))
    return LoadSpec(concurrency=concurrency, request_rate=rate, requests=requests, waves=waves or 4,
                    search=search or "adaptive", arrival_seed=seed or 0, noise_threshold=float(noise or 0.1),
                    slo=slo)


_COMMON_LIMITS: dict[str, tuple[int, str]] = {
    "max_new_tokens": (MAX_NEW_TOKENS, "MAX_NEW_TOKENS"), "repeats": (MAX_REPEATS, "MAX_REPEATS"),
    "warmup": (MAX_WARMUP, "MAX_WARMUP")}
_KIND_LIMITS: dict[str, tuple[int, str]] = {
    "count": (MAX_ITEMS, "MAX_ITEMS"), "limit": (MAX_ITEMS, "MAX_ITEMS"), "turns": (MAX_TURNS, "MAX_TURNS")}


def _item_count(kind: str, params: Mapping[str, Any]) -> int:
    """Items of one repeat, from the kind's parameters (a prompts file's are counted when it is read)."""
    for name in ("items", "prompt_tokens"):
        if isinstance(params.get(name), tuple):
            return len(params[name])
    count = params.get("count")
    return count if isinstance(count, int) else 1


def _check_prompts_file(r: _Reader, key: KeyPath, path: Path, params: Mapping[str, Any]) -> int:
    """Read and parse a prompts file now, so that the run cannot die on it; the number of prompts it gives."""
    hint = "relative paths are taken from the sweep file's folder"
    if not path.is_file():
        r.error(key, f"prompts file not found: {path}" if not path.exists() else
                f"the prompts file {path} is not a regular file",
                hint)
        return 0
    try:
        size = path.stat().st_size
        if size > MAX_PROMPTS_FILE_BYTES:
            r.error(key, f"the prompts file {path} is {size:,} bytes (MAX_PROMPTS_FILE_BYTES = {MAX_PROMPTS_FILE_BYTES:,})",
                    "set limit = N and keep only the prompts you use in the file")
            return 0
        categories = params.get("categories") or ()
        prompts = load_prompts_file(path, categories, params.get("limit") or 0)
    except (OSError, PromptsFileError) as exc:
        r.error(key, f"the prompts file cannot be used: {exc}", "each line is a JSON object with \"turns\", "
                "\"prompt\" or \"text\" (blank and # lines are skipped)")
        return 0
    if not prompts:
        r.error(key, f"the prompts file {path} gives no prompt" + (f" in categories {list(categories)}" if categories else ""),
                "check the file and the categories")
        return 0
    if len(prompts) > MAX_ITEMS:
        r.error(key, f"the prompts file {path} holds {len(prompts):,} prompts (MAX_ITEMS = {MAX_ITEMS:,})", "set limit = N")
        return 0
    return len(prompts)


def _added(seen: set[tuple[str, Scalar]], key: tuple[str, Scalar]) -> bool:
    """Add ``key`` to ``seen``; false, so that a generator's filter can remember what it passed."""
    seen.add(key)
    return False
