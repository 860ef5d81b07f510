"""Every use of a private name of Textual or textual-serve, in one module, each checked by
tests/tui/test_tui_textual_private.py.

The screen uses Textual's public API only: its tables are line-API views over view rows
(:mod:`~specbench_tui.tui.table_view`), colours come from component classes and theme variables, toasts are
Textual's own notifications. What reaches further is listed in :data:`PRIVATE_NAMES`; a test per name fails on an
upgrade that removes or changes it, and a static check fails when any other module names one.

What is here: textual-serve's per-tab app and its server, with the private hooks ``specbench serve`` needs
(how a tab's process starts and ends, which requests and messages reach it) under public names
(:class:`ServedApp`, :class:`ServedServer`); :mod:`~specbench_tui.tui.web` builds on them. textual-serve is the
``serve`` extra (pinned in ``pyproject.toml``): only :mod:`~specbench_tui.tui.web` imports this module.
"""

from __future__ import annotations

import asyncio
from asyncio.subprocess import Process

from aiohttp import web
from textual_serve.app_service import AppService
from textual_serve.server import Server

PRIVATE_NAMES: tuple[tuple[str, str], ...] = (
    # (where, name): every private name this module uses; tests/tui/test_tui_textual_private.py checks each.
    ("textual_serve.app_service.AppService", "_build_environment"),
    ("textual_serve.app_service.AppService", "_open_app_process"),
    ("textual_serve.app_service.AppService", "_process"),
    ("textual_serve.app_service.AppService", "_stdin"),
    ("textual_serve.app_service.AppService", "_task"),
    ("textual_serve.app_service.AppService", "_download_manager"),
    ("textual_serve.server.Server", "_make_app"),
    ("textual_serve.server.Server", "_process_messages"),
)


class ServedApp(AppService):
    """textual-serve's app of one browser tab, its process's start and end under public names."""

    def environment(self, environment: dict[str, str]) -> dict[str, str]:
        """The app process's environment, from textual-serve's (``environment``); a subclass adds to it."""
        return environment

    async def open_process(self, environment: dict[str, str]) -> Process:
        """Start the app's process with ``environment``, its stdin, stdout and stderr piped."""
        raise NotImplementedError

    def _build_environment(self, width: int = 80, height: int = 24) -> dict[str, str]:
        return self.environment(super()._build_environment(width, height))

    async def _open_app_process(self, width: int = 80, height: int = 24) -> Process:
        process = await self.open_process(self._build_environment(width, height))
        assert process.stdin is not None
        self._process = process
        self._stdin = process.stdin
        return process

    @property
    def process(self) -> Process | None:
        """The app's process once started."""
        process: Process | None = self._process
        return process

    def take_task(self) -> asyncio.Task[None] | None:
        """The task that runs the app (None: not started, or taken already), no longer the service's."""
        task: asyncio.Task[None] | None = self._task
        self._task = None
        return task

    async def cancel_downloads(self) -> None:
        """Cancel the app's downloads in flight."""
        await self._download_manager.cancel_app_downloads(app_service_id=self.app_service_id)


class ServedServer(Server):
    """textual-serve's server, its web application and the handling of a tab's messages under public names."""

    def extend_app(self, app: web.Application) -> None:
        """Add to the web application textual-serve made (middlewares, routes)."""

    async def make_app(self) -> web.Application:
        """The web application to run."""
        return await self._make_app()

    async def process_messages(self, websocket: web.WebSocketResponse, app_service: AppService) -> None:
        """Handle a tab's messages until its websocket closes (textual-serve's handling unless overridden)."""
        await super()._process_messages(websocket, app_service)

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        self.extend_app(app)
        return app

    async def _process_messages(self, websocket: web.WebSocketResponse, app_service: AppService) -> None:
        await self.process_messages(websocket, app_service)
