"""The stream client's own SSE line splitter: SSE line ends only (``\\r\\n``, ``\\r``, ``\\n``), whatever the
network's chunking, and a line without end is cut off at the cap instead of filling memory."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specbench_tui.engine.client import _LineTooLong, _read_head, _sse_lines


class _Body:
    """Just enough of an httpx response: ``aiter_bytes`` over given chunks, counting what was taken."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.taken = 0

    async def aiter_bytes(self):
        for chunk in self.chunks:
            self.taken += len(chunk)
            yield chunk


async def _lines(chunks: list[bytes], max_line: int = 1 << 20) -> list[str]:
    return [line async for line in _sse_lines(_Body(chunks), max_line)]  # type: ignore[arg-type]


def _reference(data: bytes) -> list[str]:
    """SSE's split: CRLF, CR or LF end a line; a last line without end is still a line."""
    lines, current, i = [], bytearray(), 0
    while i < len(data):
        byte = data[i:i + 1]
        if byte in (b"\r", b"\n"):
            lines.append(current.decode("utf-8", errors="replace"))
            current = bytearray()
            i += 2 if data[i:i + 2] == b"\r\n" else 1
            continue
        current += byte
        i += 1
    if current:
        lines.append(current.decode("utf-8", errors="replace"))
    return lines


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


pieces = st.lists(st.sampled_from([b"data: ", '{"text": "a\u2028b"}'.encode(), b"\r", b"\n", b"\r\n",
                                   "\u2029\u0085é".encode(), b"[DONE]", b"\xff", b"x"]), max_size=40)


@settings(max_examples=300, deadline=None)
@given(pieces, st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_lines_do_not_depend_on_the_chunking(parts, cuts):
    data = b"".join(parts)
    assert asyncio.run(_lines(_split(data, cuts))) == _reference(data)


async def test_a_crlf_split_across_chunks_is_one_line_end():
    assert await _lines([b"data: 1\r", b"\ndata: 2\r", b"\r\n", b"\n"]) == ["data: 1", "data: 2", "", ""]


async def test_unicode_line_separators_stay_inside_a_line():
    text = "data: {\"text\": \"line\u2028sep\u2029para\u0085nel\"}\n\n"
    assert await _lines([text.encode()]) == [text[:-2], ""]


async def test_a_line_without_end_stops_at_the_cap():
    body = _Body([b"data: " + b"A" * 1000] * 100)
    with pytest.raises(_LineTooLong):
        async for _line in _sse_lines(body, max_line=10_000):
            pass
    assert body.taken <= 12_000


async def test_only_the_head_of_an_error_body_is_read():
    body = _Body([b"E" * 1000] * 1000)
    head = await _read_head(body, limit=4096)
    assert head == b"E" * 4096 and body.taken <= 5000
