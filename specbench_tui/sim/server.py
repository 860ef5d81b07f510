"""The main process: SGLang's launch sequence, HTTP server, signals and shutdown.

Order of events, as in ``sglang.launch_server``: parse and resolve the flags (exit 2 on a bad flag, a
traceback and exit 1 on a resolution error or a missing local model path), log ``server_args=...``, spawn
the scheduler and detokenizer children and wait for their ``ready``, start the HTTP server with uvicorn's
lines, warm up with a real ``/generate`` over HTTP, then log ``The server is fired up and ready to roll!``.

Shutdown follows SGLang's handlers:

- SIGQUIT from a child: ``Received sigquit from a child process. It usually means the child failed.`` before
  the first request (the warm-up is one), ``SIGQUIT received. signum=None, frame=None. It usually means one child
  failed.`` after it, then ``kill_process_tree``: every descendant is SIGKILLed and reaped, then the process SIGKILLs itself, so the
  exit status is -9 (``kill_process_tree`` calls ``itself.kill()`` before its ``sys.exit(0)``).
- SIGTERM once the first request has created the handle loop: the graceful drain of
  ``tokenizer_manager.sigterm_watchdog`` with no time limit (``SGL_FORCE_SHUTDOWN=1`` skips it), then the
  schedulers are stopped and the tree killed (exit status -9). Before that, uvicorn's handler shuts down and
  the process dies of SIGTERM; before the HTTP server starts, SIGTERM's default action applies.
- SIGINT (Ctrl-C): uvicorn's shutdown lines, the children are killed, the process dies of SIGINT.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from specbench_tui.sim import kvpool, logs, procs
from specbench_tui.sim.api import Api, ServerState
from specbench_tui.sim.args import ResolutionError, Resolved, parse_args, resolve
from specbench_tui.sim.engine import Engine
from specbench_tui.sim.httpd import HttpServer
from specbench_tui.sim.logs import SITE, Logger
from specbench_tui.sim.metrics import Metrics
from specbench_tui.sim.profile import ProfileError, first_rule, load_profile
from specbench_tui.sim.speed import SpeedModel, config_facts

WARMUP_PROMPT = "The capital city of France is"
_MAIN_FRAMES = [
    ("<frozen runpy>", 198, "_run_module_as_main", None),
    ("<frozen runpy>", 88, "_run_code", None),
    (f"{SITE}/sglang/launch_server.py", 32, "<module>", "server_args = prepare_server_args(sys.argv[1:])"),
    (f"{SITE}/sglang/srt/server_args.py", 9012, "prepare_server_args", "return ServerArgs.from_cli_args(raw_args)"),
    (f"{SITE}/sglang/srt/server_args.py", 8890, "from_cli_args", "return cls(**{attr: getattr(args, attr) for attr in attrs})"),
    ("<string>", 312, "__init__", None),
    (f"{SITE}/sglang/srt/server_args.py", 812, "__post_init__", "self.resolve_once()"),
]


def _fatal(exc_type: str, message: str, extra_frames: Sequence[tuple[str, int, str, str | None]] = ()) -> int:
    """Print an uncaught-exception traceback from SGLang's start-up path; exit status 1 like Python's."""
    lines = ["Traceback (most recent call last):"]
    for path, line, func, code in [*_MAIN_FRAMES, *extra_frames]:
        lines.append(f'  File "{path}", line {line}, in {func}')
        if code:
            lines.append(f"    {code}")
    lines.append(f"{exc_type}: {message}")
    logs.write_raw("\n".join(lines) + "\n")
    return 1


def _is_missing_local_path(path: str) -> bool:
    return path.startswith(("/", "./", "../", "~")) and not os.path.exists(os.path.expanduser(path))


def _server_args_repr(values: Mapping[str, object]) -> str:
    return "ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in values.items()) + ")"


def _bool_env(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


class Server:
    """One simulated SGLang server process."""

    def __init__(self, resolved: Resolved, profile: dict[str, Any], context_len: int) -> None:
        self.args = resolved
        self.profile = profile
        self.context_len = context_len
        self.log = Logger("", resolved.log_level, resolved.log_level_http)
        self.style = profile["logs"]["style"]
        self.sched_log = Logger(logs.scheduler_prefix(0 if resolved.dp_size > 1 else None, 0, resolved.tp_size,
                                                      self.style), resolved.log_level)
        self.facts = config_facts(resolved)
        self.memory = procs.memory_plan(profile["model"], resolved.mem_fraction_static, resolved.tp_size,
                                        resolved.spec_on, resolved.max_total_tokens)
        self.captured_bs = (procs.capture_sizes(resolved.decode_graph_max_bs)
                            if resolved.cuda_graph_backend_decode != "disabled" else [])
        """The decode batch sizes captured as CUDA graphs (``Capture target decode CUDA graph end. bs=[...]``)."""
        self.children: list[procs.Child] = []
        self.http: HttpServer | None = None
        self.t0 = time.monotonic()
        self._dying = False
        self._running_phase = False
        """The first request created the handle loop: SIGQUIT now takes the running-phase handler."""
        self._exit: asyncio.Future[int] | None = None
        self._watchdog_task: asyncio.Task[None] | None = None
        self._child_watch: asyncio.Task[None] | None = None

    # -- start-up ------------------------------------------------------------------------------------------
    def _startup_failure(self) -> tuple[procs.StartupCrash | None, bool]:
        """The start-up crash (natural OOM or a profile rule) and whether start-up hangs."""
        if not self.memory.fits_weights:
            return {"stage": "load", "signature": "cuda_oom", "ranks": "all"}, False
        if not self.memory.fits_pool:
            return {"stage": "kv", "signature": "kv_pool_oom", "ranks": "all"}, False
        rule = first_rule(self.profile["crash"], self.facts)
        if rule and rule.get("when") == "startup":
            signature = rule.get("signature", "cuda_illegal_instruction")
            stage = {"cuda_oom": "load", "kv_pool_oom": "kv"}.get(signature, "graph")
            return {"stage": stage, "signature": signature, "ranks": rule.get("ranks", "all")}, False
        hang = first_rule(self.profile["hang"], self.facts)
        return None, bool(hang and hang.get("when") == "startup")

    def _child_config(self) -> procs.ChildConfig:
        a = self.args
        crash, hang = self._startup_failure()
        slow = first_rule(self.profile["slow_start"], self.facts)
        return procs.child_config(
            main_pid=os.getpid(), dp_size=a.dp_size, tp_size=a.tp_size, base_gpu_id=a.base_gpu_id, style=self.style,
            log_level=a.log_level, startup=self.profile["startup"], time_scale=float(self.profile["time_scale"]),
            extra_delay_s=float(self.profile["startup"]["extra_delay_s"]) + float(slow.get("delay_s", 0) if slow else 0),
            memory=self.memory, architecture=self.profile["model"]["architecture"],
            draft_architecture="DFlashDraftModel" if a.algorithm in ("DFLASH", "DDTREE") else "LlamaForCausalLMEagle3",
            spec_on=a.spec_on, decode_graph=a.cuda_graph_backend_decode != "disabled",
            draft_tokens_per_req=a.speculative_num_draft_tokens or 1,
            cuda_graph_max_bs=a.decode_graph_max_bs, max_total_num_tokens=self.memory.max_total_num_tokens,
            chunked_prefill_size=a.chunked_prefill_size, max_prefill_tokens=a.max_prefill_tokens,
            max_running_requests=kvpool.max_running_requests(a.max_running_requests, self.memory.max_total_num_tokens,
                                                             self.context_len, a.attn_dp_size),
            context_len=self.context_len,
            watchdog_timeout=a.watchdog_timeout, startup_crash=crash, startup_hang=hang,
        )

    async def _wait_children_ready(self) -> bool:
        pending = [c for c in self.children if c.role != "detokenizer"]
        while pending:
            for child in list(pending):
                try:
                    if child.conn.poll():
                        child.conn.recv()
                        pending.remove(child)
                except (EOFError, OSError):
                    if not self._dying:
                        self.log.error("Rank 0 scheduler is dead. Please check if there are relevant logs.")
                    return False
            await asyncio.sleep(0.01)
        return True

    def _build(self) -> Api:
        a = self.args
        metrics = Metrics(
            {"model_name": a.served_model_name, "engine_type": "unified", "tp_rank": "0", "pp_rank": "0"},
            {"max_total_num_tokens": self.memory.max_total_num_tokens, "context_len": self.context_len,
             "spec_num_steps": a.speculative_num_steps or 0, "spec_num_draft_tokens": a.speculative_num_draft_tokens or 0,
             "kv_cache_memory_usage_gb": max(self.memory.pool_gb, 0.0), "weight_memory_usage_gb": self.memory.weights_gb,
             "graph_memory_usage_gb": self.memory.graph_gb,
             "startup_cuda_graph_time_seconds": float(self.profile["startup"]["cuda_graph_s"])},
        )
        crash = first_rule(self.profile["crash"], self.facts)
        hang = first_rule(self.profile["hang"], self.facts)
        self.engine = Engine(
            speed=SpeedModel(self.profile, a), resolved=a, profile=self.profile, logger=self.sched_log,
            max_total_num_tokens=self.memory.max_total_num_tokens, context_len=self.context_len, metrics=metrics,
            crash_rule=crash if crash and crash.get("when", "after_requests") != "startup" else None,
            hang_rule=hang if hang and hang.get("when", "after_requests") != "startup" else None,
            empty_output=first_rule(self.profile["empty_output"], self.facts) is not None,
            on_crash=self._order_crash(crash), on_watchdog=self._order_watchdog,
            rank_logs=[Logger(logs.scheduler_prefix(rank, 0, a.tp_size, self.style), a.log_level)
                       for rank in range(a.dp_size)] if a.dp_size > 1 else None,
            cuda_graph_bs=self.captured_bs or None,
        )
        self.state = ServerState(args=a, engine=self.engine, metrics=metrics, log=self.log, profile=self.profile,
                                 memory=self.memory, context_len=self.context_len, captured_bs=self.captured_bs,
                                 first_request_hook=self._create_handle_loop)
        return Api(self.state)

    def _order_crash(self, rule: Mapping[str, object] | None) -> Callable[[str], None]:
        def order(signature: str) -> None:
            ranks = rule.get("ranks", "all") if rule else "all"
            self._send_schedulers(("crash", signature, self.args.algorithm, ranks))
        return order

    def _order_watchdog(self) -> None:
        self._send_schedulers(("watchdog", self.args.algorithm))

    def _send_schedulers(self, order: tuple[object, ...]) -> None:
        for child in self.children:
            if child.role != "detokenizer":
                try:
                    child.conn.send(order)
                except OSError:
                    pass

    async def _http_call(self, method: str, path: str, body: Mapping[str, object] | None = None) -> int:
        """A minimal HTTP/1.1 call to ourselves (the warm-up goes over the wire, as in SGLang)."""
        host = "127.0.0.1" if self.args.host in ("0.0.0.0", "") else ("::1" if self.args.host == "::" else self.args.host)
        reader, writer = await asyncio.open_connection(host, self.args.port)
        data = json.dumps(body).encode() if body is not None else b""
        headers = [f"{method} {path} HTTP/1.1", f"host: {host}:{self.args.port}", "connection: close",
                   f"content-length: {len(data)}", "content-type: application/json"]
        if self.args.api_key:
            headers.append(f"authorization: Bearer {self.args.api_key}")
        writer.write(("\r\n".join(headers) + "\r\n\r\n").encode() + data)
        await writer.drain()
        status_line = await reader.readline()
        await reader.read()
        writer.close()
        return int(status_line.split()[1])

    async def _warmup(self) -> bool:
        try:
            await self._http_call("GET", "/model_info")
            status = await self._http_call("POST", "/generate", {
                "text": WARMUP_PROMPT, "sampling_params": {"temperature": 0, "max_new_tokens": 8}})
        except (OSError, ValueError, IndexError) as exc:
            status, error = 0, repr(exc)
        else:
            error = f"status_code={status}"
        if status == 200:
            return True
        self.log.error(f"Initialization failed. warmup error: {error}")
        return False

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        self._exit = loop.create_future()
        loop.add_signal_handler(signal.SIGQUIT, self._on_sigquit)
        loop.add_signal_handler(signal.SIGINT, self._on_interrupt, signal.SIGINT)
        self.children = procs.start_children(self._child_config())
        if not await self._wait_children_ready():
            procs.kill_process_tree(self.children, include_parent=False)
            return 1
        api = self._build()
        self.engine.start()
        self._child_watch = loop.create_task(self._subprocess_watchdog())
        self.http = HttpServer(api.handle, self.log, os.environ.get("SPECBENCH_SIM_WIRE_TRACE"))
        self.log.uvicorn(f"Started server process [{os.getpid()}]")
        self.log.uvicorn("Waiting for application startup.")
        self.log.uvicorn("Application startup complete.")
        try:
            if self.profile["failures"]["port_in_use"]:
                host = self.args.host
                raise OSError(98, f"error while attempting to bind on address ({host!r}, {self.args.port}): "
                                  "address already in use")
            await self.http.start(self.args.host, self.args.port)
        except OSError as exc:
            self.log.uvicorn(str(exc), 40)
            self.log.uvicorn("Waiting for application shutdown.")
            self.log.uvicorn("Application shutdown complete.")
            procs.kill_process_tree(self.children, include_parent=False)
            return 1
        loop.add_signal_handler(signal.SIGTERM, self._on_interrupt, signal.SIGTERM)
        self.log.uvicorn(f"Uvicorn running on http://{self.args.host}:{self.args.port} (Press CTRL+C to quit)")
        if not self.args.skip_server_warmup and not await self._warmup():
            procs.kill_process_tree(self.children)
        try:  # _freeze_gc_after_server_warmup, with or without a warm-up
            await self._http_call("POST", "/freeze_gc")
        except (OSError, ValueError, IndexError):
            self.log.warning("post-warmup freeze_gc failed")
        self.state.startup_time = time.monotonic() - self.t0
        self.state.metrics.update_gauges(startup_time_seconds=self.state.startup_time)
        self.state.status = "Up"
        self.engine.serving = True
        self.log.info("The server is fired up and ready to roll!")
        return await self._exit

    # -- signals and shutdown ----------------------------------------------------------------------------------
    def _create_handle_loop(self) -> None:
        """SGLang's ``auto_create_handle_loop`` (first request): SIGTERM now drains, the watchdog starts."""
        loop = asyncio.get_running_loop()
        self._running_phase = True
        loop.add_signal_handler(signal.SIGTERM, self._on_sigterm)
        self._watchdog_task = loop.create_task(self._sigterm_watchdog())

    async def _subprocess_watchdog(self) -> None:
        """SGLang's ``SubprocessWatchdog``: a child that died without an exception triggers the SIGQUIT path."""
        while not self._dying:
            await asyncio.sleep(0.2)
            for child in self.children:
                code = child.process.exitcode
                if code is not None and not self._dying:
                    self.log.error(f"Subprocess {child.role} (pid={child.process.pid}) crashed with exit code {code}. "
                                   "Triggering SIGQUIT for cleanup...")
                    os.kill(os.getpid(), signal.SIGQUIT)
                    return

    def _on_sigquit(self) -> None:
        """SGLang's two SIGQUIT handlers: ``engine.py``'s launch-phase one until the first request (the warm-up
        counts) creates the tokenizer manager's handle loop, whose ``running_phase_sigquit_handler`` replaces it
        (called by ``loop.add_signal_handler`` without arguments, hence ``signum=None, frame=None``)."""
        if self._dying:
            return
        self._dying = True
        if self._running_phase:
            self.log.error("SIGQUIT received. signum=None, frame=None. It usually means one child failed.")
        else:
            self.log.error("Received sigquit from a child process. It usually means the child failed.")
        pid = os.getpid()
        self.log.info(f"kill_process_tree called: parent_pid={pid}, include_parent=True, pid={pid}")
        procs.kill_process_tree(self.children)

    def _on_interrupt(self, signum: int) -> None:
        """SIGINT, or SIGTERM before the first request: uvicorn shuts down, the tree dies, then ourselves."""
        if self._dying:
            return
        self._dying = True
        if self.http is not None:
            self.log.uvicorn("Shutting down")
            self.http.close()
            self.log.uvicorn("Waiting for application shutdown.")
            self.log.uvicorn("Application shutdown complete.")
            self.log.uvicorn(f"Finished server process [{os.getpid()}]")
        procs.kill_process_tree(self.children, include_parent=False)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    def _on_sigterm(self) -> None:
        self.log.warning("SIGTERM received. signum=None frame=None. Draining requests and shutting down...")
        self.state.gracefully_exit = True

    async def _sigterm_watchdog(self) -> None:
        poll = float(self.profile["shutdown"]["poll_s"])
        while not self.state.gracefully_exit:
            await asyncio.sleep(poll)
        while True:
            pending = [r.rid for r in (*self.engine.waiting, *self.engine.running)]
            if self.state.status == "UnHealthy":
                self.log.error("Signal SIGTERM received while health check failed. Force exiting.")
                break
            if _bool_env("SGL_FORCE_SHUTDOWN"):
                self.log.error("Signal SIGTERM received while force shutdown flag set. Force exiting.")
                break
            self.log.info(f"Gracefully exiting... Remaining number of requests {len(pending)}. "
                          f"Remaining requests remaining_rids={pending!r}.")
            if not pending:
                break
            await asyncio.sleep(poll)
        self._dying = True
        for child in self.children:
            try:
                child.conn.send(("stop",))
            except OSError:
                pass
        deadline = time.monotonic() + 15.0
        while time.monotonic() < deadline and any(c.process.is_alive() for c in self.children):
            await asyncio.sleep(0.02)
        alive = [c.process.pid for c in self.children if c.process.is_alive()]
        if alive:
            self.log.warning(f"Schedulers still alive 15s after ShutdownReq, killing them before they released: {alive}")
        procs.kill_process_tree(self.children)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m specbench_tui.sim``: parse SGLang's flags and run the simulated server."""
    ns = parse_args(argv)
    try:
        profile = load_profile()
    except ProfileError as exc:
        logs.write_raw(f"specbench_tui.sim: {exc}\n")
        return 2
    model_path = ns.model_path or ""
    if model_path and _is_missing_local_path(model_path):
        return _fatal("OSError", f"Incorrect path_or_model_id: '{model_path}'. Please provide either the path to a "
                                 "local folder or the repo_id of a model on the Hub.",
                      [(f"{SITE}/transformers/utils/hub.py", 511, "cached_files", "raise OSError(")])
    auto = (5, 4, 8) if "llama" in model_path.lower() else (3, 1, 4)
    try:
        resolved = resolve(ns, auto, int(profile["model"]["draft_block_size"]))
    except ResolutionError as exc:
        return _fatal(exc.exc_type, exc.message)
    if profile["seed"] is not None:
        resolved.values["random_seed"] = int(profile["seed"])
    log = Logger("", resolved.log_level, resolved.log_level_http)
    derived = int(profile["model"]["context_length"])
    context_len = resolved.context_length or derived
    if context_len > derived:
        message = (f"User-specified context_length ({context_len}) is greater than the derived context_length "
                   f"({derived}). This may lead to incorrect model outputs or CUDA errors.")
        if not _bool_env("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"):
            return _fatal("ValueError", message + " To allow overriding this maximum, set the env var "
                                                  "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1")
        log.warning("Warning: " + message)
    for warning in resolved.warnings:
        log.warning(warning)
    log.info(f"server_args={_server_args_repr(resolved.values)}")
    try:
        return asyncio.run(Server(resolved, profile, context_len).run())
    except KeyboardInterrupt:  # SIGINT before the event loop took over
        return 130
