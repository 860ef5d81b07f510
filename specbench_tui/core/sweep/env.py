"""Environment references (``${NAME}``, ``${NAME:-default}``) in sweep values, and the secret checks around
them: what is expanded when, and what looks like a key that should never be written into a sweep file."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import overload

from specbench_tui.core.secrets import is_secret_name
from specbench_tui.core.sweep.reader import Reader
from specbench_tui.core.tomlpos import KeyPath

ENV_NAME_OK = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
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


@overload
def expand_value(r: Reader, key: KeyPath, value: str) -> str: ...
@overload
def expand_value(r: Reader, key: KeyPath, value: list[object]) -> list[object]: ...
@overload
def expand_value(r: Reader, key: KeyPath, value: object) -> object: ...
def expand_value(r: Reader, key: KeyPath, value: object) -> object:
    """A string (or the strings of an array) with environment references expanded; unset ones are errors."""
    if isinstance(value, list):
        return [expand_value(r, (*key, i), v) for i, v in enumerate(value)]
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


def looks_like_secret(value: str) -> bool:
    """True for strings that look like an API key rather than an environment variable's name."""
    if value.lower().startswith(("sk-", "sk_", "hf_", "bearer")):
        return True
    has_lower = any(c.islower() for c in value)
    has_digit = any(c.isdigit() for c in value)
    return len(value) >= 20 and has_lower and has_digit
