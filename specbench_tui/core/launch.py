"""The exact command line of a server: launcher prefix + the configuration's argv + host and port."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping

from specbench_tui.core.engines.registry import engine_flags, get_profile
from specbench_tui.core.plan import PlannedConfig
from specbench_tui.core.secrets import all_forms, is_secret_name
from specbench_tui.core.sweep.env import expand_env_refs, refers_to_secret
from specbench_tui.core.sweep.schema import EngineSpec

def launcher_prefix(engine: EngineSpec, this_python: str) -> list[str]:
    """What starts a server: a user command, or ``python -m`` the module the engine names for the launcher
    (SGLang: ``sglang.launch_server``, or the simulator)."""
    if engine.launcher == "command":
        return list(engine.command)
    modules = get_profile(engine.profile).python_modules
    if engine.launcher not in modules:
        raise ValueError(f"engine profile {engine.profile!r} has no launcher {engine.launcher!r} "
                         f"(it has: {', '.join(modules) or 'none'}); set launcher = \"command\" and its command")
    python = engine.python or this_python
    return [python, *safe_path_flag(engine), "-m", modules[engine.launcher]]


SAFE_PATH_PROFILES = frozenset({"sglang"})
"""Profiles whose own launcher's Python is 3.11 or later, whatever interpreter runs it (SGLang 0.5.23 requires
Python 3.11)."""


def safe_path_flag(engine: EngineSpec) -> list[str]:
    """``["-P"]`` where the server's Python is known to have it (3.11+: this interpreter when the sweep names
    none; the interpreter of SGLang's own launcher), else nothing: ``python -m`` puts the working directory first on ``sys.path``, and
    ``-P`` keeps it off in the server and in the processes its ``multiprocessing`` starts (which inherit the
    flag), so that a module left in a shared working directory is never imported by a server. Nothing else of
    the server's import path changes (``PYTHONPATH``, the user site); the scripts a server runs by path keep
    their own folder. A Python 3.10 named by ``engine.python`` for another profile starts as before (it has
    no ``-P``)."""
    import sys

    if engine.python is None:
        return ["-P"] if sys.version_info >= (3, 11) else []
    return ["-P"] if engine.profile in SAFE_PATH_PROFILES and engine.launcher == "sglang" else []


def server_argv(engine: EngineSpec, config: PlannedConfig, this_python: str, port: int,
                api_key: str | None = None) -> list[str]:
    """The full argv of one launch; the API key, when given, is only ever placed here (never logged)."""
    always = [flag for flag in engine_flags(engine.profile).launch_args if flag not in config.argv]
    argv = [*launcher_prefix(engine, this_python), *config.argv, *always, "--host", engine.host, "--port", str(port)]
    if api_key:
        argv += ["--api-key", api_key]
    return argv


def launch_env(config_env: Iterable[tuple[str, str]]) -> dict[str, str]:
    """A configuration's environment as the server gets it: the ``${NAME}`` references that the sweep keeps
    for secrets (a secret-named variable, or a reference to one) are expanded here, at launch, and nowhere
    earlier."""
    return {name: expand_env_refs(value)[0] if is_secret_name(name) or refers_to_secret(value) else value
            for name, value in config_env}


def redact_argv(argv: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """``argv`` with the API key replaced, for events, logs and screens: the value after a separate
    ``--api-key`` and the value of ``--api-key=VALUE`` (possible in a ``launcher = "command"`` prefix)."""
    out = list(argv)
    for i, part in enumerate(out):
        if part == "--api-key" and i + 1 < len(out):
            out[i + 1] = "***"
        elif part.startswith("--api-key="):
            out[i] = "--api-key=***"
    return tuple(out)


REDACTED = "***"
SHORT_SECRET = 4
"""A secret shorter than this is redacted only where it follows ``api_key``/``api-key`` (replacing every
occurrence of three letters would garble the log, and a key that short protects nothing anyway)."""


def argv_secrets(argv: Iterable[str]) -> tuple[str, ...]:
    """The API key(s) in a launch argv: after a separate ``--api-key`` and in ``--api-key=VALUE``."""
    parts = list(argv)
    found = [parts[i + 1] for i, part in enumerate(parts[:-1]) if part == "--api-key"]
    found += [part.partition("=")[2] for part in parts if part.startswith("--api-key=")]
    return tuple(dict.fromkeys(s for s in found if s and s != REDACTED))


def env_secrets(env: Mapping[str, str]) -> tuple[str, ...]:
    """The values of a server environment's secret-named variables (``HF_TOKEN``, ``*_API_KEY``...) that are
    long enough to redact without garbling a log line."""
    return tuple(v for k, v in env.items() if is_secret_name(k) and len(v) >= MIN_ENV_SECRET)


MIN_ENV_SECRET = 8
"""A secret-named variable's value shorter than this (``1``, ``true``) is not taken for a secret."""


def secret_redactor(secrets: Iterable[str]) -> Callable[[str], str] | None:
    """A function that replaces every occurrence of ``secrets`` in a text by ``***`` (None when there are
    none), in every form a log line can spell them: raw, ``repr``-escaped, JSON-escaped and shell-quoted
    (:func:`~specbench_tui.core.secrets.secret_forms`). SGLang logs ``server_args=ServerArgs(...
    api_key='...')`` at start-up; a log line must never carry it to the log file or the screen."""
    unique = sorted({s for s in secrets if s}, key=len, reverse=True)
    if not unique:
        return None
    long = all_forms(s for s in unique if len(s) >= SHORT_SECRET)
    short = [s for s in unique if len(s) < SHORT_SECRET]
    alternatives = [re.escape(s) for s in long]
    if short:
        shorts = "|".join(re.escape(s) for s in short)
        alternatives.append(rf"(?<=[Aa][Pp][Ii][_-][Kk][Ee][Yy])(?P<sep>\W{{1,3}})(?:{shorts})(?![A-Za-z0-9_-])")
    pattern = re.compile("|".join(alternatives))

    def replace(match: re.Match[str]) -> str:
        return (match.groupdict().get("sep") or "") + REDACTED

    # Every form of a secret holds its longest run of characters no escaping changes: one search per secret says
    # whether any form can be there (a key with quotes or backslashes has a dozen forms, each a search of the text).
    needles = list(dict.fromkeys(n for s in unique if len(s) >= SHORT_SECRET for n in _needles(s)))
    needles.extend(short)

    def redact(text: str) -> str:
        if any(needle in text for needle in needles):  # usually one substring search per secret and no regex
            return pattern.sub(replace, text)
        return text

    return redact


_KEPT = re.compile(r"[ !#-&(-\[\]-~]{4,}")
r"""A run of printable ASCII without ``'``, ``"`` or ``\``: what repr, JSON and shell quoting all leave as is."""


def _needles(secret: str) -> list[str]:
    """Substrings one of which every form of ``secret`` contains (:func:`secret_forms`): its longest run of
    characters that no escaping changes, or (none of 4 or more) its forms themselves."""
    runs = _KEPT.findall(secret)
    return [max(runs, key=len)] if runs else all_forms([secret])
