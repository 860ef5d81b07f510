"""A server's figures about itself are bounded before use (issue 49, point 1): a context of 10^30 is clamped with
a warning, a malformed field is ignored with a notice (never an internal error), and long prompts are built off
the engine's event loop and never beyond the sweep's own limits."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from specbench_tui.core.engines.sglang import SGLANG
from specbench_tui.core.engines.vllm import VLLM
from specbench_tui.core.prompts import MAX_LONG_CONTEXT_CHARS, long_context_text
from specbench_tui.core.sweep.limits import MAX_PROMPT_TOKENS
from specbench_tui.engine.client import ServerClient
from specbench_tui.core.engines.base import EngineProfile
from specbench_tui.engine.server_figures import MAX_CONTEXT_TOKENS, MAX_RUNNING_CAP, ServerFigures, read_server_figures


@contextmanager
def serving(bodies: dict[str, bytes]) -> Iterator[str]:
    """A local HTTP server answering ``GET path`` with ``bodies[path]`` (404 otherwise); yields its URL."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            body = bodies.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


async def _figures(url: str, profile: EngineProfile = SGLANG) -> ServerFigures:
    client = ServerClient(url, profile)
    try:
        return await read_server_figures(client, profile)
    finally:
        await client.aclose()


def test_a_context_of_ten_to_the_thirty_is_clamped_with_a_warning_naming_it() -> None:
    info = {"context_length": 10**30, "max_running_requests": 10**40, "cuda_graph_max_bs_decode": 10**25}
    with serving({"/server_info": json.dumps(info).encode()}) as url:
        figures = asyncio.run(_figures(url))
    assert figures.context_length == MAX_CONTEXT_TOKENS
    assert figures.running_cap == MAX_RUNNING_CAP and figures.graph_ceiling == MAX_RUNNING_CAP
    warnings = " | ".join(text for level, text in figures.notices if level == "warning")
    assert "context_length (max_model_len) = about 10^30" in warnings and f"{MAX_CONTEXT_TOKENS:,}" in warnings, warnings


def test_vllm_max_model_len_of_ten_to_the_thirty_is_clamped() -> None:
    models = {"data": [{"id": "m", "max_model_len": 10**30}]}
    with serving({"/v1/models": json.dumps(models).encode()}) as url:
        figures = asyncio.run(_figures(url, VLLM))
    assert figures.context_length == MAX_CONTEXT_TOKENS
    assert any("max_model_len) = about 10^30" in text for _, text in figures.notices), figures.notices


@pytest.mark.parametrize("info", [{"internal_states": 5}, {"internal_states": [{"context_len": "x"}], "x": 1},
                                  {"internal_states": "abc", "cuda_graph_config": 7},
                                  {"speculative_algorithm": "EAGLE", "speculative_num_steps": [1]}])
def test_a_malformed_field_is_ignored_with_a_notice(info: dict[str, object]) -> None:
    with serving({"/server_info": json.dumps(info).encode()}) as url:
        figures = asyncio.run(_figures(url))
    assert figures.running_cap is None or isinstance(figures.running_cap, int)
    if info.get("internal_states") == 5:
        assert figures.context_length is None
        assert any("malformed" in text and "ignored" in text for _, text in figures.notices), figures.notices


def test_json_nested_a_hundred_thousand_deep_is_ignored_with_a_notice() -> None:
    deep = b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with serving({"/server_info": deep}) as url:
        figures = asyncio.run(_figures(url))
    assert figures.context_length is None and figures.info == {}
    assert any("nested too deeply" in text for _, text in figures.notices), figures.notices


def test_a_long_prompt_is_never_built_beyond_the_sweep_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    from specbench_tui.core import prompts

    assert 4 * MAX_PROMPT_TOKENS <= MAX_LONG_CONTEXT_CHARS <= 16 * MAX_PROMPT_TOKENS
    monkeypatch.setattr(prompts, "MAX_LONG_CONTEXT_CHARS", 100_000)  # the same rule, at a size a test can build
    start = time.monotonic()
    text = long_context_text(10**30)
    assert len(text) <= 100_000 + 200 and len(prompts.filler_sentences(10**30)) <= 100_000 // 40 + 8
    assert time.monotonic() - start < 10


def test_a_long_prompt_is_built_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sizing a large prompt builds its text in a thread: the engine's loop keeps answering meanwhile."""
    from specbench_tui.core.sweep.schema import WorkloadSpec
    from specbench_tui.engine import workloads

    built_on: list[str] = []
    real = workloads.long_context_text

    def spy(chars: int, seed: int = 7) -> str:
        built_on.append(threading.current_thread().name)
        return real(min(chars, 10_000), seed)

    monkeypatch.setattr(workloads, "long_context_text", spy)

    class Client:
        profile = SGLANG

        async def tokenize(self, text: str) -> tuple[int, None]:
            return len(text) // 4, None

    spec = WorkloadSpec(name="long", kind="long_context", max_new_tokens=16, repeats=1, warmup=0, temperature=0.0,
                        ignore_eos=True, params=(("prompt_tokens", [2_000_000]),))
    workload = workloads.LongContextWorkload(spec)
    session = workloads.Session(Client(), lambda: None, 4_000_000, lambda level, text: None)  # type: ignore[arg-type]
    asyncio.run(workload._size(session, 2_000_000))
    assert built_on and threading.main_thread().name not in built_on[:1], built_on
