"""Workloads: what each built-in kind sends, and how its answers become :class:`Measurement` records.

A workload knows its item names before any server runs (so resume can tell what is left), may prepare
against a live server (long-context prompts are sized with the server's own ``/v1/tokenize`` and
context length), sends unmeasured warm-up requests, and runs one item × repeat at a time. Multi-turn kinds
(the agentic loops, Spec-Bench questions with several turns) produce one record per conversation with
``turns`` set; their figures combine the turns (:func:`specbench_tui.core.metrics.combine_turns`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypedDict

import httpx

from specbench_tui.core.acceptance import add_histograms, from_mapping
from specbench_tui.core.budget import Budget, BudgetError, plan_budget, usable_context
from specbench_tui.core.context_ladder import filler_seed, ladder_text, rung_order
from specbench_tui.core.logparse import spec_counter_figures
from specbench_tui.core.metrics import (
    ConversationTiming,
    RequestTiming,
    acceptance_length,
    combine_turns,
    percentile,
    request_timing,
)
from specbench_tui.core.prompt_datasets import dataset_path, load_dataset, random_token_warning
from specbench_tui.core.prompts import (
    CSV_STAGES,
    MAX_LONG_CONTEXT_CHARS,
    PromptItem,
    arithmetic_prompts,
    calculator_reply,
    calculator_task,
    code_prompts,
    csv_feedback,
    haiku_prompts,
    is_final,
    json_extraction_prompts,
    load_prompts_file,
    long_context_text,
    make_csv,
    transcript,
)
from specbench_tui.core.records import (
    STATUS_ERROR,
    STATUS_OK,
    STATUS_ZERO_OUTPUT,
    Measurement,
)
from specbench_tui.core.sweep.schema import WorkloadSpec
from specbench_tui.core.workload_kinds import ParamSpec, register_kind
from specbench_tui.engine.client import GenerateResult, ServerClient
from specbench_tui.engine.server_figures import MAX_CONTEXT_TOKENS

THREAD_PROMPT_CHARS = 1 << 20
"""Prompt text of this many characters or more is built in a thread, off the engine's event loop."""
PROMPT_MARGIN = 8
"""Context tokens kept free beyond a prompt and its output when a prompt not sized by its workload is checked
(a BOS token, a chat marker)."""
MAX_BYTES_PER_TOKEN = 256
"""No token of any tokenizer is longer: a text of more bytes than this per token of room surely cannot fit."""
ERROR_KIND_TOO_LONG = "too_long"
"""A request not sent because it cannot fit the server's context."""


class WorkloadError(Exception):
    """A workload cannot run against this server (e.g. its context length is unknown)."""


@dataclass
class Session:
    """What a workload may use of the server it runs against."""

    client: ServerClient
    on_progress: Callable[[], None]
    context_length: int | None
    notice: Callable[[str, str], None]
    """(level, text): something the user should read, e.g. a clamped prompt."""
    reserved_tokens: int = 0
    """Context tokens the server reserves per request for speculative decoding (SGLang's EAGLE family)."""
    max_req_input_len: int | None = None
    """The server's scheduler input limit, when it says (SGLang's ``/server_info``)."""
    counted: dict[str, int] = field(default_factory=dict)
    """Prompt text's hash → the server's token count of it (each long text is counted once)."""
    refused_once: bool = False
    """A request too long for the context was refused already (the notice is said once)."""

    async def counters(self) -> dict[str, float] | None:
        """The server's acceptance counters now (None when its profile has none, or they cannot be read)."""
        if self.client.profile.spec_counters is None:
            return None
        return await self.client.counters()

    def counter_figures(self, before: dict[str, float], after: dict[str, float] | None,
                        log_accept_length: float | None = None) -> dict[str, object]:
        """The server's own acceptance over a window from its counters (``1 + Δaccepted / Δdrafts`` for
        llama.cpp), for ``WorkloadFinished.server_log``; {} when they cannot be compared."""
        names = self.client.profile.spec_counters
        figures = spec_counter_figures(before, after, names) if after is not None and names is not None else None
        if figures is None:
            return {}
        return {**figures, "log_accept_length": log_accept_length}

    async def generate(self, text: str, max_new_tokens: int, spec: WorkloadSpec, *, sized: bool = False) -> GenerateResult:
        """Send one request, unless it cannot fit the server's context (``sized``: the caller sized it already):
        then it is not sent, and the result is an error saying why (never the server's 400)."""
        self.on_progress()
        if not sized:
            refusal = await self.refusal(text, max_new_tokens)
            if refusal is not None:
                return refusal
        params = {"max_new_tokens": max_new_tokens, "temperature": spec.temperature, "ignore_eos": spec.ignore_eos}
        return await self.client.generate(text, params, on_progress=self.on_progress)

    async def refusal(self, text: str, max_new_tokens: int) -> GenerateResult | None:
        """An error result when ``text`` plus ``max_new_tokens`` cannot fit the context (with the reserved speculative
        tokens and the scheduler's input limit), else None. A text of fewer bytes than the room left surely fits (a
        token is at least a byte); a longer one is counted by the server's tokenizer (once per text); one of more
        than :data:`MAX_BYTES_PER_TOKEN` bytes per token of room is refused without counting."""
        if self.context_length is None:
            return None
        room = usable_context(self.context_length, self.reserved_tokens, self.max_req_input_len) - PROMPT_MARGIN
        size = len(text.encode("utf-8", errors="replace"))
        if size + max_new_tokens <= room:
            return None
        key = _sha(text)
        count = self.counted.get(key)
        if count is None and size > MAX_BYTES_PER_TOKEN * room:
            count = size // MAX_BYTES_PER_TOKEN
        if count is None:
            try:
                count, _ = await self.client.tokenize(text)
            except Exception:  # noqa: BLE001 - a server that cannot count: the request is sent as it is
                return None
            self.counted[key] = count
        if count + max_new_tokens <= room:
            return None
        why = (f"not sent: a prompt of {'at least ' if key not in self.counted else ''}{count:,} tokens + "
               f"max_new_tokens {max_new_tokens:,} cannot fit the server's context of {self.context_length:,} tokens "
               f"({self.reserved_tokens:,} reserved for speculative decoding, {PROMPT_MARGIN} kept free"
               + (f", input limit {self.max_req_input_len:,}" if self.max_req_input_len else "") + ")")
        if not self.refused_once:
            self.refused_once = True
            self.notice("warning", f"a prompt is too long for this server: {why}; shorten the prompts, lower "
                                   "max_new_tokens or raise the context (each such request is recorded as an error)")
        now = time.monotonic()
        return GenerateResult(rid="", started_at=time.time(), start=now, end=now, error=why,
                              error_kind=ERROR_KIND_TOO_LONG)


@dataclass(frozen=True)
class Labels:
    """Who a record belongs to."""

    config_id: str
    config: str
    workload: str


@dataclass
class _Extra:
    requested_prompt_tokens: int | None = None
    clamped: bool = False


# --------------------------------------------------------------------------------------------- measurements


def _finish_reason(meta: Mapping[str, object]) -> str | None:
    reason = meta.get("finish_reason")
    if isinstance(reason, Mapping):
        return str(reason.get("type")) if reason.get("type") else None
    return str(reason) if reason is not None else None


def _int(meta: Mapping[str, object], key: str) -> int | None:
    value = meta.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(meta: Mapping[str, object], key: str) -> float | None:
    value = meta.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="replace")).hexdigest()[:16]


class _BaseFields(TypedDict):
    """The :class:`Measurement` fields every record carries."""

    config_id: str
    config: str
    workload: str
    item: str
    repeat: int
    requested_prompt_tokens: int | None
    clamped: bool
    started_at: float | None
    turns: int | None


class _ErrorFields(TypedDict):
    """The :class:`Measurement` fields of a failed request or conversation."""

    status: str
    error: str
    error_kind: str | None
    http_status: int | None
    prompt_tokens: int | None


class _SpecFields(TypedDict, total=False):
    """Speculative decoding's :class:`Measurement` fields (the draft counts only where the server sent them)."""

    verify_ct: int | None
    accept_length: float | None
    accept_rate: float | None
    num_retractions: int | None
    correct_drafts: int
    proposed_drafts: int
    accept_histogram: tuple[int, ...]


class _TimingFields(TypedDict):
    """The :class:`Measurement` fields of a request's timing."""

    ttft_s: float | None
    e2e_s: float | None
    decode_tps: float | None
    itl_mean_s: float | None
    itl_p50_s: float | None
    itl_p95_s: float | None
    itl_p99_s: float | None
    chunks: int


def _base_fields(labels: Labels, item: str, repeat: int, results: Sequence[GenerateResult],
                 extra: _Extra) -> _BaseFields:
    """The fields every record carries, whatever its outcome."""
    return {
        "config_id": labels.config_id, "config": labels.config, "workload": labels.workload, "item": item,
        "repeat": repeat, "requested_prompt_tokens": extra.requested_prompt_tokens, "clamped": extra.clamped,
        "started_at": results[0].started_at if results else None,
        "turns": len(results) if len(results) > 1 else None,
    }


def _error_fields(results: Sequence[GenerateResult]) -> _ErrorFields | None:
    """The error of the first failed turn (or of a request never sent); None when every turn succeeded."""
    failed = next((r for r in results if not r.ok), None)
    if failed is None and results:
        return None
    if failed is None:
        return {"status": STATUS_ERROR, "error": "no request was sent", "error_kind": None, "http_status": None,
                "prompt_tokens": None}
    turn = f"turn {results.index(failed) + 1}: " if len(results) > 1 else ""
    return {"status": STATUS_ERROR, "error": f"{turn}{failed.error}", "error_kind": failed.error_kind,
            "http_status": failed.http_status, "prompt_tokens": failed.prompt_tokens}


def _summed(values: Sequence[int | None]) -> int | None:
    """The sum of the turns that sent a count; None when no turn sent one."""
    return sum(v for v in values if v) if any(v is not None for v in values) else None


def _spec_fields(results: Sequence[GenerateResult], completion: int) -> _SpecFields:
    """Speculative decoding's counts summed over the turns: verify steps, acceptance, retractions, drafts."""
    # SGLang sends the spec_* fields only for a request with at least one verify step: a turn without them
    # (one token from the prefill alone) verified nothing, so the conversation's steps are the others' sum.
    verify_ct = _summed([_int(r.meta_info, "spec_verify_ct") for r in results])
    reported = _float(results[-1].meta_info, "spec_accept_length") if len(results) == 1 else None
    rates = [x for x in (_float(r.meta_info, "spec_accept_rate") for r in results) if x is not None]
    return {
        "verify_ct": verify_ct, "accept_length": acceptance_length(reported, completion, verify_ct),
        "accept_rate": sum(rates) / len(rates) if rates else None,
        "num_retractions": _summed([_int(r.meta_info, "num_retractions") for r in results]),
        **_draft_counts(results),
    }


def _timing_fields(timing: RequestTiming | ConversationTiming) -> _TimingFields:
    """Time to first token, end to end, decode rate and the inter-token latencies' mean and percentiles."""
    itls = list(timing.itls_s)
    return {
        "ttft_s": timing.ttft_s, "e2e_s": timing.e2e_s, "decode_tps": timing.decode_tps,
        "itl_mean_s": sum(itls) / len(itls) if itls else None, "itl_p50_s": percentile(itls, 50),
        "itl_p95_s": percentile(itls, 95), "itl_p99_s": percentile(itls, 99), "chunks": timing.chunks,
    }


def measurement_from(labels: Labels, item: str, repeat: int, results: Sequence[GenerateResult],
                     extra: _Extra | None = None) -> Measurement:
    """The record of one request (one result) or one conversation (several), errors and zero output flagged."""
    base = _base_fields(labels, item, repeat, results, extra or _Extra())
    failure = _error_fields(results)
    if failure is not None:
        return Measurement(**base, **failure)
    timings = [request_timing(r.start, r.end, r.chunks, r.completion_tokens) for r in results]
    last = results[-1]
    completion = sum(t.completion_tokens for t in timings)
    zero_turn = next((i for i, t in enumerate(timings) if t.completion_tokens <= 0), None)
    status, error = STATUS_OK, None
    if zero_turn is not None:
        status = STATUS_ZERO_OUTPUT
        error = (f"turn {zero_turn + 1} returned no tokens" if len(results) > 1 else "the server returned no tokens")
    return Measurement(
        **base, status=status, error=error,
        prompt_tokens=last.prompt_tokens, completion_tokens=completion,
        cached_tokens=_int(last.meta_info, "cached_tokens"),
        **_timing_fields(timings[0] if len(results) == 1 else combine_turns(timings)),
        **_spec_fields(results, completion),
        finish_reason=_finish_reason(last.meta_info), http_status=last.http_status,
        output_sha=_sha("\x1e".join(r.text for r in results)),
    )


def _draft_counts(results: Sequence[GenerateResult]) -> _SpecFields:
    """SGLang's ``spec_num_correct_drafts``, ``spec_num_proposed_drafts`` and ``spec_correct_drafts_histogram``
    summed over a conversation's turns (a turn without them verified nothing); {} when no turn sent them."""
    correct = [_int(r.meta_info, "spec_num_correct_drafts") for r in results]
    proposed = [_int(r.meta_info, "spec_num_proposed_drafts") for r in results]
    histograms = [h for h in (from_mapping(r.meta_info) for r in results) if h]
    out: _SpecFields = {}
    if any(v is not None for v in correct) and any(v is not None for v in proposed):
        out["correct_drafts"] = sum(v for v in correct if v)
        out["proposed_drafts"] = sum(v for v in proposed if v)
    if histograms:
        out["accept_histogram"] = add_histograms(histograms)
    return out


# ------------------------------------------------------------------------------------------------ workloads


@dataclass
class Workload:
    """Base: a fixed list of single-turn prompts."""

    spec: WorkloadSpec
    prompts: list[PromptItem] = field(default_factory=list)

    def items(self) -> list[str]:
        return [p.item for p in self.prompts]

    async def prepare(self, session: Session) -> None:
        """Get ready against a live server (nothing to do for fixed prompts)."""

    def warmup_text(self) -> str:
        return self.prompts[0].text if self.prompts else "Hello."

    async def warmup(self, session: Session) -> None:
        """``spec.warmup`` unmeasured requests with the first prompt (their results are dropped)."""
        for _ in range(self.spec.warmup):
            await session.generate(self.warmup_text(), self.spec.max_new_tokens, self.spec)

    async def run(self, item: str, repeat: int, session: Session, labels: Labels) -> Measurement:
        prompt = next(p for p in self.prompts if p.item == item)
        if prompt.turns:
            return await self._conversation(prompt, repeat, session, labels)
        result = await session.generate(prompt.text, self.spec.max_new_tokens, self.spec)
        return _with_category(measurement_from(labels, item, repeat, [result]), prompt)

    async def _conversation(self, prompt: PromptItem, repeat: int, session: Session, labels: Labels) -> Measurement:
        """Spec-Bench multi-turn questions: each later turn sees the earlier answers."""
        history: list[tuple[str, str]] = []
        results: list[GenerateResult] = []
        for user in (prompt.text, *prompt.turns):
            result = await session.generate(transcript(history, user), self.spec.max_new_tokens, self.spec)
            results.append(result)
            if not result.ok:
                break
            history.append((user, result.text))
        return _with_category(measurement_from(labels, prompt.item, repeat, results), prompt)


def _with_category(measurement: Measurement, prompt: PromptItem) -> Measurement:
    """The record with its prompt's dataset category (for the category × configuration matrices)."""
    return dataclasses.replace(measurement, category=prompt.category) if prompt.category else measurement


class LongContextWorkload(Workload):
    """Prompts sized in the server's own tokens to each requested size, clamped to fit the context."""

    margin = 32

    def __init__(self, spec: WorkloadSpec) -> None:
        super().__init__(spec)
        self._requested: list[int | str] = list(spec.param("prompt_tokens"))
        self._built: dict[str, tuple[str, Budget, int]] = {}
        """item → (text, budget, server token count)."""
        self._by_target: dict[int, tuple[str, int]] = {}
        self._context: tuple[int, int, int | None] | None = None
        """(context length, reserved tokens, scheduler input limit) the prompts were sized for."""
        self._chars_per_token = 4.0

    def items(self) -> list[str]:
        return [str(r) for r in self._requested]

    async def prepare(self, session: Session) -> None:
        try:
            await self._prepare(session)
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            raise WorkloadError(f"cannot size long prompts with {session.client.profile.tokenize_path}: "
                                f"{type(exc).__name__}: {exc}") from exc

    async def _prepare(self, session: Session) -> None:
        context = session.context_length
        if context is None and session.client.profile.tokenize_reports_context:
            try:
                _, context = await session.client.tokenize("x")
            except Exception:  # noqa: BLE001 - any failure means "unknown", handled below
                context = None
            if context is not None and context > MAX_CONTEXT_TOKENS:
                session.notice("warning", f"{self.spec.name}: the server's {session.client.profile.tokenize_path} "
                               f"says max_model_len = {context:.3g}: more than any sweep can use, so "
                               f"{MAX_CONTEXT_TOKENS:,} is used instead")
                context = MAX_CONTEXT_TOKENS
        if context is None:
            raise WorkloadError("the server reports no context length, so long prompts cannot be sized safely")
        limits = (context, session.reserved_tokens, session.max_req_input_len)
        if limits != self._context or not await self._cache_still_valid(session):
            self._built.clear()
            self._by_target.clear()
            self._context = limits
        for requested in self._requested:
            item = str(requested)
            try:
                budget = plan_budget(requested, context, self.spec.max_new_tokens, self.margin,
                                     reserved=session.reserved_tokens, max_req_input_len=session.max_req_input_len)
            except BudgetError as exc:
                raise WorkloadError(str(exc)) from exc
            if item not in self._built:
                if budget.prompt_tokens not in self._by_target:
                    self._by_target[budget.prompt_tokens] = await self._size(session, budget.prompt_tokens)
                text, tokens = self._by_target[budget.prompt_tokens]
                self._built[item] = (text, budget, tokens)
                if budget.clamped:  # said once per sizing, not once per configuration
                    session.notice("warning", f"{self.spec.name} {item}: {budget.note}")

    async def _cache_still_valid(self, session: Session) -> bool:
        """Prompts sized on an earlier server are reused when this server counts the largest one the same."""
        if not self._built:
            return True
        text, _, tokens = max(self._built.values(), key=lambda built: built[2])
        return (await session.client.tokenize(text))[0] == tokens

    async def _size(self, session: Session, target: int) -> tuple[str, int]:
        """Text of at most ``target`` server tokens and within 0.5 % of it (secant steps, then bisection)."""
        tolerance = max(4, target // 200)
        low_chars, low = 0, ("", 0)
        high_chars: int | None = None
        chars = max(64, int(target * self._chars_per_token))
        for _ in range(24):
            # A report of millions of characters takes seconds to build: off the engine's event loop.
            text = self._text(chars) if chars < THREAD_PROMPT_CHARS else await asyncio.to_thread(self._text, chars)
            count, _ = await session.client.tokenize(text)
            if count > 0:
                self._chars_per_token = len(text) / count
            if count <= target:
                if count > low[1] or not low[0]:
                    low_chars, low = chars, (text, count)
                if count >= target - tolerance:
                    return text, count
            else:
                high_chars = chars
            guess = int(chars * target / max(count, 1))
            if high_chars is not None and not low_chars < guess < high_chars:
                guess = (low_chars + high_chars) // 2
            if guess == chars:
                guess = chars - 1 if count > target else chars + 1
            chars = max(1, guess)
        if not low[0]:
            raise WorkloadError(f"could not build a prompt of at most {target} tokens")
        return low

    def _text(self, chars: int) -> str:
        """The prompt text of about ``chars`` characters that sizing counts."""
        return long_context_text(chars)

    def warmup_text(self) -> str:
        smallest = min(self._built.values(), key=lambda built: built[2], default=None)
        return smallest[0] if smallest else "Hello."

    async def warmup(self, session: Session) -> None:
        smallest = min(self._built.values(), key=lambda built: built[2], default=None)
        for _ in range(self.spec.warmup):
            max_new = smallest[1].max_new_tokens if smallest else self.spec.max_new_tokens
            await session.generate(self.warmup_text(), max_new, self.spec, sized=True)

    async def run(self, item: str, repeat: int, session: Session, labels: Labels) -> Measurement:
        text, budget, tokens = self._built[item]
        result = await session.generate(text, budget.max_new_tokens, self.spec, sized=True)
        requested = budget.requested if isinstance(budget.requested, int) else budget.prompt_tokens
        # A clamped prompt is filed under the size sent, the request beside it (Measurement.planned_key).
        filed = str(tokens) if budget.clamped else item
        return measurement_from(labels, filed, repeat, [result], _Extra(requested, budget.clamped))


WARMUP_REPEAT = 0
"""The warm-up's filler is the smallest rung's at repeat 0: no measured request shares it."""


class ContextLadderWorkload(LongContextWorkload):
    """The ``context_ladder`` kind: one prompt per rung and repeat, each with its own filler
    (:func:`specbench_tui.core.context_ladder.ladder_text`), sized and clamped as ``long_context``'s are. Which rungs
    a configuration measures is the search's (:func:`specbench_tui.core.crossover.ladder.ladder_needs`, through the
    engine's load driver). Rungs go from the smallest context to ``max``; a (rung, repeat) prompt is built when it is
    first sent."""

    def __init__(self, spec: WorkloadSpec) -> None:
        super().__init__(spec)
        self._requested = list(spec.param("prompt_tokens"))
        self._budgets: dict[str, Budget] = {}
        self._texts: dict[tuple[str, int], tuple[str, int]] = {}
        """(rung, repeat) → (text, server token count)."""
        self._seed = 0

    def items(self) -> list[str]:
        return rung_order(self._requested)

    async def _prepare(self, session: Session) -> None:
        """Each rung's budget (its prompt and output sizes in this context); the texts wait until they are sent."""
        context = await self._context_length(session)
        limits = (context, session.reserved_tokens, session.max_req_input_len)
        if limits != self._context:
            self._budgets.clear()
            self._texts.clear()
            self._context = limits
        for item, requested in zip(self.items(), sorted(self._requested, key=_order)):
            if item in self._budgets:
                continue
            try:
                budget = plan_budget(requested, context, self.spec.max_new_tokens, self.margin,
                                     reserved=session.reserved_tokens, max_req_input_len=session.max_req_input_len)
            except BudgetError as exc:
                raise WorkloadError(str(exc)) from exc
            self._budgets[item] = budget
            if budget.clamped:
                session.notice("warning", f"{self.spec.name} rung {item}: {budget.note}")

    async def _context_length(self, session: Session) -> int:
        """The server's context (as ``long_context`` reads it: its info, else what its tokenizer says, at most
        :data:`MAX_CONTEXT_TOKENS`)."""
        context = session.context_length
        if context is None and session.client.profile.tokenize_reports_context:
            try:
                _, context = await session.client.tokenize("x")
            except (httpx.HTTPError, ValueError, KeyError):
                context = None
        if context is None:
            raise WorkloadError("the server reports no context length, so the ladder's rungs cannot be sized safely")
        return min(int(context), MAX_CONTEXT_TOKENS)

    def _text(self, chars: int) -> str:
        return ladder_text(chars, self._seed, MAX_LONG_CONTEXT_CHARS)

    async def _prompt(self, session: Session, item: str, repeat: int) -> tuple[str, int]:
        key = (item, repeat)
        if key not in self._texts:
            self._seed = filler_seed(self.spec.name, item, repeat)
            self._texts[key] = await self._size(session, self._budgets[item].prompt_tokens)
        return self._texts[key]

    def warmup_text(self) -> str:
        first = self.items()[0] if self.items() else None
        built = self._texts.get((first, WARMUP_REPEAT)) if first is not None else None
        return built[0] if built else "Hello."

    async def warmup(self, session: Session) -> None:
        if not self.spec.warmup or not self._budgets:
            return
        first = self.items()[0]
        text, _ = await self._prompt(session, first, WARMUP_REPEAT)
        for _ in range(self.spec.warmup):
            await session.generate(text, self._budgets[first].max_new_tokens, self.spec, sized=True)

    async def run(self, item: str, repeat: int, session: Session, labels: Labels) -> Measurement:
        budget = self._budgets[item]
        try:
            text, _ = await self._prompt(session, item, repeat)
        except (httpx.HTTPError, ValueError, KeyError, WorkloadError) as exc:
            return Measurement(config_id=labels.config_id, config=labels.config, workload=labels.workload, item=item,
                               repeat=repeat, status=STATUS_ERROR,
                               error=f"not sent: cannot size rung {item} with the server's tokenizer: {exc}"[:500])
        result = await session.generate(text, budget.max_new_tokens, self.spec, sized=True)
        requested = budget.requested if isinstance(budget.requested, int) else budget.prompt_tokens
        return measurement_from(labels, item, repeat, [result], _Extra(requested, budget.clamped))


def _order(rung: int | str) -> tuple[bool, int]:
    return (isinstance(rung, str), rung if isinstance(rung, int) else 0)


class CalculatorWorkload(Workload):
    """A tool loop: the model writes ``CALC: expr``, the harness evaluates it and sends the result back."""

    def __init__(self, spec: WorkloadSpec) -> None:
        super().__init__(spec, [PromptItem(f"calc-{i + 1}", calculator_task(i), "agentic")
                                for i in range(spec.param("count"))])

    async def run(self, item: str, repeat: int, session: Session, labels: Labels) -> Measurement:
        prompt = next(p for p in self.prompts if p.item == item)
        history: list[tuple[str, str]] = []
        results: list[GenerateResult] = []
        user = prompt.text
        for _ in range(self.spec.param("turns")):
            result = await session.generate(transcript(history, user), self.spec.max_new_tokens, self.spec)
            results.append(result)
            if not result.ok or is_final(result.text):
                break
            history.append((user, result.text))
            user = calculator_reply(result.text)
        return measurement_from(labels, item, repeat, results)


class CsvPipelineWorkload(Workload):
    """A data pipeline around a CSV validator: find bad rows, fix them, summarise; the harness validates."""

    def __init__(self, spec: WorkloadSpec) -> None:
        super().__init__(spec, [PromptItem(f"csv-{i + 1}", CSV_STAGES[0].format(csv=make_csv(seed=300 + i)), "agentic")
                                for i in range(spec.param("count"))])

    async def run(self, item: str, repeat: int, session: Session, labels: Labels) -> Measurement:
        index = int(item.split("-")[1]) - 1
        csv_text = make_csv(seed=300 + index)
        history: list[tuple[str, str]] = []
        results: list[GenerateResult] = []
        user = CSV_STAGES[0].format(csv=csv_text)
        for stage in range(min(self.spec.param("turns"), len(CSV_STAGES))):
            result = await session.generate(transcript(history, user), self.spec.max_new_tokens, self.spec)
            results.append(result)
            if not result.ok:
                break
            history.append((user, result.text))
            user = csv_feedback(stage, result.text, csv_text)
        return measurement_from(labels, item, repeat, results)


WorkloadBuilder = Callable[[WorkloadSpec], Workload]
"""Makes the workload object of one ``[[workloads]]`` block of its kind."""


def _agentic(spec: WorkloadSpec) -> Workload:
    return CsvPipelineWorkload(spec) if spec.param("task") == "csv_validator" else CalculatorWorkload(spec)


def _prompts_file(spec: WorkloadSpec) -> Workload:
    params = dict(spec.params)
    return PromptsFileWorkload(spec, load_prompts_file(params["path"], params.get("categories", ()),
                                                       params.get("limit", 0)))


class DatasetWorkload(Workload):
    """A local prompt dataset by category (Spec-Bench, MT-Bench, SPEED-Bench JSONL); warns, once it runs, when
    its prompts look like random tokens."""

    def __init__(self, spec: WorkloadSpec) -> None:
        params = dict(spec.params)
        super().__init__(spec, load_dataset(
            dataset_path(str(params.get("path") or "")), str(params.get("format") or "spec_bench"),
            params.get("categories", ()), int(params.get("limit") or 0), int(params.get("per_category") or 0),
            str(params.get("category_field") or "category")))

    async def prepare(self, session: Session) -> None:
        warning = random_token_warning(self.spec.name, [p.text for p in self.prompts])
        if warning:
            session.notice("warning", warning)


class PromptsFileWorkload(Workload):
    """A ``prompts_file`` workload: warns when its prompts look like random tokens."""

    async def prepare(self, session: Session) -> None:
        warning = random_token_warning(self.spec.name, [p.text for p in self.prompts])
        if warning:
            session.notice("warning", warning)


BUILDERS: dict[str, WorkloadBuilder] = {
    "code": lambda spec: Workload(spec, code_prompts(spec.param("items"))),
    "arithmetic": lambda spec: Workload(spec, arithmetic_prompts(spec.param("count"))),
    "json_extraction": lambda spec: Workload(spec, json_extraction_prompts(spec.param("count"))),
    "haiku": lambda spec: Workload(spec, haiku_prompts(spec.param("count"))),
    "long_context": LongContextWorkload,
    "agentic": _agentic,
    "prompts_file": _prompts_file,
    "prompt_dataset": DatasetWorkload,
    "context_ladder": lambda spec: ContextLadderWorkload(spec),
}
"""Kind name → its builder; the kinds and their parameters are :data:`specbench_tui.core.workload_kinds.KINDS`."""


def register_workload_kind(name: str, params: dict[str, ParamSpec], builder: WorkloadBuilder) -> None:
    """Add a workload kind: its parameters (validated by the sweep loader, with errors naming file and line)
    and its builder. A kind is then usable in any sweep loaded after this call."""
    register_kind(name, params)
    BUILDERS[name] = builder


def build_workload(spec: WorkloadSpec) -> Workload:
    """The workload object for one ``[[workloads]]`` block."""
    builder = BUILDERS.get(spec.kind)
    if builder is None:
        raise ValueError(f"unknown workload kind {spec.kind!r}")
    return builder(spec)


async def server_ttft_counters(session: Session) -> dict[str, float] | None:
    """The server's Prometheus counters when its profile names a time-to-first-token histogram (the starvation
    guard's other witness), else None without a request."""
    if session.client.profile.ttft_histogram is None:
        return None
    return await session.client.counters()
