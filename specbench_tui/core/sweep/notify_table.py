"""``[notify]``: who is called when a sweep needs a person (:mod:`specbench_tui.core.alerts`), and ``[metrics]``:
the engine's Prometheus endpoint. URLs are kept as written: a ``${NAME}`` reference (a token, a webhook's secret
path) is expanded only by the engine when it sends (:mod:`specbench_tui.engine.notify`), so the secret is never in
the plan, the run directory or a message."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from specbench_tui.core.alerts import DEFAULT_INTERVAL_S, KINDS
from specbench_tui.core.errors import did_you_mean
from specbench_tui.core.sweep.reader import Reader, short_repr, type_name

NOTIFY_KEYS = ("urls", "on", "min_interval_s", "terminal")
METRICS_KEYS = ("port", "host", "otlp_endpoint")
MAX_URLS = 16
MAX_INTERVAL_S = 86400.0
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://\S")
_SECRETISH = re.compile(r"://[^/?#\s]*:[^@/\s]+@|[?&](?:token|key|secret|password|pass|apikey)=[^&${}]+",
                        re.IGNORECASE)
"""A password in the authority (``user:pass@``) or a token parameter written out instead of a ``${NAME}``."""


@dataclass(frozen=True)
class NotifySpec:
    """``[notify]``: Apprise URLs (as written), the kinds of alert sent, the rate limit, the terminal's bell."""

    urls: tuple[str, ...] = ()
    on: tuple[str, ...] = KINDS
    min_interval_s: float = DEFAULT_INTERVAL_S
    terminal: bool = True
    """Attached terminals ring the bell and show a desktop notification (OSC 9 / OSC 777)."""


@dataclass(frozen=True)
class MetricsSpec:
    """``[metrics]``: the engine serves Prometheus metrics on ``host:port`` (None: off)."""

    port: int | None = None
    host: str = "127.0.0.1"
    otlp_endpoint: str | None = None
    """Where the same metrics are pushed over OTLP/HTTP (a collector's ``http://host:4318``); None: not pushed."""


def read_notify(r: Reader, data: object) -> NotifySpec:
    key = ("notify",)
    table = r.table(data, key, NOTIFY_KEYS)
    urls = _urls(r, table.get("urls", []))
    on = _kinds(r, table.get("on", list(KINDS)))
    interval = r.positive(table, key, "min_interval_s", (float,), DEFAULT_INTERVAL_S, allow_zero=True,
                          limit=MAX_INTERVAL_S, limit_name="a day")
    terminal = r.get(table, key, "terminal", (bool,), True)
    return NotifySpec(urls=urls, on=on, min_interval_s=float(interval), terminal=terminal)


def _urls(r: Reader, value: object) -> tuple[str, ...]:
    key = ("notify", "urls")
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        r.error(key, f"expected an array of URLs, got {type_name(value)} {short_repr(value)}",
                'e.g. urls = ["ntfy://ntfy.sh/${NTFY_TOPIC}"]')
        return ()
    if len(value) > MAX_URLS:
        r.error(key, f"{len(value)} URLs: at most {MAX_URLS}", "one URL per service is enough")
        return ()
    urls: list[str] = []
    for i, url in enumerate(value):
        if not isinstance(url, str) or not _URL.match(url.strip()):
            r.error((*key, i), f"expected an Apprise URL such as \"ntfy://ntfy.sh/TOPIC\", got {type_name(url)}"
                    f" {short_repr(url) if not isinstance(url, str) else ''}".rstrip(),
                    "write scheme://... (docs/notifications.md lists the services)")
        elif _SECRETISH.search(url):
            r.error((*key, i), "this URL holds a password or token written out",
                    "put the secret in the environment and write ${NAME} in its place, e.g. "
                    "\"discord://${DISCORD_WEBHOOK}\" (the sweep file is copied into the run directory)")
        else:
            urls.append(url.strip())
    return tuple(urls)


def _kinds(r: Reader, value: object) -> tuple[str, ...]:
    key = ("notify", "on")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        r.error(key, f"expected an array of alert kinds, got {type_name(value)} {short_repr(value)}",
                f"pick from {', '.join(KINDS)}")
        return KINDS
    kinds: list[str] = []
    for i, kind in enumerate(value):
        if kind not in KINDS:
            r.error((*key, i), f"unknown alert kind '{kind}'",
                    did_you_mean(kind, KINDS) or f"pick from {', '.join(KINDS)}")
        elif kind not in kinds:
            kinds.append(kind)
    return tuple(kinds)


def read_metrics(r: Reader, data: object) -> MetricsSpec:
    key = ("metrics",)
    table = r.table(data, key, METRICS_KEYS)
    port = r.get(table, key, "port", (int,))
    if port is not None and not 1 <= port <= 65535:
        r.error((*key, "port"), f"port {port} is not a TCP port", "pick one in 1024-65535, e.g. 9464")
        port = None
    host = r.get(table, key, "host", (str,), "127.0.0.1")
    if host not in ("127.0.0.1", "localhost", "::1"):
        r.error((*key, "host"), f"host {host!r} is not this machine's loopback",
                "the endpoint is served on localhost only: write 127.0.0.1 and reach it through an SSH tunnel")
        host = "127.0.0.1"
    return MetricsSpec(port=port, host=host, otlp_endpoint=_otlp_endpoint(r, table.get("otlp_endpoint")))


def _otlp_endpoint(r: Reader, value: object) -> str | None:
    key = ("metrics", "otlp_endpoint")
    if value is None:
        return None
    try:
        parts = urlsplit(value) if isinstance(value, str) else None
        usable = parts is not None and parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # a port that is no number
        parts, usable = None, False
    if parts is not None and (parts.username or parts.password):
        r.error(key, "otlp_endpoint carries a user or password in the URL, which the run directory would keep",
                "write the URL without them and put the credentials in OTEL_EXPORTER_OTLP_HEADERS")
        return None
    if not usable:
        r.error(key, f"otlp_endpoint {value!r} is not an http(s) URL",
                "write the collector's OTLP/HTTP address, e.g. \"http://127.0.0.1:4318\"")
        return None
    return str(value)
