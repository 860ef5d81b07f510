"""Secrets: which names and values look like one, and every form a secret can take in a line of text.

A server prints its arguments with ``repr()`` (SGLang logs ``ServerArgs(... api_key='...')``), a JSON log
escapes them, a shell line quotes them: a key holding a backslash, a tab or a quote is then no longer the same
substring as the key itself, so redaction must look for each of those spellings (:func:`secret_forms`).
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections import Counter
from collections.abc import Iterable

SECRET_NAME = re.compile(
    r"TOKEN|KEY|SECRET|PASSW(?:OR)?D|PASSPHRASE|CREDENTIAL|AUTH|COOKIE|PRIVATE|(?:^|_)PWD$|(?:^|_)PAT$",
    re.IGNORECASE)
"""Names of variables that hold secrets (``HF_TOKEN``, ``OPENAI_API_KEY``, ``DB_PASSWORD``, ...)."""
_NOT_SECRET_NAMES = frozenset({"TOKENIZERS_PARALLELISM", "PWD", "OLDPWD", "SSH_AUTH_SOCK"})

TOKEN_PREFIXES = ("hf_", "sk-", "sk_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "xoxb-",
                  "xoxp-", "xoxa-", "AKIA", "ASIA", "eyJ", "AIza", "pk_live_", "rk_live_", "bearer ")
"""Prefixes of well-known token formats (Hugging Face, OpenAI/Anthropic, GitHub, GitLab, Slack, AWS, JWT,
Google, Stripe) and a pasted ``Bearer`` header."""


def is_secret_name(name: str) -> bool:
    """Whether a variable called ``name`` probably holds a secret."""
    return name.upper() not in _NOT_SECRET_NAMES and bool(SECRET_NAME.search(name))


def _entropy_bits_per_char(value: str) -> float:
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def looks_like_token(value: str, secret_name: bool = True) -> bool:
    """Whether ``value`` looks like a credential: a known token prefix, or (for a variable whose name says it
    holds a secret) a long high-entropy string with no spaces or path separators (a path, a number, a word
    or a flag value is not one)."""
    text = value.strip()
    if len(text) >= (8 if secret_name else 16) and text.lower().startswith(tuple(p.lower() for p in TOKEN_PREFIXES)):
        return True
    if not secret_name or len(text) < 16 or any(c.isspace() for c in text) or "/" in text or "${" in text:
        return False
    classes = sum((any(c.islower() for c in text), any(c.isupper() for c in text), any(c.isdigit() for c in text)))
    return classes >= 2 and _entropy_bits_per_char(text) >= 3.0


def secret_forms(secret: str) -> list[str]:
    """The spellings of ``secret`` a log line can contain: raw, ``repr``'s (either quote), JSON-escaped
    (ASCII or not), shell-quoted, and each of those escaped once more (a repr inside a repr or a JSON string).
    Longest first, so a replacement never leaves part of a longer form behind."""
    forms = {secret}
    for text in (secret,):
        forms.add(repr(text)[1:-1])
        forms.add(json.dumps(text)[1:-1])
        forms.add(json.dumps(text, ensure_ascii=False)[1:-1])
        quoted = shlex.quote(text)
        forms.add(quoted)
        if quoted.startswith("'") and quoted.endswith("'"):
            forms.add(quoted[1:-1])
    for form in list(forms):
        forms.add(repr(form)[1:-1])
        forms.add(json.dumps(form)[1:-1])
    # repr() chooses double quotes when the text holds a single one and no double: both spellings can occur.
    forms.add(secret.replace("\\", "\\\\").replace("'", "\\'").replace("\t", "\\t").replace("\n", "\\n")
              .replace("\r", "\\r"))
    forms.add(secret.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t").replace("\n", "\\n")
              .replace("\r", "\\r"))
    return sorted((f for f in forms if f), key=len, reverse=True)


def all_forms(secrets: Iterable[str]) -> list[str]:
    """Every form of every secret, longest first, without repeats."""
    out = {form for secret in secrets if secret for form in secret_forms(secret)}
    return sorted(out, key=len, reverse=True)
