"""Client of external-dns's webhook provider protocol (`--provider=webhook`), behind the zone-scoped Provider.

The protocol (media type `application/external.dns.webhook+json;version=1`): `GET /` negotiates and returns
the server's domain filter (`{"include", "exclude", "regexInclude", "regexExclude"}`), `GET /records` lists
every record the server manages, `POST /records` applies `{create, updateOld, updateNew, delete}` and
answers 204, `POST /adjustendpoints` lets the server rewrite endpoints before planning. external-dns
retries only 5xx answers and takes any other failure as final. We map 429 to ThrottledError, another 4xx
to `POST /records` to BatchRejectedError (the server refused that content: the worker splits the batch
to find the record at fault), transport failures to UnreachableError and the rest to ProviderError, and
leave retrying to the worker.

The protocol is not zone-scoped, so:
- `zones()` are the configured zones (`zones=`), else the negotiated filter's `include` list less the
  names it excludes; a filter that lists no zones (empty, or regex only) cannot be split into zones and
  is an error saying so.
- `records(zone)` fetches every record once and keeps the zone's share: each name belongs to its most
  specific zone, and names the filter excludes are dropped. The full list is cached for `cache_ttl`
  seconds so that reconciling many zones does not refetch it per zone; every apply through this client
  invalidates it.
- `apply(zone, ...)` refuses, before sending anything, an endpoint outside the zone: a replica writes
  only the zones it owns.

Fencing: the protocol has no conditional write, so the provider cannot refuse a stale owner's write
(design §2 rule 8). By default `acquire_fence` and a fenced `apply` raise FencingUnsupportedError: a
sharded deployment must not believe it is fenced when it is not, and failing loudly is the safe answer.
Unfenced use (`--sharding=off`, no token) works as external-dns does. With `allow_unfenced=True`
(`--webhook-allow-unfenced`) the client accepts tokens, keeps them locally and refuses a write carrying
a token older than the one this process last acquired for the zone; it warns once and counts every such
write in `shardsync_webhook_unfenced_writes_total`. Safety then rests on the lease protocol alone (release
first, acquire second, self-fencing): a replica paused past its lease can still land one late write.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import orjson
from prometheus_client import Counter

from shardsync.domain_filter import DomainFilter, DomainFilterError
from shardsync.endpoint import Changes, Endpoint, InvalidEndpoint, ZoneIndex, normalize_name
from shardsync.flags import Flag, FlagGroup, mirrored
from shardsync.logs import get_logger
from shardsync.providers.base import (
    BatchRejectedError,
    FencedError,
    FenceToken,
    ProviderError,
    ThrottledError,
)
from shardsync.providers.httpclient import CLIENT_HEADER, retry_after, transport_errors

log = get_logger(__name__)

MEDIA_TYPE = "application/external.dns.webhook+json;version=1"
DEFAULT_TIMEOUT = 10.0

SKIPPED_ENDPOINTS = Counter(
    "shardsync_webhook_skipped_endpoints_total",
    "Endpoints in a webhook provider's answer that could not be read (skipped, the others kept)",
)
UNFENCED_WRITES = Counter(
    "shardsync_webhook_unfenced_writes_total",
    "Writes that carried a fence token the webhook provider could not enforce (--webhook-allow-unfenced).",
)


class FencingUnsupportedError(ProviderError):
    """The webhook protocol cannot make a write conditional on a fence token."""


def _same_media_type(value: str) -> bool:
    return value.replace(" ", "").lower() == MEDIA_TYPE


def _domain_filter(data: Any) -> DomainFilter:
    """The filter a server sent on negotiation; a bad one is a ProviderError, as any protocol failure."""
    try:
        return DomainFilter.from_json(data)
    except DomainFilterError as exc:
        raise ProviderError(f"webhook negotiation: {exc}") from exc


@dataclass(frozen=True, slots=True)
class _Snapshot:
    version: int
    fetched: float
    records: list[Endpoint]


class WebhookProvider:
    """The Provider protocol over an external-dns webhook provider at `url` (see the module docstring)."""

    name = "webhook"

    def __init__(
        self,
        url: str,
        *,
        identity: str = "shardsync",
        zones: Sequence[str] = (),
        allow_unfenced: bool = False,
        timeout: float = DEFAULT_TIMEOUT,
        cache_ttl: float = 1.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.identity = identity
        self.allow_unfenced = allow_unfenced
        self._configured_zones = sorted({normalize_name(z) for z in zones})
        self._timeout = timeout
        self._cache_ttl = cache_ttl
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout),
            headers={"Accept": MEDIA_TYPE, CLIENT_HEADER: identity},
            transport=transport,
        )
        self._filter: DomainFilter | None = None
        self._index: ZoneIndex | None = None
        self._negotiate_lock = anyio.Lock()
        self._fetch_lock = anyio.Lock()
        self._version = 0  # bumped by every apply: a snapshot taken before it is stale
        self._snapshot: _Snapshot | None = None
        self._fences: dict[str, FenceToken] = {}
        self._warned = False

    # ---- HTTP ----

    async def _request(self, method: str, path: str, body: Any = None) -> httpx.Response:
        what = f"webhook provider {method} {self.url}{path}"
        headers: dict[str, str] = {}
        content = None
        if body is not None:
            content = orjson.dumps(body)
            headers["Content-Type"] = MEDIA_TYPE
        with transport_errors(what, self._timeout):
            resp = await self._http.request(method, self.url + path, content=content, headers=headers)
        text = f"{what}: {resp.status_code} {resp.text[:300]}"
        if resp.status_code == 429:
            raise ThrottledError(text, retry_after(resp))
        if method == "POST" and path == "/records" and 400 <= resp.status_code < 500:
            raise BatchRejectedError(text)
        if not 200 <= resp.status_code < 300:
            raise ProviderError(text)
        return resp

    @staticmethod
    def _json(resp: httpx.Response) -> Any:
        try:
            return orjson.loads(resp.content)
        except orjson.JSONDecodeError as exc:
            raise ProviderError(f"webhook provider {resp.request.url}: answer is not JSON: {exc}") from exc

    @staticmethod
    def _endpoints(data: Any, what: str) -> list[Endpoint]:
        if not isinstance(data, list):
            raise ProviderError(f"webhook provider {what}: expected a list of endpoints")
        # One bad endpoint costs that endpoint, not the zone: it is skipped with a warning and counted.
        endpoints = []
        for item in data:
            try:
                endpoints.append(Endpoint.from_json(item))
            except InvalidEndpoint as exc:
                SKIPPED_ENDPOINTS.inc()
                log.warning("webhook provider endpoint skipped", answer=what, error=str(exc)[:300])
        return endpoints

    # ---- protocol ----

    async def negotiate(self) -> DomainFilter:
        """`GET /`: check the media type and learn the domain filter (once; again after a failure)."""
        async with self._negotiate_lock:
            if self._filter is None:
                resp = await self._request("GET", "")
                content_type = resp.headers.get("Content-Type", "")
                if not _same_media_type(content_type):
                    raise ProviderError(
                        f"webhook provider {self.url}: negotiated content type {content_type!r}, "
                        f"want {MEDIA_TYPE!r}"
                    )
                self._filter = _domain_filter(self._json(resp))
                log.info("webhook provider negotiated", url=self.url, include=",".join(self._filter.include))
            return self._filter

    async def zones(self) -> list[str]:
        if self._configured_zones:
            return list(self._configured_zones)
        domain_filter = await self.negotiate()
        zones = domain_filter.zones()
        if not zones:
            raise ProviderError(
                f"webhook provider {self.url}: its domain filter lists no zones "
                "(empty or regex only); configure the zones explicitly"
            )
        return zones

    async def all_records(self) -> list[Endpoint]:
        """`GET /records`: every record the webhook provider serves (cached, see the module docstring)."""
        async with self._fetch_lock:
            snap = self._snapshot
            now = time.monotonic()
            if snap is not None and snap.version == self._version and now - snap.fetched < self._cache_ttl:
                return snap.records
            version = self._version
            resp = await self._request("GET", "/records")
            records = self._endpoints(self._json(resp), "GET /records")
            if version == self._version:
                self._snapshot = _Snapshot(version, now, records)
            return records

    async def _zone_index(self) -> ZoneIndex:
        if self._index is None:
            self._index = ZoneIndex(await self.zones())
        return self._index

    async def records(self, zone: str) -> list[Endpoint]:
        zone = normalize_name(zone)
        domain_filter = await self.negotiate()
        index = await self._zone_index()
        if zone not in index:
            raise ProviderError(f"webhook provider {self.url}: zone {zone} is not served")
        return [
            ep
            for ep in await self.all_records()
            if index.zone_of(ep.dns_name) == zone and domain_filter.match(ep.dns_name)
        ]

    async def adjust_endpoints(self, endpoints: Iterable[Endpoint]) -> list[Endpoint]:
        """`POST /adjustendpoints`: the endpoints as the webhook provider wants them planned."""
        await self.negotiate()
        resp = await self._request("POST", "/adjustendpoints", [e.to_json() for e in endpoints])
        return self._endpoints(self._json(resp), "POST /adjustendpoints")

    async def apply(self, zone: str, changes: Changes, fence: FenceToken | None = None) -> None:
        zone = normalize_name(zone)
        if fence is not None:
            self._check_fence(zone, fence)
        index = await self._zone_index()
        for ep in (*changes.create, *changes.update_old, *changes.update_new, *changes.delete):
            if index.zone_of(ep.dns_name) != zone:
                raise ProviderError(f"{ep.dns_name}: not in zone {zone}; nothing sent")
        if changes.is_empty():
            return
        try:
            await self._request("POST", "/records", changes.to_json())
        finally:
            # Whatever the answer, the server may have applied part of it: drop the cached listing.
            self._version += 1
            self._snapshot = None
        if fence is not None:
            UNFENCED_WRITES.inc()

    async def acquire_fence(self, zone: str, token: FenceToken) -> None:
        zone = normalize_name(zone)
        self._require_unfenced_allowed(zone)
        current = self._fences.get(zone)
        if current is not None and current != token and current.generation >= token.generation:
            raise FencedError(
                f"zone {zone}: this process holds {current.to_text()}, not older than {token.to_text()}"
            )
        self._fences[zone] = token

    async def close(self) -> None:
        await self._http.aclose()

    # ---- fencing policy ----

    def _require_unfenced_allowed(self, zone: str) -> None:
        if not self.allow_unfenced:
            raise FencingUnsupportedError(
                f"zone {zone}: the webhook protocol cannot fence writes; run with --sharding=off, "
                "or accept unfenced writes with --webhook-allow-unfenced"
            )
        if not self._warned:
            self._warned = True
            log.warning(
                "webhook provider cannot fence writes: a stale owner's late write is not refused",
                url=self.url,
            )

    def _check_fence(self, zone: str, fence: FenceToken) -> None:
        self._require_unfenced_allowed(zone)
        current = self._fences.get(zone)
        if current != fence:
            held = current.to_text() if current else "no token"
            raise FencedError(f"zone {zone}: this process holds {held}, not {fence.to_text()}")


# -- flags and construction ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WebhookOptions:
    """The `--webhook-*` flags."""

    provider_url: str = "http://localhost:8888"
    allow_unfenced: bool = False


FLAGS = FlagGroup(
    "webhook",
    "webhook provider (--provider=webhook)",
    WebhookOptions,
    (
        mirrored("provider_url", "URL of an external-dns webhook provider", flag="webhook-provider-url"),
        Flag(
            "allow_unfenced",
            "let sharded replicas write through the webhook provider, which cannot fence writes",
            switch=True,
            flag="webhook-allow-unfenced",
        ),
    ),
)


def build(options: WebhookOptions, identity: str) -> WebhookProvider:
    return WebhookProvider(options.provider_url, identity=identity, allow_unfenced=options.allow_unfenced)
