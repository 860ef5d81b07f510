#!/usr/bin/env python3
"""Re-capture the llama-server fixtures in this directory, and run the draft-budget sweep.

Standard library only. Needs a built llama-server and the tiny model pair:

    eval "$(tools/setup_llama_server.sh)"
    python3 tests/data/llamacpp/capture.py capture --server "$LLAMA_SERVER" \
        --target "$TINY_TARGET_GGUF" --draft "$TINY_DRAFT_GGUF" --out tests/data/llamacpp
    python3 tests/data/llamacpp/capture.py sweep --server "$LLAMA_SERVER" \
        --target "$TINY_TARGET_GGUF" --draft "$TINY_DRAFT_GGUF" --out /tmp/sweep.json

``capture`` starts one server per scenario (baseline, draft-n4, draft-n16, ngram), records its stdout and
stderr, /health from launch to ready, /metrics before and after, streamed and non-streamed
/v1/completions and /v1/chat/completions, the context-overflow error, and how the server ends on SIGTERM or
SIGKILL (idle and during a streaming request). Every server is stopped by its own PID.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from typing import Any, cast

HOST = "127.0.0.1"
ALIAS = "tiny"
CTX = 2048
PROMPT = "def parse_args(argv):\n    parser = argparse.ArgumentParser("
CHAT = [{"role": "user", "content": "Write a function that reads a file."}]
SWEEP_PROMPTS = [
    "import os\nimport sys\n\ndef main(",
    "class Config:\n    def __init__(self, path):\n        self.",
    "for name, value in sorted(items):\n    if ",
    "    return self._data[key]\n\n    def ",
    "# Copyright (c) the Python authors\n\"\"\"Utilities for ",
    "try:\n    import threading\nexcept ImportError:\n    ",
    "def __repr__(self):\n        return '%s(%r)' % (",
    "with open(filename, 'rb') as fp:\n        data = ",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def server_argv(server: str, target: str, port: int, spec: list[str], threads: int = 2) -> list[str]:
    return [server, "-m", target, "-a", ALIAS, "--host", HOST, "--port", str(port), "-c", str(CTX),
            "-np", "2", "-t", str(threads), "--metrics", *spec]


def spec_flags(kind: str, draft: str, n_max: int = 4) -> list[str]:
    if kind == "none":
        return []
    if kind == "draft":
        return ["-md", draft, "--spec-type", "draft-simple", "--spec-draft-n-max", str(n_max)]
    if kind == "draft-md-only":  # pitfall: loads the draft but does not speculate
        return ["-md", draft]
    if kind == "ngram":
        return ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "2", "--spec-ngram-simple-size-m", "8"]
    raise ValueError(kind)


class Server:
    def __init__(self, argv: list[str], port: int, log_dir: str | None):
        self.argv, self.port = argv, port
        if log_dir:
            os.makedirs(log_dir, exist_ok=True)
            self.out = open(os.path.join(log_dir, "stdout.log"), "wb")
            self.err = open(os.path.join(log_dir, "stderr.log"), "wb")
        else:
            self.out = self.err = open(os.devnull, "wb")
        self.t_launch = time.monotonic()
        self.proc = subprocess.Popen(argv, stdout=self.out, stderr=self.err, stdin=subprocess.DEVNULL)

    def request(self, method: str, path: str, body: dict | None = None, timeout: float = 60):
        conn = http.client.HTTPConnection(HOST, self.port, timeout=timeout)
        try:
            data = json.dumps(body).encode() if body is not None else None
            conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    def json(self, path: str, body: dict | None = None):
        status, raw = self.request("POST" if body is not None else "GET", path, body)
        return status, json.loads(raw)

    def stream_raw(self, path: str, body: dict) -> bytes:
        status, raw = self.request("POST", path, body)
        assert status == 200, (status, raw[:300])
        return cast(bytes, raw)

    def wait_ready(self, timeout: float = 60.0) -> list[dict]:
        """Poll /health every ~2 ms; return the de-duplicated sequence of states seen, with times."""
        seen: list[dict] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            t_ms = round((time.monotonic() - self.t_launch) * 1000, 1)
            try:
                status, raw = self.request("GET", "/health", timeout=2)
                state = {"status": status, "body": raw.decode()}
            except (ConnectionRefusedError, ConnectionResetError, http.client.RemoteDisconnected) as e:
                state = {"status": None, "error": type(e).__name__}
            if not seen or {k: v for k, v in seen[-1].items() if k != "t_ms"} != state:
                seen.append({"t_ms": t_ms, **state})
            if state.get("status") == 200:
                return seen
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode} before ready")
            time.sleep(0.002)
        raise TimeoutError("server not ready")

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout: float = 30.0) -> dict:
        t0 = time.monotonic()
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
            return {"signal": sig.name, "exited_by_itself": False, "returncode": rc}
        finally:
            self.out.close()
            if self.err is not self.out:
                self.err.close()
        return {"signal": sig.name, "returncode": rc, "seconds_to_exit": round(time.monotonic() - t0, 3)}


def completion_body(stream: bool, max_tokens: int, prompt: str = PROMPT) -> dict:
    b = {"model": ALIAS, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": stream}
    if stream:
        b["stream_options"] = {"include_usage": True}
    return b


def chat_body(stream: bool, max_tokens: int) -> dict:
    b = {"model": ALIAS, "messages": CHAT, "max_tokens": max_tokens, "temperature": 0, "stream": stream}
    if stream:
        b["stream_options"] = {"include_usage": True}
    return b


def write(path: str, data) -> None:
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(path, mode) as fh:
        if isinstance(data, (dict, list)):
            json.dump(data, fh, indent=1)
            fh.write("\n")
        else:
            fh.write(data)


def stream_then_signal(srv: Server, sig: signal.Signals, after_s: float) -> dict:
    """Start a long streaming request, send `sig` to the server mid-stream, report what the client saw."""
    seen: dict[str, Any] = {"chunks": 0, "done_marker": False, "error": None}

    def client() -> None:
        conn = http.client.HTTPConnection(HOST, srv.port, timeout=30)
        try:
            body = completion_body(True, CTX - 64)
            body["ignore_eos"] = True
            conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            seen["status"] = r.status
            while True:
                line = r.readline()
                if not line:
                    break
                if line.startswith(b"data: "):
                    seen["chunks"] += 1
                    if line.strip() == b"data: [DONE]":
                        seen["done_marker"] = True
        except Exception as e:  # noqa: BLE001 - we record whatever the client sees
            seen["error"] = f"{type(e).__name__}: {e}"
        finally:
            conn.close()

    th = threading.Thread(target=client)
    th.start()
    time.sleep(after_s)
    chunks_at_signal = seen["chunks"]
    res = srv.stop(sig)
    th.join(30)
    res["client"] = {**seen, "chunks_before_signal": chunks_at_signal}
    return res


def capture(a: argparse.Namespace) -> None:
    index: dict[str, Any] = {"server_version": subprocess.run([a.server, "--version"], capture_output=True, text=True).stderr.strip()
                             or subprocess.run([a.server, "--version"], capture_output=True, text=True).stdout.strip(),
                             "scenarios": {}}
    scenarios = [
        ("baseline", "none", 0, "sigterm-idle"),
        ("draft-n4", "draft", 4, "sigkill-idle"),
        ("draft-n16", "draft", 16, "sigterm-streaming"),
        ("ngram", "ngram", 0, "sigkill-streaming"),
    ]
    for name, kind, n_max, ending in scenarios:
        d = os.path.join(a.out, name)
        port = free_port()
        argv = server_argv(a.server, a.target, port, spec_flags(kind, a.draft, n_max))
        srv = Server(argv, port, d)
        info: dict = {"argv": [os.path.basename(x) if x in (a.server, a.target, a.draft) else x for x in argv]}
        try:
            health = srv.wait_ready()
            info["ready_ms"] = health[-1]["t_ms"]
            write(os.path.join(d, "health_startup.json"), health)
            write(os.path.join(d, "models.json"), srv.json("/v1/models")[1])
            write(os.path.join(d, "metrics_before.txt"), srv.request("GET", "/metrics")[1].decode())
            st, body = srv.json("/v1/completions", completion_body(False, 64))
            write(os.path.join(d, "completion.json"), body)
            write(os.path.join(d, "completion_stream.sse"), srv.stream_raw("/v1/completions", completion_body(True, 12)))
            st, body = srv.json("/v1/chat/completions", chat_body(False, 32))
            write(os.path.join(d, "chat.json"), body)
            write(os.path.join(d, "chat_stream.sse"), srv.stream_raw("/v1/chat/completions", chat_body(True, 12)))
            if name == "baseline":
                # prompt fits, prompt + max_tokens does not
                st, raw = srv.request("POST", "/v1/completions", completion_body(False, CTX * 2))
                write(os.path.join(d, "overflow_max_tokens.json"), {"status": st, "body": json.loads(raw)})
                # the prompt alone exceeds the context
                long_prompt = "x = compute(a, b, c)\n" * 600
                st, raw = srv.request("POST", "/v1/completions", completion_body(False, 16, long_prompt))
                write(os.path.join(d, "overflow_prompt.json"), {"status": st, "body": json.loads(raw)})
                st, raw = srv.request("GET", "/no-such-endpoint")
                write(os.path.join(d, "not_found.json"), {"status": st, "body": raw.decode()})
            write(os.path.join(d, "metrics_after.txt"), srv.request("GET", "/metrics")[1].decode())
            if ending == "sigterm-idle":
                info["shutdown"] = srv.stop(signal.SIGTERM)
            elif ending == "sigkill-idle":
                info["shutdown"] = srv.stop(signal.SIGKILL)
            elif ending == "sigterm-streaming":
                info["shutdown"] = stream_then_signal(srv, signal.SIGTERM, 0.3)
            else:
                info["shutdown"] = stream_then_signal(srv, signal.SIGKILL, 0.3)
        finally:
            if srv.proc.poll() is None:
                srv.stop(signal.SIGKILL)
        index["scenarios"][name] = info
        print(name, json.dumps(info["shutdown"]), "ready_ms", info.get("ready_ms"), file=sys.stderr)
    write(os.path.join(a.out, "index.json"), index)


def parse_metrics(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.rpartition(" ")
            out[k] = float(v)
    return out


def sweep(a: argparse.Namespace) -> None:
    configs = [("baseline", "none", 0)] + [(f"draft-n{n}", "draft", n) for n in a.n_max] + [("ngram", "ngram", 0),
                                                                                           ("md-only", "draft-md-only", 0)]
    results = []
    for rnd in range(a.rounds):
        for name, kind, n_max in configs:
            port = free_port()
            argv = server_argv(a.server, a.target, port, spec_flags(kind, a.draft, n_max), a.threads)
            srv = Server(argv, port, None)
            try:
                ready_ms = srv.wait_ready()[-1]["t_ms"]
                srv.json("/v1/completions", completion_body(False, 16))  # warm-up
                m0 = parse_metrics(srv.request("GET", "/metrics")[1].decode())
                toks = wall = 0.0
                tps, draft_n, draft_acc = [], 0, 0
                for p in SWEEP_PROMPTS:
                    body = completion_body(False, a.max_tokens, p)
                    body["ignore_eos"] = True
                    t0 = time.monotonic()
                    st, r = srv.json("/v1/completions", body)
                    wall += time.monotonic() - t0
                    assert st == 200, r
                    toks += r["usage"]["completion_tokens"]
                    tm = r["timings"]
                    tps.append(tm["predicted_per_second"])
                    draft_n += tm.get("draft_n", 0)
                    draft_acc += tm.get("draft_n_accepted", 0)
                m1 = parse_metrics(srv.request("GET", "/metrics")[1].decode())
            finally:
                srv.stop(signal.SIGTERM)
            d = {k.split(":", 1)[1]: m1.get(k, 0) - m0.get(k, 0) for k in m1 if k.startswith("llamacpp:spec_decode_num")}
            drafts = d.get("spec_decode_num_drafts_total", 0)
            row = {"round": rnd, "config": name, "ready_ms": ready_ms, "tokens": toks,
                   "wall_tok_s": round(toks / wall, 1), "median_predicted_per_second": round(statistics.median(tps), 1),
                   "draft_n": draft_n, "draft_n_accepted": draft_acc,
                   "acceptance_rate": round(draft_acc / draft_n, 3) if draft_n else None,
                   "metrics_drafts": drafts,
                   "mean_accept_len": round(1 + d.get("spec_decode_num_accepted_tokens_total", 0) / drafts, 2) if drafts else 1.0}
            results.append(row)
            print(json.dumps(row), file=sys.stderr)
    write(a.out, {"max_tokens": a.max_tokens, "prompts": len(SWEEP_PROMPTS), "threads": a.threads,
                  "load_before": os.getloadavg(), "results": results})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("capture", "sweep"):
        s = sub.add_parser(name)
        s.add_argument("--server", required=True)
        s.add_argument("--target", required=True)
        s.add_argument("--draft", required=True)
        s.add_argument("--out", required=True)
        if name == "sweep":
            s.add_argument("--n-max", type=int, nargs="+", default=[2, 4, 8, 16])
            s.add_argument("--max-tokens", type=int, default=128)
            s.add_argument("--rounds", type=int, default=2)
            s.add_argument("--threads", type=int, default=2, help="llama-server -t")
    a = p.parse_args()
    capture(a) if a.cmd == "capture" else sweep(a)


if __name__ == "__main__":
    main()
