"""An aiohttp application served on a loopback port from an event loop in a background thread, for the
cloud API contract fakes: `ServedApp(app).start()` binds a free port on 127.0.0.1, `url` is where it
answers, `stop()` ends the server, its loop and its thread (bounded waits). A context manager too.

The tests' clients (official SDKs, replica processes) are blocking or live in other processes, so the
fake needs a loop of its own; its handlers run on that one thread, one at a time between awaits.
"""

from __future__ import annotations

import asyncio
import threading

from aiohttp import web

START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0


class ServedApp:
    def __init__(self, app: web.Application, host: str = "127.0.0.1") -> None:
        self.app = app
        self.host = host
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        if not self.port:
            raise RuntimeError("not started")
        return f"http://{self.host}:{self.port}"

    def start(self) -> ServedApp:
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="cloud-fake", daemon=True)
        thread.start()
        self._loop, self._thread = loop, thread
        try:
            self.port = asyncio.run_coroutine_threadsafe(self._serve(), loop).result(timeout=START_TIMEOUT)
        except BaseException:
            self.stop()
            raise
        return self

    async def _serve(self) -> int:
        self._runner = runner = web.AppRunner(self.app, access_log=None, shutdown_timeout=STOP_TIMEOUT)
        await runner.setup()
        site = web.TCPSite(runner, self.host, 0)
        await site.start()
        return int(runner.addresses[0][1])

    def stop(self) -> None:
        loop, thread, runner = self._loop, self._thread, self._runner
        if loop is None or thread is None:
            return
        if runner is not None:
            asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=STOP_TIMEOUT * 2)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=STOP_TIMEOUT)
        if not thread.is_alive():
            loop.close()
        self._loop = self._thread = self._runner = None
        self.port = 0

    def __enter__(self) -> ServedApp:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
