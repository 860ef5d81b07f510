"""A deterministic stand-in tokenizer, chat template, prompt classifier and output-text generator.

Tokenization is a GPT-2-style pre-split (words with their leading space, single digits, punctuation runs,
whitespace runs) where every piece longer than :data:`MAX_PIECE` characters counts as several tokens. The
same text always gives the same tokens, so ``/v1/tokenize`` agrees with ``prompt_tokens``. Token ids are a
CRC of the piece; ``/v1/detokenize`` can invert the ids this process has produced.

The chat template is Qwen's ChatML: each message costs ``tokens(content) + 5``
(``<|im_start|>``, role, ``\\n``, ..., ``<|im_end|>``, ``\\n``) and the generation prompt
``<|im_start|>assistant\\n`` adds 3 (:data:`CHAT_MESSAGE_OVERHEAD`, :data:`CHAT_GENERATION_OVERHEAD`).

Output text is pseudo-text in the style of the prompt's kind (code, math, json, creative, long, chat),
drawn from a generator seeded only by the prompt, so greedy output is identical for every speculative
algorithm: speculation is lossless.
"""

from __future__ import annotations

import random
import re
import zlib
from collections.abc import Iterator, Mapping, Sequence

MAX_PIECE = 6
SPECIAL_TOKENS = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645}
CHAT_MESSAGE_OVERHEAD = 5
CHAT_GENERATION_OVERHEAD = 3

_SPECIAL = re.compile("(" + "|".join(re.escape(t) for t in SPECIAL_TOKENS) + ")")
_PIECE = re.compile(r"'(?:s|t|re|ve|m|ll|d)| ?[^\W\d_]+| ?\d| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+")
_ID_TO_TEXT: dict[int, str] = {v: k for k, v in SPECIAL_TOKENS.items()}


def _piece_id(piece: str) -> int:
    token_id = zlib.crc32(piece.encode("utf-8")) % 151000
    _ID_TO_TEXT.setdefault(token_id, piece)
    return token_id


def split_pieces(text: str) -> list[str]:
    """Split ``text`` into token strings (special tokens kept whole)."""
    pieces: list[str] = []
    for part in _SPECIAL.split(text):
        if not part:
            continue
        if part in SPECIAL_TOKENS:
            pieces.append(part)
            continue
        for piece in _PIECE.findall(part):
            pieces.extend(piece[i : i + MAX_PIECE] for i in range(0, len(piece), MAX_PIECE))
    return pieces


def encode(text: str) -> list[int]:
    """Token ids of ``text``."""
    return [SPECIAL_TOKENS.get(p) or _piece_id(p) for p in split_pieces(text)]


def decode(ids: Sequence[int], skip_special_tokens: bool = True) -> str:
    """Text of ids this process has seen (unknown ids decode to nothing)."""
    special = set(SPECIAL_TOKENS.values())
    return "".join(
        _ID_TO_TEXT.get(i, "") for i in ids if not (skip_special_tokens and i in special)
    )


def message_text(content: object) -> str:
    """The text of an OpenAI message ``content`` (a string or a list of ``{"type": "text"}`` parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def apply_chat_template(messages: Sequence[Mapping[str, object]]) -> tuple[str, list[int]]:
    """Render ChatML with the generation prompt; return the text and its token ids (per-part encoding)."""
    text_parts: list[str] = []
    ids: list[int] = []
    for message in messages:
        role = str(message.get("role", "user"))
        content = message_text(message.get("content"))
        text_parts.append(f"<|im_start|>{role}\n{content}<|im_end|>\n")
        ids += [SPECIAL_TOKENS["<|im_start|>"], _piece_id(role), _piece_id("\n")]
        ids += encode(content)
        ids += [SPECIAL_TOKENS["<|im_end|>"], _piece_id("\n")]
    text_parts.append("<|im_start|>assistant\n")
    ids += [SPECIAL_TOKENS["<|im_start|>"], _piece_id("assistant"), _piece_id("\n")]
    return "".join(text_parts), ids


_CODE = re.compile(r"```|\b(def|class|function|import|python|javascript|typescript|rust|golang|sql|"
                   r"implement|refactor|compile|code|program|bug|regex)\b")
_JSON = re.compile(r"\bjson\b|\byaml\b")
_CREATIVE = re.compile(r"\b(haiku|poem|poetry|story|lyrics|sonnet|limerick|creative|fiction)\b")
_MATH = re.compile(r"\b(solve|calculate|compute|equation|math|sum|product|prove|integral|derivative|how many|"
                   r"how much|percent|gsm8k)\b|\d+\s*[-+*/^=]\s*\d+")
LONG_PROMPT_TOKENS = 8000


def classify(text: str, n_tokens: int) -> str:
    """The kind of a prompt: ``long`` (over 8000 tokens), else code, json, creative, math or chat."""
    if n_tokens > LONG_PROMPT_TOKENS:
        return "long"
    lowered = text.lower()
    if _CODE.search(lowered):
        return "code"
    if _JSON.search(lowered) or text.lstrip().startswith("{"):
        return "json"
    if _CREATIVE.search(lowered):
        return "creative"
    if _MATH.search(lowered):
        return "math"
    return "chat"


_WORDS = ("the model", "a request", "each step", "the draft", "tokens", "latency", "the server", "memory",
          "throughput", "a batch", "the cache", "results", "accuracy", "the user", "context", "speed",
          "quality", "the answer", "time", "data")
_VERBS = ("improves", "reduces", "depends on", "follows", "changes", "keeps", "explains", "limits",
          "measures", "shows", "needs", "returns")
_NAMES = ("parse", "load", "merge", "count", "score", "render", "split", "flush", "fetch", "build")
_VARS = ("item", "value", "total", "result", "node", "row", "key", "buf", "idx", "acc")
_NATURE = ("autumn wind", "still water", "a grey heron", "moonlight", "cold rain", "the old pond",
           "cherry petals", "morning frost", "a distant bell", "falling snow")


def _code_line(rng: random.Random) -> str:
    name, var, var2 = rng.choice(_NAMES), rng.choice(_VARS), rng.choice(_VARS)
    n = rng.randint(0, 99)
    return rng.choice((
        f"def {name}_{var}({var2}):\n",
        f"    {var} = {name}({var2}, {n})\n",
        f"    for {var} in range({n}):\n",
        f"        if {var} > {var2}:\n",
        f"            {var2} += {var}\n",
        f"    return {var}\n",
        f"\n# {name} the {var} before use\n",
        f"class {name.capitalize()}{var.capitalize()}:\n",
        f"    assert {var} is not None\n",
    ))


def _prose_sentence(rng: random.Random) -> str:
    return f"{rng.choice(_WORDS).capitalize()} {rng.choice(_VERBS)} {rng.choice(_WORDS)}" + rng.choice(
        (". ", ", and ", "; ", ".\n\n", " because ")
    )


def _math_line(rng: random.Random) -> str:
    a, b = rng.randint(2, 99), rng.randint(2, 99)
    return rng.choice((f"{a} + {b} = {a + b}. ", f"{a} * {b} = {a * b}.\n", f"So we get {a - b}. ",
                       f"Step {rng.randint(1, 9)}: subtract {b} from {a}.\n"))


def _json_line(rng: random.Random) -> str:
    return rng.choice((f'{{"{rng.choice(_VARS)}": {rng.randint(0, 999)}}},\n',
                       f'"{rng.choice(_NAMES)}": "{rng.choice(_VARS)}",\n',
                       f'"items": [{rng.randint(0, 9)}, {rng.randint(0, 9)}],\n'))


def _creative_line(rng: random.Random) -> str:
    return f"{rng.choice(_NATURE)} {rng.choice(('over', 'in', 'beneath', 'after'))} {rng.choice(_NATURE)}\n"


_STYLES = {"code": _code_line, "math": _math_line, "json": _json_line, "creative": _creative_line,
           "long": _prose_sentence, "chat": _prose_sentence}


def output_pieces(kind: str, seed: int) -> Iterator[str]:
    """Endless output tokens (as text) in the style of ``kind``; depends only on ``kind`` and ``seed``."""
    rng = random.Random(seed)
    style = _STYLES.get(kind, _prose_sentence)
    while True:
        yield from split_pieces(style(rng))


def output_token_id(piece: str) -> int:
    """The id of an output piece (also makes it decodable)."""
    return SPECIAL_TOKENS.get(piece) or _piece_id(piece)


def prompt_seed(ids: Sequence[int]) -> int:
    """A stable seed from the prompt's token ids (same prompt, same output)."""
    return zlib.crc32(",".join(map(str, ids)).encode())
