"""What each replica serves on its metrics address: /metrics, /healthz, /readyz and /shards.

The HTTP server runs in its own threads (stdlib ThreadingHTTPServer) so a slow scraper never stalls the
event loop; the answers themselves are computed on the event loop through an anyio BlockingPortal, so they
read the replica's state without locks and always see a consistent snapshot.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
from anyio.from_thread import BlockingPortal
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, disable_created_metrics, generate_latest

from shardsync.logs import get_logger

log = get_logger(__name__)

# The `*_created` series prometheus_client adds to every counter, histogram and summary repeat each HELP
# line and tell an operator nothing (external-dns does not expose them either).
disable_created_metrics()  # type: ignore[no-untyped-call]


def parse_address(address: str) -> tuple[str, int]:
    """`:7979` → ("", 7979) (every interface, as external-dns); `127.0.0.1:0` → a free loopback port."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"metrics address {address!r} is not HOST:PORT or :PORT")
    return host.strip("[]"), int(port)


class StatusEndpoints:
    """The callables behind the endpoints; each runs on the event loop. `/readyz` answers 200 or 503 with
    `ready()`'s reason ("ok" when ready), followed by `notes()`: conditions that do not hold readiness (a
    source kind waiting for its CRD), whichever the answer."""

    def __init__(
        self,
        ready: Callable[[], tuple[bool, str]],
        shards: Callable[[], dict[str, Any] | Awaitable[dict[str, Any]]],  # awaited when a coroutine
        notes: Callable[[], list[str]] = list,
    ) -> None:
        self.ready = ready
        self.shards = shards
        self.notes = notes

    def readiness(self) -> tuple[bool, str]:
        ok, why = self.ready()
        return ok, "; ".join([why or "ok", *self.notes()])


class StatusServer:
    """Serves the endpoints from `start()` until `stop()`; `port` is the bound port (useful with port 0).

    The socket is bound at construction, so a busy or forbidden port fails before anything else starts;
    the portal (the event loop the endpoints run on) may be given then or to `start()`.
    """

    def __init__(
        self, address: str, endpoints: StatusEndpoints, portal: BlockingPortal | None = None
    ) -> None:
        host, port = parse_address(address)
        self._portal = portal
        handler = _make_handler(endpoints, self._get_portal)
        self._httpd = ThreadingHTTPServer((host, port), handler)
        self._httpd.daemon_threads = True
        self.port: int = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="status-http", daemon=True)

    def _get_portal(self) -> BlockingPortal:
        if self._portal is None:
            raise RuntimeError("not started")
        return self._portal

    def start(self, portal: BlockingPortal | None = None) -> None:
        self._portal = portal or self._portal
        self._thread.start()
        log.info("serving status endpoints", port=self.port)

    def stop(self) -> None:
        if self._thread.is_alive():
            self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread.is_alive():
            self._thread.join(timeout=5)


def _make_handler(
    endpoints: StatusEndpoints, get_portal: Callable[[], BlockingPortal]
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # scrapes are not events worth a log line
            pass

        def _send(self, code: int, body: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            try:
                portal = get_portal()
                if path == "/metrics":
                    self._send(200, generate_latest(REGISTRY), CONTENT_TYPE_LATEST)
                elif path == "/healthz":
                    # Answering at all proves the process and its event loop are alive.
                    portal.call(lambda: None)
                    self._send(200, b"ok\n", "text/plain")
                elif path == "/readyz":
                    ok, why = portal.call(endpoints.readiness)
                    self._send(200 if ok else 503, why.encode() + b"\n", "text/plain")
                elif path == "/shards":
                    body = orjson.dumps(portal.call(endpoints.shards), option=orjson.OPT_INDENT_2)
                    self._send(200, body, "application/json")
                else:
                    self._send(404, b"not found\n", "text/plain")
            except Exception as exc:  # the replica is shutting down or the snapshot failed
                self._send(503, f"unavailable: {exc}\n".encode(), "text/plain")

    return Handler
