"""The one interface every engine implements: :class:`EngineProfile`, with its flag facts (:class:`EngineFlags`).

An engine is one module of this package (``sglang``, ``llamacpp``, ``vllm``) that builds one ``EngineProfile`` and
registers it (:mod:`specbench_tui.core.engines.registry`). The profile is pure data and pure functions (no I/O):
the engine layer (``engine.server``, ``engine.client``, the orchestrator) interprets it, the planner, analysis and
the log view ask it, and none of them branches on an engine's name. ``docs/adding-an-engine.md`` walks through
writing one.

What a profile says, by who asks:

- the sweep loader and planner: its flags (:meth:`EngineProfile.flags`: names, value shapes, reserved and
  removed flags, GPUs per configuration), the flag that names the speculative algorithm, the start-up rules it
  enforces (``user_errors``: an error in the sweep) and the matrix points it would reject or rewrite
  (``skip_reason``: a skipped configuration);
- the launcher: the Python module each launcher runs (``python_modules``) and the flags always added;
- the server watcher: readiness (a log line, then a health endpoint), shutdown environment and signal, crash
  signatures (log lines and exit codes), the stats-line parser;
- the client and workloads: endpoints, the stream's wire format and its final-usage mapping onto ``meta_info``
  keys, the ``/metrics`` counters of acceptance, the context length and the tokens reserved for speculation;
- analysis: whether a configuration speculates and its draft budget, from its argv;
- the log view: extra patterns of serious lines and a compact form of the stats lines.
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources

from specbench_tui.core.errors import closest
from specbench_tui.core.logparse import BatchLine, SpecCounterNames
from specbench_tui.core.signatures import Signature

STREAM_SGLANG = "sglang"
STREAM_OPENAI = "openai"

NON_SPECULATIVE_ALGORITHMS = frozenset({"autoregressive", "ar", "none", "baseline", "custom", "unknown"})
"""Algorithm names that mean "no speculation" (a configuration's declared ``algorithm``)."""

UserError = tuple[str | None, str, str | None]
"""(flag the error is about or None, message, hint) of a rule a sweep broke."""


@dataclass(frozen=True)
class FlagShape:
    """What one flag's parser accepts, as argparse declares it."""

    arity: str
    """``0`` (a switch), ``1`` (one value), ``?`` (optional value), ``+`` or ``*`` (several values)."""
    type: str
    """``int``, ``float``, ``str``, ``json``, ``csv``, or ``other`` (a custom converter not imitated here)."""
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
        return next((found for item in values if (found := self._item_problem(flag, item)) is not None), None)

    def _item_problem(self, flag: str, item: object) -> tuple[str, str | None] | None:
        """(message, hint) when one value of ``--flag`` is not of its type or not one of its choices."""
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


RESERVED_FLAGS: Mapping[str, str] = {"port": "engine.port_base", "host": "engine.host",
                                     "api-key": "engine.api_key_env"}
"""Flags the launcher sets for every engine, with the sweep key to use instead."""


@dataclass(frozen=True)
class EngineFlags:
    """Command-line facts of one engine."""

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
    """Upper-case values of the profile's ``algorithm_flag`` the release ships (others need a fork or a plugin)."""
    unit_fraction: frozenset[str] = frozenset()
    """Flags whose value is a fraction in (0, 1]."""
    reserved: Mapping[str, str] = field(default_factory=lambda: dict(RESERVED_FLAGS))
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
    cpu_device: tuple[str, str] | None = None
    """``(flag, value)``: the engine runs without a GPU when the sweep's ``[server.args]`` set this flag to this
    value (SGLang's ``device = "cpu"``); on a machine with none, configurations then take no GPU."""
    launch_args: tuple[str, ...] = ()
    """Flags the launcher always adds (when the configuration does not), e.g. llama.cpp's ``--metrics``."""
    model_flags: tuple[tuple[tuple[str, ...], str], ...] = (
        (("--model-path", "--model"), "model"),
        (("--speculative-draft-model-path", "--speculative-draft-model"), "draft model"),
    )
    """(flags, what) whose local-path values must exist before launch (checked by the pre-flight)."""
    removed: Mapping[str, str] = field(default_factory=dict)
    """Flags the release still parses only to exit with an error, with its message (llama.cpp's ``--draft-max``)."""
    gpu_count: Callable[[Mapping[str, object]], int] | None = None
    """Replaces tp × dp × pp (llama.cpp: 1 per server unless declared)."""

    def gpus_needed(self, args: Mapping[str, object]) -> int:
        """GPUs one server of this configuration occupies: tp × dp × pp, or the engine's own rule."""
        if self.gpu_count is not None:
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


FlagTable = tuple[dict[str, FlagShape], dict[str, str], dict[str, str]]


def flag_table(text: str) -> FlagTable:
    """(shape of every long name, aliases included; short form → canonical long name; removed long name → the
    server's message) from the text of a flags file: ``canonical arity type choices aliases removed`` lines,
    tab-separated (``tools/dump_llamacpp_flags.py`` writes one). Lines starting with ``#`` are comments; the
    first may name the release (:func:`table_release`)."""
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


def table_release(text: str) -> str:
    """The version a flags file's first line names (``# ... version: 1234 (abc)`` → ``1234``), else ``""``."""
    first = text.splitlines()[0] if text else ""
    return first.split("version:", 1)[1].split("(")[0].strip() if "version:" in first else ""


def package_file(package: str, name: str) -> str:
    """The text of a data file shipped in ``package`` (an engine's flags file)."""
    return resources.files(package).joinpath(name).read_text()


# ------------------------------------------------------------------------------------------ shared mappings


def count(value: object) -> int | None:
    """``value`` when it is an int (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def positive(value: object) -> int | None:
    """``value`` when it is a positive int (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def openai_usage_meta(payload: Mapping[str, object]) -> dict[str, object]:
    """What every OpenAI-compatible final chunk carries → ``meta_info``: ``usage`` token counts (cached prompt
    tokens from ``prompt_tokens_details``) and the first choice's ``finish_reason``."""
    raw_usage = payload.get("usage")
    usage: Mapping[str, object] = raw_usage if isinstance(raw_usage, Mapping) else {}
    meta: dict[str, object] = {}
    for key in ("completion_tokens", "prompt_tokens"):
        value = count(usage.get(key))
        if value is not None:
            meta[key] = value
    details = usage.get("prompt_tokens_details")
    cached = count(details.get("cached_tokens")) if isinstance(details, Mapping) else None
    if cached is not None:
        meta["cached_tokens"] = cached
    choices = payload.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping) \
            and choices[0].get("finish_reason") is not None:
        meta["finish_reason"] = choices[0]["finish_reason"]
    return meta


def draft_acceptance_meta(completion: int, accepted: int, drafted: int) -> dict[str, object]:
    """One request's drafted and accepted tokens → ``meta_info``. Every generated token comes from one target
    step that also accepted some drafted ones, so the target steps are ``completion - accepted`` and the
    acceptance length is ``completion / steps`` (tokens per target forward pass, what SGLang's
    ``spec_accept_length`` means too); 1.0 when nothing was accepted."""
    steps = max(1, completion - accepted)
    meta: dict[str, object] = {"draft_tokens": drafted, "accepted_tokens": accepted, "spec_verify_ct": steps,
                            "spec_accept_length": completion / steps}
    if drafted:
        meta["spec_accept_rate"] = accepted / drafted
    return meta


def argv_value(argv: Sequence[str], flag: str) -> str | None:
    """The value of ``--flag`` in an argv (``--flag value`` or ``--flag=value``), else None."""
    for i, part in enumerate(argv):
        name, eq, value = part.partition("=")
        if name == flag:
            return value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
    return None


def declared_speculation(argv: Sequence[str], algorithm: str) -> bool:
    """The default speculation test: the configuration's declared algorithm is not a non-speculative name."""
    return algorithm.lower() not in NON_SPECULATIVE_ALGORITHMS


def _no_stats(line: str) -> BatchLine | None:
    return None


def _no_context(info: Mapping[str, object]) -> int | None:
    return None


@dataclass(frozen=True)
class LogHints:
    """How the log view styles an engine's lines beyond the generic level words."""

    fatal: tuple[str, ...] = ()
    """Regular expressions of serious lines: read back from disk (no verdict with them) they are drawn as errors;
    only the crash signatures make a line fatal."""
    keywords: tuple[bytes, ...] = ()
    """Literal bytes each of those lines contains (the full-log view's fast pre-filter)."""
    compact: Callable[[str], str] | None = None
    """The engine's stats line rewritten with its key figures first for the narrow live panel (``Decode ▸ ...``),
    other lines unchanged."""
    short_stamp: Callable[[str], str] | None = None
    """The line with its timestamp shortened for the live panel (SGLang: ``[date time TP0]`` → ``time TP0``),
    other lines unchanged."""


@dataclass(frozen=True)
class EngineProfile:
    """Everything the product asks of one engine: launch, watch, measure, stop, validate, analyse, style."""

    name: str
    """What ``[engine] profile`` names."""
    load_flags: Callable[[], EngineFlags]
    """The engine's flag facts (cached by the engine module: they are read from its flags file)."""
    ready_line: re.Pattern[str] | None
    """Printed once the server has warmed up and serves requests (None: readiness is the health check alone)."""
    health_path: str
    """Answers 200 when the server can generate."""
    info_path: str
    generate_path: str
    tokenize_path: str
    abort_path: str | None
    """Drops a request by id (None: closing the stream is the only way, as in llama.cpp)."""
    flush_cache_path: str | None
    """Empties the server's caches (prefix cache, an n-gram drafter's corpus) when no request runs; None: the
    engine offers no such endpoint and ``[measure] cache = "cold"`` is refused with :attr:`cache_flush_note`."""
    context_length: Callable[[Mapping[str, object]], int | None] = _no_context
    """The context length from the info endpoint's JSON."""
    shutdown_env: Mapping[str, str] = field(default_factory=dict)
    """Set at launch so that SIGTERM does not wait forever on in-flight requests."""
    default_env: Mapping[str, str] = field(default_factory=dict)
    """Set at launch unless the sweep's ``[server.env]`` (or a configuration's env) sets them."""
    stop_signal: int = signal.SIGTERM
    """Sent once at teardown; the teardown then waits ``shutdown_grace_s`` and SIGKILLs (never a second one)."""
    parse_stats_line: Callable[[str], BatchLine | None] = _no_stats
    """The server's own decode/prefill figures from one log line."""
    stats_hint: str | None = None
    """A substring every stats line contains, so that lines without it skip ``parse_stats_line`` (None: try
    every line)."""
    stats_hints: tuple[str, ...] = ()
    """Substrings one of which every stats line contains, when no single ``stats_hint`` does: a batch of lines
    is searched for each (in C), and only the lines holding one are parsed (empty: every line is)."""
    health_timeout_s: float = 30.0
    api_key_header: str = "Authorization"
    extra_env: Mapping[str, str] = field(default_factory=dict)
    health_poll_s: float = 0.25
    """Pause between health checks while the server loads."""
    stream_format: str = STREAM_SGLANG
    """``sglang`` (native ``/generate``) or ``openai`` (``/v1/completions`` with usage in the stream)."""
    tokenize_key: str = "prompt"
    """JSON key of the text in a tokenize request."""
    crash_signatures: tuple[Signature, ...] = ()
    exit_signatures: Mapping[int, str] = field(default_factory=dict)
    """Exit codes that name a crash although nothing was logged (SIGSEGV: ``segfault``)."""
    metrics_path: str | None = None
    """Prometheus counters read before and after each workload (None: the engine has none we use)."""
    ttft_histogram: str | None = None
    """The Prometheus histogram of the server's own time to first token on ``metrics_path`` (``<name>_sum`` and
    ``<name>_count``): the starvation guard holds our TTFT against it (None: the engine counts none)."""
    spec_counters: SpecCounterNames | None = None
    final_meta: Callable[[Mapping[str, object]], dict[str, object]] | None = None
    """OpenAI format: the last stream chunk (usage + engine extras) → ``meta_info`` keys."""
    fatal_stream_error: re.Pattern[str] | None = None
    """An error a stream carries when the server itself is dying (the request is then the crash's, not a
    measurement, once the process exits)."""
    stream_options: Mapping[str, object] = field(default_factory=lambda: {"include_usage": True})
    """OpenAI format: the request's ``stream_options``, as a plain client asks (``vllm bench serve`` asks the same):
    a usage object on the last chunk only."""
    counted_stream_options: Mapping[str, object] | None = None
    """OpenAI format: the ``stream_options`` that put the running token count on every chunk, asked of a sweep
    whose chunks can carry several tokens (:attr:`several_tokens_a_chunk`). It costs the server a usage object per
    chunk (real vLLM CPU at c = 64: 6 % and 12 % of its tok/s by the medians of two runs of
    bench/bench_vllm_stream_options.py), so a sweep that does not need it does not ask it. None: the
    engine has none."""
    several_tokens_a_chunk: Callable[[Sequence[str], str], bool] = lambda argv, algorithm: False
    """Whether a configuration (argv, declared algorithm) streams chunks of several tokens (speculative decoding,
    a stream interval over one): its chunks must then say how many."""
    models_path: str | None = None
    """An OpenAI model list whose ``data[0].max_model_len`` is the served context length, asked before the info
    endpoint."""
    reserved_tokens: Callable[[Mapping[str, object]], int] = lambda info: 0
    """Context tokens the server reserves per request for speculative decoding, from the info endpoint's JSON."""
    planned_reserved: Callable[[Sequence[str]], int] = lambda argv: 0
    """The same, known before launch from a configuration's argv (so a sweep sizes its long prompts once)."""
    input_limit: Callable[[Mapping[str, object]], int | None] = lambda info: None
    """The scheduler's own input limit from the info endpoint's JSON (SGLang: ``max_req_input_len``)."""
    tokenize_reports_context: bool = True
    """Whether the tokenize endpoint's ``max_model_len`` is the server's context."""
    python_packages: tuple[str, ...] = ()
    """Distributions whose versions the run's environment document records from the server's interpreter (none for a native binary)."""
    python_modules: Mapping[str, str] = field(default_factory=dict)
    """``[engine] launcher`` → the module ``python -m`` runs (a launcher not listed needs ``launcher = "command"``)."""
    algorithm_flag: str | None = None
    """The flag whose value names the speculative algorithm (checked against ``flags().known_algorithms``, and the
    configuration's algorithm when it declares none)."""
    user_errors: Callable[[Mapping[str, object]], list[UserError]] = lambda args: []
    """Start-up rules the engine enforces that no matrix point can make right: errors in the sweep."""
    skip_reason: Callable[[Mapping[str, object]], str | None] = lambda args: None
    """Why a matrix point is one the engine would reject or silently rewrite (it is kept, skipped), else None."""
    speculative: Callable[[Sequence[str], str], bool] = declared_speculation
    """Whether a configuration (argv, declared algorithm) runs speculative decoding."""
    budget_flags: tuple[str, ...] = ()
    """Flags whose integer value is a configuration's draft budget, in order."""
    budget_of: Callable[[Sequence[str]], int | None] | None = None
    """The draft budget from an argv by the engine's own rule, tried after :attr:`budget_flags` (vLLM: a key of
    its ``--speculative-config`` JSON)."""
    log: LogHints = field(default_factory=LogHints)
    cache_flush_note: str = ""
    """How the engine's server flushes its caches between measurements, or why it cannot (shown by ``validate``
    and in the refusal of ``cache = "cold"``)."""
    running_cap: Callable[[Mapping[str, object]], int | None] = lambda info: None
    """The server's running-request cap from the info endpoint's JSON (SGLang: ``max_running_requests``, per
    DP rank where ``internal_states`` says); None when it does not say."""
    planned_running_cap: Callable[[Sequence[str]], int | None] = lambda argv: None
    """The running-request cap a configuration's server will have, from its argv, when the argv decides it (an
    explicit flag, or a speculative algorithm's reset); None: the server sizes it at start."""
    graph_ceiling: Callable[[Mapping[str, object]], int | None] = lambda info: None
    graphs_captured: Callable[[Mapping[str, object]], bool | None] = lambda info: None
    """Whether the info endpoint says the server captured CUDA graphs (None: it does not say)."""
    served_adaptive: Callable[[Mapping[str, object]], bool | None] = lambda info: None
    """Whether the info endpoint says the server adapts its speculative steps (None: it does not say); it
    overrides what the command line asked (``adaptive_flag``)."""
    flush_caveat: Callable[[Sequence[str]], str | None] = lambda argv: None
    """Why an accepted cache flush may leave this configuration's server warm (None: it cannot)."""
    """The largest batch the server runs as a CUDA graph, from the info endpoint's JSON (None: not exposed)."""
    adaptive_flag: str | None = None
    """The switch that lets the server change its speculative steps with the batch size (SGLang's
    ``--speculative-adaptive``); None: the engine has none."""
    adaptive_steps: Callable[[int], tuple[int, ...]] | None = None
    """The candidate speculative steps an adaptive server chooses among at a running batch size."""

    def flags(self) -> EngineFlags:
        """The engine's flag facts."""
        return self.load_flags()

    def sweep_stream_options(self, configs: Iterable[tuple[Sequence[str], str]]) -> Mapping[str, object]:
        """The ``stream_options`` every request of a sweep carries: the counted ones when any configuration
        (argv, declared algorithm) streams chunks of several tokens, else the plain ones. One choice for the whole
        sweep, so that its baseline and its speculative rows cost the server the same per chunk and their speedup
        compares like with like."""
        if self.counted_stream_options is not None and any(self.several_tokens_a_chunk(argv, algorithm)
                                                           for argv, algorithm in configs):
            return self.counted_stream_options
        return self.stream_options

    def draft_budget(self, argv: Sequence[str]) -> int | None:
        """The draft budget an argv sets through :attr:`budget_flags` (None when none does)."""
        for flag in self.budget_flags:
            value = argv_value(argv, flag)
            if value is not None and value.isdigit():
                return int(value)
        return self.budget_of(argv) if self.budget_of is not None else None
