"""The fake provider as an HTTP server that several processes share (`shardsync fake-provider`, command.py).

It serves one FakeStore through two faces on one port.

Native JSON API (what `client.FakeHTTPProvider` speaks). The caller names itself in the header
`X-Shardsync-Client`; per-client limits are keyed on it.

- `GET /v1/zones[?versions=1]` → `{"zones": [...]}`, with `versions=1` also `"versions": {zone: version}`
  (the version a records GET names in its ETag; none for a zone with an injected failure)
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
  profile, see profile.py, with the other fields given replacing its own); GET adds `blocks`, the blocks
  its request window started
- `POST /v1/admin/seed` with `{"zones": N, "recordsPerZone": R}` → `{"zones": [...]}`
- `POST /v1/admin/zones` with `{"zone": name, "records": [Endpoint JSON...]}` → 204 (adds or replaces)

The native API's errors answer `{"error": kind, "message": text}`: 400 bad request, 404 unknown zone, 409
fenced, 422 batch rejected for its content (nothing applied), 429 throttled or prior-request-not-complete
(with Retry-After), 500 injected zone failure or unexpected error.

Webhook face: external-dns's webhook provider protocol at the root (`GET /`, `GET|POST /records`, `POST
/adjustendpoints`), answered by shardsync's webhook server (providers/webhook/server.py) over the store
(webhook_face.py): the same routes, statuses and fence extension as `shardsync webhook-server`, with the
fake's gate, faults and audit behind them. With `webhook_fence` (`shardsync fake-provider --webhook-fence`)
it speaks shardsync's fence extension: `GET /` advertises it, `POST /shardsync/fence` is the store's fence
compare-and-set, and a `POST /records` carrying `X-Shardsync-Fence: <zone> <token>` is the store's fenced
apply to that zone. Without it the face is a server that never heard of the extension: no such route, and
the header is ignored. Webhook writes are audited like the others (a fenced one with its token), one
entry per zone written. The face's errors are the webhook server's (throttling, for one, is 503 with
Retry-After there, as external-dns's webhook documentation asks).

Admin and audit calls pass no gate; provider calls pay latency and limits. Every connection is served by
aiohttp's low-level server on one event loop in a background thread: waiting for a slot and the latency take
no thread, so a call costs its parsing and the store's work (HTTP/1.1 keep-alive, Nagle off).
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, unquote

import orjson
from aiohttp import web

from shardsync import logs
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
from shardsync.providers.fake.webhook_face import StoreFace
from shardsync.providers.httpclient import CLIENT_HEADER
from shardsync.providers.webhook.server import (
    NO_CONTENT,
    BadRequest,
    Reply,
    WebhookServer,
    error_reply,
    read_json,
    start_runner,
)
from shardsync.records.endpoint import Changes, Endpoint, InvalidEndpoint

# The name it logged under as the module shardsync/providers/fake_server.py: log lines keep their logger=.
log = logs.get_logger("shardsync.providers.fake_server")

DEFAULT_PORT = 8888


class _Handler:
    """Answers the requests of one FakeStore (the module docstring's routes) on the server's event loop."""

    def __init__(self, store: FakeStore, webhook_fence: bool = False) -> None:
        self.store = store
        self.webhook_fence = webhook_fence
        # No body limit: the fake's callers are tests and benches, and seeding a zone sends more than most.
        self.webhook = WebhookServer(self._face, max_body=None)

    def _face(self, caller: str) -> StoreFace:
        return StoreFace(self.store, caller, self.webhook_fence)

    async def __call__(self, request: web.BaseRequest) -> web.StreamResponse:
        webhook = await self.webhook.respond(request)
        if webhook is not None:
            return webhook
        parts = [unquote(p) for p in request.raw_path.split("?", 1)[0].split("/") if p]
        query = {k: v[-1] for k, v in parse_qs(request.query_string).items()}
        try:
            body = await read_json(request, max_body=None)
            reply = await self._route(request, parts, query, body)
        except ThrottledError as exc:
            retry = float(getattr(exc, "retry_after", 1.0))
            kind = (
                "prior-request-not-complete" if isinstance(exc, PriorRequestNotCompleteError) else "throttled"
            )
            reply = error_reply(429, kind, str(exc), {"Retry-After": str(max(1, math.ceil(retry)))})
        except FencedError as exc:
            reply = error_reply(409, "fenced", str(exc))
        except UnknownZoneError as exc:
            reply = error_reply(404, "unknown-zone", str(exc))
        except BatchRejectedError as exc:
            reply = error_reply(422, "rejected", str(exc))
        except ProviderError as exc:
            reply = error_reply(500, "failed", str(exc))
        except (BadRequest, InvalidEndpoint, orjson.JSONDecodeError) as exc:
            reply = error_reply(400, "bad-request", str(exc))
        except Exception as exc:  # a bug here must answer, not drop the connection
            log.error("fake provider request failed", exc_info=True, path=request.path_qs)
            reply = error_reply(500, "internal", f"{type(exc).__name__}: {exc}")
        return reply.response()

    # ---- routes of the native API (the webhook face's are the webhook server's) ----

    async def _route(
        self, request: web.BaseRequest, parts: list[str], query: dict[str, str], body: Any
    ) -> Reply:
        store = self.store
        client = request.headers.get(CLIENT_HEADER) or ANONYMOUS
        match request.method, parts:
            case "GET", ["healthz"]:
                return Reply(200, {"ok": True})
            case "GET", ["v1", "zones"]:
                if "versions" not in query:
                    return Reply(200, {"zones": await store.zones_async(client)})
                zones, versions = await store.zones_and_versions_async(client)
                return Reply(200, {"zones": zones, "versions": versions})
            case "GET", ["v1", "zones", zone, "records"]:
                after = _key(query.get("after"))
                limit = _optional_int(query.get("limit"))
                seen = _etag_value(request.headers.get("If-None-Match")) if after is None else None
                version, page, nxt = await store.listing_async(
                    zone, client, after=after, limit=limit, seen=seen
                )
                etag = {"ETag": f'"{version}"'} if after is None else None
                if page is None:
                    return Reply(HTTPStatus.NOT_MODIFIED, headers=etag)
                body = {"records": [r.to_json() for r in page], "next": nxt and list(nxt)}
                return Reply(200, body, headers=etag)
            case "POST", ["v1", "zones", zone, "changes"]:
                data = _object(body)
                await store.apply_async(
                    zone,
                    Changes.from_json(_object(data.get("changes") or {})),
                    _token(data.get("fence")),
                    writer=str(data.get("writer") or client),
                    generation=_optional_int(data.get("generation")),
                )
                return NO_CONTENT
            case "POST", ["v1", "zones", zone, "fence"]:
                data = _object(body)
                token = _token(data.get("token"))
                if token is None:
                    raise BadRequest("token missing")
                await store.acquire_fence_async(zone, token, writer=str(data.get("writer") or client))
                return NO_CONTENT
            case "GET", ["v1", "zones", zone, "fence"]:
                fence = store.fence_of(zone)
                return Reply(200, {"fence": fence.to_text() if fence else None})
            case "GET", ["v1", "audit"]:
                since = _optional_int(query.get("since")) or 0
                entries = store.audit(since=since, zone=query.get("zone"))
                next_seq = entries[-1].seq + 1 if entries else since
                audit = [e.to_json() for e in entries]
                return Reply(200, {"audit": audit, "next": next_seq, "dropped": store.audit_dropped()})
            case "DELETE", ["v1", "audit"]:
                store.clear_audit()
                return NO_CONTENT
            case "GET", ["v1", "admin", "limits"]:
                return Reply(200, store.limits.to_json())
            case "POST", ["v1", "admin", "limits"]:
                try:
                    store.set_limits(store.limits.merged(_object(body)))
                except ValueError as exc:
                    raise BadRequest(str(exc)) from exc
                return Reply(200, store.limits.to_json())
            case "GET", ["v1", "admin", "faults"]:
                return Reply(200, store.faults.to_json())
            case "POST", ["v1", "admin", "faults"]:
                try:
                    store.set_faults(Faults.from_json(_object(body)))
                except ValueError as exc:
                    raise BadRequest(str(exc)) from exc
                return Reply(200, store.faults.to_json())
            case "GET", ["v1", "admin", "profile"]:
                return Reply(200, {**store.profile.to_json(), "blocks": store.profile_blocks})
            case "POST", ["v1", "admin", "profile"]:
                try:
                    store.set_profile(profile_from_json(_object(body)))
                except ValueError as exc:
                    raise BadRequest(str(exc)) from exc
                return Reply(200, store.profile.to_json())
            case "POST", ["v1", "admin", "seed"]:
                data = _object(body)
                count = _optional_int(data.get("zones")) or 0
                per_zone = _optional_int(data.get("recordsPerZone")) or 0
                return Reply(200, {"zones": store.seed(count, per_zone)})
            case "POST", ["v1", "admin", "zones"]:
                data = _object(body)
                items = data.get("records") or []
                if not isinstance(data.get("zone"), str) or not isinstance(items, list):
                    raise BadRequest("expected {zone: string, records: [endpoints]}")
                store.add_zone(data["zone"], [Endpoint.from_json(item) for item in items])
                return NO_CONTENT
        return error_reply(404, "not-found", f"no route for {request.method} {request.path_qs}")


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
    """A FakeStore served over HTTP from an event loop in a background thread; `start()` binds, `stop()`
    ends everything."""

    def __init__(
        self, store: FakeStore, host: str = "127.0.0.1", port: int = DEFAULT_PORT, webhook_fence: bool = False
    ) -> None:
        self.store = store
        self.webhook_fence = webhook_fence
        self._address = (host, port)
        self._port: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.ServerRunner | None = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("server not started")
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self._address[0]}:{self.port}"

    def start(self) -> None:
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="fake-provider", daemon=True)
        thread.start()
        self._loop, self._thread = loop, thread
        try:
            self._port = asyncio.run_coroutine_threadsafe(self._serve(), loop).result(timeout=30)
        except BaseException:
            self.stop()
            raise

    async def _serve(self) -> int:
        self._runner = runner = await start_runner(_Handler(self.store, self.webhook_fence), *self._address)
        return int(runner.addresses[0][1])

    def stop(self) -> None:
        """Stop accepting, hang up idle connections and wait for the calls in progress (bounded), then end
        the event loop and its thread."""
        loop, thread, runner = self._loop, self._thread, self._runner
        if loop is None or thread is None:
            return
        if runner is not None:
            asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        if not thread.is_alive():
            loop.close()
        self._loop = self._thread = self._runner = None
        self._port = None

    def __enter__(self) -> FakeServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
