"""The tables that become a server's command line and environment: ``args`` and ``fork_args`` (flag = value,
arrays, JSON tables) and ``env`` (NAME = value, secrets only by reference). Whether a flag exists for the
engine is checked later, by :mod:`specbench_tui.core.plan`."""

from __future__ import annotations

import json

from specbench_tui.core.secrets import is_secret_name, looks_like_token
from specbench_tui.core.sweep.env import ENV_NAME_OK, expand_value, refers_to_secret
from specbench_tui.core.sweep.reader import Reader, short_repr, type_name
from specbench_tui.core.sweep.schema import ArgValue
from specbench_tui.core.sweep.values import is_scalar
from specbench_tui.core.tomlpos import KeyPath


def args_table(r: Reader, raw: object, key: KeyPath) -> tuple[tuple[str, ArgValue], ...]:
    """Flag table: ``tp-size = 4``, ``trust-remote-code = true``, ``cuda-graph-bs-decode = [1, 2, 4]``."""
    if not isinstance(raw, dict):
        r.error(key, f"expected a table of flags, got {type_name(raw)} {short_repr(raw)}",
                "write flags as key = value lines, e.g. tp-size = 4")
        return ()
    out: dict[str, ArgValue] = {}
    for flag, value in raw.items():
        fkey = (*key, flag)
        if any(isinstance(v, str) and refers_to_secret(v) for v in (value if isinstance(value, list) else [value])):
            r.error(fkey, "a secret in a flag would be written into the plan, the run's plan file and the server's "
                    "command line", "pass it in the environment instead ([server.env] NAME = \"${NAME}\"), or the API key "
                    "with engine.api_key_env")
            continue
        value = expand_value(r, fkey, value)
        name = flag[2:] if flag.startswith("--") else flag
        if not name or name.startswith("-") or any(c.isspace() or c == "=" for c in name):
            r.error(fkey, f"'{flag}' is not a flag name", "write the flag's long name without dashes, "
                    "e.g. tp-size = 4")
            continue
        if name in out:
            r.error(fkey, f"--{name} is set twice in this table", "keep one of them")
            continue
        arg = _arg_value(r, fkey, value)
        if arg is not None:
            out[name] = arg
    return tuple(out.items())


def _arg_value(r: Reader, fkey: KeyPath, value: object) -> ArgValue | None:
    """A flag's value as the command line gets it (an array as a tuple, a table as JSON); None after saying why
    it cannot be one."""
    if isinstance(value, list):
        if not value:
            r.error(fkey, "an empty array would pass the flag with no value", "remove the key, or give at least one value")
            return None
        if not all(is_scalar(v) and not isinstance(v, bool) for v in value):
            r.error(fkey, "array flag values hold strings or numbers only", "e.g. cuda-graph-bs-decode = [1, 2, 4, 8]")
            return None
        return tuple(value)
    if is_scalar(value):
        return value
    if isinstance(value, dict):
        problem = _json_problem(value)
        if problem:
            r.error(fkey, f"a table flag value is passed as JSON, but {problem}",
                    "use strings, numbers, booleans, arrays and tables only")
            return None
        # vLLM's --speculative-config and SGLang's --json-model-override-args take a JSON object.
        return json.dumps(value, separators=(",", ":"))
    r.error(fkey, f"a flag value is a string, number, boolean, array or table, got {type_name(value)}",
            "true passes a bare flag, false leaves it out, an array passes several values, "
            "a table passes a JSON object")
    return None


def _json_problem(value: object, where: str = "") -> str | None:
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
    return f"{where or 'a value'} is {type_name(value)}"


def env_table(r: Reader, raw: object, key: KeyPath) -> tuple[tuple[str, str], ...]:
    if not isinstance(raw, dict):
        r.error(key, f"expected a table of environment variables, got {type_name(raw)} {short_repr(raw)}",
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
                and ENV_NAME_OK.fullmatch(name):
            # Passed through as written and expanded only at launch, so the secret never reaches the plan,
            # validate's output or the run directory (the server's log is redacted of it).
            expand_value(r, (*key, name), value)
            out.append((name, value))
            continue
        value = expand_value(r, (*key, name), value)
        if not ENV_NAME_OK.fullmatch(name):
            r.error((*key, name), f"'{name}' is not a valid environment variable name",
                    "use letters, digits and '_', not starting with a digit")
            continue
        if isinstance(value, bool):
            value = "1" if value else "0"
        if not is_scalar(value):
            r.error((*key, name), f"expected a string or number, got {type_name(value)}")
            continue
        out.append((name, str(value)))
    return tuple(out)
