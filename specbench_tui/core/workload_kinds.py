"""The built-in workload kinds and the parameters each accepts (pure schema, no prompts here)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ParamSpec:
    """One kind-specific parameter: its accepted TOML types, default and constraint."""

    types: tuple[type, ...]
    default: object
    description: str
    choices: tuple[object, ...] | None = None
    item_types: tuple[type, ...] | None = None
    """For list parameters, the accepted element types."""
    positive: bool = False


DATASET_FORMATS = ("spec_bench", "mt_bench", "speed_bench")
"""Formats of a ``prompt_dataset`` file (:data:`specbench_tui.core.prompt_datasets.FORMATS`)."""
CODE_TASKS = ("fibonacci", "quicksort", "binary_search", "lru_cache", "merge_intervals", "trie")
AGENTIC_TASKS = ("calculator", "csv_validator")

KINDS: dict[str, dict[str, ParamSpec]] = {
    "code": {
        "items": ParamSpec((list,), list(CODE_TASKS[:2]), "which programming tasks to ask for",
                           choices=CODE_TASKS, item_types=(str,)),
    },
    "arithmetic": {
        "count": ParamSpec((int,), 3, "how many word problems", positive=True),
    },
    "json_extraction": {
        "count": ParamSpec((int,), 3, "how many records to extract", positive=True),
    },
    "haiku": {
        "count": ParamSpec((int,), 3, "how many haiku topics", positive=True),
    },
    "long_context": {
        "prompt_tokens": ParamSpec((list,), [1024, 8192, "max"],
                                   "prompt sizes in tokens; \"max\" fills the context to the limit",
                                   item_types=(int, str)),
    },
    "context_ladder": {  # specbench_tui.core.context_ladder: per rung figures and C* (docs/context-ladder.md)
        "prompt_tokens": ParamSpec((list,), [1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, "max"],
                                   "the rungs: prompt sizes in tokens, ascending; \"max\" (last) fills the context "
                                   "to the limit", item_types=(int, str)),
        "search": ParamSpec((str,), "adaptive", "adaptive: measure the rungs that find C*; grid: every rung",
                            choices=("adaptive", "grid")),
    },
    "agentic": {
        "task": ParamSpec((str,), "calculator", "the multi-turn task", choices=AGENTIC_TASKS),
        "turns": ParamSpec((int,), 4, "maximum turns per conversation", positive=True),
        "count": ParamSpec((int,), 2, "how many conversations", positive=True),
    },
    "prompts_file": {
        "path": ParamSpec((str,), None, "a JSONL file of prompts (Spec-Bench question.jsonl works)"),
        "categories": ParamSpec((list,), [], "keep only these categories (empty: all)", item_types=(str,)),
        "limit": ParamSpec((int,), 0, "at most this many prompts (0: all)"),
    },
    "prompt_dataset": {  # specbench_tui.core.prompt_datasets: results per category (docs/acceptance.md)
        "path": ParamSpec((str,), "", "a local JSONL dataset file (empty: the shipped Spec-Bench-format sample)"),
        "format": ParamSpec((str,), "spec_bench", "the file's format", choices=DATASET_FORMATS),
        "categories": ParamSpec((list,), [], "keep only these categories (empty: all)", item_types=(str,)),
        "per_category": ParamSpec((int,), 0, "at most this many prompts of each category (0: all)"),
        "limit": ParamSpec((int,), 0, "at most this many prompts in all (0: all)"),
        "category_field": ParamSpec((str,), "category", "the field that names a prompt's category",
                                    choices=("category", "sub_category")),
    },
}
"""Kind name → its parameters (the sweep loader validates ``[[workloads]]`` against them)."""


def register_kind(name: str, params: dict[str, ParamSpec]) -> None:
    """Declare a workload kind and its parameters; its builder is registered with the engine's
    (:func:`specbench_tui.engine.workloads.register_workload_kind` does both)."""
    if name in KINDS:
        raise ValueError(f"workload kind {name!r} is already registered")
    clash = sorted(set(params) & {"name", "kind", *COMMON_PARAMS})
    if clash:
        raise ValueError(f"workload kind {name!r}: {', '.join(clash)} are parameters of every workload")
    KINDS[name] = dict(params)

COMMON_PARAMS: dict[str, ParamSpec] = {
    "max_new_tokens": ParamSpec((int,), 256, "output tokens per request", positive=True),
    "repeats": ParamSpec((int,), None, "measured repetitions of each item (default: sweep.repeats)", positive=True),
    "warmup": ParamSpec((int,), None, "unmeasured warm-up requests (default: sweep.warmup)"),
    "temperature": ParamSpec((int, float), 0.0, "sampling temperature (0: greedy)"),
    "ignore_eos": ParamSpec((bool,), True, "generate exactly max_new_tokens"),
}
"""Parameters every workload accepts besides ``name`` and ``kind``."""
