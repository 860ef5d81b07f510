"""Prompt text for the built-in workload kinds: pure and deterministic (same parameters, same prompts).

Every item has a stable name (``fibonacci``, ``arith-2``, ``q81``) because resume keys measurements by
(config, workload, item, repeat). The agentic helpers are here too, because they are pure: the calculator's
safe expression evaluator and the CSV validator the harness runs on the model's behalf.
"""

from __future__ import annotations

import ast
import json
import math
import operator
import random
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from specbench_tui.core.sweep.limits import MAX_ITEMS, MAX_PROMPT_TOKENS, MAX_PROMPTS_FILE_BYTES


@dataclass(frozen=True)
class PromptItem:
    """One prompt of a workload; ``turns`` holds follow-up user turns (Spec-Bench MT-bench has two)."""

    item: str
    text: str
    category: str = ""
    turns: tuple[str, ...] = ()


# ------------------------------------------------------------------------------------------------ code

CODE_DESCRIPTIONS = {
    "fibonacci": "a function fib(n) that returns the n-th Fibonacci number in O(log n) time using fast "
                 "doubling, plus an iterative version and a test comparing them for n < 90",
    "quicksort": "an in-place quicksort with median-of-three pivot selection and insertion sort for small "
                 "partitions, plus tests on random, sorted and duplicate-heavy lists",
    "binary_search": "bisect_left and bisect_right from scratch, plus a function that counts occurrences of "
                     "a value in a sorted list, with edge-case tests",
    "lru_cache": "an LRU cache class with get and put in O(1) using a dict and a doubly linked list, with "
                 "capacity eviction tests",
    "merge_intervals": "a function that merges overlapping intervals and another that inserts a new interval "
                       "into a sorted non-overlapping list, with tests",
    "trie": "a Trie class supporting insert, search, starts_with and delete, plus a function listing all words "
            "with a given prefix in lexicographic order",
}


def code_prompts(items: Sequence[str]) -> list[PromptItem]:
    """One prompt per programming task name."""
    return [PromptItem(name, f"Write Python code for {CODE_DESCRIPTIONS[name]}. Explain the approach briefly, "
                             "then give the complete code.", "code") for name in items]


# ---------------------------------------------------------------------------------------------- arithmetic

_NAMES = ("Ada", "Bruno", "Chen", "Dalia", "Emeka", "Farah", "Goran", "Hana", "Ivo", "Jun")
_GOODS = ("apples", "notebooks", "bolts", "tickets", "tiles", "cables", "jars", "seeds")


def arithmetic_prompts(count: int) -> list[PromptItem]:
    """Multi-step word problems with integer answers."""
    out = []
    for i in range(count):
        rng = random.Random(1000 + i)
        name, goods = rng.choice(_NAMES), rng.choice(_GOODS)
        boxes, per_box, sold, price = rng.randint(3, 19), rng.randint(6, 48), rng.randint(5, 60), rng.randint(2, 15)
        text = (f"{name} buys {boxes} boxes of {goods} with {per_box} {goods} in each box, sells {sold} of them "
                f"at {price} dollars each, and then shares the rest equally among 3 friends, keeping the "
                "remainder. How much money did the sale bring, how many does each friend get, and how many "
                "are left over? Reason step by step, then give the final answers.")
        out.append(PromptItem(f"arith-{i + 1}", text, "math"))
    return out


# ---------------------------------------------------------------------------------------- json extraction

_CITIES = ("Lisbon", "Osaka", "Nairobi", "Toronto", "Tallinn", "Lima", "Perth", "Seville")
_PRODUCTS = ("standing desk", "espresso machine", "road bike", "drone", "monitor arm", "kayak", "3D printer")


def json_extraction_prompts(count: int) -> list[PromptItem]:
    """A paragraph describing an order; the model must return a JSON object with a fixed schema."""
    out = []
    for i in range(count):
        rng = random.Random(2000 + i)
        name, city, product = rng.choice(_NAMES), rng.choice(_CITIES), rng.choice(_PRODUCTS)
        qty, price, day = rng.randint(1, 9), round(rng.uniform(20, 2400), 2), rng.randint(1, 28)
        text = (f"Order note: On March {day}, {name} from {city} ordered {qty} x {product} at ${price} each. "
                "They asked for gift wrapping and delivery before the weekend, and paid by card.\n\n"
                "Extract this order as a JSON object with exactly these keys: customer (string), city (string), "
                "product (string), quantity (integer), unit_price (number), total (number), day_of_month "
                "(integer), gift_wrap (boolean), payment (string). Reply with the JSON only.")
        out.append(PromptItem(f"json-{i + 1}", text, "json"))
    return out


# -------------------------------------------------------------------------------------------------- haiku

_TOPICS = ("autumn rain on a tin roof", "a server room at midnight", "the first snow in a harbour town",
           "a cat watching a kettle", "fog over a rice field", "the last train home", "a lighthouse keeper",
           "cherry blossoms in a parking lot")


def haiku_prompts(count: int) -> list[PromptItem]:
    """Short creative requests: little to draft, so speculation helps least here."""
    return [PromptItem(f"haiku-{i + 1}", f"Write three haiku about {_TOPICS[i % len(_TOPICS)]}, each with a "
                                         "one-line title.", "creative") for i in range(count)]


# ------------------------------------------------------------------------------------------- long context

_SUBJECTS = ("The committee", "The northern warehouse", "Our lead engineer", "The audit team", "The vendor",
             "The night shift", "The marketing group", "The research lab")
_VERBS = ("reviewed", "postponed", "approved", "questioned", "documented", "rebuilt", "measured", "archived")
_OBJECTS = ("the quarterly inventory", "the cooling system upgrade", "the travel budget", "the test harness",
            "the supplier contract", "the backup schedule", "the onboarding guide", "the release checklist")
LONG_CONTEXT_QUESTION = ("\n\nQuestion: using only the report above, list the three facts that mention the "
                         "cooling system, then summarise the report in five bullet points.\nAnswer:")


MAX_LONG_CONTEXT_CHARS = 8 * MAX_PROMPT_TOKENS
"""The longest report built (a token of this text is 4 to 5 characters): a size asked beyond it, from a server
that claims an absurd context, is cut to it rather than filling the machine's memory."""


def filler_sentences(count: int, seed: int = 7) -> list[str]:
    """Deterministic report-like sentences, each numbered so repeats never look identical (at most enough for
    :data:`MAX_LONG_CONTEXT_CHARS`)."""
    count = max(0, min(count, MAX_LONG_CONTEXT_CHARS // 40 + 8))
    rng = random.Random(seed)
    return [f"Fact {i + 1}: {rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} on day "
            f"{rng.randint(1, 365)}." for i in range(count)]


def long_context_text(chars: int, seed: int = 7) -> str:
    """A report of about ``chars`` characters (at most :data:`MAX_LONG_CONTEXT_CHARS`) followed by the question
    (sizing to tokens is the caller's)."""
    chars = max(1, min(chars, MAX_LONG_CONTEXT_CHARS))
    body: list[str] = []
    size = 0
    sentences = filler_sentences(max(1, chars // 40 + 8), seed)
    for sentence in sentences:
        if size >= chars:
            break
        body.append(sentence)
        size += len(sentence) + 1
    text = " ".join(body)[:max(chars, 1)]
    return "Incident report archive.\n" + text + LONG_CONTEXT_QUESTION


# ---------------------------------------------------------------------------------- agentic: calculator

CALCULATOR_SYSTEM = (
    "You can use a calculator. To use it, write a line `CALC: <expression>` using numbers, + - * / ** ( ) "
    "and stop; the result comes back as `RESULT: <value>`. When you know the answer, write `FINAL: <answer>`.")
_CALC_TASKS = (
    "A tank holds 1,250 litres and leaks 3.5% of its content every hour. How much is left after 6 hours?",
    "A loan of 18,400 dollars at 4.2% yearly interest compounded monthly: what is owed after 3 years?",
    "A train covers 312 km in 2 h 40 min, then 95 km in 55 min. What is its average speed overall?",
    "Three pumps fill a pool in 9, 12 and 18 hours alone. How long do they take together, in minutes?",
)


def calculator_task(index: int) -> str:
    """The opening user turn of calculator conversation ``index``."""
    return f"{CALCULATOR_SYSTEM}\n\nTask: {_CALC_TASKS[index % len(_CALC_TASKS)]}"


_CALC_LINE = re.compile(r"CALC:\s*`?([^`\n]+)`?")
_FINAL = re.compile(r"FINAL:", re.IGNORECASE)
_BARE_EXPR = re.compile(r"([-+(]?\s*\d[\d\s.+\-*/()%]*[+\-*/%]\s*[\d(][\d\s.+\-*/()%]*)")


def extract_expression(text: str) -> str | None:
    """The expression the model asked the calculator for: the last ``CALC:`` line, else a bare one."""
    calls = _CALC_LINE.findall(text)
    if calls:
        return str(calls[-1]).strip()
    bare = [m.strip() for m in _BARE_EXPR.findall(text) if any(op in m for op in "+-*/")]
    return bare[-1] if bare else None


def is_final(text: str) -> bool:
    """Whether the model gave its final answer."""
    return _FINAL.search(text) is not None


_OPS: dict[type[ast.operator], Callable[[float, float], float]] = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_UNARY: dict[type[ast.unaryop], Callable[[float], float]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}


class CalcError(ValueError):
    """The expression is not plain arithmetic, or cannot be evaluated."""


def safe_eval(expression: str, max_power: int = 100) -> float:
    """Evaluate plain arithmetic (numbers, + - * / // % ** and parentheses) without ``eval``."""
    cleaned = expression.replace(",", "").replace("^", "**").replace("×", "*").replace("÷", "/").strip()
    if len(cleaned) > 200:
        raise CalcError("expression too long")
    try:
        tree = ast.parse(cleaned, mode="eval")
    except SyntaxError as exc:
        raise CalcError(f"not an arithmetic expression: {expression!r}") from exc

    def walk(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            constant: float = node.value
            return constant
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > max_power:
                raise CalcError("exponent too large")
            try:
                result: float = _OPS[type(node.op)](left, right)
                return result
            except (ZeroDivisionError, OverflowError) as exc:
                raise CalcError(str(exc)) from exc
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            unary: float = _UNARY[type(node.op)](walk(node.operand))
            return unary
        raise CalcError(f"not allowed in an expression: {type(node).__name__}")

    value = walk(tree)
    if isinstance(value, complex) or not math.isfinite(value):
        raise CalcError("result is not a finite real number")
    return value


def calculator_reply(model_text: str) -> str:
    """The harness's next user turn: the calculator's result, or how to call it."""
    expression = extract_expression(model_text)
    if expression is None:
        return "RESULT: no expression found. Write `CALC: <expression>` or `FINAL: <answer>`."
    try:
        value = safe_eval(expression)
    except CalcError as exc:
        return f"RESULT: error: {exc}"
    shown = f"{value:.6g}" if isinstance(value, float) else str(value)
    return f"RESULT: {shown}"


# -------------------------------------------------------------------------------- agentic: CSV pipeline

CSV_HEADER = ("id", "email", "age", "country", "signup_date")
_COUNTRIES = ("PT", "JP", "KE", "CA", "EE", "PE", "AU", "ES")


def make_csv(seed: int, rows: int = 24) -> str:
    """A small customer table with a few deliberately invalid rows (bad email, age, country or date)."""
    rng = random.Random(seed)
    lines = [",".join(CSV_HEADER)]
    for i in range(1, rows + 1):
        email = f"user{i}@example.{rng.choice(('com', 'org', 'net'))}"
        age = str(rng.randint(18, 90))
        country = rng.choice(_COUNTRIES)
        date = f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        fault = rng.random()
        if fault < 0.08:
            email = email.replace("@", " at ")
        elif fault < 0.16:
            age = rng.choice(("-3", "abc", "214"))
        elif fault < 0.22:
            country = "XX"
        elif fault < 0.28:
            date = "2025-13-40"
        lines.append(",".join((str(i), email, age, country, date)))
    return "\n".join(lines)


_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$")
_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")


def validate_csv(text: str) -> dict[int, str]:
    """The validator the harness runs: row id → what is wrong with it (valid rows are absent)."""
    problems: dict[int, str] = {}
    lines = [line for line in text.strip().splitlines() if line.strip()]
    for number, line in enumerate(lines[1:], start=1):
        cells = line.split(",")
        if len(cells) != len(CSV_HEADER):
            problems[number] = f"expected {len(CSV_HEADER)} columns, found {len(cells)}"
            continue
        row_id = int(cells[0]) if cells[0].isdigit() else number
        email, age, country, date = cells[1:]
        if not _EMAIL.match(email):
            problems[row_id] = f"invalid email {email!r}"
        elif not (age.isdigit() and 0 < int(age) < 130):
            problems[row_id] = f"invalid age {age!r}"
        elif country not in _COUNTRIES:
            problems[row_id] = f"unknown country {country!r}"
        else:
            match = _DATE.match(date)
            if not match or not (1 <= int(match.group(2)) <= 12 and 1 <= int(match.group(3)) <= 31):
                problems[row_id] = f"invalid date {date!r}"
    return problems


_ROW_IDS = re.compile(r"\b(?:row|id)?\s*#?(\d{1,4})\b", re.IGNORECASE)


def rows_named(text: str) -> set[int]:
    """Row ids the model named as invalid (any ``INVALID: 3, 7`` line, else every number on ``row`` lines)."""
    for line in text.splitlines():
        if line.strip().upper().startswith("INVALID:"):
            return {int(n) for n in re.findall(r"\d+", line.split(":", 1)[1])}
    return {int(n) for n in re.findall(r"\brow\s*#?(\d{1,4})", text, re.IGNORECASE)}


CSV_STAGES = (
    "Here is a CSV export:\n\n{csv}\n\nFind the invalid rows (bad email, age outside 1-129, unknown country "
    "code, impossible date). Answer with one line `INVALID: <ids>` and a short reason for each.",
    "Now write corrected versions of the invalid rows, one CSV line each, keeping the ids.",
    "Finally, give a JSON summary: total rows, invalid rows, rows fixed, and the most common problem.",
)


def csv_feedback(stage: int, model_text: str, csv_text: str) -> str:
    """The harness's reply after ``stage``: the validator's verdict on what the model produced."""
    truth = validate_csv(csv_text)
    if stage == 0:
        named = rows_named(model_text)
        missed = sorted(set(truth) - named)
        wrong = sorted(named - set(truth))
        return (f"Validator: {len(truth)} invalid rows. You found {len(named & set(truth))}; "
                f"missed {missed or 'none'}; "
                f"wrongly flagged {wrong or 'none'}. The validator's reasons: "
                + "; ".join(f"row {k}: {v}" for k, v in sorted(truth.items())) + "\n\n" + CSV_STAGES[1])
    if stage == 1:
        header = ",".join(CSV_HEADER)
        fixed = [line for line in model_text.splitlines() if line.count(",") == len(CSV_HEADER) - 1]
        still_bad = validate_csv("\n".join([header, *fixed])) if fixed else {}
        return (f"Validator: {len(fixed)} corrected rows received, {len(still_bad)} still invalid"
                + (": " + "; ".join(f"row {k}: {v}" for k, v in sorted(still_bad.items())) if still_bad else ".")
                + "\n\n" + CSV_STAGES[2])
    return "Validator: summary received. Thank you."


# ------------------------------------------------------------------------------------------- conversations


def transcript(turns: Sequence[tuple[str, str]], next_user: str) -> str:
    """A plain-text multi-turn prompt: earlier (user, assistant) pairs, then the new user turn.

    The native ``/generate`` endpoint takes raw text, and the model's chat template is not known to the
    harness, so a neutral transcript is used; the context grows every turn, which is what the workload tests.
    """
    parts = [f"User: {user}\nAssistant: {assistant}" for user, assistant in turns]
    parts.append(f"User: {next_user}\nAssistant:")
    return "\n\n".join(parts)


# ------------------------------------------------------------------------------------------- prompts file


class PromptsFileError(ValueError):
    """A prompts file that cannot be read as JSONL prompts."""


BOM = b"\xef\xbb\xbf"


def jsonl_records(path: str | Path, cap: int = MAX_PROMPTS_FILE_BYTES) -> Iterator[tuple[int, object]]:
    """(line number, parsed JSON) of each line of a JSONL file that is not blank or a ``#`` comment, read as a
    stream: a caller that stops (a ``limit`` reached) reads no further. Lines end at ``\n`` only (U+2028, U+0085
    or a lone ``\r`` inside a line are JSON's business), a UTF-8 BOM is skipped, and reading more than ``cap``
    bytes raises :class:`PromptsFileError` naming the line and the fix."""
    try:
        with Path(path).open("rb") as handle:
            yield from _records(handle, path, cap)
    except OSError as exc:
        raise PromptsFileError(f"cannot read {path}: {exc.strerror or exc}") from exc


def _records(handle: BinaryIO, path: str | Path, cap: int) -> Iterator[tuple[int, object]]:
    read = number = 0
    while True:
        raw = handle.readline(cap - read + 1)
        if not raw:
            return
        number += 1
        read += len(raw)
        if read > cap:
            raise PromptsFileError(
                f"{path}:{number}: more than {cap:,} bytes read (MAX_PROMPTS_FILE_BYTES) before the prompts asked "
                "for were all found: set limit = N (or per_category = N), or keep only the prompts you use")
        if number == 1 and raw.startswith(BOM):
            raw = raw[len(BOM):]
        line = raw.decode("utf-8", errors="replace")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise PromptsFileError(f"{path}:{number}: not JSON ({exc.msg})") from exc
        except RecursionError:
            raise PromptsFileError(f"{path}:{number}: JSON nested too deeply") from None
        yield number, data


def load_prompts_file(path: str | Path, categories: Sequence[str] = (), limit: int = 0) -> list[PromptItem]:
    """Prompts from JSONL: Spec-Bench ``question.jsonl`` (``question_id``, ``category``, ``turns``) or lines
    with ``prompt``/``text`` (and optional ``id``, ``category``). Blank and ``#`` lines are skipped; reading
    stops at ``limit`` prompts (and one past :data:`MAX_ITEMS`)."""
    out: list[PromptItem] = []
    seen: set[str] = set()
    for number, data in jsonl_records(path):
        if not isinstance(data, dict):
            raise PromptsFileError(f"{path}:{number}: expected a JSON object")
        turns = data.get("turns")
        if isinstance(turns, list) and turns and all(isinstance(t, str) for t in turns):
            text, more = turns[0], tuple(turns[1:])
        elif isinstance(data.get("prompt"), str):
            text, more = data["prompt"], ()
        elif isinstance(data.get("text"), str):
            text, more = data["text"], ()
        else:
            raise PromptsFileError(f"{path}:{number}: no 'turns', 'prompt' or 'text'")
        category = str(data.get("category", ""))
        if categories and category not in categories:
            continue
        raw_id = data.get("question_id", data.get("id", number))
        item = f"q{raw_id}" if isinstance(raw_id, int) else str(raw_id)
        if item in seen:
            item = f"{item}@{number}"
        seen.add(item)
        out.append(PromptItem(item, text, category, more))
        if (limit and len(out) >= limit) or len(out) > MAX_ITEMS:
            break
    return out
