"""The server side of external-dns's webhook provider protocol over any shardsync Provider, with shardsync's
fence extension (protocol.py; README.md, "Webhook fence extension"): the one home of what a webhook server
answers. `shardsync webhook-server` (command.py) serves a provider built from its flags with it; the fake
provider's webhook face (providers/fake/server.py) is this server over the fake's store.

`WebhookServer` is an aiohttp low-level handler. `respond(request)` answers the protocol's routes and
returns None for any other path, so a server with routes of its own (the fake's native API) serves both on
one port; called as the handler itself, it answers any other path 404. The provider is
`provider_for(caller)`, the caller being the name a request gives in `X-Shardsync-Client` ("" without
one): the fake keys its limits and audit on it; a provider built from flags is one for every caller.

Routes (served.py says which zones are served and how listings and writes are split over them):
- `GET /` (negotiation): the domain filter `{"include": [served zones]}` as the protocol's media type, with
  `Vary: Content-Type`; and `X-Shardsync-Fence: 1` when the provider fences its writes
  (base.fences_writes). The extension is offered exactly then, since its promise (a stale token's write
  refused atomically with the write) is the provider's own `apply(zone, changes, fence)` contract. A
  provider that does not fence its writes (pdns, whose fence check is a request before its PATCH, not
  atomic with it; the webhook client of a server without the extension) is not advertised: its callers
  run lease-timed, the header is ignored and `/shardsync/fence` is no route.
- `GET /records`: every served zone's records.
- `POST /records`: the changes split per zone and applied zone by zone, in zone order. A record in no
  served zone refuses the whole request before anything is applied. A zone that fails does not stop the
  others; the answer is then the first 5xx among the failures (retrying may help), else the first one.
  With the extension's header (when offered): that one zone's fenced apply; a zone not served, or a
  record outside it, is refused before anything is applied; the answer confirms the fence.
- `POST /adjustendpoints`: the provider's `adjust_desired` (base.AdjustsDesired) where it has one, else the
  endpoints as parsed (canonical names, sorted targets).
- `POST /shardsync/fence` (when offered): `acquire_fence(zone, token)`.
A request whose `Accept` does not admit the media type is 406; a body of another content type than the
media type or JSON, 415.

Errors, as external-dns's webhook documentation asks (external-dns retries a 5xx; any other failure is
final for that run) and the extension specifies: a refused token 409; a malformed request 400, a body over
`max_body` 413; an unknown zone 404; content the provider refuses (BatchRejectedError, RecordsRejectedError)
or a record outside the served zones 422; throttling (ThrottledError) 503 with `Retry-After`, which the
webhook client reads as throttling; a DNS server behind that cannot be reached (UnreachableError) 502; any
other provider failure 500. Every error answers a small JSON body `{"error": kind, "message": text}` and
is logged in one line.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from http import HTTPStatus
from typing import Any

import orjson
from aiohttp import web

from shardsync.logs import get_logger
from shardsync.providers.base import (
    BatchRejectedError,
    FencedError,
    FenceToken,
    Provider,
    ProviderError,
    RecordsRejectedError,
    ThrottledError,
    UnreachableError,
    adjuster_of,
    fences_writes,
)
from shardsync.providers.httpclient import CLIENT_HEADER
from shardsync.providers.webhook.protocol import (
    FENCE_HEADER,
    FENCE_PATH,
    FENCE_VERSION,
    MEDIA_TYPE,
    accepts_media_type,
    parse_fence_value,
    same_media_type,
)
from shardsync.providers.webhook.served import ServedZones, outside_zone
from shardsync.records.domain_filter import DomainFilter
from shardsync.records.endpoint import Changes, Endpoint, InvalidEndpoint

log = get_logger(__name__)

MAX_BODY = 32 * 1024 * 1024  # external-dns's default --webhook-provider-max-body-size
JSON = "application/json"
FENCE_SPOKEN: Mapping[str, str] = {FENCE_HEADER: FENCE_VERSION}
_FENCE_PARTS = [p for p in FENCE_PATH.split("/") if p]
_ROUTES = {"": ("GET",), "records": ("GET", "POST"), "adjustendpoints": ("POST",)}

ProviderFor = Callable[[str], Provider]


class BadRequest(ValueError):
    """The request itself is malformed (400)."""


class BodyTooLarge(BadRequest):
    """The body is over the server's limit (413)."""


class UnknownZone(ProviderError):
    """A fenced call names a zone the server does not serve (404)."""


class OutsideZones(BatchRejectedError):
    """Records the request may not write where it asked: in no served zone, or outside its fenced zone."""


class ZonesFailed(ProviderError):
    """Some zones of an unfenced write failed; answered with the status of `cause`."""

    def __init__(self, message: str, cause: ProviderError) -> None:
        super().__init__(message)
        self.cause = cause


class Reply:
    """One answer: status, JSON body (or none), content type and headers."""

    __slots__ = ("body", "content_type", "headers", "status")

    def __init__(
        self,
        status: int,
        body: Any = None,
        content_type: str = JSON,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.status = status
        self.body = b"" if body is None else orjson.dumps(body)
        self.content_type = content_type
        self.headers = dict(headers or {})

    def response(self) -> web.Response:
        headers = dict(self.headers)
        if self.body:
            headers["Content-Type"] = self.content_type
        return web.Response(status=self.status, body=self.body or None, headers=headers)


NO_CONTENT = Reply(HTTPStatus.NO_CONTENT)


def error_reply(status: int, kind: str, message: str, headers: Mapping[str, str] | None = None) -> Reply:
    return Reply(status, {"error": kind, "message": message[:1000]}, headers=headers)


def failure_reply(exc: Exception) -> Reply:
    """The status the protocol and the extension give a failure (the module docstring)."""
    message = str(exc)
    if isinstance(exc, ZonesFailed):
        reply = failure_reply(exc.cause)
        return error_reply(reply.status, "failed", message, reply.headers)
    match exc:
        case FencedError():
            return error_reply(409, "fenced", message)
        case BodyTooLarge():
            return error_reply(413, "too-large", message)
        case BadRequest() | InvalidEndpoint() | orjson.JSONDecodeError():
            return error_reply(400, "bad-request", message)
        case UnknownZone():
            return error_reply(404, "unknown-zone", message)
        case BatchRejectedError() | RecordsRejectedError():
            return error_reply(422, "rejected", message)
        case ThrottledError():
            wait = exc.retry_after if exc.retry_after is not None else 1.0
            return error_reply(503, "throttled", message, {"Retry-After": str(max(1, math.ceil(wait)))})
        case UnreachableError():
            return error_reply(502, "unreachable", message)
        case ProviderError():
            return error_reply(500, "failed", message)
    return error_reply(500, "internal", f"{type(exc).__name__}: {message}")


async def read_json(request: web.BaseRequest, max_body: int | None = MAX_BODY) -> Any:
    """The request's JSON body (None without one); BadRequest when it cannot be read."""
    if "chunked" in request.headers.get("Transfer-Encoding", "").lower():
        raise BadRequest("a body needs a valid Content-Length")
    length = request.content_length
    if not length:
        return None
    if max_body is not None and length > max_body:
        raise BodyTooLarge(f"body of {length} bytes, over this server's limit of {max_body}")
    # The stream itself: BaseRequest.read() would cap a body at 1 MiB.
    return orjson.loads(await request.content.read())


async def start_runner(
    handler: Callable[[web.BaseRequest], Awaitable[web.StreamResponse]], host: str | None, port: int
) -> web.ServerRunner:
    """aiohttp's low-level server for `handler`, listening on `host:port` (None: every interface; port 0: a
    free one, then `runner.addresses[0][1]`): HTTP/1.1 keep-alive (an idle connection dropped after 120 s),
    no access log; `runner.cleanup()` stops it, waiting up to 10 s for the calls in progress. OSError when
    it cannot listen there."""
    runner = web.ServerRunner(
        web.Server(handler, access_log=None, keepalive_timeout=120), shutdown_timeout=10
    )
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port, backlog=256, reuse_address=True).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner


def _changes(body: Any) -> Changes:
    if not isinstance(body, Mapping):
        raise BadRequest("expected a JSON object of changes")
    try:
        changes = Changes.from_json(body)
    except (TypeError, AttributeError) as exc:
        raise BadRequest(f"not a changes object: {exc}") from exc
    if len(changes.update_old) != len(changes.update_new):
        raise BadRequest(
            f"updateOld has {len(changes.update_old)} endpoints, updateNew {len(changes.update_new)}"
        )
    return changes


def _endpoints(body: Any) -> list[Endpoint]:
    if not isinstance(body, list) or not all(isinstance(item, Mapping) for item in body):
        raise BadRequest("expected a JSON array of endpoints")
    return [Endpoint.from_json(item) for item in body]


def _named(endpoints: list[Endpoint]) -> str:
    shown = ", ".join(f"{ep.dns_name} {ep.record_type}" for ep in endpoints[:5])
    return shown + (f" and {len(endpoints) - 5} more" if len(endpoints) > 5 else "")


class WebhookServer:
    """The protocol's routes over `provider_for(caller)` (see the module docstring)."""

    def __init__(
        self,
        provider_for: ProviderFor,
        domain_filter: DomainFilter | None = None,
        *,
        max_body: int | None = MAX_BODY,
        zones: ServedZones | None = None,
    ) -> None:
        self.provider_for = provider_for
        self.zones = zones or ServedZones(domain_filter)
        self.max_body = max_body
        self._fenced: bool | None = None  # the provider's answer, once given (it does not change)

    async def __call__(self, request: web.BaseRequest) -> web.StreamResponse:
        reply = await self.respond(request)
        if reply is None:
            reply = error_reply(404, "not-found", f"no route for {request.method} {request.path}").response()
        return reply

    async def offers_fence(self, provider: Provider) -> bool:
        """Whether the extension is offered: the provider fences its writes (asked once it answers)."""
        if self._fenced is None:
            self._fenced = await fences_writes(provider)
        return self._fenced

    async def respond(self, request: web.BaseRequest) -> web.Response | None:
        """The answer to a request on one of the protocol's routes; None for any other path."""
        parts = [p for p in request.path.split("/") if p]
        route = "/".join(parts)
        if route not in _ROUTES and parts != _FENCE_PARTS:
            return None
        caller = request.headers.get(CLIENT_HEADER, "")
        try:
            provider = self.provider_for(caller)
            if parts == _FENCE_PARTS and not await self.offers_fence(provider):
                return None  # as a server that never heard of the extension
            allowed = _ROUTES.get(route, ("POST",))
            if request.method not in allowed:
                reply = error_reply(405, "method-not-allowed", f"{request.method} /{route}")
                reply.headers["Allow"] = ", ".join(allowed)
            else:
                reply = await self._route(request, route, provider)
        except Exception as exc:
            reply = failure_reply(exc)
            if reply.status == 500 and not isinstance(exc, ProviderError):  # a bug here: answer, then say
                log.error("webhook request failed", exc_info=True, method=request.method, path=request.path)
                return reply.response()
        if reply.status >= 400:
            log.warning(
                "webhook request failed",
                method=request.method,
                path=request.path,
                caller=caller or "-",
                status=reply.status,
                error=orjson.loads(reply.body).get("message", "")[:300],
            )
        return reply.response()

    async def _route(self, request: web.BaseRequest, route: str, provider: Provider) -> Reply:
        if not accepts_media_type(request.headers.get("Accept")):
            return error_reply(406, "not-acceptable", f"this server answers {MEDIA_TYPE} only")
        if request.method == "POST":
            content_type = request.headers.get("Content-Type", "")
            if content_type and not (same_media_type(content_type) or content_type.startswith(JSON)):
                return error_reply(415, "unsupported-media-type", f"send {MEDIA_TYPE}, not {content_type}")
        match request.method, route:
            case "GET", "":
                index = await self.zones.listed(provider)
                spoken = FENCE_SPOKEN if await self.offers_fence(provider) else {}
                zones = list(index)
                body = {"include": zones} if zones else {}
                return Reply(200, body, MEDIA_TYPE, {"Vary": "Content-Type", **spoken})
            case "GET", "records":
                records = await self.zones.every_record(provider)
                return Reply(200, [ep.to_json() for ep in records], MEDIA_TYPE)
            case "POST", "records":
                changes = _changes(await read_json(request, self.max_body))
                fence = await self._fence(request, provider)
                if fence is not None:
                    await self._apply_fenced(provider, changes, *fence)
                    return Reply(HTTPStatus.NO_CONTENT, headers=FENCE_SPOKEN)
                await self._apply(provider, changes)
                return NO_CONTENT
            case "POST", "adjustendpoints":
                endpoints = _endpoints(await read_json(request, self.max_body))
                adjuster = adjuster_of(provider)
                adjusted = adjuster.adjust_desired(endpoints) if adjuster is not None else endpoints
                return Reply(200, [ep.to_json() for ep in adjusted], MEDIA_TYPE)
        # POST /shardsync/fence: the only route left, offered
        taking = await self._fence(request, provider)
        if taking is None:
            raise BadRequest(f"{FENCE_HEADER} missing")
        await self._served(provider, taking[0])
        await provider.acquire_fence(*taking)
        return NO_CONTENT

    async def _fence(self, request: web.BaseRequest, provider: Provider) -> tuple[str, FenceToken] | None:
        """The zone and token of the request's fence header; None without one, or when the extension is not
        offered (the header is then ignored, as a server that never heard of it would)."""
        value = request.headers.get(FENCE_HEADER)
        if value is None or not await self.offers_fence(provider):
            return None
        try:
            return parse_fence_value(value)
        except ValueError as exc:
            raise BadRequest(str(exc)) from exc

    async def _served(self, provider: Provider, zone: str) -> None:
        index = await self.zones.index(provider)
        if zone not in index and zone not in await self.zones.index(provider, refresh=True):
            raise UnknownZone(f"zone {zone} is not served here")

    async def _apply_fenced(self, provider: Provider, changes: Changes, zone: str, token: FenceToken) -> None:
        await self._served(provider, zone)
        outside = outside_zone(zone, changes, await self.zones.index(provider))
        if outside:
            raise OutsideZones(f"not in zone {zone}, which the fence names: {_named(list(outside))}")
        await provider.apply(zone, changes, token)
        log.debug("webhook changes applied", zone=zone, changes=len(changes), fence=token.to_text())

    async def _apply(self, provider: Provider, changes: Changes) -> None:
        """The unfenced write, zone by zone (see the module docstring)."""
        if changes.is_empty():
            return
        parts, outside = await self.zones.split(provider, changes)
        if outside:
            raise OutsideZones(f"in no zone this server serves: {_named(outside)}; nothing applied")
        failures: list[tuple[str, ProviderError]] = []
        for zone, part in parts.items():
            try:
                await provider.apply(zone, part)
            except ProviderError as exc:
                failures.append((zone, exc))
            else:
                log.debug("webhook changes applied", zone=zone, changes=len(part))
        if failures:
            raise _worst(failures, len(parts))


def _worst(failures: list[tuple[str, ProviderError]], zones: int) -> ProviderError:
    """The failure the answer's status follows (the first 5xx, else the first); with several zones, as a
    ZonesFailed whose message names every zone that failed."""
    chosen = next((exc for _, exc in failures if failure_reply(exc).status >= 500), failures[0][1])
    if zones == 1:
        return chosen
    shown = "; ".join(f"zone {zone}: {exc}" for zone, exc in failures[:5])
    return ZonesFailed(f"{len(failures)} of {zones} zones failed (the others were applied): {shown}", chosen)
