"""The HTTP layer: a threaded HTTP/1.1 keep-alive server (Nagle off) whose handler applies faults, serves the
admin endpoint, hands API requests to RestApi and streams watches as chunked line-delimited JSON."""

from __future__ import annotations

import contextlib
import email.utils
import select
import socket
import struct
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import orjson

from shardsync.local.apiserver import admin, routing
from shardsync.local.apiserver.clients import ClientCounts, verb_of
from shardsync.local.apiserver.errors import ApiError, bad_request, service_unavailable
from shardsync.local.apiserver.faults import Faults
from shardsync.local.apiserver.rest import Reply, Request, RestApi
from shardsync.local.apiserver.store import Store
from shardsync.local.apiserver.watch import WatchSpec, stream
from shardsync.logs import get_logger

log = get_logger(__name__)
_MAX_BODY = 64 * 1024 * 1024
_MAX_LINE = 65536
_MAX_HEADERS = 100


def _http_date() -> str:
    now = int(time.time())
    cached = _DATE_CACHE
    if cached[0] != now:
        cached[:] = [now, email.utils.formatdate(now, usegmt=True)]
    return str(cached[1])


_DATE_CACHE: list[int | str] = [0, ""]


class App:
    """What every handler thread shares: the store, the REST layer, faults, the per-client counts and the
    stop flag."""

    def __init__(
        self,
        store: Store,
        faults: Faults,
        bookmark_interval: float,
        snapshot: Any = None,
        clients: ClientCounts | None = None,
    ) -> None:
        self.store = store
        self.api = RestApi(store)
        self.faults = faults
        self.clients = clients if clients is not None else ClientCounts()
        self.bookmark_interval = bookmark_interval
        self.stopping = threading.Event()
        self.snapshot = snapshot or (lambda: None)


class ApiHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], app: App) -> None:
        self.app = app
        self._conns: set[socket.socket] = set()
        self._conns_cond = threading.Condition()
        super().__init__(address, Handler)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        with self._conns_cond:
            self._conns.add(request)
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._conns_cond:
                self._conns.discard(request)
                self._conns_cond.notify_all()

    def connection_count(self) -> int:
        with self._conns_cond:
            return len(self._conns)

    def close_connections(self, timeout: float) -> bool:
        """Shuts every open connection so its thread ends; True when all ended within `timeout`."""
        with self._conns_cond:
            for conn in list(self._conns):
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
            return self._conns_cond.wait_for(lambda: not self._conns, timeout)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: ApiHTTPServer
    fields: dict[str, str]
    raw_requestline: bytes

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("http", request=self.requestline, detail=format % args)

    def version_string(self) -> str:
        return "shardsync-apiserver"

    def parse_request(self) -> bool:
        """Request line and headers without the email parser, which costs a quarter of a request's time.

        Sets command, path, request_version, close_connection and `fields` (lower-cased header names)."""
        self.command = ""
        self.close_connection = True
        self.requestline = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        words = self.requestline.split()
        if len(words) != 3 or not words[2].startswith("HTTP/1."):
            self.request_version = "HTTP/1.0"
            self.send_error(400, f"Bad request line {self.requestline!r}")
            return False
        self.command, self.path, self.request_version = words
        fields: dict[str, str] = {}
        while True:
            line = self.rfile.readline(_MAX_LINE + 1)
            if len(line) > _MAX_LINE or len(fields) > _MAX_HEADERS:
                self.send_error(431, "Request header too large")
                return False
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode("iso-8859-1").partition(":")
            key = name.strip().lower()
            fields[key] = f"{fields[key]}, {value.strip()}" if key in fields else value.strip()
        self.fields = fields
        connection = fields.get("connection", "").lower()
        self.close_connection = connection == "close" or (
            self.request_version == "HTTP/1.0" and connection != "keep-alive"
        )
        if fields.get("expect", "").lower() == "100-continue":
            self.send_response_only(100)
            self.end_headers()
        return True

    def do_GET(self) -> None:
        self._handle()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_GET

    # -- request plumbing ----------------------------------------------------------------------------------

    def _read_body(self) -> bytes:
        if "chunked" in self.fields.get("transfer-encoding", "").lower():
            parts: list[bytes] = []
            total = 0
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline().strip():
                        pass
                    return b"".join(parts)
                total += size
                if total > _MAX_BODY:
                    raise bad_request("request body too large")
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.fields.get("content-length") or 0)
        if length > _MAX_BODY:
            raise bad_request("request body too large")
        return self.rfile.read(length) if length else b""

    def _header(self, name: str) -> str | None:
        return self.fields.get(name.lower())

    def _handle(self) -> None:
        app = self.server.app
        try:
            body = self._read_body()
        except (ApiError, ValueError) as exc:
            self.close_connection = True
            self._send_error(exc if isinstance(exc, ApiError) else bad_request(str(exc)))
            return
        url = urlsplit(self.path)
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        if url.path.startswith(admin.PREFIX):
            code, doc = admin.handle(
                self.command,
                url.path[len(admin.PREFIX) :],
                query,
                app.faults,
                app.store.resource_version,
                app.snapshot,
                app.clients,
            )
            self._send(code, orjson.dumps(doc), "application/json")
            return
        user_agent = self._header("User-Agent") or ""
        self._count(user_agent, url.path, query)
        mode = app.faults.hold(user_agent, self._header, app.stopping.is_set, url.path)
        if mode == "drop" or app.stopping.is_set():
            self._drop()
            return
        if mode is not None:
            self._send_error(service_unavailable("the API server is unavailable (injected fault)"))
            return
        try:
            reply = app.api.handle(Request(self.command, url.path, query, self._header, body))
        except ApiError as exc:
            self._send_error(exc)
            return
        except Exception as exc:  # a bug must answer 500, not kill the connection thread silently
            log.error("request failed", exc_info=True, method=self.command, path=url.path)
            self._send_error(ApiError(500, "InternalError", f"internal error: {exc}"))
            return
        if isinstance(reply, WatchSpec):
            self._stream(reply, user_agent)
        else:
            self._send_reply(reply)

    def _count(self, user_agent: str, path: str, query: dict[str, str]) -> None:
        """Count this request for its client (discovery and health requests are not counted)."""
        route = routing.parse(path)
        if isinstance(route, routing.ResourceRoute):
            watch = query.get("watch", "").lower() in ("true", "1")
            resource = route.plural if route.subresource is None else f"{route.plural}/{route.subresource}"
            verb = verb_of(self.command, route, watch)
            self.server.app.clients.request(user_agent, verb, resource, route.name)

    # -- responses -----------------------------------------------------------------------------------------

    def _send(self, code: int, data: bytes, content_type: str) -> None:
        # Status line, headers and body in one send: separate small writes cost a syscall and a packet each.
        reason = self.responses.get(code, ("",))[0]
        head = (
            f"{self.protocol_version} {code} {reason}\r\n"
            f"Content-Type: {content_type}\r\n"
            f"Content-Length: {len(data)}\r\n"
            "Cache-Control: no-cache, private\r\n"
            f"Date: {_http_date()}\r\n" + ("Connection: close\r\n" if self.close_connection else "") + "\r\n"
        )
        self.wfile.write(head.encode("latin-1") + (b"" if self.command == "HEAD" else data))

    def _send_reply(self, reply: Reply) -> None:
        data = reply.body if isinstance(reply.body, bytes) else orjson.dumps(reply.body)
        self._send(reply.code, data, reply.content_type)

    def _send_error(self, exc: ApiError) -> None:
        self._send(exc.code, orjson.dumps(exc.status()), "application/json")

    def _drop(self) -> None:
        """Resets the connection without an answer, as a cut-off network would look to the client."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    def _peer_closed(self) -> bool:
        """True once the client has closed its side: an idle watch would otherwise hold its thread until the
        next event for that resource fails to write."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _stream(self, spec: WatchSpec, user_agent: str) -> None:
        app = self.server.app
        resource = spec.resource.plural
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        events: Iterator[dict[str, Any] | None] = stream(
            app.store, spec, app.stopping.is_set, app.bookmark_interval
        )
        path = urlsplit(self.path).path
        try:
            for event in events:
                mode = app.faults.hold(user_agent, self._header, app.stopping.is_set, path)
                if app.stopping.is_set():
                    self.close_connection = True
                    break
                if mode is not None:
                    # A cut-off client's watch breaks like a broken connection would.
                    self._drop()
                    return
                if event is None:
                    if self._peer_closed():
                        self.close_connection = True
                        return
                    continue
                data = orjson.dumps(event) + b"\n"
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                if event.get("type") != "BOOKMARK":
                    app.clients.watch_event(user_agent, resource)
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True
