"""The server-wide caches that make a repeat faster than a first sight, as in SGLang 0.5.23.

- :class:`PrefixCache`, the radix cache (``mem_cache/radix_cache.py``): a finished request's tokens (input
  and output) stay cached; a later request whose input starts with them prefills only the rest
  (``#cached-token`` in ``Prefill batch``, ``meta_info.cached_tokens``), at least one token always computed.
  ``--disable-radix-cache`` turns it off. A retracted request's tokens are not inserted (SGLang frees them at
  once).
- :class:`NgramCorpus`, NGRAM's corpus (``speculative/ngram_worker.py``, ``_update_ngram_corpus``): every
  decode step puts the request's latest tokens in one server-wide corpus (capacity
  ``--speculative-ngram-capacity``, 10 M tokens), and drafts are looked up in it. The simulator keys an
  output stream by what determines it (prompt kind and seed: same prompt, same sampling seed, same
  output); a request whose stream the corpus already holds up to position ``n`` drafts positions below ``n``
  from memory (acceptance ``acceptance.ngram_warm_alpha``, near-perfect), beyond it as on a first sight.

``/flush_cache`` clears both (``Scheduler.flush_cache``: ``tree_cache.reset()`` and the draft worker's
``clear_cache_pool()``, which is ``ngram_corpus.reset()``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence

FLUSHED_LOG = "Cache flushed successfully!"
"""``Scheduler.flush_cache``'s line, logged by every DP leader."""


def flush_refused_log(queued: int, running: int) -> str:
    """``Scheduler.flush_cache``'s warning while requests wait or run."""
    return f"Cache not flushed because there are pending requests. #queue-req: {queued}, #running-req: {running}"


class PrefixCache:
    """Token sequences seen before, newest last; at most ``max_tokens`` tokens (the KV pool's size: SGLang evicts
    the radix tree into it) and ``max_entries`` sequences are kept, the oldest evicted first (the entry bound
    keeps a lookup cheap; SGLang's tree has none)."""

    def __init__(self, max_tokens: int, enabled: bool = True, max_entries: int = 256) -> None:
        self.max_tokens = max(0, max_tokens)
        self.max_entries = max(1, max_entries)
        self.enabled = enabled
        self._entries: OrderedDict[tuple[int, ...], None] = OrderedDict()
        self._tokens = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def tokens(self) -> int:
        return self._tokens

    def match(self, ids: Sequence[int]) -> int:
        """Tokens of ``ids`` already cached (``match_prefix``), leaving at least one to compute."""
        if not self.enabled or not self._entries:
            return 0
        best = 0
        for seen in self._entries:
            n = 0
            for a, b in zip(seen, ids):
                if a != b:
                    break
                n += 1
            best = max(best, n)
        return min(best, max(0, len(ids) - 1))

    def insert(self, ids: Sequence[int]) -> None:
        """Cache ``ids`` (``cache_finished_req``); a sequence already covered by a longer one adds nothing."""
        if not self.enabled or len(ids) < 2:
            return
        key = tuple(ids)
        if key in self._entries:
            self._entries.move_to_end(key)
            return
        self._entries[key] = None
        self._tokens += len(key)
        while (self._tokens > self.max_tokens or len(self._entries) > self.max_entries) and len(self._entries) > 1:
            old, _ = self._entries.popitem(last=False)
            self._tokens -= len(old)

    def reset(self) -> None:
        self._entries.clear()
        self._tokens = 0


class NgramCorpus:
    """Output streams decoded before, and how far: a stream's key is whatever fixes its tokens."""

    def __init__(self, capacity_tokens: int) -> None:
        self.capacity = max(0, capacity_tokens)
        self._streams: OrderedDict[Hashable, dict[str, int]] = OrderedDict()
        self._tokens = 0

    @property
    def tokens(self) -> int:
        return self._tokens

    def known(self, key: Hashable, rid: str) -> int:
        """How many tokens of stream ``key`` the corpus holds from other requests than ``rid``."""
        runs = self._streams.get(key)
        if not runs:
            return 0
        return max((n for r, n in runs.items() if r != rid), default=0)

    def put(self, key: Hashable, rid: str, length: int) -> None:
        """Request ``rid`` decoded stream ``key`` up to ``length`` tokens (``batch_put``)."""
        runs = self._streams.setdefault(key, {})
        self._streams.move_to_end(key)
        before = max(runs.values(), default=0)
        runs[rid] = max(runs.get(rid, 0), length)
        self._tokens += max(runs.values()) - before
        while self._tokens > self.capacity and len(self._streams) > 1:
            _, old = self._streams.popitem(last=False)
            self._tokens -= max(old.values(), default=0)

    def settle(self, key: Hashable, rid: str) -> None:
        """A finished request's run becomes the stream's anonymous memory (so a repeat of ``rid`` sees it)."""
        runs = self._streams.get(key)
        if runs is None or rid not in runs:
            return
        runs["*"] = max(runs.get("*", 0), runs.pop(rid))

    def reset(self) -> None:
        self._streams.clear()
        self._tokens = 0
