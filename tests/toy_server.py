"""A tiny stand-in inference server for the toy engine (``tests/toy_engine.py``): the HTTP API and log lines an
engine module maps, with no model behind them. Started by a sweep as a real subprocess (``launcher = "command"``).

- ``GET /health``: 200 once listening; ``GET /info``: ``{"context_length": N}``;
- ``POST /tokenize`` ``{"prompt": text}``: ``{"count": words}``;
- ``POST /v1/completions`` with ``stream: true``: OpenAI-style server-sent events, one word per chunk (``w0 w1
  ...``, the same for every configuration: greedy and lossless), then a final chunk with ``usage`` and, when
  drafting (``--draft-window N`` > 0), ``toy_spec: {"accepted": A, "drafted": D}``, then ``[DONE]``;
- logs ``toy server ready`` once serving, and ``toy stats: accept len L, gen T tok/s`` after each request;
- ``--crash-after K``: the K-th request prints ``TOY MELTDOWN: reactor breach`` and exits 3 mid-stream.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", default="toy")
    parser.add_argument("--draft-window", type=int, default=0)
    parser.add_argument("--token-delay-ms", type=float, default=3.0)
    parser.add_argument("--context-length", type=int, default=4096)
    parser.add_argument("--crash-after", type=int, default=0)
    args = parser.parse_args()
    served = [0]

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *values: object) -> None:
            pass

        def _json(self, status: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> dict:
            length = int(self.headers.get("Content-Length") or 0)
            body: dict = json.loads(self.rfile.read(length) or b"{}")
            return body

        def do_GET(self) -> None:
            if self.path == "/health":
                self._json(200, {"status": "ok"})
            elif self.path == "/info":
                self._json(200, {"context_length": args.context_length, "model": args.model})
            else:
                self._json(404, {"error": {"message": f"no {self.path}"}})

        def do_POST(self) -> None:
            body = self._body()
            if self.path == "/tokenize":
                self._json(200, {"count": len(str(body.get("prompt", "")).split())})
                return
            if self.path != "/v1/completions":
                self._json(404, {"error": {"message": f"no {self.path}"}})
                return
            served[0] += 1
            tokens = int(body.get("max_tokens") or 16)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            started = time.monotonic()
            delay = args.token_delay_ms / 1000 / (2 if args.draft_window > 0 else 1)
            for i in range(tokens):
                if args.crash_after and served[0] >= args.crash_after and i == tokens // 2:
                    print("TOY MELTDOWN: reactor breach", flush=True)
                    os._exit(3)
                chunk = {"choices": [{"index": 0, "text": f" w{i}", "finish_reason": None}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
                time.sleep(delay)
            final: dict = {"choices": [{"index": 0, "text": "", "finish_reason": "length"}],
                           "usage": {"prompt_tokens": 8, "completion_tokens": tokens, "total_tokens": tokens + 8}}
            accept_len = 1.0
            if args.draft_window > 0:
                steps = math.ceil(tokens / 2)
                final["toy_spec"] = {"accepted": tokens - steps, "drafted": steps * args.draft_window}
                accept_len = tokens / steps
            self.wfile.write(f"data: {json.dumps(final)}\n\ndata: [DONE]\n\n".encode())
            self.wfile.flush()
            rate = tokens / max(1e-6, time.monotonic() - started)
            print(f"toy stats: accept len {accept_len:.2f}, gen {rate:.1f} tok/s", flush=True)

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    print(f"toy server on {args.host}:{args.port} (model {args.model}, draft window {args.draft_window})")
    print("toy server ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
