"""The running server: binds the HTTP server to a port, runs it in a thread, stops it without hanging,
snapshots to `--data-dir` on stop and restarts on the same port with the same objects."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from shardsync.local.apiserver import kubeconfig, snapshot
from shardsync.local.apiserver.client import api_client
from shardsync.local.apiserver.clients import ClientCounts
from shardsync.local.apiserver.faults import Faults
from shardsync.local.apiserver.http import ApiHTTPServer, App
from shardsync.local.apiserver.resources import ResourceTable
from shardsync.local.apiserver.store import Store
from shardsync.logs import get_logger

log = get_logger(__name__)


@dataclass(eq=False)
class ApiServer:
    """An embedded API server. `start()` returns once it accepts connections; `stop()` returns once every
    connection thread has ended (bounded), after writing the snapshot when a data dir is set."""

    host: str = "127.0.0.1"
    port: int = 0  # 0 picks a free one; the bound port once started (a restart keeps it)
    data_dir: Path | None = None  # the snapshot is loaded from here at start, saved here on stop
    kubeconfig_path: Path | None = None  # written for this server on start
    window: int = 10_000  # events kept for watch resume
    bookmark_interval: float = 60.0
    faults: Faults = field(default_factory=Faults, init=False)
    clients: ClientCounts = field(default_factory=ClientCounts, init=False)  # per-client requests and events
    store: Store = field(init=False)
    _http: ApiHTTPServer | None = field(default=None, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)
    _app: App | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.store = self._new_store(snapshot.load(self.data_dir) if self.data_dir else None)

    @property
    def kubeconfig(self) -> Path | None:
        return self.kubeconfig_path

    def _new_store(self, state: dict[str, Any] | None) -> Store:
        store = Store(ResourceTable(), window=self.window)
        if state is not None:
            store.load(state)
        return store

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._http is not None

    @property
    def open_connections(self) -> int:
        """Client connections currently held open (keep-alive and watches)."""
        return self._http.connection_count() if self._http is not None else 0

    def start(self) -> ApiServer:
        if self._http is not None:
            return self
        self._app = App(self.store, self.faults, self.bookmark_interval, self.save_snapshot, self.clients)
        self._http = ApiHTTPServer((self.host, self.port), self._app)
        self.port = self._http.server_address[1]
        self._thread = threading.Thread(
            target=self._http.serve_forever,
            kwargs={"poll_interval": 0.1},
            name=f"apiserver-{self.port}",
            daemon=True,
        )
        self._thread.start()
        if self.kubeconfig_path is not None:
            kubeconfig.write(self.kubeconfig_path, self.url)
        log.info("apiserver started", url=self.url, resource_version=self.store.resource_version)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        http, app, thread = self._http, self._app, self._thread
        if http is None or app is None or thread is None:
            return
        app.stopping.set()
        self.faults.wake()
        self.store.wake()
        http.shutdown()
        thread.join(timeout)
        if not http.close_connections(timeout):
            log.warning("apiserver connections still open after stop", url=self.url)
        http.server_close()
        self._http = self._app = self._thread = None
        self.save_snapshot()
        log.info("apiserver stopped", url=self.url, resource_version=self.store.resource_version)

    def restart(self) -> ApiServer:
        """Stops and starts again on the same port with the same objects and resourceVersion. Like a real
        API server restart, the watch window starts empty (resuming from an older version gets 410) and no
        injected fault survives it. `self.store` is a new Store afterwards."""
        self.stop()
        self.faults.clear()
        self.store = self._new_store(self.store.dump())
        return self.start()

    def save_snapshot(self) -> str | None:
        if self.data_dir is None:
            return None
        return str(snapshot.save(self.data_dir, self.store.dump()))

    def write_kubeconfig(self, path: Path) -> Path:
        return kubeconfig.write(path, self.url)

    def api_client(self, user_agent: str | None = None) -> Any:
        """A configured `kubernetes.client.ApiClient` for this server."""
        return api_client(self.url, user_agent)

    def __enter__(self) -> ApiServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def serve(
    port: int = 0,
    host: str = "127.0.0.1",
    data_dir: Path | None = None,
    kubeconfig_path: Path | None = None,
    window: int = 10_000,
    bookmark_interval: float = 60.0,
) -> ApiServer:
    """Starts an embedded API server in a background thread of this process and returns its handle."""
    return ApiServer(host, port, data_dir, kubeconfig_path, window, bookmark_interval).start()
