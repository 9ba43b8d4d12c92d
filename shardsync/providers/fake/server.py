"""The fake provider as an HTTP server that several processes share (`shardsync fake-provider`, command.py).

It serves one FakeStore through two faces on one port.

Native JSON API (what `client.FakeHTTPProvider` speaks). The caller names itself in the header
`X-Shardsync-Client`; per-client limits are keyed on it.

- `GET /v1/zones` → `{"zones": [...]}`
- `GET /v1/zones/{zone}/records[?after=KEY&limit=N]` → `{"records": [Endpoint JSON...], "next": KEY or null}`:
  one page (all records unless the profile or `limit` cuts it); KEY is the JSON [name, type, set id] of the
  last record returned, passed back as `after` for the next page. The first page carries the zone's version
  as its `ETag`; a first-page request with `If-None-Match: <that ETag>` answers 304 without a body while the
  zone's records are unchanged (a conditional read: a provider call all the same, gated and faulted alike)
- `POST /v1/zones/{zone}/changes` with `{"changes": Changes JSON, "fence": token text or null, "writer",
  "generation"}` → 204
- `POST /v1/zones/{zone}/fence` with `{"token": token text, "writer"}` → 204
- `GET /v1/zones/{zone}/fence` → `{"fence": token text or null}` (inspection; never among the records)
- `GET /v1/audit[?since=SEQ&zone=Z]` → `{"audit": [entries...], "next": SEQ, "dropped": N}`;
  `DELETE /v1/audit` clears it
- `GET|POST /v1/admin/limits`: `{"latency", "rateLimit", "burst", "concurrency", "queueTimeout"}`
  (POST changes the fields given)
- `GET|POST /v1/admin/faults`: `{"throttleNext", "throttleRatio", "failRecords", "failZones", "seed"}`
  (POST replaces them all)
- `GET|POST /v1/admin/profile`: `{"name", "accountRate", "accountBurst", "processing"}` (POST: the named
  profile, see profile.py, with the other fields given replacing its own)
- `POST /v1/admin/seed` with `{"zones": N, "recordsPerZone": R}` → `{"zones": [...]}`
- `POST /v1/admin/zones` with `{"zone": name, "records": [Endpoint JSON...]}` → 204 (adds or replaces)

Errors answer `{"error": kind, "message": text}`: 400 bad request, 404 unknown zone, 409 fenced,
422 batch rejected for its content (nothing applied), 429 throttled or prior-request-not-complete (with
Retry-After), 500 injected zone failure or unexpected error.

Webhook face: external-dns's webhook provider protocol at the root, media type
`application/external.dns.webhook+json;version=1`: `GET /` negotiates and returns the domain filter
(`{"include": [every zone]}`), `GET /records` lists every zone's records, `POST /records` applies
create/updateOld/updateNew/delete (capitalised keys too) and answers 204, `POST /adjustendpoints` returns
the endpoints in canonical form. Webhook writes are unfenced and audited like the others.

Admin and audit calls pass no gate; provider calls pay latency and limits. Each connection gets a thread
(HTTP/1.1 keep-alive, Nagle off: otherwise every request costs ~40 ms on loopback).
"""

from __future__ import annotations

import contextlib
import math
import socket
import threading
from collections.abc import Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import orjson

from shardsync import logs
from shardsync.endpoint import Changes, Endpoint, InvalidEndpoint
from shardsync.providers.base import (
    BatchRejectedError,
    FencedError,
    FenceToken,
    ProviderError,
    ThrottledError,
)
from shardsync.providers.fake.faults import Faults
from shardsync.providers.fake.limits import ANONYMOUS
from shardsync.providers.fake.profile import PriorRequestNotCompleteError, profile_from_json
from shardsync.providers.fake.store import FakeStore, UnknownZoneError
from shardsync.providers.httpclient import CLIENT_HEADER

# The name it logged under as the module shardsync/providers/fake_server.py: log lines keep their logger=.
log = logs.get_logger("shardsync.providers.fake_server")

WEBHOOK_MEDIA_TYPE = "application/external.dns.webhook+json;version=1"
DEFAULT_PORT = 8888
_JSON = "application/json"


class BadRequest(ValueError):
    """The request itself is malformed (400)."""


class _Reply:
    __slots__ = ("body", "content_type", "headers", "status")

    def __init__(
        self,
        status: int,
        body: Any = None,
        content_type: str = _JSON,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.status = status
        self.body = b"" if body is None else orjson.dumps(body)
        self.content_type = content_type
        self.headers = dict(headers or {})


_NO_CONTENT = _Reply(HTTPStatus.NO_CONTENT)


def _error(status: int, kind: str, message: str, headers: Mapping[str, str] | None = None) -> _Reply:
    return _Reply(status, {"error": kind, "message": message}, headers=headers)


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # so server_close() joins the handler threads
    block_on_close = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], store: FakeStore) -> None:
        self.store = store
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """End every connection after its call in progress: shutting the read side wakes threads waiting
        for a next request on a keep-alive connection, while a call in progress still sends its answer."""
        with self._open_lock:
            conns = list(self._open)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RD)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    timeout = 120  # an idle keep-alive connection is dropped after this many seconds
    server: _Server

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("fake provider request", line=format % args)

    # ---- plumbing ----

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        parts = [unquote(p) for p in url.path.split("/") if p]
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        try:
            body = self._read_body()
            reply = self._route(method, parts, query, body)
        except ThrottledError as exc:
            retry = float(getattr(exc, "retry_after", 1.0))
            kind = (
                "prior-request-not-complete" if isinstance(exc, PriorRequestNotCompleteError) else "throttled"
            )
            reply = _error(429, kind, str(exc), {"Retry-After": str(max(1, math.ceil(retry)))})
        except FencedError as exc:
            reply = _error(409, "fenced", str(exc))
        except UnknownZoneError as exc:
            reply = _error(404, "unknown-zone", str(exc))
        except BatchRejectedError as exc:
            reply = _error(422, "rejected", str(exc))
        except ProviderError as exc:
            reply = _error(500, "failed", str(exc))
        except (BadRequest, InvalidEndpoint, orjson.JSONDecodeError) as exc:
            reply = _error(400, "bad-request", str(exc))
        except Exception as exc:  # a bug here must not kill the connection thread silently
            log.error("fake provider request failed", exc_info=True, path=self.path)
            reply = _error(500, "internal", f"{type(exc).__name__}: {exc}")
        self._send(reply)

    def _read_body(self) -> Any:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0 or "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            # The body's end is unknown, so the connection cannot carry another request.
            self.close_connection = True
            raise BadRequest("a body needs a valid Content-Length")
        if length == 0:
            return None
        return orjson.loads(self.rfile.read(length))

    def _send(self, reply: _Reply) -> None:
        # The status line, headers and body in one write: written apart (as send_response, end_headers
        # and a body write do), they leave as two segments and wake the client twice per answer.
        lines = [f"{self.protocol_version} {reply.status} {HTTPStatus(reply.status).phrase}"]
        if reply.body:
            lines.append(f"Content-Type: {reply.content_type}")
        if reply.status != HTTPStatus.NOT_MODIFIED:  # a 304 has no body, so no length of one
            lines.append(f"Content-Length: {len(reply.body)}")
        lines.extend(f"{name}: {value}" for name, value in reply.headers.items())
        head = "\r\n".join(lines).encode("latin-1") + b"\r\n\r\n"
        self.log_request(reply.status)
        try:
            self.wfile.write(head + reply.body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    @property
    def _client(self) -> str:
        return self.headers.get(CLIENT_HEADER) or ANONYMOUS

    # ---- routes ----

    def _route(self, method: str, parts: list[str], query: dict[str, str], body: Any) -> _Reply:
        store = self.server.store
        match method, parts:
            case "GET", []:
                zones = store.zones(self._client)
                return _Reply(
                    200,
                    {"include": zones} if zones else {},
                    WEBHOOK_MEDIA_TYPE,
                    {"Vary": "Content-Type"},
                )
            case "GET", ["records"]:
                records = store.all_records(self._client)
                return _Reply(200, [r.to_json() for r in records], WEBHOOK_MEDIA_TYPE)
            case "POST", ["records"]:
                store.apply_by_name(Changes.from_json(_object(body)), writer=self._client)
                return _NO_CONTENT
            case "POST", ["adjustendpoints"]:
                if not isinstance(body, list):
                    raise BadRequest("expected a JSON array of endpoints")
                adjusted = [Endpoint.from_json(item).to_json() for item in body]
                return _Reply(200, adjusted, WEBHOOK_MEDIA_TYPE)
            case "GET", ["healthz"]:
                return _Reply(200, {"ok": True})
            case "GET", ["v1", "zones"]:
                return _Reply(200, {"zones": store.zones(self._client)})
            case "GET", ["v1", "zones", zone, "records"]:
                after = _key(query.get("after"))
                limit = _optional_int(query.get("limit"))
                seen = _etag_value(self.headers.get("If-None-Match")) if after is None else None
                version, page, nxt = store.listing(zone, self._client, after=after, limit=limit, seen=seen)
                etag = {"ETag": f'"{version}"'} if after is None else None
                if page is None:
                    return _Reply(HTTPStatus.NOT_MODIFIED, headers=etag)
                body = {"records": [r.to_json() for r in page], "next": nxt and list(nxt)}
                return _Reply(200, body, headers=etag)
            case "POST", ["v1", "zones", zone, "changes"]:
                data = _object(body)
                store.apply(
                    zone,
                    Changes.from_json(_object(data.get("changes") or {})),
                    _token(data.get("fence")),
                    writer=str(data.get("writer") or self._client),
                    generation=_optional_int(data.get("generation")),
                )
                return _NO_CONTENT
            case "POST", ["v1", "zones", zone, "fence"]:
                data = _object(body)
                token = _token(data.get("token"))
                if token is None:
                    raise BadRequest("token missing")
                store.acquire_fence(zone, token, writer=str(data.get("writer") or self._client))
                return _NO_CONTENT
            case "GET", ["v1", "zones", zone, "fence"]:
                fence = store.fence_of(zone)
                return _Reply(200, {"fence": fence.to_text() if fence else None})
            case "GET", ["v1", "audit"]:
                since = _optional_int(query.get("since")) or 0
                entries = store.audit(since=since, zone=query.get("zone"))
                next_seq = entries[-1].seq + 1 if entries else since
                audit = [e.to_json() for e in entries]
                return _Reply(200, {"audit": audit, "next": next_seq, "dropped": store.audit_dropped()})
            case "DELETE", ["v1", "audit"]:
                store.clear_audit()
                return _NO_CONTENT
            case "GET", ["v1", "admin", "limits"]:
                return _Reply(200, store.limits.to_json())
            case "POST", ["v1", "admin", "limits"]:
                try:
                    store.set_limits(store.limits.merged(_object(body)))
                except ValueError as exc:
                    raise BadRequest(str(exc)) from exc
                return _Reply(200, store.limits.to_json())
            case "GET", ["v1", "admin", "faults"]:
                return _Reply(200, store.faults.to_json())
            case "POST", ["v1", "admin", "faults"]:
                try:
                    store.set_faults(Faults.from_json(_object(body)))
                except ValueError as exc:
                    raise BadRequest(str(exc)) from exc
                return _Reply(200, store.faults.to_json())
            case "GET", ["v1", "admin", "profile"]:
                return _Reply(200, store.profile.to_json())
            case "POST", ["v1", "admin", "profile"]:
                try:
                    store.set_profile(profile_from_json(_object(body)))
                except ValueError as exc:
                    raise BadRequest(str(exc)) from exc
                return _Reply(200, store.profile.to_json())
            case "POST", ["v1", "admin", "seed"]:
                data = _object(body)
                count = _optional_int(data.get("zones")) or 0
                per_zone = _optional_int(data.get("recordsPerZone")) or 0
                return _Reply(200, {"zones": store.seed(count, per_zone)})
            case "POST", ["v1", "admin", "zones"]:
                data = _object(body)
                items = data.get("records") or []
                if not isinstance(data.get("zone"), str) or not isinstance(items, list):
                    raise BadRequest("expected {zone: string, records: [endpoints]}")
                store.add_zone(data["zone"], [Endpoint.from_json(item) for item in items])
                return _NO_CONTENT
        return _error(404, "not-found", f"no route for {method} {self.path}")


def _etag_value(header: str | None) -> str | None:
    """The version an `If-None-Match` names (one quoted ETag, as the client sends it), or None."""
    if not header:
        return None
    return header.strip().removeprefix("W/").strip('"') or None


def _object(body: Any) -> Mapping[str, Any]:
    if body is None:
        return {}
    if not isinstance(body, Mapping):
        raise BadRequest("expected a JSON object")
    return body


def _optional_int(value: Any) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise BadRequest(f"not an integer: {value!r}") from exc


def _key(value: str | None) -> tuple[str, str, str] | None:
    if value is None:
        return None
    key = orjson.loads(value)
    if not (isinstance(key, list) and len(key) == 3 and all(isinstance(k, str) for k in key)):
        raise BadRequest(f"after: not a JSON [name, type, set id]: {value!r}")
    return (key[0], key[1], key[2])


def _token(value: Any) -> FenceToken | None:
    if value is None:
        return None
    try:
        return FenceToken.from_text(str(value))
    except ValueError as exc:
        raise BadRequest(str(exc)) from exc


class FakeServer:
    """A FakeStore served over HTTP from a background thread; `start()` binds, `stop()` ends everything."""

    def __init__(self, store: FakeStore, host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> None:
        self.store = store
        self._address = (host, port)
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self._address[0]}:{self.port}"

    def start(self) -> None:
        self._httpd = _Server(self._address, self.store)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1}, name="fake-provider", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop accepting, hang up open connections and wait for every handler thread (bounded by the
        longest call in progress: latency plus queue timeout)."""
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.close_connections()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> FakeServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
