"""The streaming ``/generate`` client against a hostile server: every bad answer ends as a recorded error
with its reason, within its timeout, and a 2 GB body is cut off instead of being read into memory."""

from __future__ import annotations

import time

import pytest
from hostile_http import HostileServer

from specbench_tui.engine.client import (
    ERROR_CONNECTION,
    ERROR_HTTP,
    ERROR_PROTOCOL,
    ERROR_SSE,
    ERROR_TIMEOUT,
    ServerClient,
)
from specbench_tui.core.engines.sglang import SGLANG

TIMEOUT_S = 2.0
SLACK_S = 3.0


async def _generate(behaviour: str, timeout_s: float = TIMEOUT_S):
    async with HostileServer(behaviour) as server:
        client = ServerClient(server.url, SGLANG, request_timeout_s=timeout_s, connect_timeout_s=timeout_s)
        started = time.monotonic()
        try:
            result = await client.generate("hi", {"max_new_tokens": 4})
        finally:
            await client.aclose()
        return result, time.monotonic() - started, server


CASES = {
    # behaviour: (error kind(s), words the reason must hold)
    "malformed_json": ({ERROR_PROTOCOL}, "unreadable stream payload"),
    "truncated_sse": ({ERROR_CONNECTION}, "reset"),
    "sse_error": ({ERROR_SSE}, "longer than the model's context length"),
    "http_400": ({ERROR_HTTP}, "HTTP 400: scripted failure 400"),
    "http_500": ({ERROR_HTTP}, "HTTP 500: scripted failure 500"),
    "http_503": ({ERROR_HTTP}, "HTTP 503"),
    "reset": ({ERROR_CONNECTION}, "connection"),
    "reset_mid_stream": ({ERROR_CONNECTION}, "connection"),
    "stall_after_first": ({ERROR_TIMEOUT}, "request_timeout_s"),
    "no_answer": ({ERROR_TIMEOUT}, "time"),
    "redirect": ({ERROR_HTTP}, "HTTP 307"),
}


@pytest.mark.parametrize("behaviour", sorted(CASES))
async def test_hostile_answer_is_a_recorded_error_within_the_timeout(behaviour):
    kinds, words = CASES[behaviour]
    result, took, server = await _generate(behaviour)
    assert not result.ok, f"{behaviour} was taken as a good answer: {result}"
    assert result.error_kind in kinds, (result.error_kind, result.error)
    assert words in (result.error or ""), result.error
    assert took <= TIMEOUT_S + SLACK_S, f"{behaviour}: {took:.1f} s"
    if behaviour == "redirect":
        assert server.requests == [("POST", "/generate")], "the redirect was followed"


async def test_a_good_stream_is_measured():
    result, _took, _ = await _generate("ok")
    assert result.ok, result.error
    assert result.text == "Hello world!" and result.completion_tokens == 4 and len(result.chunks) == 4


async def test_a_stream_cut_before_done_is_an_error():
    result, _took, _ = await _generate("truncated_clean")
    assert not result.ok and result.error_kind == ERROR_PROTOCOL, result


async def test_line_separators_inside_the_text_are_not_line_breaks():
    result, _took, _ = await _generate("unicode_separators")
    assert result.ok, result.error
    assert result.text == "line\u2028sep\u2029para\u0085nel"


LIMIT = 64 << 20
"""A client must stop reading a hostile body well before this (the server stops at 96 MB anyway)."""


async def _huge(behaviour: str):
    result, took, server = await _generate(behaviour, timeout_s=30.0)
    assert not result.ok
    assert took <= 30 + SLACK_S
    assert server.sent < LIMIT, f"{behaviour}: the client read {server.sent >> 20} MB of a 2 GB body"
    return result


async def test_a_2_gb_error_body_is_cut_off():
    result = await _huge("huge_error_body")
    assert result.error_kind == ERROR_HTTP


async def test_a_2_gb_sse_line_is_cut_off():
    result = await _huge("huge_sse_line")
    assert result.error_kind == ERROR_PROTOCOL
