"""A local notification endpoint for the notification tests: an HTTP server that records what Apprise's
``json://`` scheme posts to it, or one that hangs or refuses; and the simulator sweep with crashes and a stall."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PROFILE = """
seed = 3
[deterministic]
enabled = true
tok_s = 400.0
accept_length = 3.0
ttft_ms = 5
[output]
eos = false
[shutdown]
poll_s = 0.05
[[crash]]
algorithm = "DDTREE"
when = "after_requests"
after_requests = 1
signature = "cuda_illegal_instruction"
[[hang]]
algorithm = "DFLASH"
budget = [16]
when = "after_requests"
after_requests = 1
[[empty_output]]
algorithm = "DFLASH"
budget = [8]
"""

SWEEP = """
[sweep]
name = "unwatched"
baseline = "ar"
gpus = 1
repeats = 2
warmup = 0
[engine]
launcher = "simulator"
sim_profile = "sim_profile.toml"
port_base = {port}
startup_timeout_s = 60
stall_timeout_s = 3
shutdown_grace_s = 2
gpu_release_timeout_s = 1
[server.args]
model-path = "Qwen/Qwen3-8B"
context-length = 8192
{notify}
[[configs]]
name = "ar"
algorithm = "autoregressive"
[[configs]]
name = "ddtree-b{budget}"
algorithm = "ddtree"
matrix = { budget = [8, 16, 32] }
[configs.args]
speculative-algorithm = "DDTREE"
speculative-draft-model-path = "z-lab/Qwen3-8B-DFlash-b16"
speculative-num-draft-tokens = "{budget}"
page-size = 1
[[configs]]
name = "dflash-b{budget}"
algorithm = "dflash"
matrix = { budget = [4, 8, 16] }
[configs.args]
speculative-algorithm = "DFLASH"
speculative-draft-model-path = "z-lab/Qwen3-8B-DFlash-b16"
speculative-num-draft-tokens = "{budget}"
[[workloads]]
name = "code"
kind = "code"
items = ["fibonacci"]
max_new_tokens = 24
"""


def sweep_text(notify: str = "") -> str:
    return SWEEP.replace("{notify}", notify)


class Endpoint:
    """An HTTP endpoint on 127.0.0.1 in a thread: ``mode`` ``record`` answers 200 and keeps each JSON body,
    ``hang`` reads the request and never answers (until :meth:`close`), ``refuse`` is a port nobody listens on."""

    def __init__(self, mode: str = "record") -> None:
        self.mode = mode
        self.received: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.release = threading.Event()
        self.server: ThreadingHTTPServer | None = None
        if mode == "refuse":
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                self.port = probe.getsockname()[1]
            return
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                if endpoint.mode == "hang":
                    endpoint.release.wait(60)
                    return
                endpoint.paths.append(self.path)
                endpoint.received.append(json.loads(body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def titles(self) -> list[str]:
        return [str(body.get("title")) for body in self.received]

    def close(self) -> None:
        self.release.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
