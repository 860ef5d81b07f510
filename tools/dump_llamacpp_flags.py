"""Print the options of a real ``llama-server`` (from its ``--help``) as ``specbench_tui/core/engines/llamacpp_flags.tsv``.

    eval "$(tools/setup_llama_server.sh)"
    python3 tools/dump_llamacpp_flags.py "$LLAMA_SERVER" > specbench_tui/core/engines/llamacpp_flags.tsv

One line per option group of the help text (``--spec-draft-model, -md, --model-draft FNAME``)::

    canonical<TAB>arity<TAB>type<TAB>choices<TAB>aliases<TAB>removed

``removed`` is the help's own message for a flag that still parses but only exits with an error (``--draft-max``:
"the argument has been removed. use --spec-draft-n-max ..."); empty for a working flag.

``canonical`` is the group's first long name without dashes; ``aliases`` are the group's other names *with*
their dashes (``-md,--model-draft``), so short forms can be told apart from long ones. ``arity`` is ``0``
(a switch: no value placeholder), ``1`` (one value) or ``?`` (an optional value, written ``[on|off|auto]``);
``type`` is ``str``, or ``csv`` for a comma-separated list whose items must be among ``choices``
(``--spec-type none,draft-simple,...``). ``choices`` come from ``{a,b}``, ``<0|1>`` and ``[a|b]``
placeholders. The help text does not say which values are integers, so no numeric type is recorded;
``core/engines/llamacpp.py`` lists the few flags whose value must be a positive integer.

``tests/unit/core/test_core_llamacpp.py`` checks that the checked-in file equals this script's output whenever the
binary is present (``tools/setup_llama_server.sh`` builds it).
"""

from __future__ import annotations

import re
import subprocess
import sys

_NAME = re.compile(r"^-{1,2}[A-Za-z0-9][A-Za-z0-9_-]*$")
_CSV_CHOICES = re.compile(r"^[a-z0-9][a-z0-9-]*(?:,[a-z0-9][a-z0-9-]*)+$")


def parse_help(text: str) -> list[tuple[str, str, str, tuple[str, ...], tuple[str, ...], str]]:
    """(canonical, arity, type, choices, aliases, removed) for each option group of ``llama-server --help``."""
    out: list[tuple[str, str, str, tuple[str, ...], tuple[str, ...], str]] = []
    seen: set[str] = set()
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if not line.startswith("-"):
            continue
        parts = re.split(r"\s{2,}", re.sub(r",\s+", ", ", line.rstrip()), maxsplit=1)
        head = parts[0]
        description = parts[1] if len(parts) > 1 else ""
        for more in lines[index + 1:]:
            if not more.startswith(" "):
                break
            description += " " + more.strip()
        description = description.strip()
        removed = description.split(" (env:")[0] if description.startswith("the argument has been removed") else ""
        names: list[str] = []
        tokens = head.split()
        placeholder = ""
        for i, token in enumerate(tokens):
            name = token.rstrip(",")
            if _NAME.match(name) and (token.endswith(",") or i == len(tokens) - 1 or not names
                                      or tokens[i - 1].endswith(",")):
                names.append(name)
                continue
            placeholder = " ".join(tokens[i:])
            break
        longs = [n[2:] for n in names if n.startswith("--")]
        if not longs or longs[0] in seen:
            continue
        canonical = longs[0]
        seen.add(canonical)
        arity, kind, choices = _shape(placeholder)
        aliases = tuple(n for n in names if n != f"--{canonical}")
        out.append((canonical, arity, kind, choices, aliases, removed))
    return out


def _shape(placeholder: str) -> tuple[str, str, tuple[str, ...]]:
    if not placeholder:
        return "0", "str", ()
    optional = re.fullmatch(r"\[([^\[\]]*)\]", placeholder)
    if optional:
        inner = optional.group(1)
        return "?", "str", tuple(inner.split("|")) if "|" in inner else ()
    braces = re.fullmatch(r"\{([^{}]*)\}", placeholder)
    if braces:
        return "1", "str", tuple(braces.group(1).split(","))
    angle = re.fullmatch(r"<([^<>]*)>", placeholder)
    if angle and "|" in angle.group(1):
        return "1", "str", tuple(angle.group(1).split("|"))
    if _CSV_CHOICES.match(placeholder):
        return "1", "csv", tuple(placeholder.split(","))
    return "1", "str", ()


def render(binary: str) -> str:
    """The TSV file for ``binary`` (its version goes in the header)."""
    help_text = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=60, check=False).stdout
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60, check=False)
    first = (version.stdout + version.stderr).strip().splitlines()
    lines = [f"# llama-server --help, {first[0] if first else 'unknown version'}",
             "# canonical\tarity\ttype\tchoices\taliases\tremoved  (regenerate: tools/dump_llamacpp_flags.py)"]
    for canonical, arity, kind, choices, aliases, removed in parse_help(help_text):
        lines.append("\t".join((canonical, arity, kind, ",".join(choices), ",".join(aliases), removed)))
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    sys.stdout.write(render(argv[1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
