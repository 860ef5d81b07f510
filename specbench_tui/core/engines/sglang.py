"""SGLang 0.5.23 (``python -m sglang.launch_server``), and the simulator that speaks it: the primary engine.

Everything the product knows about SGLang is here: its flags (generated from its own parser by
``tools/dump_sglang_flags.py`` into ``sglang_0_5_23_flags.txt`` and ``sglang_0_5_23_flag_shapes.tsv``; a test
checks both against SGLang 0.5.23 whenever its parser is installed), readiness, endpoints and shutdown, the
``Decode batch``/``Prefill batch`` stats lines, its crash signatures, the tokens it reserves for speculative
decoding, the start-up rules a sweep must respect, the EAGLE points it would rewrite, and the compact form of its
stats lines in the live log.

The simulator (``specbench_tui.sim``) is not a separate engine: it speaks SGLang's wire, prints SGLang's log lines
and takes SGLang's flags, so a sweep reaches it as ``profile = "sglang"`` with ``launcher = "simulator"``
(:data:`PYTHON_MODULES`); what a simulated run means to the rest of the program is :mod:`.simulator`'s.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from specbench_tui.core.acceptance import ACCEPTANCE_LENGTH, DRAFT_ACCEPTANCE_RATE
from specbench_tui.core.engines import simulator
from specbench_tui.core.engines.base import (
    EngineFlags,
    EngineProfile,
    FlagShape,
    LogHints,
    UserError,
    argv_value,
    declared_speculation,
    package_file,
    positive,
)
from specbench_tui.core.logparse import MAX_STATS_LINE, RETRACT, STEPS, BatchLine
from specbench_tui.core.signatures import CUDA_SIGNATURES, NCCL_SIGNATURE, Signature, signature

# ------------------------------------------------------------------------------------------------ flags

_POSITIVE_INT = frozenset(
    {
        "tp-size", "tensor-parallel-size", "dp-size", "data-parallel-size", "pp-size",
        "pipeline-parallel-size", "attn-dp-size", "context-length", "decode-log-interval",
        "cuda-graph-max-bs-decode", "cuda-graph-max-bs-prefill", "max-running-requests",
        "chunked-prefill-size", "max-prefill-tokens", "max-total-tokens", "page-size",
        "speculative-num-steps", "speculative-eagle-topk", "speculative-num-draft-tokens",
        "speculative-dflash-block-size", "speculative-ddtree-budget", "stream-interval",
    }
)
"""Flags whose value must be a positive integer, when present."""

SGLANG_ALGORITHMS = frozenset({"EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO",
                               "FROZEN_KV_MTP", "NONE"})
"""``--speculative-algorithm`` names SGLang 0.5.23 resolves (``spec_info.py`` plus the NEXTN alias)."""


def _resource(name: str) -> str:
    return package_file(__package__ or "specbench_tui.core.engines", name)


def _flag_names() -> frozenset[str]:
    text = _resource("sglang_0_5_23_flags.txt")
    flags = {line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")}
    return frozenset(flags - {"help"})  # argparse's own --help is no server flag


def _shapes() -> dict[str, FlagShape]:
    """``name<TAB>arity<TAB>type<TAB>choices`` lines (choices comma-separated) → shapes."""
    shapes: dict[str, FlagShape] = {}
    for line in _resource("sglang_0_5_23_flag_shapes.tsv").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, arity, kind, choices = (line.split("\t") + ["", "", ""])[:4]
        shapes[name] = FlagShape(arity, kind, tuple(c for c in choices.split(",") if c))
    return shapes


@functools.cache
def sglang_flags() -> EngineFlags:
    """SGLang 0.5.23's flag facts."""
    return EngineFlags(
        name="sglang",
        known_flags=_flag_names(),
        release="0.5.23",
        shapes=_shapes(),
        known_algorithms=SGLANG_ALGORITHMS,
        unit_fraction=frozenset({"mem-fraction-static"}),
        known_fork_flags=frozenset({"speculative-ddtree-budget", "speculative-dflash-enable-ddtree",
                                    "speculative-dflash-tree-verify"}),
        positive_int=_POSITIVE_INT,
        tp_flags=("tp-size", "tensor-parallel-size"),
        dp_flags=("dp-size", "data-parallel-size"),
        pp_flags=("pp-size", "pipeline-parallel-size"),
        cpu_device=("device", "cpu"),
    )


# ------------------------------------------------------------------------------------------------ stats lines

_HEAD = re.compile(
    r"^\[(?P<time>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:[.,]\d{1,6})?)(?P<prefix>(?:\s+[A-Z_]+\d+)*)\]\s+"
    r"(?P<kind>Decode|Prefill) batch(?: \[\d+\])?[.,]\s+(?P<body>.*)$"
)
_FIELD = re.compile(r"(?P<key>#?[A-Za-z][A-Za-z0-9 \-/()]{0,40}+):\s*(?P<value>-?[0-9]+(?:\.[0-9]+)?|True|False)")
"""A ``key: value`` field; the key is bounded (the longest, ``input throughput (token/s)``, has 26 characters)
so that a line without colons is scanned in linear time, not from every position to its end. The key takes
its characters possessively (none of them is the colon that ends it: nothing to give back, no backtracking)."""
_RANK = re.compile(r"(?:^|\s)(DP|TP|PP|EP)(\d+)\b")
"""Rank prefixes as whole words: 0.5.23 also prints ``ATTN_CPn`` and ``MOE_DPn`` (``MOE_DP1`` is no DP rank)."""
_TIMESTAMP = re.compile(r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?:[.,](\d{1,6}))?")
_USAGE_KEYS = ("token usage", "full token usage", "swa token usage", "mamba usage")
"""The KV pool's usage fields: ``token usage``, or a hybrid model's ``full``/``swa``/``mamba`` ones."""


def _figures(body: str) -> dict[str, float | None]:
    """Each field of a stats line's body by its name: its number, None for ``True``/``False``; a name given
    twice keeps its last value. Every stats line of a measured window is parsed on the engine's event loop, so
    each value is read once here, not once per name looked up."""
    figures: dict[str, float | None] = {}
    for key, value in _FIELD.findall(body):
        figures[key.rstrip(" ")] = None if value == "True" or value == "False" else float(value)
    return figures


def _count(value: float | None) -> int | None:
    return None if value is None else int(value)


def parse_batch_line(line: str) -> BatchLine | None:
    """A ``Decode batch`` / ``Prefill batch`` line's figures, or None for any other line.

    Both forms are accepted: ``Decode batch, #running-req: ...`` (0.5.10 and later) and ``Decode batch.
    #running-req: ...`` (older), with or without a ``DPn``/``TPn``/``PPn``/``EPn`` prefix, with or without
    milliseconds in the timestamp, with or without a trailing comma, with or without the speculative ``accept
    len`` / ``accept rate`` fields, with a full-attention pool's ``#token``/``token usage`` or a hybrid model's
    ``#full token``/``full token usage`` plus ``swa token usage`` or ``mamba usage`` (the fullest pool is the
    usage), and with 0.5.23's ``ATTN_CPn``/``MOE_DPn`` prefixes (not ranks). Fields are read by name, so new
    fields in between do not break it."""
    if len(line) > MAX_STATS_LINE:
        return None
    match = _HEAD.match(line.strip())
    if match is None:
        return None
    time, prefix, kind, body = match.group("time", "prefix", "kind", "body")
    get = _figures(body).get
    ranks = dict(_RANK.findall(prefix)) if prefix else {}
    tokens = get("#token")
    usages = [usage for usage in map(get, _USAGE_KEYS) if usage is not None]
    return BatchLine(
        kind=kind.lower(),
        time=time,
        tp_rank=int(ranks["TP"]) if "TP" in ranks else None,
        dp_rank=int(ranks["DP"]) if "DP" in ranks else None,
        running_req=_count(get("#running-req")),
        queue_req=_count(get("#queue-req")),
        num_token=_count(tokens if tokens is not None else get("#full token")),
        token_usage=max(usages) if usages else None,  # the fullest pool, as SGLang's get_max_pool_usage takes it
        accept_length=get("accept len"),
        accept_rate=get("accept rate"),
        gen_throughput=get("gen throughput (token/s)"),
        new_tokens=_count(get("#new-token")),
        input_throughput=get("input throughput (token/s)"),
        graph=_graph(body),
    )


_GRAPH = re.compile(r"\b(?:cuda|cpu) graph: (True|False)")
"""``scheduler_metrics_mixin.py``: every batch line says whether it ran a captured graph (``cpu graph:`` on CPU)."""


def _graph(body: str) -> bool | None:
    match = _GRAPH.search(body)
    return None if match is None else match.group(1) == "True"


_RETRACT = re.compile(r"KV cache pool is full\. Retract requests\. #retracted_reqs: (?P<count>\d+)")
"""``scheduler.py`` ``update_running_batch``: the warning of a decode step that retracted requests to free KV
cache (each is prefilled again later; its ``meta_info.num_retractions`` counts it)."""


_STEPS = re.compile(r"Switch adaptive runtime state: steps \d+ -> (?P<to>\d+)|"
                    r"AdaptiveSpeculativeParams initialized: steps=(?P<init>\d+)")
"""``eagle_worker_v2.py`` ``apply_runtime_state`` (the steps an adaptive server switches to) and
``adaptive_spec_params.py`` (the steps it starts with)."""


def parse_stats_line(line: str) -> BatchLine | None:
    """A ``Decode batch`` / ``Prefill batch`` line (:func:`parse_batch_line`), a retraction warning as a
    :data:`~specbench_tui.core.logparse.RETRACT` line, or an adaptive server's steps as a
    :data:`~specbench_tui.core.logparse.STEPS` line (``num_token``: the steps), else None. Cheap substring tests
    first; a line holding none of them (the profile's ``stats_hints``, kept in step with these tests) is never
    passed here by the log watch."""
    if len(line) > MAX_STATS_LINE:
        return None
    if " batch" in line:
        return parse_batch_line(line)
    if "Retract requests" in line:
        match = _RETRACT.search(line)
        return _event_line(line, RETRACT, int(match.group("count"))) if match else None
    if "adaptive runtime state" in line or "AdaptiveSpeculativeParams initialized" in line:
        match = _STEPS.search(line)
        return _event_line(line, STEPS, int(match.group("to") or match.group("init"))) if match else None
    return None


def _event_line(line: str, kind: str, value: int) -> BatchLine:
    stamp = _TIMESTAMP.match(line)
    ranks = dict(_RANK.findall(line.split("]", 1)[0])) if line.startswith("[") else {}
    return BatchLine(kind=kind, time=stamp.group(1) if stamp else "",
                     tp_rank=int(ranks["TP"]) if "TP" in ranks else None,
                     dp_rank=int(ranks["DP"]) if "DP" in ranks else None, running_req=None, queue_req=None,
                     num_token=value, token_usage=None, accept_length=None, accept_rate=None,
                     gen_throughput=None, new_tokens=None, input_throughput=None)


def line_timestamp(line: str) -> float | None:
    """The epoch seconds of an SGLang log line's ``[YYYY-mm-dd HH:MM:SS(.ms)]`` prefix (local time), or None."""
    match = _TIMESTAMP.match(line)
    if match is None:
        return None
    try:
        stamp = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S").timestamp()
    except ValueError:
        return None
    fraction = match.group(2)
    return stamp + (int(fraction) / 10 ** len(fraction) if fraction else 0.0)


_BATCH = re.compile(r"^(?P<head>.*?)(?P<kind>Decode|Prefill) batch[,.]\s*(?P<rest>.*)$")
_LIVE_STAMP = re.compile(r"^\[\d{4}-\d\d-\d\d (\d\d:\d\d:\d\d(?:\.\d+)?)((?: [A-Z]{2}\d+)*)\] ")


def short_stamp(text: str) -> str:
    """``[2025-01-01 12:00:01 TP0] ...`` → ``12:00:01 TP0 ...``: the date says nothing in a live panel."""
    return _LIVE_STAMP.sub(lambda m: f"{m[1]}{m[2]} ", text, count=1)


def compact_batch_line(text: str) -> str:
    """``Decode batch`` / ``Prefill batch`` lines with their key figures first, for the narrow live panel.

    ``[ts] Decode batch, #running-req: 1, … gen throughput (token/s): 182.30, #queue-req: 0`` becomes
    ``[ts] Decode ▸ 182.30 tok/s · acc.len 3.91 · acc.rate 0.78 · run 1 · queue 0 · usage 0.01`` (SGLang's
    ``accept len`` and ``accept rate`` under the glossary's short names); other lines are returned unchanged
    (the full-log screen always shows the original).
    """
    match = _BATCH.match(text)
    if match is None:
        return text
    fields: dict[str, str] = {}
    for part in match["rest"].split(","):
        key, colon, value = part.partition(":")
        if colon:
            fields[key.strip()] = value.strip()
    items: list[str] = []
    if match["kind"] == "Decode":
        if "gen throughput (token/s)" in fields:
            items.append(f"{fields['gen throughput (token/s)']} tok/s")
        if "accept len" in fields:
            rate = fields.get("accept rate")
            items.append(f"{ACCEPTANCE_LENGTH.short} {fields['accept len']}")
            if rate:
                items.append(f"{DRAFT_ACCEPTANCE_RATE.short} {rate}")
        labels = (("#running-req", "run"), ("#queue-req", "queue"), ("token usage", "usage"), ("#token", "tokens"))
    else:
        if "input throughput (token/s)" in fields:
            items.append(f"in {fields['input throughput (token/s)']} tok/s")
        labels = (("#new-token", "new"), ("#cached-token", "cached"), ("#running-req", "run"),
                  ("#queue-req", "queue"))
    items.extend(f"{label} {fields[key]}" for key, label in labels if key in fields)
    if not items:
        return text
    return f"{match['head']}{match['kind']} ▸ " + " · ".join(items)


# ------------------------------------------------------------------------------------------------ crashes

SGLANG_SIGNATURES: tuple[Signature, ...] = (
    *CUDA_SIGNATURES,
    NCCL_SIGNATURE,
    # A soft watchdog (``self.soft=True``) only dumps debug information; the server goes on.
    signature("watchdog_timeout", r"watchdog timeout \(self\.watchdog_timeout=[^,)]*(?:, self\.soft=False)?\)", 70),
    signature("initialization_failed", r"Initialization failed\. ", 60),
    signature("scheduler_died_at_init", r"Rank \d+ scheduler died during initialization", 55),
    signature("scheduler_exception", r"(?:Scheduler|DetokenizerManager|TokenizerManager|DataParallelController) "
                                     r"hit an exception", 50),
    signature("subprocess_crashed", r"Subprocess \S+ \(pid=\d+\) crashed with exit code", 45),
    signature("sigquit_from_child", r"Received sigquit from a child proces|SIGQUIT received\. signum=", 40),
    # The traceback's last line names the cause (``AttributeError: 'NoneType' object has no attribute 'shape'``),
    # some 100 lines after ``Scheduler hit an exception``: more specific than the lines that announce the crash,
    # less than a CUDA, NCCL or memory signature on the same line. Only a bare exception line (no log prefix).
    signature("python_exception", r"^[A-Za-z_][A-Za-z0-9_.]*(?:Error|Exception|Interrupt): \S", 52),
    signature("python_traceback", r"^(?:\[[^\]]*\]\s*)?Traceback \(most recent call last\):", 10),
)
"""The patterns SGLang 0.5.x prints when it dies (the simulator prints the same lines; docs/simulator.md lists
them)."""

# ------------------------------------------------------------------------------------------------ budget

RESERVING_ALGORITHMS = frozenset({"EAGLE", "EAGLE3", "FROZEN_KV_MTP", "NEXTN"})
"""SGLang's ``SpeculativeAlgorithm.is_eagle()`` (NEXTN is EAGLE's alias): the algorithms whose draft tokens sit
in the request's output slots, so the context check counts them (``managers/utils.py``,
``compute_num_reserved_tokens``). Every other algorithm reserves nothing."""

AUTO_RESERVED = 20
"""What an EAGLE-family server reserves at most when it picks its own (steps, topk, draft tokens): SGLang's
``_auto_choose_speculative_params`` picks (5, 4, 8) at most, so ``max(4 * 5, 8)``."""


def reserved_speculative_tokens(algorithm: str | None, *, topk: int | None = None, steps: int | None = None,
                                draft_tokens: int | None = None) -> int:
    """Context tokens SGLang 0.5.23 keeps per request on top of its input: ``max(topk * steps,
    max_speculative_num_draft_tokens)`` for the EAGLE family (EAGLE, EAGLE3, FROZEN_KV_MTP; NEXTN is EAGLE), 0
    for every other algorithm. ``draft_tokens`` is the resolved ``speculative_num_draft_tokens`` (the maximum
    one unless ``--speculative-adaptive`` is on)."""
    if not algorithm or algorithm.upper() not in RESERVING_ALGORITHMS:
        return 0
    return max((topk or 0) * (steps or 0), draft_tokens or 0)


def _served_reserved_tokens(info: Mapping[str, object]) -> int:
    """The resolved speculative arguments of ``/server_info`` through SGLang's rule. An adaptive server
    (``speculative_adaptive``) sizes its drafts for the largest candidate step, whatever its resolved
    ``speculative_num_draft_tokens`` says (``resolve_max_speculative_num_draft_tokens``: ``max(candidate_steps)
    + 1``; topk is 1)."""
    algorithm = info.get("speculative_algorithm")
    if info.get("speculative_adaptive") is True:
        return reserved_speculative_tokens(
            algorithm if isinstance(algorithm, str) else None, topk=positive(info.get("speculative_eagle_topk")) or 1,
            steps=ADAPTIVE_MAX_STEPS, draft_tokens=ADAPTIVE_MAX_STEPS + 1)
    return reserved_speculative_tokens(
        algorithm if isinstance(algorithm, str) else None, topk=positive(info.get("speculative_eagle_topk")),
        steps=positive(info.get("speculative_num_steps")),
        draft_tokens=positive(info.get("speculative_num_draft_tokens")))


def planned_reserved_tokens(argv: Sequence[str]) -> int:
    """The tokens a configuration's server will reserve, from its argv (``--flag value`` or ``--flag=value``).

    Known before any server runs, so a sweep can size its long prompts once for every configuration: the same
    prompt for the baseline and for the most reserving configuration, whose measurements are then paired."""
    algorithm = argv_value(argv, "--speculative-algorithm")
    if not algorithm or algorithm.upper() not in RESERVING_ALGORITHMS:
        return 0

    def number(flag: str) -> int | None:
        try:
            return int(argv_value(argv, flag) or "")
        except ValueError:
            return None

    steps = number("--speculative-num-steps")
    if "--speculative-adaptive" in argv:  # buffers are sized for the largest candidate step (7: 8 draft tokens)
        topk = number("--speculative-eagle-topk") or 1
        return reserved_speculative_tokens(algorithm, topk=topk, steps=ADAPTIVE_MAX_STEPS,
                                           draft_tokens=ADAPTIVE_MAX_STEPS + 1)
    if steps is None:
        return AUTO_RESERVED
    return reserved_speculative_tokens(algorithm, topk=number("--speculative-eagle-topk") or 1, steps=steps,
                                       draft_tokens=number("--speculative-num-draft-tokens"))


# ------------------------------------------------------------------------------------------------ adaptive steps

ADAPTIVE_TIERS: tuple[tuple[int, tuple[int, ...]], ...] = ((1, (1, 3, 5, 7)), (8, (0, 1, 3)), (32, (0, 1)),
                                                           (64, (0,)))
"""``speculative/adaptive_spec_params.py`` ``DEFAULT_ADAPTIVE_CONFIG``: from each batch size on, the candidate
speculative steps ``--speculative-adaptive`` chooses among (0: no speculation)."""


def adaptive_steps(batch: int) -> tuple[int, ...]:
    """The candidate steps of SGLang's default adaptive tiers at a running batch of ``batch`` requests."""
    chosen: tuple[int, ...] = ADAPTIVE_TIERS[0][1]
    for start, steps in ADAPTIVE_TIERS:
        if batch >= start:
            chosen = steps
    return chosen


ADAPTIVE_MAX_STEPS = max(step for _, steps in ADAPTIVE_TIERS for step in steps)
ADAPTIVE_CANDIDATE_STEPS: tuple[int, ...] = tuple(sorted({step for _, steps in ADAPTIVE_TIERS for step in steps}))
"""Every tier's candidate steps together (``resolve_candidate_steps_from_config``): the values
``--speculative-num-steps`` may take with ``--speculative-adaptive`` (SGLang refuses any other at start-up)."""
ADAPTIVE_START_STEPS = ADAPTIVE_CANDIDATE_STEPS[len(ADAPTIVE_CANDIDATE_STEPS) // 2]
"""The steps an adaptive server starts with when ``--speculative-num-steps`` is unset: the middle candidate
(``speculative_hook.py`` ``_init_adaptive_speculative_params``: ``candidate_steps[len(candidate_steps) // 2]``)."""
ADAPTIVE_ALGORITHMS = frozenset({"EAGLE", "EAGLE3", "NEXTN"})
"""``adaptive_spec_params.py`` ``adaptive_unsupported_reason``: adaptive runs for EAGLE and EAGLE3 only (NEXTN is
EAGLE); for any other algorithm SGLang switches it off with a warning and ``/server_info`` says
``speculative_adaptive: false``."""


def served_adaptive(info: Mapping[str, object]) -> bool | None:
    """``/server_info``'s resolved ``speculative_adaptive``: whether the server really adapts its steps (SGLang
    turns the flag off for NGRAM, DFLASH, topk > 1, attention DP and multi-layer EAGLE); None when not said."""
    value = info.get("speculative_adaptive")
    return value if isinstance(value, bool) else None


def _adaptive_steps_error(args: Mapping[str, object]) -> UserError | None:
    """``--speculative-num-steps`` outside the adaptive candidates, where SGLang keeps adaptive on (EAGLE family,
    topk 1, its default tiers): it refuses to start."""
    if args.get("speculative-adaptive") in (None, False) or args.get("speculative-adaptive-config") is not None:
        return None
    if str(args.get("speculative-algorithm", "")).upper() not in ADAPTIVE_ALGORITHMS:
        return None
    if str(args.get("speculative-eagle-topk", "1")) != "1" or args.get("enable-dp-attention") not in (None, False):
        return None
    steps = args.get("speculative-num-steps")
    if steps is None or str(steps) in {str(s) for s in ADAPTIVE_CANDIDATE_STEPS}:
        return None
    choices = ", ".join(map(str, ADAPTIVE_CANDIDATE_STEPS))
    return ("speculative-num-steps", f"--speculative-num-steps {steps} with --speculative-adaptive: SGLang refuses "
            f"to start (it must be one of the adaptive candidate steps {choices}; speculative_hook.py "
            "_init_adaptive_speculative_params)",
            f"set speculative-num-steps to one of {choices}, or drop it (the server then starts at "
            f"{ADAPTIVE_START_STEPS})")


# ------------------------------------------------------------------------------------------------ plan rules

_EAGLE_FAMILY = {"EAGLE", "EAGLE3", "NEXTN", "STANDALONE"}
_EAGLE_TRIPLE = ("speculative-num-steps", "speculative-eagle-topk", "speculative-num-draft-tokens")
_DRAFT_MODEL_FLAGS = ("speculative-draft-model-path", "speculative-draft-model")


def user_errors(args: Mapping[str, object]) -> list[UserError]:
    """Misconfigurations SGLang refuses at start-up, which no matrix point can make right: user errors."""
    out: list[UserError] = []
    steps_error = _adaptive_steps_error(args)
    if steps_error is not None:
        out.append(steps_error)
    algorithm = str(args.get("speculative-algorithm", "")).upper()
    if algorithm == "DFLASH":
        if not any(args.get(f) not in (None, False) for f in _DRAFT_MODEL_FLAGS):
            out.append(("speculative-algorithm", "--speculative-algorithm DFLASH needs "
                        "--speculative-draft-model-path; SGLang refuses to start without it",
                        "add speculative-draft-model-path = \"/path/to/the/DFlash/draft\" to this configuration's "
                        "args or to [server.args]"))
        block = args.get("speculative-dflash-block-size")
        ndt = args.get("speculative-num-draft-tokens")
        if block is not None and ndt is not None and str(block) != str(ndt):
            out.append(("speculative-dflash-block-size", f"--speculative-dflash-block-size {block} differs from "
                        f"--speculative-num-draft-tokens {ndt}; SGLang requires them equal for DFLASH",
                        "set only one of them: they are aliases for DFLASH"))
        pp = args.get("pp-size", args.get("pipeline-parallel-size"))
        if pp is not None and str(pp) != "1":
            out.append(("pp-size", f"DFLASH requires --pp-size 1, got {pp}", "remove pp-size"))
    return out


def eagle_skip_reason(args: Mapping[str, object]) -> str | None:
    """SGLang's EAGLE rules that make a matrix point meaningless, as a skip reason (None when valid).

    SGLang asserts when only some of steps/topk/draft-tokens are set, and with topk = 1 it rewrites the draft
    token count to steps + 1, so such a point would silently measure another point's server.
    """
    algorithm = str(args.get("speculative-algorithm", "")).upper()
    if algorithm not in _EAGLE_FAMILY:
        return None
    present = [f for f in _EAGLE_TRIPLE if args.get(f) not in (None, False)]
    if present and len(present) != 3:
        return ("EAGLE needs speculative-num-steps, speculative-eagle-topk and speculative-num-draft-tokens "
                "set together (SGLang asserts otherwise)")
    if len(present) == 3:
        try:
            steps, topk, ndt = (int(str(args[f])) for f in _EAGLE_TRIPLE)
        except ValueError:
            return None
        if steps * topk + 1 < ndt:
            return f"steps×topk+1 = {steps * topk + 1} < num_draft_tokens = {ndt}: SGLang cannot build that draft tree"
        if topk == 1 and ndt != steps + 1:
            return (f"with topk=1 SGLang forces num_draft_tokens to steps+1 = {steps + 1}: it would measure "
                    "that point's server again")
    return None


def speculates(argv: Sequence[str], algorithm: str) -> bool:
    """A configuration passes ``--speculative-algorithm`` or declares a speculative algorithm."""
    return "--speculative-algorithm" in argv or declared_speculation(argv, algorithm)


# ------------------------------------------------------------------------------------------------ the wire


def _states(info: Mapping[str, object]) -> Iterable[object]:
    """``/server_info``'s ``internal_states``: one per scheduler. A value that is not iterable raises the
    ``TypeError`` iterating it would (``server_figures.read_rule`` reports the field as malformed)."""
    states = info.get("internal_states") or ()
    if not isinstance(states, Iterable):
        raise TypeError(f"'{type(states).__name__}' object is not iterable")
    return states


def _context_length(info: Mapping[str, object]) -> int | None:
    """``/server_info`` carries the resolved ServerArgs; ``context_length`` may be None when not passed."""
    for key in ("context_length", "max_model_len", "context_len"):
        value = positive(info.get(key))
        if value is not None:
            return value
    for state in _states(info):
        if isinstance(state, Mapping):
            value = state.get("context_len") or state.get("context_length")
            if isinstance(value, int) and value > 0:
                return value
    return None


def _input_limit(info: Mapping[str, object]) -> int | None:
    """``/server_info`` merges the scheduler's start-up info: ``max_req_input_len`` (inputs of that many tokens
    or more are aborted)."""
    return positive(info.get("max_req_input_len"))


def running_cap(info: Mapping[str, object]) -> int | None:
    """The running-request cap the scheduler enforces: the sum over DP ranks of ``internal_states[]``'s
    ``effective_max_running_requests_per_dp`` (``scheduler.max_running_requests``), else the resolved
    ``max_running_requests`` (48 for every speculative algorithm but UNO when the flag is unset)."""
    per_dp = [positive(state.get("effective_max_running_requests_per_dp"))
              for state in _states(info) if isinstance(state, Mapping)]
    if per_dp and all(v is not None for v in per_dp):
        return sum(v for v in per_dp if v is not None)
    return positive(info.get("max_running_requests"))


SPECULATIVE_RESET_CAP = 48
"""``arg_groups/speculative_hook.py``: every speculative algorithm but UNO resets an unset
``--max-running-requests`` to 48 ("Max running requests is reset to 48 for speculative decoding")."""


def _dp_size(argv: Sequence[str]) -> int:
    value = argv_value(argv, "--dp-size") or argv_value(argv, "--data-parallel-size") or "1"
    return int(value) if value.isdigit() and int(value) > 0 else 1


def planned_running_cap(argv: Sequence[str]) -> int | None:
    """``--max-running-requests`` when the argv sets it, else 48 for a speculative algorithm other than UNO, else
    None (the scheduler sizes it from its KV pool at start). With plain ``--dp-size N`` (no
    ``--enable-dp-attention``) each of the N data-parallel schedulers has that cap of its own: N times it in all
    (``/server_info``'s ``internal_states`` then lists N ``effective_max_running_requests_per_dp``)."""
    explicit = argv_value(argv, "--max-running-requests")
    ranks = 1 if "--enable-dp-attention" in argv else _dp_size(argv)
    if explicit is not None:
        return int(explicit) * ranks if explicit.isdigit() else None
    algorithm = (argv_value(argv, "--speculative-algorithm") or "").upper()
    if algorithm and algorithm not in ("NONE", "UNO"):
        return SPECULATIVE_RESET_CAP * ranks
    return None


def flush_caveat(argv: Sequence[str]) -> str | None:
    """Why an accepted flush may leave caches warm, or None. With ``--dp-size`` > 1 SGLang's ``/flush_cache``
    goes to every data-parallel rank but answers with the first rank's result only
    (``managers/tokenizer_control_mixin.py`` ``flush_cache``: ``(await self.flush_cache_communicator(...))[0]``):
    a 200 says rank 0 flushed, while another rank may keep its prefix cache or n-gram corpus."""
    ranks = _dp_size(argv)
    if ranks <= 1:
        return None
    return (f"with --dp-size {ranks}, SGLang's /flush_cache answers with data-parallel rank 0's result only: a 200 "
            "does not say the other ranks flushed, so a measurement marked cold may meet another rank's warm "
            "prefix cache or n-gram corpus")


def graph_ceiling(info: Mapping[str, object]) -> int | None:
    """The largest decode batch captured as a CUDA graph, when ``/server_info`` says: the flag's own
    ``cuda_graph_max_bs_decode`` (null unless passed), else the largest of the batch sizes each scheduler state
    captured (``internal_states[].decode_cuda_graph_bs``), else the resolved ``cuda_graph_config.decode.max_bs``,
    else the older ``cuda_graph_max_bs``."""
    if graphs_captured(info) is False:  # the resolved configuration says 32 on CPU too: nothing was captured
        return None
    value = positive(info.get("cuda_graph_max_bs_decode"))
    if value is not None:
        return value
    captured = _captured_decode_bs(info.get("internal_states"))
    if captured:
        return max(captured)
    config = info.get("cuda_graph_config")
    decode = config.get("decode") if isinstance(config, dict) else None
    value = positive(decode.get("max_bs")) if isinstance(decode, dict) else None
    return value if value is not None else positive(info.get("cuda_graph_max_bs"))


def graphs_captured(info: Mapping[str, object]) -> bool | None:
    """Whether the server captured any decode CUDA graph: False when every scheduler state lists its captured
    batch sizes and each list is empty (``decode_cuda_graph_bs: []``: a CPU server, or graphs disabled), True
    when one lists any, None when no state says."""
    states = info.get("internal_states")
    said = [state["decode_cuda_graph_bs"] for state in states if isinstance(state, dict)
            and isinstance(state.get("decode_cuda_graph_bs"), list)] if isinstance(states, list) else []
    if not said:
        return None
    return any(said)


def _captured_decode_bs(states: object) -> list[int]:
    """Every decode batch size the scheduler states say they captured as CUDA graphs."""
    out: list[int] = []
    for state in states if isinstance(states, list) else []:
        sizes = state.get("decode_cuda_graph_bs") if isinstance(state, dict) else None
        out.extend(bs for bs in map(positive, sizes if isinstance(sizes, list) else []) if bs is not None)
    return out


CACHE_FLUSH_NOTE = ("POST /flush_cache empties the radix prefix cache, the KV pools and the n-gram drafter's corpus "
                    "(scheduler.py flush_cache); SGLang refuses it with 400 while requests run or wait, so it is "
                    "retried until accepted")

CRASH_DIAGNOSTICS_OFF = {"SGLANG_PYSPY_DUMP_BEFORE_CRASH": "0", "SGLANG_CUDA_COREDUMP_BEFORE_CRASH": "0"}
"""Set at launch unless the sweep sets them: after ``Scheduler hit an exception`` SGLang's crash handler
(``managers/tokenizer_manager.py`` ``dump_requests_before_crash``, defaults in ``srt/environ.py``) otherwise sleeps
5 s, runs py-spy and waits 60 s for CUDA core dumps before it kills its tree, on its event loop, so SIGTERM is
not served meanwhile. With both 0 the crashed server exits within the second."""

PYTHON_MODULES = {"sglang": "sglang.launch_server", simulator.LAUNCHER: simulator.MODULE}
"""Real SGLang, or the simulator that imitates it (:mod:`.simulator`)."""

SGLANG = EngineProfile(
    name="sglang",
    load_flags=sglang_flags,
    ready_line=re.compile(r"The server is fired up and ready to roll!"),
    health_path="/health_generate",
    info_path="/server_info",
    generate_path="/generate",
    tokenize_path="/v1/tokenize",
    abort_path="/abort_request",
    flush_cache_path="/flush_cache",
    shutdown_env={"SGL_FORCE_SHUTDOWN": "1", "SGLANG_FORCE_SHUTDOWN": "1"},
    default_env=CRASH_DIAGNOSTICS_OFF,
    parse_stats_line=parse_stats_line,
    stats_hint=None,  # decode/prefill lines, retraction warnings and adaptive step switches (see parse_stats_line)
    stats_hints=(" batch", "Retract requests", "adaptive runtime state", "AdaptiveSpeculativeParams initialized"),
    context_length=_context_length,
    # /v1/models carries model_config.context_len, the limit its tokenizer manager enforces, while
    # /server_info's context_length is null unless --context-length was passed.
    models_path="/v1/models",
    reserved_tokens=_served_reserved_tokens,
    planned_reserved=planned_reserved_tokens,
    input_limit=_input_limit,
    # The tokenize endpoint's max_model_len is the tokenizer's model_max_length: never the limit.
    tokenize_reports_context=False,
    crash_signatures=SGLANG_SIGNATURES,
    python_packages=("sglang", "sgl-kernel", "torch", "triton", "pytorch-triton", "flashinfer-python",
                     "transformers", "xgrammar"),
    python_modules=PYTHON_MODULES,
    algorithm_flag="speculative-algorithm",
    user_errors=user_errors,
    skip_reason=eagle_skip_reason,
    speculative=speculates,
    budget_flags=("--speculative-ddtree-budget", "--speculative-num-draft-tokens",
                  "--speculative-dflash-block-size", "--speculative-dspark-block-size"),
    log=LogHints(fatal=(r"Scheduler hit an exception",), keywords=(b"Scheduler hit an exception",),
                 compact=compact_batch_line, short_stamp=short_stamp),
    cache_flush_note=CACHE_FLUSH_NOTE,
    running_cap=running_cap,
    planned_running_cap=planned_running_cap,
    graph_ceiling=graph_ceiling,
    graphs_captured=graphs_captured,
    served_adaptive=served_adaptive,
    flush_caveat=flush_caveat,
    adaptive_flag="--speculative-adaptive",
    adaptive_steps=adaptive_steps,
)
"""SGLang's profile."""
