"""The simulated scheduler: continuous batching of prefill and verify steps, with SGLang's statistics.

One asyncio task plays the scheduler loop. Waiting requests are prefilled in batches (``Prefill batch``
line, first token), then every decode step advances all running requests together: it takes the time the
speed model gives for the batch, and commits ``1 + accepted`` tokens per request. Every
``--decode-log-interval`` steps it logs a ``Decode batch`` line with the interval's accept length, accept
rate and measured generation throughput. Steps follow absolute deadlines, so timing errors do not pile up
and a streaming client measures the modelled rate.

Failures that happen at run time (crash after warm-up / N requests / N steps, hang, watchdog) are decided
here and carried out through the callbacks the server passes in.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from specbench_tui.sim import kvpool, logs, tokenizer
from specbench_tui.sim.adaptive import AdaptiveSteps
from specbench_tui.sim.caches import FLUSHED_LOG, NgramCorpus, PrefixCache, flush_refused_log
from specbench_tui.sim.metrics import DecodeInterval, Metrics
from specbench_tui.sim.spec_hook import load_adaptive_config
from specbench_tui.sim.speed import SpeedModel

if TYPE_CHECKING:
    from specbench_tui.sim.args import Resolved

PRECISE_SLEEP_S = 0.0015
"""The last part of every scheduler sleep, slept precisely (see :meth:`Engine._sleep_until`)."""


class FinishReason(TypedDict):
    """SGLang's ``meta_info.finish_reason``: ``{"type": "stop", "matched": eos}``, ``{"type": "length",
    "length": n}`` or ``{"type": "abort", "message": ..., "status_code": ..., "err_type": ...}`` (its JSON keeps
    the keys in the order they are written)."""

    type: str
    matched: NotRequired[int]
    length: NotRequired[int]
    message: NotRequired[str]
    status_code: NotRequired[int | None]
    err_type: NotRequired[str | None]


@dataclass(eq=False)
class Request:
    """One generation request and its progress (the tokenizer manager's ``ReqState``, merged)."""

    rid: str
    input_ids: list[int]
    prompt_text: str
    kind: str
    max_new_tokens: int
    temperature: float = 0.0
    ignore_eos: bool = False
    internal: bool = False  # health checks: excluded from metrics and failure counters
    natural_len: int | None = None
    seed: int = 0
    created: float = field(default_factory=time.time)
    created_mono: float = field(default_factory=time.monotonic)
    output_ids: list[int] = field(default_factory=list)
    output_parts: list[str] = field(default_factory=list)
    cached_tokens: int = 0
    finish_reason: FinishReason | None = None
    verify_ct: int = 0
    correct_drafts: int = 0
    histogram: list[int] = field(default_factory=list)
    first_token_mono: float | None = None
    finished_mono: float | None = None
    retractions: int = 0  # meta_info.num_retractions (Req.retraction_count)
    retracted: bool = False  # waiting to be prefilled again after a retraction
    dp_rank: int = 0
    event: asyncio.Event = field(default_factory=asyncio.Event)
    _pieces: Iterator[str] | None = None
    _rng: random.Random | None = None
    _alpha: float = 0.0
    _context: float = 1.0
    """The share of the acceptance left at this prompt's length (``acceptance.context_half_life_tokens``)."""
    _length: float | None = None
    """Deterministic mode: tokens per verify step at this prompt's length."""

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    @property
    def text(self) -> str:
        return "".join(self.output_parts)

    @property
    def completion_tokens(self) -> int:
        return len(self.output_ids)

    @property
    def context_tokens(self) -> int:
        return len(self.input_ids) + len(self.output_ids)

    reproducible: bool = True  # greedy, or sampled with a sampling_seed: a repeat decodes the same tokens

    @property
    def stream_key(self) -> tuple[str, int, str]:
        """What fixes the output tokens (prompt kind and seed): NGRAM's corpus knows a stream by it. A sampled
        request without a seed decodes its own tokens on a real server, so its stream is its own."""
        return (self.kind, self.seed, "" if self.reproducible else self.rid)


class Engine:
    """The scheduler loop and its server-wide state (stats, prefix cache, failure triggers)."""

    def __init__(self, *, speed: SpeedModel, resolved: Resolved, profile: dict[str, Any], logger: logs.Logger,
                 max_total_num_tokens: int, context_len: int, metrics: Metrics,
                 crash_rule: Mapping[str, Any] | None, hang_rule: Mapping[str, Any] | None, empty_output: bool,
                 on_crash: Callable[[str], None], on_watchdog: Callable[[], None],
                 rank_logs: list[logs.Logger] | None = None, cuda_graph_bs: list[int] | None = None) -> None:
        self.speed = speed
        self.args = resolved
        self.profile = profile
        self.log = logger
        self.style = profile["logs"]["style"]
        self.max_total_num_tokens = max(1, max_total_num_tokens)
        self.context_len = context_len
        self.max_req_len = min(context_len - 1, self.max_total_num_tokens - 1)
        """``TpModelWorker``: the longest request (input + output) the scheduler takes."""
        self.max_req_input_len = self.max_req_len - 5
        """Inputs of this many tokens or more are aborted (``validate_input_length``)."""
        self.metrics = metrics
        self.crash_rule = crash_rule
        self.hang_rule = hang_rule
        self.empty_output = empty_output
        self.on_crash = on_crash
        self.on_watchdog = on_watchdog
        self.max_running = kvpool.max_running_requests(resolved.max_running_requests, self.max_total_num_tokens,
                                                       context_len, resolved.attn_dp_size)
        """The scheduler's cap (``effective_max_running_requests_per_dp``); admission beyond it queues."""
        self.rank_logs = rank_logs or [logger]
        """One logger per DP rank's stats-logging scheduler (``DPn TP0``); the engine plays them all."""
        self._next_dp = 0
        self.prefix = PrefixCache(self.max_total_num_tokens, enabled=not resolved.disable_radix_cache)
        self.corpus = NgramCorpus(resolved.speculative_ngram_capacity) if speed.algorithm == "NGRAM" else None
        self.ratio = kvpool.TokenRatio(float(resolved.schedule_conservativeness))
        self.decode_reserve = kvpool.decode_reserve(resolved.values, resolved.max_speculative_num_draft_tokens)
        self.simulate_acc_len = _env_float("SGLANG_SIMULATE_ACC_LEN", -1.0) if speed.algorithm != "NONE" else -1.0
        """SGLang's benchmark knob: every verify accepts this many tokens (sampled per batch), whatever drafted."""
        self.simulate_acc_method = os.environ.get("SGLANG_SIMULATE_ACC_METHOD", "match-expected")
        self.retracted_total = 0
        self.adaptive = (AdaptiveSteps(int(resolved.speculative_num_steps),
                                       load_adaptive_config(resolved.speculative_adaptive_config),
                                       cuda_graph_bs, logger.info)
                         if resolved.speculative_adaptive else None)
        self.eos_id = int(profile["model"]["eos_token_id"])
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.rng = random.Random(resolved.random_seed)
        self._wake = asyncio.Event()
        self.idle = asyncio.Event()
        """Set while nothing runs or waits (a deferred ``/flush_cache`` waits for it)."""
        self.idle.set()
        self.hung = False  # the scheduler stopped (crash pending, or hang)
        self.server_frozen = False  # a hang with scope "server": HTTP stops answering too
        self.serving = False  # set once the server is ready: warm-up does not count towards after_requests
        self.finished_requests = 0
        self.decode_steps = 0
        self.record_step_time = os.environ.get("SGLANG_RECORD_STEP_TIME", "").lower() in ("1", "true")
        self.step_time_dict: dict[str, list[float]] = {}
        self.last_gen_throughput = 0.0
        self.last_receive = 0.0  # time.monotonic() of the last output (health checks wait for it)
        self._reset_interval(time.monotonic())
        self.reset_spec_totals()
        self._cadence: float | None = None
        self._idle_since: float | None = time.monotonic()
        """When the scheduler last went idle (None while it works): an idle scheduler starts a request's
        prefill the moment it arrives, not when this task gets round to it."""
        self._last_prefill_log = time.monotonic()
        self._task: asyncio.Task[None] | None = None

    # -- public API -------------------------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def submit(self, req: Request) -> None:
        """Queue a request (its ``event`` is set whenever it has new output), after the scheduler's own limits:
        ``max_new_tokens`` is clipped silently to what the request and the KV pool leave
        (``init_req_max_new_tokens``), and an input of ``max_req_input_len`` tokens or more is aborted with
        ``finish_reason {"type": "abort", ...}`` (``validate_input_length``), or cut with
        ``--allow-auto-truncate``."""
        n_input = len(req.input_ids)
        page = max(1, int(self.args.page_size or 1))
        paged_input = -(-n_input // page) * page
        req.max_new_tokens = max(0, min(req.max_new_tokens, self.max_req_len - n_input - 1,
                                        self.max_total_num_tokens - paged_input - page - 1))
        if n_input >= self.max_req_input_len:
            if self.args.allow_auto_truncate:
                self.log.warning("Request length is longer than the KV cache pool size or the max context length. "
                                 f"Truncated. len(req.origin_input_ids)={n_input}, "
                                 f"max_req_input_len={self.max_req_input_len}.")
                req.input_ids = req.input_ids[:self.max_req_input_len]
            else:
                message = (f"Input length ({n_input} tokens) exceeds the maximum allowed length "
                           f"({self.max_req_input_len} tokens). Use a shorter input or enable --allow-auto-truncate.")
                self.log.error(f"{message}, self.rid={req.rid!r}")
                req.input_ids = [0]  # set_finish_with_abort: one token, to skip the long prefill
                self._finish(req, {"type": "abort", "message": message, "status_code": 400,
                                   "err_type": "BadRequestError"})
                return
        req.cached_tokens = self.prefix.match(req.input_ids)
        if len(self.rank_logs) > 1:  # the DP controller's round robin
            req.dp_rank, self._next_dp = self._next_dp, (self._next_dp + 1) % len(self.rank_logs)
        req._pieces = tokenizer.output_pieces(req.kind, req.seed)
        req._rng = random.Random(f"{self.args.random_seed}:{req.rid}")
        req._context = self.speed.context_factor(len(req.input_ids))  # acceptance left at this prompt's length
        req._alpha = self.speed.alpha(req.kind, req.temperature) * req._context
        req._length = self.speed.deterministic_length(len(req.input_ids))
        req.histogram = [0] * (self.speed.depth + 1)
        self.waiting.append(req)
        self.idle.clear()
        self._wake.set()

    def abort(self, rid: str | None = None, message: str = "Abort in waiting queue") -> int:
        """Abort one request (``rid``) or all (None); return how many were aborted."""
        count = 0
        for queue in (self.waiting, self.running):
            for req in list(queue):
                if rid is None or req.rid == rid:
                    queue.remove(req)
                    self._finish(req, {"type": "abort", "message": message, "status_code": None, "err_type": None})
                    count += 1
        return count

    @property
    def in_flight(self) -> int:
        return len(self.waiting) + len(self.running)

    def reset_spec_totals(self) -> None:
        """Reset the server-wide accept-length totals (``/flush_cache`` does this)."""
        self.spec_total_accept_tokens = 0
        self.spec_total_forward_ct = 0

    def flush_cache(self) -> bool:
        """``Scheduler.flush_cache``: when idle, clear the radix cache, NGRAM's corpus and the accept totals and
        log on every DP leader; while requests run or wait, refuse with SGLang's warning."""
        if self.in_flight:
            self.log.warning(flush_refused_log(len(self.waiting), len(self.running)))
            return False
        self.prefix.reset()
        if self.corpus is not None:
            self.corpus.reset()  # draft_worker.clear_cache_pool()
        self.reset_spec_totals()  # reset_metrics: the interval's counts too
        for iv in self._iv:
            iv.accept_tokens = iv.correct = iv.forwards = 0
        self.metrics.reset_spec()
        for log in self.rank_logs:
            log.info(FLUSHED_LOG)
        return True

    @property
    def avg_spec_accept_length(self) -> float:
        return self.spec_total_accept_tokens / self.spec_total_forward_ct if self.spec_total_forward_ct else 0.0

    @property
    def has_spec_accept_length(self) -> bool:
        """``_average_accept_length`` is None (the key absent) until a decode line added forwards."""
        return self.spec_total_forward_ct > 0

    def used_tokens(self, rank: int | None = None) -> int:
        """KV tokens the running requests hold (of one DP rank's, or all)."""
        return sum(r.context_tokens for r in self.running if rank is None or r.dp_rank == rank)

    # -- the loop ---------------------------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            if not self.waiting and not self.running:
                self._cadence = None
                self._idle_since = time.monotonic()
                self.idle.set()
                self._wake.clear()
                await self._wake.wait()
                continue
            if self.hung:
                await asyncio.Event().wait()
            if self._failure_due():
                continue
            if self.waiting and len(self.running) < self.max_running and await self._prefill():
                continue
            if self.running:
                await self._decode_step()
            else:
                self._wake.clear()
                await self._wake.wait()

    def _failure_due(self) -> bool:
        """Trigger a configured run-time crash or hang when its moment has come (before a forward)."""
        has_real_work = any(not r.internal for r in (*self.waiting, *self.running))
        for rule, action in ((self.crash_rule, self._trigger_crash), (self.hang_rule, self._trigger_hang)):
            if not rule or not has_real_work:
                continue
            when = rule.get("when", "after_requests")
            due = (
                (when == "warmup" and self.running)
                or (when == "after_requests" and self.serving
                    and self.finished_requests >= int(rule.get("after_requests", 0)))
                or (when == "after_steps" and self.decode_steps >= int(rule.get("after_steps", 0)))
            )
            if due:
                action(rule)
                return True
        return False

    def _trigger_crash(self, rule: Mapping[str, Any]) -> None:
        self.hung = True
        self.on_crash(rule.get("signature", "cuda_illegal_instruction"))

    def _trigger_hang(self, rule: Mapping[str, Any]) -> None:
        self.hung = True
        self.server_frozen = rule.get("scope", "scheduler") == "server"
        loop = asyncio.get_running_loop()
        loop.call_later(float(self.args.watchdog_timeout), self.on_watchdog)

    async def _sleep_until(self, deadline: float) -> None:
        """Sleep until ``deadline`` to within ~0.1 ms. asyncio's timers wake up to 1 ms late (epoll's timeout
        is rounded up to whole milliseconds), so the last stretch is slept with a blocking ``time.sleep``
        (nanosleep: no CPU spent; the loop is held for at most :data:`PRECISE_SLEEP_S`)."""
        delay = deadline - time.monotonic() - PRECISE_SLEEP_S
        await asyncio.sleep(max(0.0, delay))  # always yields, so the streams are written between steps
        rest = deadline - time.monotonic()
        if rest > 0:
            time.sleep(rest)  # noqa: ASYNC251 - deliberate: at most PRECISE_SLEEP_S, for timer precision

    async def _prefill(self) -> bool:
        """Prefill the next admitted batch; False when the KV budget admits none (the running ones decode)."""
        batch, new_tokens, cached = self._admit()
        if not batch:
            return False
        chunk = max(1, self.args.chunked_prefill_size or new_tokens)
        start = time.monotonic()
        idle_since, self._idle_since = self._idle_since, None
        if self.speed.deterministic:
            # The promise is "the first token ttft_ms after the request arrived": an idle scheduler's prefill
            # starts at the arrival, so the HTTP handling, tokenization and this task's wake-up are inside the
            # ttft_ms, not added to it (they were ~0.6 ms on 2 cores, plus asyncio's timer lateness). The
            # ``Prefill batch`` line is printed when the batch is scheduled, before its forward, as SGLang does.
            begin = start
            if idle_since is not None:
                begin = min(start, max(idle_since, max(r.created_mono for r in batch)))
            self._log_prefill(batch, new_tokens, cached)
            await self._sleep_until(begin + self.speed.prefill_seconds(new_tokens))
        else:
            done = 0
            while done < new_tokens:
                part = min(chunk, new_tokens - done)
                await self._sleep_until(time.monotonic() + self.speed.prefill_seconds(part))
                self._log_prefill(batch, part, cached if done == 0 else 0)
                done += part
        now = time.monotonic()
        for req in batch:
            self._after_prefill(req, now)
        self._cadence = now
        self.last_receive = now
        return True

    def _admit(self) -> tuple[list[Request], int, int]:
        """The next prefill batch: waiting requests in order, within the running cap, ``--max-prefill-tokens``
        and the KV pool's budget (``PrefillAdder``); a retracted request prefills its input and output again.
        Returns the batch, its new (uncached) tokens and its cached ones."""
        batch: list[Request] = []
        new_tokens = cached = 0
        used, admitted = self._held(self.running), 0.0
        while self.waiting and len(self.running) + len(batch) < self.max_running:
            req = self.waiting[0]
            extend = req.context_tokens if req.retracted else max(1, len(req.input_ids) - req.cached_tokens)
            if batch and new_tokens + extend > self.args.max_prefill_tokens:
                break
            if (self.running or batch) and not kvpool.admits(self.max_total_num_tokens, used, self.running,
                                                             self.ratio.current, extend, req, admitted):
                break
            batch.append(self.waiting.popleft())
            admitted += kvpool.need(req, extend)
            new_tokens += extend
            cached += 0 if req.retracted else req.cached_tokens
        return batch, new_tokens, cached

    def _after_prefill(self, req: Request, now: float) -> None:
        if req.finished:  # aborted while prefilling
            return
        if req.retracted:  # the prefill of a retracted request computes its next token
            req.retracted = False
            self._commit(req, 1)
            if not req.finished:
                self.running.append(req)
            return
        self.prefix.insert(req.input_ids)  # cache_unfinished_req: the prompt is shared from now on
        if self.empty_output and not req.internal:
            self._finish(req, {"type": "stop", "matched": self.eos_id})
            return
        if req.max_new_tokens <= 0:
            self._finish(req, {"type": "length", "length": 0})
            return
        self._commit(req, 1)
        req.first_token_mono = now
        if not req.finished:
            self.running.append(req)

    def _retract_if_full(self) -> None:
        """``update_running_batch``: retract requests when the next decode step does not fit in the KV pool,
        else let the new-token ratio decay."""
        if self._fits(self.running):
            self.ratio.decay_step()
            return
        order = kvpool.retraction_order(self.running)
        keep = [self.running[i] for i in order]
        retracted: list[Request] = []
        while len(keep) > 1 and (not retracted or not self._fits(keep)):
            retracted.append(keep.pop())
        old_ratio, self.ratio.current = self.ratio.current, kvpool.TokenRatio.after_retract(keep)
        self.rank_logs[0].warning(kvpool.retract_message(len(retracted), self._held(retracted), old_ratio,
                                                         self.ratio.current))
        self.running = keep
        for req in retracted:
            req.retractions += 1
            req.retracted = True
            self.waiting.append(req)
        self.retracted_total += len(retracted)
        self.metrics.update_gauges(num_retracted_reqs=len(retracted))
        self.metrics.counters["num_retracted_requests"] += len(retracted)

    def _held(self, reqs: Iterable[Request]) -> int:
        """KV slots ``reqs`` hold: their tokens plus, with speculation, the per-request decode reserve."""
        return sum(r.context_tokens + self.decode_reserve for r in reqs)

    def _fits(self, reqs: list[Request]) -> bool:
        """``check_decode_mem``: the next decode step of ``reqs`` fits in the pool (one more token each without
        speculation; the speculative reserve already holds the next step)."""
        step = 0 if self.decode_reserve else len(reqs)
        return self._held(reqs) + step <= self.max_total_num_tokens

    def _simulated_acc_len(self, max_len: int) -> int:
        """``sample_simulated_acc_len``: one length for the whole batch in [1, max_len]."""
        length = self.simulate_acc_len
        if self.simulate_acc_method == "multinomial":
            return int(round(min(max(self.rng.gauss(length, 1.0), 1.0), max_len)))
        length = max(1.0, min(float(max_len), length))
        lower = int(length // 1)
        if lower >= max_len:
            return lower
        return lower + 1 if self.rng.random() < length - lower else lower

    def _warm_drafts(self, req: Request, depth: int) -> int:
        """NGRAM: how many of this step's draft positions the corpus holds from an earlier run of the stream."""
        if self.corpus is None:
            return 0
        return max(0, min(depth, self.corpus.known(req.stream_key, req.rid) - req.completion_tokens))

    def _draw(self, req: Request, depth: int) -> int:
        """Tokens one verify step commits for ``req`` (bonus included), ``depth`` drafts at most."""
        warm = self._warm_drafts(req, depth)
        det = self.speed.deterministic
        if det:
            if warm:
                return min(det.committed(req.verify_ct, det.warm_accept_length), warm + 1)
            return min(det.committed(req.verify_ct, req._length), depth + 1)
        return 1 + self.speed.draw_accepted(req._rng or self.rng, req._alpha, depth, warm)

    async def _decode_step(self) -> None:
        self._retract_if_full()
        batch = list(self.running)
        bs = len(batch)
        steps = self.adaptive.activate_for_batch(bs) if self.adaptive else None
        depth = self.speed.depth if steps is None else steps
        proposed = self.speed.verify_width - 1 if steps is None else steps  # accept rate: per draft token verified
        duration = self.speed.step_seconds(bs, sum(r.context_tokens for r in batch), self.rng, steps)
        now = time.monotonic()
        base = self._cadence if self._cadence is not None and now - self._cadence < duration else now
        deadline = base + duration
        await self._sleep_until(deadline)
        self._cadence = deadline
        if self.record_step_time:
            self.step_time_dict.setdefault(str(bs), []).append(duration)
        correct: list[int] = []
        forced = self._simulated_acc_len(depth + 1) if self.simulate_acc_len > 0 else None
        for req in batch:
            if req.finished:
                continue
            got = self._commit(req, forced if forced is not None else self._draw(req, depth))
            if self.corpus is not None:
                self.corpus.put(req.stream_key, req.rid, req.completion_tokens)  # _update_ngram_corpus
            accepted = max(0, got - 1)
            correct.append(accepted)
            req.verify_ct += 1
            req.correct_drafts += accepted
            if req.histogram:
                req.histogram[min(accepted, len(req.histogram) - 1)] += 1
            self._iv[req.dp_rank].add(got, accepted, proposed)
        if self.adaptive:
            self.adaptive.on_verify_complete(correct, bs)
        self.running = [r for r in self.running if not r.finished]
        self.decode_steps += 1
        self.metrics.spec_verify_calls += 1 if self.speed.algorithm != "NONE" else 0
        self.last_receive = time.monotonic()
        if self.decode_steps % max(1, self.args.decode_log_interval) == 0:
            self._log_decode(bs)

    # -- token bookkeeping -------------------------------------------------------------------------------
    def _commit(self, req: Request, count: int) -> int:
        """Append up to ``count`` tokens; finish on length, EOS or context; return tokens appended."""
        limit = min(req.max_new_tokens, self.context_len - len(req.input_ids))
        appended = 0
        for _ in range(count):
            if req.natural_len is not None and req.completion_tokens + 1 >= req.natural_len:
                req.output_ids.append(self.eos_id)
                appended += 1
                self._finish(req, {"type": "stop", "matched": self.eos_id})
                break
            piece = next(req._pieces) if req._pieces else ""
            req.output_ids.append(tokenizer.output_token_id(piece))
            req.output_parts.append(piece)
            appended += 1
            if req.completion_tokens >= limit:
                self._finish(req, {"type": "length", "length": req.completion_tokens})
                break
        req.event.set()
        return appended

    def _finish(self, req: Request, reason: FinishReason) -> None:
        req.finish_reason = reason
        req.finished_mono = time.monotonic()
        req.event.set()
        if reason["type"] != "abort":
            self.prefix.insert(req.input_ids + req.output_ids[:-1])  # cache_finished_req
            if self.corpus is not None:
                self.corpus.settle(req.stream_key, req.rid)
        if req.internal:
            return
        if self.serving:
            self.finished_requests += 1
        self.metrics.observe_finished(req, aborted=reason["type"] == "abort")

    # -- log lines ---------------------------------------------------------------------------------------
    def _reset_interval(self, now: float) -> None:
        self._iv_start = now
        self._iv = [DecodeInterval() for _ in self.rank_logs]

    def _log_prefill(self, batch: list[Request], new_tokens: int, cached: int) -> None:
        """One ``Prefill batch`` line per DP rank with requests in the batch (its own counts)."""
        now = time.monotonic()
        gap = max(now - self._last_prefill_log, 1e-6)
        self._last_prefill_log = now
        graph = self.args.cuda_graph_backend_prefill != "disabled" and new_tokens <= (
            self.args.cuda_graph_max_bs_prefill or 0)
        ranks = sorted({r.dp_rank for r in batch}) or [0]
        for rank in ranks:
            mine = [r for r in batch if r.dp_rank == rank]
            share = new_tokens if len(ranks) == 1 else sum(max(1, len(r.input_ids) - r.cached_tokens) for r in mine)
            rank_cached = cached if len(ranks) == 1 else sum(r.cached_tokens for r in mine)
            usage = (self.used_tokens(rank) + share) / self.max_total_num_tokens
            self.rank_logs[rank].info(logs.format_prefill(
                self.style, len(mine), share, rank_cached, usage, self._count(self.running, rank),
                self._count(self.waiting, rank), 0, graph, share / gap, self.profile["logs"]["pool"]))

    def _count(self, reqs: Iterable[Request], rank: int) -> int:
        return sum(1 for r in reqs if r.dp_rank == rank)

    def _log_decode(self, bs: int) -> None:
        """Every ``--decode-log-interval`` decode steps: the ``Decode batch`` line of every DP rank, and the
        server-wide accept totals behind ``avg_spec_accept_length`` (SGLang adds the interval's counts here, in
        ``report_decode_stats``, so the average is absent until the first decode line)."""
        now = time.monotonic()
        elapsed = max(now - self._iv_start, 1e-6)
        spec = self.speed.algorithm != "NONE"
        total = DecodeInterval()
        for rank, iv in enumerate(self._iv):
            total.merge(iv)
            rank_bs = self._count(self.running, rank) if len(self._iv) > 1 else bs
            if len(self._iv) > 1 and not iv.forwards and not rank_bs:
                continue  # an idle DP rank runs no decode batch, so it logs none
            graph = self.args.cuda_graph_backend_decode != "disabled" and rank_bs <= (
                self.args.decode_graph_max_bs)
            accept_len, accept_rate = iv.accept(spec)
            used = self.used_tokens(rank if len(self._iv) > 1 else None)
            self.rank_logs[rank].info(logs.format_decode(
                self.style, self._count(self.running, rank), used, used / self.max_total_num_tokens, accept_len,
                accept_rate, graph, iv.tokens / elapsed, self._count(self.waiting, rank), self.profile["logs"]["pool"]))
        self.spec_total_accept_tokens += total.accept_tokens
        self.spec_total_forward_ct += total.forwards
        gen = total.tokens / elapsed
        accept_len, accept_rate = total.accept(spec)
        self.last_gen_throughput = gen
        self.metrics.update_gauges(gen_throughput=gen, num_running_reqs=len(self.running),
                                   num_queue_reqs=len(self.waiting),
                                   token_usage=self.used_tokens() / self.max_total_num_tokens,
                                   spec_accept_length=accept_len or 0.0, spec_accept_rate=accept_rate or 0.0)
        self._reset_interval(now)


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default
