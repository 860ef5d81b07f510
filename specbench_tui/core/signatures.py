"""Crash signatures: named regular expressions over server log lines, and the level of every line.

A signature names *why* a server died (``cuda_illegal_instruction``, ``cuda_oom``, ...). Several can match
around one crash: SGLang prints ``Scheduler hit an exception: Traceback ...`` before the
``RuntimeError: CUDA error: an illegal instruction was encountered`` line that names the cause. Each
signature therefore has a *specificity*; when lines close together match several signatures, the most
specific one names the crash, so ``python_traceback`` only wins when nothing better is in sight.

User signatures from ``[engine.crash_signatures]`` are the most specific of all: a user writes one because
the built-ins are too vague for their failure.

Every pattern, built-in or user, is compiled with RE2 (``google-re2``), which matches in time linear in the
line: a pattern such as ``(a+)+$`` cannot backtrack and stall the event loop every log line goes through. A
pattern RE2 cannot take (look-around, back-references) is refused when the sweep is validated.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import AnyStr, Protocol, overload

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would print its parse errors to stderr; they are reported as sweep issues
_OPTIONS.max_mem = 8 << 20


class Re2Match(Protocol):
    """What is read of an RE2 match (``re2`` ships no types)."""

    def start(self) -> int: ...
    def end(self) -> int: ...
    def span(self) -> tuple[int, int]: ...


class Re2Pattern(Protocol[AnyStr]):
    """What is used of an RE2-compiled pattern over ``str`` or ``bytes`` (``re2`` ships no types)."""

    @property
    def pattern(self) -> AnyStr: ...
    def search(self, text: AnyStr, /) -> Re2Match | None: ...
    def finditer(self, text: AnyStr, /) -> Iterator[Re2Match]: ...


@overload
def compile_pattern(pattern: str) -> Re2Pattern[str]: ...
@overload
def compile_pattern(pattern: bytes) -> Re2Pattern[bytes]: ...
def compile_pattern(pattern: str | bytes) -> Re2Pattern[str] | Re2Pattern[bytes]:
    """``pattern`` compiled with RE2; raises ``ValueError`` saying why when RE2 cannot take it."""
    try:
        compiled: Re2Pattern[str] | Re2Pattern[bytes] = re2.compile(pattern, _OPTIONS)
        return compiled
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", errors="replace")
        raise ValueError(str(reason)) from None


def pattern_problem(pattern: str) -> str | None:
    """Why a crash-signature pattern cannot be used, or None."""
    try:
        compile_pattern(pattern)
    except ValueError as exc:
        return f"invalid regular expression for RE2: {exc}"
    return None

LEVEL_FATAL = "fatal"
LEVEL_ERROR = "error"
LEVEL_WARNING = "warning"
LEVEL_INFO = "info"


@dataclass(frozen=True)
class Signature:
    """One named crash pattern."""

    name: str
    pattern: Re2Pattern[str]
    """RE2-compiled: ``search`` runs in time linear in the line."""
    specificity: int
    """Higher names the crash when several signatures match around it."""


@dataclass(frozen=True)
class SignatureMatch:
    """A line that matched a signature."""

    signature: Signature
    line: str

    @property
    def name(self) -> str:
        return self.signature.name


def signature(name: str, pattern: str, specificity: int) -> Signature:
    """A built-in signature (an engine module's); the pattern is compiled with RE2."""
    return Signature(name, compile_pattern(pattern), specificity)


CUDA_SIGNATURES: tuple[Signature, ...] = (
    signature("cuda_illegal_instruction", r"CUDA error: an illegal instruction was encountered", 100),
    signature("cuda_illegal_memory_access", r"CUDA error: an illegal memory access was encountered", 100),
    signature("cuda_graph_capture_failed", r"Capture cuda graph failed|Capture prefill CUDA graph failed", 95),
    signature("cuda_oom", r"OutOfMemoryError|CUDA out of memory|Not enough memory\. Please try to increase "
                          r"--mem-fraction-static", 90),
    signature("cuda_error", r"CUDA error: ", 80),
)
"""Patterns any CUDA-backed engine can print (a llama.cpp CUDA build prints ``CUDA error: ...`` too); each engine
module lists the signatures it uses (``EngineProfile.crash_signatures``)."""

NCCL_SIGNATURE = signature("nccl_error", r"NCCL error|ncclInternalError|ncclSystemError|ncclUnhandledCudaError|"
                                         r"ProcessGroupNCCL\.cpp.{0,300}?(?:watchdog thread terminated|Exception)", 85)
"""A collective-communication failure, in any engine that runs NCCL (tensor parallelism)."""

EXIT_SIGNATURES: dict[int, str] = {-11: "segfault", -6: "abort", -7: "bus_error", -4: "illegal_instruction",
                                   139: "segfault", 134: "abort", 135: "bus_error", 132: "illegal_instruction"}
"""Exit codes that mean the process crashed by itself (negative: killed by that signal; 128+n from a shell)."""

USER_SPECIFICITY = 200

MATCH_WINDOW = 16 * 1024
"""How much of a line the signatures are matched against (each built-in runs in linear time anyway)."""


class SignatureSet:
    """The signatures of one sweep: its engine's (``builtins``) plus the sweep's own, matched line by line."""

    def __init__(self, extra: Iterable[tuple[str, str]] = (), builtins: Iterable[Signature] = ()):
        user = [Signature(name, compile_pattern(pattern), USER_SPECIFICITY) for name, pattern in extra]
        self.signatures: tuple[Signature, ...] = tuple(
            sorted([*user, *builtins], key=lambda s: -s.specificity))
        # One pass over a whole batch of lines finds out whether any line can match at all (the common answer
        # is no); ^ and $ then match at each line's start and end. A pattern anchored to the text itself
        # (\A, \z) cannot be combined and is always matched line by line.
        combinable = [s.pattern.pattern for s in self.signatures if "\\A" not in s.pattern.pattern
                      and "\\z" not in s.pattern.pattern]
        self._per_line_only = len(combinable) != len(self.signatures)
        self._combinable = tuple(combinable)
        self._block = (compile_pattern(("(?m)" + "|".join(f"(?:{p})" for p in combinable)).encode())
                       if combinable else None)
        self._scanners: dict[tuple[str, ...], Re2Pattern[bytes] | None] = {}

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.signatures)

    def candidates(self, block: bytes) -> set[int] | None:
        """The indices of the lines of ``block`` (UTF-8 lines joined by ``\\n``) that may match a signature,
        found in one linear pass instead of one per line and signature; None when every line must be tried."""
        if self._per_line_only:
            return None
        return candidate_lines(self._block, block) if self._block is not None else set()

    def scanner(self, literals: Iterable[str] = ()) -> Re2Pattern[bytes] | None:
        """One RE2 pattern (bytes, ``(?m)``) that matches wherever a signature or one of ``literals`` (a log
        watch's stats hints) may match: the watch's single linear pass over a batch (:func:`lines_touched`
        gives the lines). None when a signature cannot be combined (every line must then be tried). A line
        the pass does not touch matches no signature and holds no literal; a line it touches is only a
        candidate (one match may hide another that starts inside it): :meth:`may_match` and ``in`` decide."""
        if self._per_line_only:
            return None
        key = tuple(literals)
        if key not in self._scanners:
            parts = [*self._combinable, *(re2.escape(literal) for literal in key if literal)]
            self._scanners[key] = compile_pattern(("(?m)" + "|".join(f"(?:{p})" for p in parts)).encode()) \
                if parts else None
        return self._scanners[key]

    def may_match(self, line: bytes) -> bool:
        """Whether ``line`` (one line, UTF-8) may match a signature (one RE2 call; :meth:`match` decides)."""
        if self._per_line_only:
            return True
        return self._block is not None and self._block.search(line) is not None

    def match(self, line: str) -> SignatureMatch | None:
        """The most specific signature ``line`` matches, or None. Only the first :data:`MATCH_WINDOW`
        characters are searched: every line is matched on the engine's event loop, and a crash line names its
        cause near its start, while a 1 MB line (a dumped tensor, a progress bar) must not hold up the loop,
        whatever a user's pattern does with it."""
        head = line[:MATCH_WINDOW]
        for signature in self.signatures:
            if signature.pattern.search(head):
                return SignatureMatch(signature, line)
        return None


def most_specific(matches: Iterable[SignatureMatch]) -> SignatureMatch | None:
    """The match that names the crash: highest specificity, the earliest one among equals."""
    best: SignatureMatch | None = None
    for match in matches:
        if best is None or match.signature.specificity > best.signature.specificity:
            best = match
    return best


_EXCEPTION_LINE = re.compile(r"^(?:\[[^\]]*\]\s*)?(?:[\w.]+:\s+)?((?:[A-Za-z_][\w.]*)?(?:Error|Exception|Interrupt): \S.*)$")
"""A traceback's closing line (``ValueError: Unknown speculative algorithm name: DDTRE``), bare or behind a log
prefix; the exception's name and message are the group."""

ANNOUNCING_SIGNATURES = frozenset({"python_traceback", "scheduler_exception", "subprocess_crashed",
                                   "sigquit_from_child", "scheduler_died_at_init", "initialization_failed"})
"""Signatures that announce a crash without saying why: their cause is the traceback's exception line."""


def crash_cause(signature_name: str, line: str, excerpt: Iterable[str] = ()) -> str:
    """The one cause every view shows for a crash: the signature's own line, or, for a signature that only
    announces the crash (``Traceback (most recent call last):``), the last ``Error:`` / ``Exception:`` line of
    the excerpt (the traceback's closing line), falling back to the signature's line when there is none."""
    own = line.strip()
    if signature_name not in ANNOUNCING_SIGNATURES:
        return own
    for text in reversed(list(excerpt)):
        found = _EXCEPTION_LINE.match(text.strip())
        if found:
            return found.group(1).strip()
    return own


_ERROR = re.compile(r"\b(?:ERROR|CRITICAL)\b|(?:Error|Exception)\b|\berror:")
_WARNING = re.compile(r"\bWARN(?:ING)?\b|Warning\b|\bwarning\b|deprecated")


_LEVEL_WORDS = compile_pattern(f"(?:{_ERROR.pattern})|(?:{_WARNING.pattern})".encode())
"""Both word lists in one RE2 pattern, for a whole batch (RE2's ASCII \\b finds a superset of ``re``'s)."""


def candidate_lines(pattern: Re2Pattern[bytes], block: bytes) -> set[int]:
    """Indices of the lines a match of (bytes) ``pattern`` in ``block`` touches: every line from the match's
    start to its end, since a pattern may cross a line break in the joined text. Linear in ``block``."""
    found: set[int] = set()
    line, position = 0, 0
    for match in pattern.finditer(block):
        start, end = match.start(), max(match.start(), match.end() - 1)
        line += block.count(b"\n", position, start)
        last = line + block.count(b"\n", start, end)
        found.update(range(line, last + 1))
        line, position = last, end
    return found


def lines_touched(pattern: Re2Pattern[bytes], block: bytes) -> list[tuple[int, bytes]]:
    """``(index, the line)`` of each line of ``block`` (lines joined by ``\\n``) that a match of (bytes)
    ``pattern`` touches, in order, each once; as :func:`candidate_lines`, every line from a match's start to its
    end. Linear in ``block``; only the lines touched are cut out (the batch is never split)."""
    found: list[tuple[int, bytes]] = []
    line, line_start = 0, 0
    for match in pattern.finditer(block):
        start, end = match.span()
        end = max(start, end - 1)
        if start > line_start and (crossed := block.count(b"\n", line_start, start)):
            line += crossed
            line_start = block.rfind(b"\n", line_start, start) + 1
        while True:
            stop = block.find(b"\n", line_start)
            stop = len(block) if stop < 0 else stop
            if not found or found[-1][0] != line:
                found.append((line, block[line_start:stop]))
            if end <= stop:
                break
            line, line_start = line + 1, stop + 1
    return found


def level_candidates(block: bytes) -> set[int]:
    """The lines of ``block`` that may be ``error`` or ``warning`` (all others are ``info``)."""
    return candidate_lines(_LEVEL_WORDS, block)


_LEVEL_KEYS = ("ERROR", "CRITICAL", "Error", "Exception", "error:", "WARN", "Warning", "warning", "deprecated")
"""A literal every line :func:`line_level` calls ``error`` or ``warning`` contains (each alternative of its two
word lists holds one): a batch is searched for these in C, and only the lines holding one are classified."""


def lines_holding(block: str, needles: Iterable[str]) -> set[int]:
    """Indices of the lines of ``block`` (lines joined by ``\\n``) that contain one of ``needles``: one
    ``str.find`` pass per needle (C), Python work only per line found."""
    found: set[int] = set()
    for needle in needles:
        position = block.find(needle)
        line, counted = 0, 0
        while position >= 0:
            line += block.count("\n", counted, position)
            found.add(line)
            end = block.find("\n", position)
            if end < 0:
                break
            counted = end
            position = block.find(needle, end)
    return found


def last_lines(text: str, keep: int) -> list[str]:
    """The last ``keep`` lines of ``text`` (lines joined by ``\\n``): only they are copied (``rsplit`` would copy
    all the others as its first piece)."""
    start = len(text)
    for _ in range(keep):
        start = text.rfind("\n", 0, start)
        if start < 0:
            return text.split("\n")
    return text[start + 1:].split("\n")


def block_levels(block: str, lines: list[str]) -> dict[int, str]:
    """``error`` or ``warning`` for each of ``lines`` (``block``: them joined by ``\\n``) that :func:`line_level`
    gives one of without signatures, by index; the other lines are ``info``. Only the lines holding a word of its
    lists are classified, each by ``line_level`` itself."""
    levels: dict[int, str] = {}
    for index in lines_holding(block, _LEVEL_KEYS):
        level = line_level(lines[index])
        if level != LEVEL_INFO:
            levels[index] = level
    return levels


def line_level(line: str, signatures: SignatureSet | None = None) -> str:
    """``fatal`` for a crash signature, else ``error``, ``warning`` or ``info`` from the line's words."""
    if signatures is not None and signatures.match(line) is not None:
        return LEVEL_FATAL
    if _ERROR.search(line):
        return LEVEL_ERROR
    if _WARNING.search(line):
        return LEVEL_WARNING
    return LEVEL_INFO
