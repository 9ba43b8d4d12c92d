"""`AwsProvider`: Route53 hosted zones as the Provider protocol, fenced by a compare-and-swap in every batch.

- `zones()` lists the hosted zones (and their tags when `--aws-zone-tags` asks) and keeps those the zone
  filter admits, one per name (zones.py);
- `records(zone)` lists the zone in pages of `page_size` (Route53's maximum, 300), without the fence;
- `adjust_desired(endpoints)` is external-dns's AdjustEndpoints (records.py), applied by the worker to the
  desired endpoints before planning;
- `apply(zone, changes, fence)` writes the plan in batches (batches.py), `--aws-batch-change-interval`
  apart, each headed by `[DELETE fence "<token>", UPSERT fence "<token>"]` when fenced. A batch Route53
  refuses for its fence raises FencedError (the worker drops the zone); a batch refused for its content is
  sent again one record group at a time, as external-dns does, and the groups still refused are reported
  with RecordsRejectedError while every other change applies;
- `acquire_fence(zone, token)` reads the fence and swaps it by `[DELETE current, UPSERT token]` (or
  `[CREATE token]` when there is none), re-reading when it lost a race.
Blocking boto3 calls run in worker threads (api.py maps their errors and counts them).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from functools import partial
from typing import Any, Protocol

from shardsync.logs import get_logger
from shardsync.providers.aws.batches import (
    Change,
    Limits,
    fence_changes,
    fence_name,
    fence_reserve,
    fence_rrset,
    route53_changes,
    split,
    token_of,
)
from shardsync.providers.aws.errors import InvalidChangeBatchError, Start
from shardsync.providers.aws.records import adjust, endpoints_of, rrset_of, unescape
from shardsync.providers.aws.zones import HostedZone, ZoneFilter, by_name
from shardsync.providers.base import FenceToken, Pacer, ProviderError, unpaced
from shardsync.providers.batch_writer import BatchWriter
from shardsync.providers.fence_record import FenceMoved, acquire_by_swap, refused_by_fence
from shardsync.providers.worker_threads import WorkerThreads
from shardsync.providers.zone_choice import LeftOutZones
from shardsync.records.endpoint import Changes, Endpoint, normalize_name

log = get_logger("shardsync.providers.aws")

PAGE_SIZE = 300  # ListResourceRecordSets' largest page


class Api(Protocol):
    """The Route53 calls the provider makes (api.Route53Api; tests may pass another)."""

    def hosted_zones(self) -> list[HostedZone]: ...
    def tags(self, zone_ids: Iterable[str]) -> dict[str, dict[str, str]]: ...
    def rrsets(
        self, zone_id: str, start: Start | None, max_items: int
    ) -> tuple[list[dict[str, Any]], Start | None]: ...
    def change(self, zone_id: str, changes: list[dict[str, Any]], comment: str = "") -> None: ...


class AwsProvider:
    """Route53 through `api` (module docstring)."""

    name = "aws"
    page_size = PAGE_SIZE

    def __init__(
        self,
        api: Api,
        *,
        zone_filter: ZoneFilter | None = None,
        limits: Limits | None = None,
        batch_interval: float = 1.0,
        prefer_cname: bool = False,
        evaluate_target_health: bool = True,
        zones_cache: float = 0.0,
        max_in_flight: int = 8,
    ) -> None:
        self.api = api
        self.zone_filter = zone_filter or ZoneFilter()
        self.limits = limits or Limits()
        self.prefer_cname = prefer_cname
        self.evaluate_target_health = evaluate_target_health
        self.zones_cache = zones_cache
        self._zones: dict[str, HostedZone] = {}
        self._listed_at = -math.inf
        self._left_out = LeftOutZones(log, "aws", hint="choose with --aws-zone-type or --zone-id-filter")
        self._threads = WorkerThreads(max_in_flight)
        self._writer: BatchWriter[Change] = BatchWriter(
            log, "aws", refused=InvalidChangeBatchError, interval=batch_interval
        )
        # awaited before each further API request of one call (base.MultiRequest): the provider budget
        # paces and counts every listing page and change batch, not only every call
        self.pacer: Pacer = unpaced

    # -- the Provider protocol ----------------------------------------------------------------------------

    async def zones(self) -> list[str]:
        if time.monotonic() - self._listed_at >= self.zones_cache:  # --aws-zones-cache-duration
            self._zones = await self._threads.run(self._discover)
            self._listed_at = time.monotonic()
        return sorted(self._zones)

    async def records(self, zone: str) -> list[Endpoint]:
        zone_id = await self._zone_id(zone)
        fence = fence_name(normalize_name(zone))
        out: list[Endpoint] = []
        start: Start | None = None
        while True:
            if out:
                await self.pacer("records")
            page, start = await self._threads.run(partial(self.api.rrsets, zone_id, start, self.page_size))
            for rrset in page:
                if normalize_name(unescape(str(rrset["Name"]))) == fence:
                    continue
                out.extend(endpoints_of(rrset))
            if start is None:
                return out

    def adjust_desired(self, endpoints: list[Endpoint]) -> list[Endpoint]:
        return adjust(
            endpoints, prefer_cname=self.prefer_cname, evaluate_target_health=self.evaluate_target_health
        )

    async def apply(self, zone: str, changes: Changes, fence: FenceToken | None = None) -> None:
        zone = normalize_name(zone)
        zone_id = await self._zone_id(zone)
        planned = route53_changes(changes, lambda ep: rrset_of(ep, self.evaluate_target_health, zone_id))
        reserved = fence_reserve(zone, fence) if fence else (0, 0, 0)
        batches = split(planned, self.limits, reserved)
        await self._writer.write(zone, batches, partial(self._send, zone, zone_id, fence=fence), self.pacer)

    async def acquire_fence(self, zone: str, token: FenceToken) -> None:
        zone = normalize_name(zone)
        zone_id = await self._zone_id(zone)

        async def read() -> tuple[dict[str, Any] | None, FenceToken | None, bool]:
            current = await self._read_fence(zone, zone_id)
            return current, token_of(current), len((current or {}).get("ResourceRecords") or ()) == 1

        async def swap(current: dict[str, Any] | None) -> None:
            await self.pacer("fence")  # the read was the call's first request
            cas = fence_changes(zone, None, token)
            if current is not None:  # delete exactly what was read: the compare of the swap
                cas = [{"Action": "DELETE", "ResourceRecordSet": current}, cas[0] | {"Action": "UPSERT"}]
            try:
                await self._threads.run(partial(self.api.change, zone_id, cas, "shardsync fence"))
            except InvalidChangeBatchError:
                raise FenceMoved from None

        await acquire_by_swap(log, "aws", zone, token, read, swap)

    async def close(self) -> None:
        """Nothing to release: boto3's connection pool goes with the process."""

    # -- internals ------------------------------------------------------------------------------------------

    def _discover(self) -> dict[str, HostedZone]:
        listed = [z for z in self.api.hosted_zones() if self.zone_filter.matches(z)]
        if self.zone_filter.needs_tags and listed:
            tags = self.api.tags(z.id for z in listed)
            listed = [z for z in listed if self.zone_filter.matches_tags(tags.get(z.id, {}))]
        chosen, left = by_name(listed)
        for zone in left:
            self._left_out.warn(zone.name, zone.id, chosen[zone.name].id)
        return chosen

    async def _zone_id(self, zone: str) -> str:
        zone = normalize_name(zone)
        if zone not in self._zones:
            self._listed_at = -math.inf  # a zone not seen yet: list again, whatever the cache says
            await self.zones()
        try:
            return self._zones[zone].id
        except KeyError:
            raise ProviderError(f"zone {zone!r}: no such Route53 hosted zone (or filtered out)") from None

    async def _read_fence(self, zone: str, zone_id: str) -> dict[str, Any] | None:
        name = fence_name(zone)
        page, _ = await self._threads.run(lambda: self.api.rrsets(zone_id, (name, "TXT", ""), 1))
        for rrset in page:
            if normalize_name(unescape(str(rrset["Name"]))) == name and rrset.get("Type") == "TXT":
                return rrset
        return None

    async def _send(
        self,
        zone: str,
        zone_id: str,
        batch: list[Change],
        index: int,
        total: int,
        *,
        fence: FenceToken | None,
    ) -> None:
        head = fence_changes(zone, fence, fence) if fence else []
        body = head + [c.to_api() for c in batch]
        try:
            await self._threads.run(lambda: self.api.change(zone_id, body))
        except InvalidChangeBatchError as exc:
            if fence is not None and fence_name(zone) in str(exc):
                raise refused_by_fence(log, "aws", zone, fence, index, total, exc) from None
            raise


def fence_record(zone: str, token: FenceToken) -> dict[str, Any]:
    """The fence RRset as written (for tests and tools)."""
    return fence_rrset(normalize_name(zone), token)
