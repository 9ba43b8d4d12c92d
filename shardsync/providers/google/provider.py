"""`GoogleProvider`: Cloud DNS managed zones as the Provider protocol, fenced by a compare-and-swap in every
change.

- `zones()` lists the managed zones and keeps those the zone filter admits, one per DNS name (zones.py);
- `records(zone)` lists the zone's record sets page by page, without the fence. A record set whose
  endpoint, written again, would not be the listed set exactly (values in another order, another
  spelling) is remembered as listed, so that its deletion names it exactly as Cloud DNS wants;
- `apply(zone, changes, fence)` writes the plan in changes (batches.py), `--google-batch-change-interval`
  apart, each carrying `deletions: [fence "<token>"]`, `additions: [fence "<token>"]` when fenced. A change
  Cloud DNS refuses for its fence (the fence deletion does not match: 412, or the fence is gone: 404)
  raises FencedError (the worker drops the zone); one refused for its content is sent again one record
  group at a time, and the groups still refused are reported with RecordsRejectedError while every other
  change applies;
- `acquire_fence(zone, token)` reads the fence and swaps it by `deletions: [current], additions: [token]`
  (or `additions: [token]` when there is none), reading again when it lost a race.
Blocking library calls run in worker threads (api.py maps their errors and counts them).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import Any, Protocol

from shardsync.logs import get_logger
from shardsync.providers.base import FenceToken, Pacer, ProviderError, fence_record_name, unpaced
from shardsync.providers.batch_writer import BatchWriter
from shardsync.providers.fence_record import FenceMoved, acquire_by_swap, refused_by_fence
from shardsync.providers.google.batches import (
    Change,
    Item,
    Limits,
    change_of,
    fence_reserve,
    fence_rrset,
    items_of,
    split,
    token_of,
)
from shardsync.providers.google.errors import ChangeRefusedError
from shardsync.providers.google.records import (
    RRset,
    absolute,
    endpoint_of,
    key_of,
    listed,
    rrset_of,
)
from shardsync.providers.google.zones import ManagedZone, ZoneFilter, by_dns_name
from shardsync.providers.worker_threads import WorkerThreads
from shardsync.providers.zone_choice import LeftOutZones
from shardsync.records.endpoint import Changes, Endpoint, normalize_name, same_targets

log = get_logger("shardsync.providers.google")

Page = tuple[list[dict[str, Any]], str | None]


class Api(Protocol):
    """The Cloud DNS calls the provider makes (api.CloudDnsApi; tests may pass another)."""

    def zones_page(self, token: str | None) -> Page: ...
    def rrsets_page(self, zone: str, token: str | None, name: str = "", rtype: str = "") -> Page: ...
    def change(self, zone: str, additions: list[RRset], deletions: list[RRset]) -> None: ...


class GoogleProvider:
    """Cloud DNS through `api` (module docstring)."""

    name = "google"

    def __init__(
        self,
        api: Api,
        *,
        zone_filter: ZoneFilter | None = None,
        limits: Limits | None = None,
        batch_interval: float = 1.0,
        max_in_flight: int = 8,
    ) -> None:
        self.api = api
        self.zone_filter = zone_filter or ZoneFilter()
        self.limits = limits or Limits()
        self._zones: dict[str, ManagedZone] = {}
        self._left_out = LeftOutZones(
            log, "google", hint="choose with --google-zone-visibility or --zone-id-filter"
        )
        # per zone: the record sets listed in a form their endpoint would not write back exactly
        self._as_listed: dict[str, dict[tuple[str, str], RRset]] = {}
        self._threads = WorkerThreads(max_in_flight)
        self._writer: BatchWriter[Item] = BatchWriter(
            log, "google", refused=ChangeRefusedError, interval=batch_interval
        )
        # awaited before each further API request of one call (base.MultiRequest): the provider budget
        # paces and counts every listing page and change, not only every call
        self.pacer: Pacer = unpaced

    # -- the Provider protocol ----------------------------------------------------------------------------

    async def zones(self) -> list[str]:
        listed_zones = [
            ManagedZone.from_api(z) async for page in self._pages("zones", self.api.zones_page) for z in page
        ]
        self._zones = self._choose(listed_zones)
        for gone in set(self._as_listed) - set(self._zones):
            del self._as_listed[gone]
        return sorted(self._zones)

    async def records(self, zone: str) -> list[Endpoint]:
        zone = normalize_name(zone)
        managed = await self._zone(zone)
        fence = fence_record_name(zone)
        out: list[Endpoint] = []
        kept: dict[tuple[str, str], RRset] = {}
        async for page in self._pages("records", partial(self.api.rrsets_page, managed.name)):
            for rrset in page:
                key = key_of(rrset)
                ep = endpoint_of(rrset) if key[0] != fence else None
                if ep is None:
                    continue
                out.append(ep)
                as_listed = listed(rrset)
                if rrset_of(ep) != as_listed:  # not what writing `ep` would give: deleted as listed
                    kept[key] = as_listed
        self._as_listed[zone] = kept
        return out

    async def apply(self, zone: str, changes: Changes, fence: FenceToken | None = None) -> None:
        zone = normalize_name(zone)
        managed = await self._zone(zone)
        items = items_of(changes, partial(self._deletion_of, zone))
        batches = split(items, self.limits, fence_reserve(fence) if fence else (0, 0))
        await self._writer.write(zone, batches, partial(self._send, zone, managed, fence=fence), self.pacer)

    async def acquire_fence(self, zone: str, token: FenceToken) -> None:
        zone = normalize_name(zone)
        managed = await self._zone(zone)

        async def read() -> tuple[RRset | None, FenceToken | None, bool]:
            current = await self._read_fence(zone, managed)
            return current, token_of(current), len((current or {}).get("rrdatas") or ()) == 1

        async def swap(current: RRset | None) -> None:
            await self.pacer("fence")  # the read was the call's first request
            # delete exactly what was read: the compare of the swap
            change = partial(
                self.api.change, managed.name, [fence_rrset(zone, token)], [current] if current else []
            )
            try:
                await self._threads.run(change)
            except ChangeRefusedError as exc:
                if exc.status in (404, 409, 412):  # the fence is not, or no longer, what was read
                    raise FenceMoved from None
                raise

        await acquire_by_swap(log, "google", zone, token, read, swap)

    async def close(self) -> None:
        """Nothing to release: the library's HTTP session goes with the process."""

    # -- internals ------------------------------------------------------------------------------------------

    async def _pages(
        self, kind: str, fetch: Callable[[str | None], Page]
    ) -> AsyncIterator[list[dict[str, Any]]]:
        """The pages of a listing, one request each; every request after the first is paced as `kind`."""
        token: str | None = None
        first = True
        while first or token is not None:
            if not first:
                await self.pacer(kind)
            first = False
            page, token = await self._threads.run(partial(fetch, token))
            yield page

    def _choose(self, listed_zones: list[ManagedZone]) -> dict[str, ManagedZone]:
        chosen, left = by_dns_name(z for z in listed_zones if self.zone_filter.matches(z))
        for zone in left:  # a managed zone's id, in the API's paths, is its name
            self._left_out.warn(
                zone.dns_name, zone.name, chosen[zone.dns_name].name, visibility=zone.visibility
            )
        return chosen

    async def _zone(self, zone: str) -> ManagedZone:
        if zone not in self._zones:
            await self.zones()  # a zone not seen yet: list again
        try:
            return self._zones[zone]
        except KeyError:
            raise ProviderError(f"zone {zone!r}: no such Cloud DNS managed zone (or filtered out)") from None

    def _deletion_of(self, zone: str, ep: Endpoint) -> RRset:
        """The record set a deletion of `ep` names: as listed when it was kept so and still is `ep`."""
        kept = self._as_listed.get(zone, {}).get((ep.dns_name, ep.record_type))
        if kept is not None:
            was = endpoint_of(kept)
            if was is not None and was.ttl == ep.ttl and same_targets(was.targets, ep.targets):
                return kept
        return rrset_of(ep)

    async def _read_fence(self, zone: str, managed: ManagedZone) -> RRset | None:
        name = absolute(fence_record_name(zone))
        page, _ = await self._threads.run(lambda: self.api.rrsets_page(managed.name, None, name, "TXT"))
        for rrset in page:
            if key_of(rrset) == (fence_record_name(zone), "TXT"):
                return listed(rrset)
        return None

    async def _send(
        self,
        zone: str,
        managed: ManagedZone,
        batch: list[Item],
        index: int,
        total: int,
        *,
        fence: FenceToken | None,
    ) -> None:
        change = change_of(batch, zone, fence)
        send = partial(self.api.change, managed.name, change.additions, change.deletions)
        try:
            await self._threads.run(send)
        except ChangeRefusedError as exc:
            if fence is not None and exc.at == ("deletions", 0):  # the fence is always the first deletion
                raise refused_by_fence(log, "google", zone, fence, index, total, exc) from None
            raise
        self._forget_written(zone, change)

    def _forget_written(self, zone: str, change: Change) -> None:
        """A record set deleted or written again is no longer as listed."""
        kept = self._as_listed.get(zone)
        if kept:
            for item in change.items:
                kept.pop((item.endpoint.dns_name, item.endpoint.record_type), None)
