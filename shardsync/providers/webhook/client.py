"""`WebhookProvider`: the zone-scoped Provider over a server of external-dns's webhook provider protocol.

The protocol (media type `application/external.dns.webhook+json;version=1`): `GET /` negotiates and returns
the server's domain filter (`{"include", "exclude", "regexInclude", "regexExclude"}`), `GET /records` lists
every record the server manages, `POST /records` applies `{create, updateOld, updateNew, delete}` and
answers 204, `POST /adjustendpoints` lets the server rewrite endpoints before planning. external-dns
retries only 5xx answers and takes any other failure as final, so its documentation asks a server to
answer a rate limit with a 5xx. We map 429, and 503 with a Retry-After (how server.py answers throttling),
to ThrottledError, another 4xx to `POST /records` to BatchRejectedError (the server refused that
content: the worker splits the batch to find the record at fault), transport failures to UnreachableError
and the rest to ProviderError, and leave retrying to the worker.

The protocol is not zone-scoped, so:
- `zones()` are the configured zones (`zones=`), else the negotiated filter's `include` list less the
  names it excludes; a filter that lists no zones (empty, or regex only) cannot be split into zones and
  is an error saying so.
- `records(zone)` fetches every record once and keeps the zone's share: each name belongs to its most
  specific zone, and names the filter excludes are dropped. The full list is cached for `cache_ttl`
  seconds so that reconciling many zones does not refetch it per zone; an apply through this client makes
  it stale for the zone written only (the one zone whose share it may have changed), so a replica taking
  over many zones reads the list about once, not once per zone it writes.
- `apply(zone, ...)` refuses, before sending anything, an endpoint outside the zone: a replica writes
  only the zones it owns.

Fencing (design §2 rule 8) depends on the server, learned once by the negotiation (`fences_writes`,
base.NegotiatesFencing; protocol.py and README.md's "Webhook fence extension" give the wire format):
- A server that advertises shardsync's fence extension gets fenced writes: `acquire_fence` is its
  compare-and-set (`POST /shardsync/fence`), every `apply` with a token carries it
  (`X-Shardsync-Fence: <zone> <token>`), and a 409 or 412 is a FencedError (the replica drops the zone).
  A fenced write the server applied without confirming the fence (a server replaced by one without the
  extension) is logged once and counted in `shardsync_webhook_unfenced_writes_total`.
- Any other server gets lease-timed writes, as external-dns's own leader election: the tokens stay in this
  process, which refuses a write carrying a token older than the one it last acquired for the zone; a
  stale replica's late write is not refused by the server, so the replicas use the conservative timings
  (shardsync.sharding.timings.UNFENCED). Every such write is counted in
  `shardsync_webhook_unfenced_writes_total`.
Both keep the per-process check first, so a stale token is refused before anything is sent.
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

from shardsync.logs import get_logger
from shardsync.providers.base import (
    BatchRejectedError,
    FencedError,
    FenceToken,
    ProviderError,
    ThrottledError,
)
from shardsync.providers.httpclient import CLIENT_HEADER, retry_after, transport_errors
from shardsync.providers.webhook.protocol import (
    FENCE_HEADER,
    FENCE_PATH,
    FENCED_STATUSES,
    MEDIA_TYPE,
    fence_value,
    same_media_type,
    speaks_fence,
)
from shardsync.records.domain_filter import DomainFilter, DomainFilterError
from shardsync.records.endpoint import Changes, Endpoint, InvalidEndpoint, ZoneIndex, normalize_name

# The name it logged under as the module shardsync/providers/webhook.py: log lines keep their logger=.
log = get_logger("shardsync.providers.webhook")

DEFAULT_TIMEOUT = 10.0

SKIPPED_ENDPOINTS = Counter(
    "shardsync_webhook_skipped_endpoints_total",
    "Endpoints in a webhook provider's answer that could not be read (skipped, the others kept)",
)
UNFENCED_WRITES = Counter(
    "shardsync_webhook_unfenced_writes_total",
    "Writes carrying a fence token that the webhook provider did not check (it has no fence extension)",
)


def _domain_filter(data: Any) -> DomainFilter:
    """The filter a server sent on negotiation; a bad one is a ProviderError, as any protocol failure."""
    try:
        return DomainFilter.from_json(data)
    except DomainFilterError as exc:
        raise ProviderError(f"webhook negotiation: {exc}") from exc


@dataclass(frozen=True, slots=True)
class _Snapshot:
    version: int  # the count of applies when the listing was asked for
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
        timeout: float = DEFAULT_TIMEOUT,
        cache_ttl: float = 1.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.identity = identity
        self._configured_zones = sorted({normalize_name(z) for z in zones})
        self._timeout = timeout
        self._cache_ttl = cache_ttl
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout),
            headers={"Accept": MEDIA_TYPE, CLIENT_HEADER: identity},
            transport=transport,
        )
        self._filter: DomainFilter | None = None
        self._fenced = False  # the server advertised the fence extension (known once `_filter` is)
        self._index: ZoneIndex | None = None
        self._negotiate_lock = anyio.Lock()
        self._fetch_lock = anyio.Lock()
        self._version = 0  # bumped by every apply
        self._written: dict[str, int] = {}  # zone -> the version its last apply made
        self._snapshot: _Snapshot | None = None
        self._tokens: dict[str, FenceToken] = {}  # the newest token this process acquired, per zone
        self._warned_unconfirmed = False

    # ---- HTTP ----

    async def _request(
        self, method: str, path: str, body: Any = None, fence: str | None = None
    ) -> httpx.Response:
        """One call; with `fence` (a fence header's value) sent, 409 and 412 are FencedError."""
        what = f"webhook provider {method} {self.url}{path}"
        headers: dict[str, str] = {}
        content = None
        if body is not None:
            content = orjson.dumps(body)
            headers["Content-Type"] = MEDIA_TYPE
        if fence is not None:
            headers[FENCE_HEADER] = fence
        with transport_errors(what, self._timeout):
            resp = await self._http.request(method, self.url + path, content=content, headers=headers)
        text = f"{what}: {resp.status_code} {resp.text[:300]}"
        if resp.status_code == 429 or (resp.status_code == 503 and "Retry-After" in resp.headers):
            raise ThrottledError(text, retry_after(resp))
        if fence is not None and resp.status_code in FENCED_STATUSES:
            raise FencedError(text)
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
        """`GET /`: check the media type, learn the domain filter and whether the server advertises the
        fence extension (once; again after a failure)."""
        if self._filter is not None:  # every fenced write asks: no lock once it is known
            return self._filter
        async with self._negotiate_lock:
            if self._filter is None:
                resp = await self._request("GET", "")
                content_type = resp.headers.get("Content-Type", "")
                if not same_media_type(content_type):
                    raise ProviderError(
                        f"webhook provider {self.url}: negotiated content type {content_type!r}, "
                        f"want {MEDIA_TYPE!r}"
                    )
                self._filter = _domain_filter(self._json(resp))
                self._fenced = speaks_fence(resp.headers)
                include = self._filter.include
                log.info(
                    "webhook provider negotiated",
                    url=self.url,
                    zones=len(include),
                    include=",".join(include[:5]) + (",..." if len(include) > 5 else ""),
                    fence_extension=self._fenced,
                )
            return self._filter

    async def fences_writes(self) -> bool:
        """Whether the server checks the fence of every write (base.NegotiatesFencing): it advertised the
        fence extension. Negotiates first (ProviderError when the server cannot be asked)."""
        await self.negotiate()
        return self._fenced

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

    async def all_records(self, zone: str | None = None) -> list[Endpoint]:
        """`GET /records`: every record the webhook provider serves, cached (see the module docstring) while
        `zone` (with None: any zone) was not written through this client since the listing was asked for."""
        async with self._fetch_lock:
            snap = self._snapshot
            now = time.monotonic()
            if snap is not None and now - snap.fetched < self._cache_ttl:
                written = self._version if zone is None else self._written.get(zone, 0)
                if written <= snap.version:
                    return snap.records
            version = self._version
            resp = await self._request("GET", "/records")
            records = self._endpoints(self._json(resp), "GET /records")
            # An apply that ran meanwhile made `_written` newer than `version`: stale for its zone alone.
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
            for ep in await self.all_records(zone)
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
            self._check_token(zone, fence)
        checked = fence is not None and await self.fences_writes()
        index = await self._zone_index()
        for ep in (*changes.create, *changes.update_old, *changes.update_new, *changes.delete):
            if index.zone_of(ep.dns_name) != zone:
                raise ProviderError(f"{ep.dns_name}: not in zone {zone}; nothing sent")
        if changes.is_empty():
            return
        header = fence_value(zone, fence) if checked and fence is not None else None
        try:
            resp = await self._request("POST", "/records", changes.to_json(), header)
        finally:
            # Whatever the answer, the server may have applied part of it: the listing is stale for the zone.
            self._version += 1
            self._written[zone] = self._version
        if fence is not None and not (checked and speaks_fence(resp.headers)):
            UNFENCED_WRITES.inc()
            if checked:
                self._unconfirmed(zone)

    async def acquire_fence(self, zone: str, token: FenceToken) -> None:
        """With the fence extension, the server's compare-and-set (`POST /shardsync/fence`, 409 or 412:
        FencedError); either way this process keeps the token and refuses older ones from then on."""
        zone = normalize_name(zone)
        current = self._tokens.get(zone)
        if current is not None and current != token and current.generation >= token.generation:
            raise FencedError(
                f"zone {zone}: this process holds {current.to_text()}, not older than {token.to_text()}"
            )
        if await self.fences_writes():
            await self._request("POST", FENCE_PATH, fence=fence_value(zone, token))
        self._tokens[zone] = token

    async def close(self) -> None:
        await self._http.aclose()

    # ---- this process's own check of the tokens ----

    def _check_token(self, zone: str, fence: FenceToken) -> None:
        current = self._tokens.get(zone)
        if current != fence:
            held = current.to_text() if current else "no token"
            raise FencedError(f"zone {zone}: this process holds {held}, not {fence.to_text()}")

    def _unconfirmed(self, zone: str) -> None:
        if not self._warned_unconfirmed:
            self._warned_unconfirmed = True
            log.error(
                "webhook provider applied a fenced write without confirming the fence: it no longer "
                "speaks the fence extension; restart the replicas so they negotiate again",
                url=self.url,
                zone=zone,
            )
