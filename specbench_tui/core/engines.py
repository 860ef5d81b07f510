"""What the product knows about each server engine's command line, as pure data.

The I/O side of an engine (readiness, endpoints, shutdown) lives in ``engine.profiles``; this module only
knows flags: which exist, what shape each value has (a switch, one value, several; int, float or string;
the allowed choices), which are reserved for the launcher, how many GPUs a configuration needs, and which
values must be positive. The orchestrator and the UI never branch on an engine's name.

SGLang's facts are generated from its own parser by ``tools/dump_sglang_flags.py`` into
``sglang_0_5_23_flags.txt`` (the names) and ``sglang_0_5_23_flag_shapes.tsv`` (the shapes); a test checks
both against SGLang 0.5.23 whenever its parser is installed.

llama.cpp's facts come from a real ``llama-server --help`` (``tools/dump_llamacpp_flags.py``) in
``llamacpp_flags.tsv``: every long name, its short forms (``-md``, ``-c``, ``-np``: a sweep must use the long
names, and a short one is refused with the long name to write), and the value shapes the help text shows.

vLLM's facts come from the real ``vllm serve`` parser (``tools/dump_vllm_flags.py``, run in ``.venv-vllm``) in
``vllm_flags.tsv``, in the same format, with value types (``int``, ``float``, ``json``...) from the parser.
"""


from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources

from specbench_tui.core.errors import closest

# Flags whose value must be a positive integer, when present.
_SGLANG_POSITIVE_INT = frozenset(
    {
        "tp-size", "tensor-parallel-size", "dp-size", "data-parallel-size", "pp-size",
        "pipeline-parallel-size", "attn-dp-size", "context-length", "decode-log-interval",
        "cuda-graph-max-bs-decode", "cuda-graph-max-bs-prefill", "max-running-requests",
        "chunked-prefill-size", "max-prefill-tokens", "max-total-tokens", "page-size",
        "speculative-num-steps", "speculative-eagle-topk", "speculative-num-draft-tokens",
        "speculative-dflash-block-size", "speculative-ddtree-budget", "stream-interval",
    }
)


@dataclass(frozen=True)
class FlagShape:
    """What one flag's parser accepts, as argparse declares it."""

    arity: str
    """``0`` (a switch), ``1`` (one value), ``?`` (optional value), ``+`` or ``*`` (several values)."""
    type: str
    """``int``, ``float``, ``str``, or ``other`` (a custom converter this module does not imitate)."""
    choices: tuple[str, ...] = ()

    def problem(self, flag: str, value: object) -> tuple[str, str | None] | None:
        """(message, hint) when ``value`` written for ``--flag`` in a sweep would fail to parse, else None."""
        if value is False:
            return None
        if self.arity == "0":
            if value is True:
                return None
            return (f"--{flag} is a switch and takes no value, got {value!r}",
                    f"write {flag} = true to pass it, or false to leave it out")
        if value is True:
            if self.arity in ("?", "*"):
                return None
            return (f"--{flag} needs a value, but true would pass it bare", f"write {flag} = <value>")
        values = value if isinstance(value, tuple) else (value,)
        if isinstance(value, tuple) and self.arity in ("1", "?"):
            return (f"--{flag} takes one value, got an array of {len(value)}", "write a single value")
        if self.type == "csv":  # a comma-separated list whose items are each one of the choices
            values = tuple(part for item in values for part in str(item).split(","))
        for item in values:
            text = "true" if item is True else "false" if item is False else str(item)
            if self.type == "json":
                try:
                    json.loads(text)
                except ValueError as exc:
                    return (f"--{flag} expects JSON, got {item!r} ({exc})",
                            "write it as a TOML table, e.g. speculative-config = { method = \"ngram\" }")
            if self.type in ("int", "float"):
                try:
                    int(text) if self.type == "int" else float(text)
                except ValueError:
                    kind = "an integer" if self.type == "int" else "a number"
                    return (f"--{flag} expects {kind}, got {item!r}", None)
            if self.choices and text not in self.choices:
                shown = ", ".join(self.choices[:12]) + (", ..." if len(self.choices) > 12 else "")
                match = closest(text, self.choices)
                return (f"--{flag} does not accept {item!r}",
                        f"did you mean '{match}'?" if match else f"choose one of: {shown}")
        return None


@dataclass(frozen=True)
class EngineFlags:
    """Command-line facts of one engine profile."""

    name: str
    known_flags: frozenset[str]
    """Every long flag (without dashes) the engine's own parser accepts."""
    known_fork_flags: frozenset[str] = frozenset()
    """Flags that exist only in forks; recognised so their values can be checked."""
    release: str = ""
    """The release whose parser ``known_flags`` and ``shapes`` come from, e.g. ``0.5.23``."""
    shapes: Mapping[str, FlagShape] = field(default_factory=dict)
    """Value shape of each known flag (aliases included)."""
    known_algorithms: frozenset[str] = frozenset()
    """Upper-case ``--speculative-algorithm`` values the release ships (others need a fork or a plugin)."""
    unit_fraction: frozenset[str] = frozenset()
    """Flags whose value is a fraction in (0, 1]."""
    reserved: Mapping[str, str] = field(default_factory=dict)
    """Flags the launcher sets itself, with the sweep key to use instead."""
    positive_int: frozenset[str] = frozenset()
    tp_flags: tuple[str, ...] = ()
    dp_flags: tuple[str, ...] = ()
    pp_flags: tuple[str, ...] = ()
    default_port: int = 30000
    short_aliases: Mapping[str, str] = field(default_factory=dict)
    """Short forms (without the dash, e.g. ``md``) → the long name a sweep must write instead."""
    runs_on_cpu: bool = False
    """The engine also runs without a GPU: on a machine with none, configurations take no GPU."""
    launch_args: tuple[str, ...] = ()
    """Flags the launcher always adds (when the configuration does not), e.g. llama.cpp's ``--metrics``."""
    model_flags: tuple[tuple[tuple[str, ...], str], ...] = (
        (("--model-path", "--model"), "model"),
        (("--speculative-draft-model-path", "--speculative-draft-model"), "draft model"),
    )
    """(flags, what) whose local-path values must exist before launch (checked by the pre-flight)."""
    removed: Mapping[str, str] = field(default_factory=dict)
    """Flags the release still parses only to exit with an error, with its message (llama.cpp's ``--draft-max``)."""
    gpu_count: object = None
    """Optional ``args -> int`` that replaces tp × dp × pp (llama.cpp: 1 per server unless declared)."""

    def gpus_needed(self, args: Mapping[str, object]) -> int:
        """GPUs one server of this configuration occupies: tp × dp × pp, or the engine's own rule."""
        if callable(self.gpu_count):
            return int(self.gpu_count(args))
        total = 1
        for names in (self.tp_flags, self.dp_flags, self.pp_flags):
            for name in names:
                if name in args:
                    total *= _as_int(args[name])
                    break
        return total

    def parallel_size(self, args: Mapping[str, object], which: str) -> int:
        """The tp, dp or pp size set by ``args`` (1 when unset)."""
        names = {"tp": self.tp_flags, "dp": self.dp_flags, "pp": self.pp_flags}[which]
        for name in names:
            if name in args:
                return _as_int(args[name])
        return 1


def _as_int(value: object) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 1


@functools.cache
def _sglang_flags() -> frozenset[str]:
    text = resources.files("specbench_tui.core").joinpath("sglang_0_5_23_flags.txt").read_text()
    flags = {line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")}
    return frozenset(flags - {"help"})  # argparse's own --help is no server flag


@functools.cache
def _sglang_shapes() -> dict[str, FlagShape]:
    """``name<TAB>arity<TAB>type<TAB>choices`` lines (choices comma-separated) → shapes."""
    text = resources.files("specbench_tui.core").joinpath("sglang_0_5_23_flag_shapes.tsv").read_text()
    shapes: dict[str, FlagShape] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, arity, kind, choices = (line.split("\t") + ["", "", ""])[:4]
        shapes[name] = FlagShape(arity, kind, tuple(c for c in choices.split(",") if c))
    return shapes


SGLANG_ALGORITHMS = frozenset({"EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO",
                               "FROZEN_KV_MTP", "NONE"})
"""``--speculative-algorithm`` names SGLang 0.5.23 resolves (``spec_info.py`` plus the NEXTN alias)."""


@functools.cache
def engine_flags(name: str) -> EngineFlags:
    """The flag facts of engine profile ``name`` (raises KeyError when unknown)."""
    if name == "sglang":
        return EngineFlags(
            name="sglang",
            known_flags=_sglang_flags(),
            release="0.5.23",
            shapes=_sglang_shapes(),
            known_algorithms=SGLANG_ALGORITHMS,
            unit_fraction=frozenset({"mem-fraction-static"}),
            known_fork_flags=frozenset({"speculative-ddtree-budget", "speculative-dflash-enable-ddtree",
                                        "speculative-dflash-tree-verify"}),
            reserved={"port": "engine.port_base", "host": "engine.host", "api-key": "engine.api_key_env"},
            positive_int=_SGLANG_POSITIVE_INT,
            tp_flags=("tp-size", "tensor-parallel-size"),
            dp_flags=("dp-size", "data-parallel-size"),
            pp_flags=("pp-size", "pipeline-parallel-size"),
        )
    if name == "llamacpp":
        shapes, aliases, removed = _llamacpp_table()
        return EngineFlags(
            name="llamacpp",
            known_flags=frozenset(shapes) - set(removed) - {"help", "usage", "version", "completion-bash",
                                                            "cache-list"},
            removed=removed,
            release=_llamacpp_release(),
            shapes=shapes,
            reserved={"port": "engine.port_base", "host": "engine.host", "api-key": "engine.api_key_env"},
            positive_int=_LLAMACPP_POSITIVE_INT,
            default_port=8080,
            short_aliases=aliases,
            runs_on_cpu=True,
            launch_args=("--metrics",),
            model_flags=((("--model", "--model-draft", "--spec-draft-model"), "model"),),
            gpu_count=_llamacpp_gpus,
        )
    if name == "vllm":
        shapes, aliases, removed = _flag_table(_VLLM_FILE)
        return EngineFlags(
            name="vllm",
            known_flags=frozenset(shapes) - set(removed) - {"help"},
            removed=removed,
            release=f"vllm {_vllm_release()}".strip(),
            shapes=shapes,
            reserved={"port": "engine.port_base", "host": "engine.host", "api-key": "engine.api_key_env"},
            positive_int=_VLLM_POSITIVE_INT,
            tp_flags=("tensor-parallel-size",),
            dp_flags=("data-parallel-size",),
            pp_flags=("pipeline-parallel-size",),
            default_port=8000,
            short_aliases=aliases,
            runs_on_cpu=True,
            model_flags=((("--model", "--tokenizer"), "model"),),
        )
    raise KeyError(name)


# ------------------------------------------------------------------------------------------------ llama.cpp

_LLAMACPP_FILE = "llamacpp_flags.tsv"
_LLAMACPP_POSITIVE_INT = frozenset(
    {"spec-draft-n-max", "parallel", "spec-ngram-simple-size-n", "spec-ngram-simple-size-m",
     "spec-ngram-mod-n-max", "spec-ngram-map-k-size-n", "spec-ngram-map-k-size-m", "batch-size", "ubatch-size"}
)


@functools.cache
def _llamacpp_table() -> tuple[dict[str, FlagShape], dict[str, str], dict[str, str]]:
    return _flag_table(_LLAMACPP_FILE)


@functools.cache
def _flag_table(filename: str) -> tuple[dict[str, FlagShape], dict[str, str], dict[str, str]]:
    """(shape of every long name, aliases included; short form → canonical long name; removed long name →
    the server's message) from a ``canonical arity type choices aliases removed`` TSV."""
    text = resources.files("specbench_tui.core").joinpath(filename).read_text()
    shapes: dict[str, FlagShape] = {}
    shorts: dict[str, str] = {}
    removed: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        canonical, arity, kind, choices, aliases, gone = (line.split("\t") + ["", "", "", "", ""])[:6]
        if gone:
            for name in (canonical, *(a[2:] for a in aliases.split(",") if a.startswith("--"))):
                removed[name] = gone
            continue
        shape = FlagShape(arity, kind, tuple(c for c in choices.split(",") if c))
        shapes[canonical] = shape
        for alias in (a for a in aliases.split(",") if a):
            if alias.startswith("--"):
                shapes.setdefault(alias[2:], shape)
            else:
                shorts.setdefault(alias[1:], canonical)
    return shapes, shorts, removed


def _llamacpp_release() -> str:
    text = resources.files("specbench_tui.core").joinpath(_LLAMACPP_FILE).read_text()
    first = text.splitlines()[0] if text else ""
    version = first.split("version:", 1)[1].split("(")[0].strip() if "version:" in first else ""
    return f"llama-server {version}".strip()


def _llamacpp_gpus(args: Mapping[str, object]) -> int:
    """One GPU per server, unless the configuration declares its devices (``device``/``tensor-split``)."""
    device = args.get("device")
    if isinstance(device, str):
        if device.strip().lower() == "none":
            return 0
        return max(1, len([d for d in device.split(",") if d.strip()]))
    split = args.get("tensor-split")
    if isinstance(split, str) and str(args.get("split-mode", "layer")) != "none":
        return max(1, len([s for s in split.split(",") if s.strip()]))
    return 1


# ------------------------------------------------------------------------------------------------ vLLM

_VLLM_FILE = "vllm_flags.tsv"
_VLLM_POSITIVE_INT = frozenset({"tensor-parallel-size", "data-parallel-size", "pipeline-parallel-size",
                                "max-num-seqs", "max-num-batched-tokens", "block-size"})


def _vllm_release() -> str:
    text = resources.files("specbench_tui.core").joinpath(_VLLM_FILE).read_text()
    first = text.splitlines()[0] if text else ""
    return first.split("version:", 1)[1].split("(")[0].strip() if "version:" in first else ""


ENGINE_NAMES = ("sglang", "llamacpp", "vllm")
"""Engine profiles a sweep may name."""
