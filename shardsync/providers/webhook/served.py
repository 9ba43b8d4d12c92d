"""What a webhook server (server.py) serves of a zone-scoped Provider, which the protocol is not:

- the zones: the provider's, kept by the server's domain filter (a zone it admits, or the parent of a domain
  it admits, as a replica keeps them), listed again on each negotiation and each full listing, and for a
  write when the list is older than `fresh_for` or names no zone for one of its records;
- every record in one answer: one read per zone, a few at a time (`concurrency`), each zone's records kept
  where that zone is their most specific served zone (a parent's delegation to a served child is the
  child's business, as a replica splits them); or one call when the provider lists every zone at once
  (`ListsEveryRecord`: the fake provider's store, whose gate then counts one call per listing);
- a POST's changes split per zone, each record to its most specific served zone; an update's two sides
  go together, to the zone of the new one.

Any read failing fails the whole listing: a partial listing would make the caller plan to create what is
there.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import anyio

from shardsync.providers.base import Provider, ProviderError
from shardsync.records.domain_filter import DomainFilter
from shardsync.records.endpoint import Changes, Endpoint, ZoneIndex

READ_CONCURRENCY = 8  # zones read at once for one GET /records
ZONES_FRESH_FOR = 10.0  # seconds a write trusts the last zone list


@runtime_checkable
class ListsEveryRecord(Protocol):
    """Optional beside Provider: every zone's records in one call."""

    async def all_records(self) -> list[Endpoint]: ...


class ServedZones:
    """The served zones of a provider, cached for writes (see the module docstring)."""

    def __init__(
        self,
        domain_filter: DomainFilter | None = None,
        *,
        fresh_for: float = ZONES_FRESH_FOR,
        concurrency: int = READ_CONCURRENCY,
    ) -> None:
        self.domain_filter = domain_filter or DomainFilter()
        self.fresh_for = fresh_for
        self.concurrency = concurrency
        self._index: ZoneIndex | None = None
        self._listed_at = 0.0
        self._listing = anyio.Lock()  # writes that find the list stale wait for one listing, not one each

    def _admits(self, zone: str) -> bool:
        return self.domain_filter.match(zone) or self.domain_filter.match_parent(zone)

    async def listed(self, provider: Provider) -> ZoneIndex:
        """The served zones, listed now."""
        listed_at = time.monotonic()
        index = ZoneIndex(z for z in await provider.zones() if self._admits(z))
        self._index, self._listed_at = index, listed_at
        return index

    async def index(self, provider: Provider, *, refresh: bool = False) -> ZoneIndex:
        """The served zones as last listed, listed again when older than `fresh_for` or with `refresh`."""
        asked = time.monotonic()
        if not (refresh or self._stale(asked)):
            assert self._index is not None
            return self._index
        async with self._listing:
            if self._index is not None and self._listed_at >= asked:
                return self._index  # listed by another caller since this one asked
            return await self.listed(provider)

    def _stale(self, now: float) -> bool:
        return self._index is None or now - self._listed_at >= self.fresh_for

    async def split(self, provider: Provider, changes: Changes) -> tuple[dict[str, Changes], list[Endpoint]]:
        """The changes per served zone, and the records in none (after listing the zones again once)."""
        parts, outside = _split(changes, await self.index(provider))
        if outside:
            parts, outside = _split(changes, await self.index(provider, refresh=True))
        return parts, outside

    async def every_record(self, provider: Provider) -> list[Endpoint]:
        """Every record of every served zone (see the module docstring)."""
        if isinstance(provider, ListsEveryRecord):
            records = await provider.all_records()
            if not self.domain_filter.configured:  # every zone is served: no zone list needed
                return records
            index = await self.index(provider)
            return [ep for ep in records if index.zone_of(ep.dns_name) is not None]
        index = await self.listed(provider)
        zones = list(index)
        found: list[list[Endpoint]] = [[] for _ in zones]
        limiter = anyio.CapacityLimiter(self.concurrency)

        failed: list[ProviderError] = []

        async def read(i: int, zone: str) -> None:
            try:
                async with limiter:
                    records = await provider.records(zone)
            except ProviderError as exc:  # the listing fails as this read did; the other reads stop
                failed.append(exc)
                tg.cancel_scope.cancel()
                return
            found[i] = [ep for ep in records if index.zone_of(ep.dns_name) == zone]

        async with anyio.create_task_group() as tg:
            for i, zone in enumerate(zones):
                tg.start_soon(read, i, zone)
        if failed:
            raise failed[0]
        return [ep for records in found for ep in records]


def _split(changes: Changes, index: ZoneIndex) -> tuple[dict[str, Changes], list[Endpoint]]:
    parts: dict[str, Changes] = {}
    outside: list[Endpoint] = []

    def part(ep: Endpoint) -> Changes | None:
        zone = index.zone_of(ep.dns_name)
        if zone is None:
            outside.append(ep)
            return None
        return parts.setdefault(zone, Changes())

    for name, endpoints in (("create", changes.create), ("delete", changes.delete)):
        for ep in endpoints:
            target = part(ep)
            if target is not None:
                getattr(target, name).append(ep)
    for old, new in zip(changes.update_old, changes.update_new, strict=False):
        target = part(new)
        if target is not None:
            target.update_old.append(old)
            target.update_new.append(new)
    return dict(sorted(parts.items())), outside


def outside_zone(zone: str, changes: Changes, index: ZoneIndex) -> Sequence[Endpoint]:
    """The records of `changes` whose most specific served zone is not `zone` (a fenced write names one)."""
    return [
        ep
        for ep in (*changes.create, *changes.update_old, *changes.update_new, *changes.delete)
        if index.zone_of(ep.dns_name) != zone
    ]
