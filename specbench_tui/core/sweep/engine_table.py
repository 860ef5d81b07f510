"""The ``[engine]`` table: which engine profile and launcher, the interpreter or command that starts the
server, host and ports, timeouts, the API key's variable and extra crash signatures. The engine names come
from :mod:`specbench_tui.core.engines`; engine-specific flag rules live in :mod:`specbench_tui.core.plan`."""

from __future__ import annotations

from pathlib import Path

from specbench_tui.core.engines.registry import engine_names
from specbench_tui.core.errors import did_you_mean
from specbench_tui.core.signatures import pattern_problem
from specbench_tui.core.sweep.env import ENV_NAME_OK, expand_value, looks_like_secret
from specbench_tui.core.sweep.limits import MAX_PATTERN_CHARS, MAX_SIGNATURES, MAX_TIMEOUT_S
from specbench_tui.core.sweep.reader import Reader, resolve_path, type_name
from specbench_tui.core.sweep.schema import EngineSpec
from specbench_tui.core.tomlpos import KeyPath

LAUNCHERS = ("simulator", "sglang", "command")
"""How a server is started: the built-in simulator, real SGLang, or a user command prefix."""
_ENGINE_KEYS = ("profile", "launcher", "python", "command", "host", "port_base", "startup_timeout_s",
                "stall_timeout_s", "request_timeout_s", "shutdown_grace_s", "gpu_release_timeout_s",
                "sim_profile", "api_key_env", "crash_signatures")
_TIMEOUTS = ("startup_timeout_s", "stall_timeout_s", "request_timeout_s", "shutdown_grace_s",
             "gpu_release_timeout_s")


def engine_spec(r: Reader, raw: object, base_dir: Path) -> EngineSpec:
    key: KeyPath = ("engine",)
    t = r.table(raw, key, _ENGINE_KEYS)
    profile = _profile(r, key, t)
    launcher = r.get(t, key, "launcher", (str,), "simulator")
    if launcher not in LAUNCHERS:
        r.error((*key, "launcher"), f"unknown launcher '{launcher}'", did_you_mean(launcher, LAUNCHERS))
        launcher = "simulator"
    command = _command(r, key, t, base_dir)
    if launcher == "command" and not command:
        r.error((*key, "launcher"), "launcher = \"command\" needs a command",
                "add command = [\"/path/to/server\", \"--its-flag\"] to [engine]")
    python = r.get(t, key, "python", (str,))
    python = expand_value(r, (*key, "python"), python) if python is not None else None
    if python is not None and "/" in python and not Path(python).expanduser().is_absolute():
        python = str(resolve_path(base_dir, python))
    sim_profile = _sim_profile(r, key, t, base_dir)
    api_key_env = _api_key_env(r, key, t)
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


def _profile(r: Reader, key: KeyPath, t: dict[str, object]) -> str:
    """The engine profile: a registered one, else ``sglang`` after saying so."""
    profile = r.get(t, key, "profile", (str,), "sglang")
    if profile not in engine_names():
        hint = did_you_mean(profile, engine_names())
        r.error((*key, "profile"), f"unknown engine profile '{profile}'",
                (f"{hint}; " if hint else "") + "an engine module of your own is named in SPECBENCH_ENGINES "
                "(docs/adding-an-engine.md)")
        return "sglang"
    return str(profile)


def _command(r: Reader, key: KeyPath, t: dict[str, object], base_dir: Path) -> list[str]:
    """The argv prefix of the ``command`` launcher, a relative program taken from the sweep file's folder."""
    command: list[object] = expand_value(r, (*key, "command"), r.get(t, key, "command", (list,), []))
    argv = [c for c in command if isinstance(c, str) and c]
    if len(argv) != len(command):
        r.error((*key, "command"), "expected an array of non-empty strings (an argv prefix; no shell is used)")
        return []
    if argv and "/" in argv[0] and not Path(argv[0]).expanduser().is_absolute():
        return [str(resolve_path(base_dir, argv[0])), *argv[1:]]
    return argv


def _sim_profile(r: Reader, key: KeyPath, t: dict[str, object], base_dir: Path) -> str | None:
    """The simulator's profile file, resolved (relative to the sweep file's folder); a missing one is an error."""
    sim_profile = r.get(t, key, "sim_profile", (str,))
    if sim_profile is None:
        return None
    resolved = resolve_path(base_dir, sim_profile)
    if not resolved.is_file():
        r.error((*key, "sim_profile"), f"simulator profile not found: {resolved}",
                "relative paths are taken from the sweep file's folder")
    return str(resolved)


def _api_key_env(r: Reader, key: KeyPath, t: dict[str, object]) -> str | None:
    """The NAME of the variable holding the API key; a value that looks like a key itself is refused."""
    api_key_env = r.get(t, key, "api_key_env", (str,))
    if api_key_env is not None and (not ENV_NAME_OK.fullmatch(api_key_env) or looks_like_secret(api_key_env)):
        r.error((*key, "api_key_env"), "expected the NAME of an environment variable that holds the key, "
                "and this looks like a key itself", "write api_key_env = \"SGLANG_API_KEY\" and export "
                "SGLANG_API_KEY=...; never put a key in a sweep file (it is copied into every run directory)")
        return None
    return api_key_env if api_key_env is None else str(api_key_env)


def _crash_signatures(r: Reader, raw: object, key: KeyPath) -> tuple[tuple[str, str], ...]:
    """``[engine.crash_signatures]``: name = "regex" pairs, each compiled now so a typo fails validation."""
    if not isinstance(raw, dict):
        r.error(key, f"expected a table of name = \"regex\" pairs, got {type_name(raw)}")
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
            r.error((*key, sig_name), f"expected a regular expression string, got {type_name(pattern)}")
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
