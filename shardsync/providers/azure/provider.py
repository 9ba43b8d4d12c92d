"""`AzureProvider`: Azure DNS zones as the Provider protocol, every batch of record-set writes headed by a
check-and-bump of the zone's fence record set.

- `zones()` lists the resource group's zones (or the subscription's), kept by `--zone-id-filter`, the list
  reused for `--azure-zones-cache-duration`;
- `records(zone)` lists the zone's record sets in pages, without the fence, as external-dns's endpoints
  (records.py), and remembers each set's etag for the writes;
- `adjust_desired(endpoints)` is external-dns's AdjustEndpoints (records.py);
- `apply(zone, changes, fence)` writes the plan one record set per request (writes.py), each conditional
  on the zone as read (a create on `If-None-Match: *`, an update or delete on the etag read), in batches
  of at most BATCH_WRITES, each begun by a bump of the fence (`If-Match` on its etag) and bumped again
  before a write when the last bump is older than FENCE_MAX_AGE (a writer that stalled mid-batch checks
  again before it goes on). A refused bump raises FencedError before the batch writes anything (the
  worker drops the zone). A record set Azure refuses for its content is reported with
  RecordsRejectedError (the rest of its record's writes skipped, every other change applied); a write
  whose condition failed (the zone changed since it was read) stops the change (ZoneChangedError: read
  again, plan again);
- `acquire_fence(zone, token)` reads the fence and swaps it by its etag, reading again when it lost a race;
- `fences_writes()` is False: the fence is not atomic with the writes it guards (writes.py), so the
  sharding loops take the conservative timing.
The SDK's client is asynchronous (aiohttp on the event loop): no worker threads.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, Protocol

from shardsync.logs import get_logger
from shardsync.providers.azure.errors import PreconditionFailedError, WriteRefusedError, ZoneChangedError
from shardsync.providers.azure.records import InvalidTargetError, adjust, body_of, endpoint_of, relative_name
from shardsync.providers.azure.writes import (
    BATCH_WRITES,
    FENCE_NAME,
    Write,
    batches,
    fence_body,
    token_of,
    units,
)
from shardsync.providers.azure.zones import Zone, select
from shardsync.providers.base import (
    FencedError,
    FenceToken,
    Pacer,
    PartlyAppliedError,
    ProviderError,
    RecordsRejectedError,
    Rejected,
    ThrottledError,
    UnreachableError,
    fence_record_name,
    unpaced,
)
from shardsync.providers.fence_record import FenceMoved, acquire_by_swap, refused_by_fence
from shardsync.providers.zone_choice import LeftOutZones
from shardsync.records.endpoint import Changes, Endpoint, normalize_name

log = get_logger("shardsync.providers.azure")

FENCE_MAX_AGE = 3.0  # seconds: an older bump is repeated before the batch's next write
RecordSet = dict[str, Any]


class Api(Protocol):
    """The Azure calls the provider makes (api.AzureApi; tests may pass another)."""

    async def zones(self, resource_group: str, pacer: Pacer) -> list[Zone]: ...
    async def record_sets(self, zone: Zone, pacer: Pacer) -> list[RecordSet]: ...
    async def get(self, zone: Zone, name: str, rtype: str) -> RecordSet | None: ...
    async def put(
        self, zone: Zone, name: str, rtype: str, body: RecordSet, *, if_match: str = "", create: bool = False
    ) -> RecordSet: ...
    async def delete(self, zone: Zone, name: str, rtype: str, *, if_match: str = "") -> None: ...
    async def close(self) -> None: ...


class _Fence:
    """Our token in a zone's fence, the etag of our last write of it, and when that write was."""

    __slots__ = ("bumped_at", "etag", "token")

    def __init__(self, token: FenceToken, etag: str, bumped_at: float) -> None:
        self.token, self.etag, self.bumped_at = token, etag, bumped_at


class AzureProvider:
    """Azure DNS through `api` (module docstring)."""

    name = "azure"

    def __init__(
        self,
        api: Api,
        *,
        resource_group: str = "",
        zone_ids: tuple[str, ...] = (),
        zones_cache: float = 0.0,
        batch_writes: int = BATCH_WRITES,
        fence_max_age: float = FENCE_MAX_AGE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.resource_group = resource_group
        self.zone_ids = tuple(i for i in zone_ids if i)
        self.zones_cache = zones_cache
        self.batch_writes = batch_writes
        self.fence_max_age = fence_max_age
        self._clock = clock
        self._zones: dict[str, Zone] = {}
        self._listed_at = -math.inf
        self._left_out = LeftOutZones(
            log, "azure", hint="choose with --azure-resource-group or --zone-id-filter"
        )
        self._etags: dict[str, dict[tuple[str, str], str]] = {}  # zone -> (name, type) -> etag
        self._fences: dict[str, _Fence] = {}
        # awaited before each further API request of one call (base.MultiRequest): the provider budget
        # paces and counts every listing page and record-set write, not only every call
        self.pacer: Pacer = unpaced

    # -- the Provider protocol ----------------------------------------------------------------------------

    async def zones(self) -> list[str]:
        if self._zones and self._clock() - self._listed_at < self.zones_cache:
            return sorted(self._zones)  # --azure-zones-cache-duration
        found = await self.api.zones(self.resource_group, self.pacer)
        chosen, left = select(found, self.zone_ids)
        for zone in left:
            self._left_out.warn(zone.name, zone.id, chosen[zone.name].id)
        self._zones, self._listed_at = chosen, self._clock()
        return sorted(chosen)

    async def records(self, zone: str) -> list[Endpoint]:
        zone = normalize_name(zone)
        listed = await self.api.record_sets(await self._zone(zone), self.pacer)
        fence = fence_record_name(zone)
        etags: dict[tuple[str, str], str] = {}
        out: list[Endpoint] = []
        for record_set in listed:
            ep = endpoint_of(record_set, zone)
            if ep is None or ep.dns_name == fence:
                continue
            etags[(ep.dns_name, ep.record_type)] = str(record_set.get("etag") or "")
            out.append(ep)
        self._etags[zone] = etags
        return out

    def adjust_desired(self, endpoints: list[Endpoint]) -> list[Endpoint]:
        return [adjust(ep) for ep in endpoints]

    async def apply(self, zone: str, changes: Changes, fence: FenceToken | None = None) -> None:
        zone = normalize_name(zone)
        where = await self._zone(zone)
        rejected: list[Rejected] = []
        todo = batches(self._writable(units(changes), rejected), self.batch_writes)
        run = _Run(self.pacer)
        refused: set[str] = set()  # records whose writes stop at a refused one
        try:
            for index, batch in enumerate(todo):
                if fence is not None:
                    await self._bump(where, fence, run, index, len(todo))
                for unit in batch:
                    for write in unit:
                        if write.group in refused:
                            break
                        if fence is not None and self._stale(zone):
                            await self._bump(where, fence, run, index, len(todo))
                        try:
                            await self._write(where, write, run)
                        except WriteRefusedError as exc:
                            refused.add(write.group)
                            rejected.append(Rejected(write.endpoint, str(exc)))
        except PreconditionFailedError as exc:
            raise ZoneChangedError(
                f"zone {zone}: a record set changed since the zone was read; {run.written} write(s) were "
                f"applied before: {exc}"
            ) from None
        except (ThrottledError, UnreachableError) as exc:
            if not run.written:
                raise  # nothing of the change is written: the call may be made again as it stands
            raise PartlyAppliedError(f"zone {zone}: {run.written} write(s) applied, then: {exc}") from None
        if rejected:
            raise RecordsRejectedError(zone, rejected)

    async def acquire_fence(self, zone: str, token: FenceToken) -> None:
        zone = normalize_name(zone)
        where = await self._zone(zone)
        run = _Run(self.pacer)  # the call's first request was paced by the budget; each further one here

        async def read() -> tuple[RecordSet | None, FenceToken | None, bool]:
            await run.request("fence")
            found = await self.api.get(where, FENCE_NAME, "TXT")
            holder = token_of(found)
            if holder == token:  # ours already: its etag is the one the first bump names
                self._fences[zone] = _Fence(token, str((found or {}).get("etag") or ""), -math.inf)
            return found, holder, True

        async def swap(found: RecordSet | None) -> None:
            await run.request("fence")
            etag = str((found or {}).get("etag") or "")
            try:
                stored = await self.api.put(
                    where, FENCE_NAME, "TXT", fence_body(token), if_match=etag, create=found is None
                )
            except PreconditionFailedError:
                raise FenceMoved from None
            self._fences[zone] = _Fence(token, str(stored.get("etag") or ""), self._clock())

        try:
            await acquire_by_swap(log, "azure", zone, token, read, swap)
        except FencedError:
            self._fences.pop(zone, None)
            raise

    async def fences_writes(self) -> bool:
        """False (base.NegotiatesFencing): the fence refuses a stale owner's next batch, not the writes of
        the batch under way, so the replicas keep the conservative timing of a provider that does not
        fence every write, as pdns's check-before-write fence does."""
        return False

    async def close(self) -> None:
        await self.api.close()

    # -- internals ------------------------------------------------------------------------------------------

    async def _zone(self, zone: str) -> Zone:
        if zone not in self._zones:
            self._listed_at = -math.inf
            await self.zones()  # a zone not seen yet: list again
        try:
            return self._zones[zone]
        except KeyError:
            raise ProviderError(f"zone {zone!r}: no such Azure DNS zone (or filtered out)") from None

    @staticmethod
    def _writable(found: list[list[Write]], rejected: list[Rejected]) -> list[list[Write]]:
        """The units whose record sets can be written; the records of the others are reported."""
        bad: set[str] = set()
        for write in (w for unit in found for w in unit):
            if write.action != "put" or write.group in bad:
                continue
            try:
                if write.endpoint.set_identifier:
                    raise InvalidTargetError("Azure DNS has no routing policies (set-identifier)")
                body_of(write.endpoint)
            except InvalidTargetError as exc:
                bad.add(write.group)
                rejected.append(Rejected(write.endpoint, str(exc)))
        kept = ([w for w in unit if w.group not in bad] for unit in found)
        return [unit for unit in kept if unit]

    def _stale(self, zone: str) -> bool:
        held = self._fences.get(zone)
        return held is None or self._clock() - held.bumped_at > self.fence_max_age

    async def _bump(self, where: Zone, fence: FenceToken, run: _Run, index: int, total: int) -> None:
        """Write our fence again, on the etag of our last write of it: FencedError when it moved."""
        held = self._fences.get(where.name)
        if held is None or held.token != fence:
            await run.request("fence")
            found = await self.api.get(where, FENCE_NAME, "TXT")
            if token_of(found) != fence or found is None:
                raise self._refused(where.name, fence, run, index, total, "the fence holds another token")
            held = _Fence(fence, str(found.get("etag") or ""), -math.inf)
        await run.request("fence")
        try:
            stored = await self.api.put(where, FENCE_NAME, "TXT", fence_body(fence), if_match=held.etag)
        except PreconditionFailedError as exc:
            raise self._refused(where.name, fence, run, index, total, str(exc)) from None
        self._fences[where.name] = _Fence(fence, str(stored.get("etag") or ""), self._clock())

    def _refused(
        self, zone: str, fence: FenceToken, run: _Run, index: int, total: int, why: str
    ) -> FencedError:
        self._fences.pop(zone, None)
        written = f"{run.written} record-set write(s) of the earlier batches; {why}"
        return refused_by_fence(log, "azure", zone, fence, index, total, ProviderError(written))

    async def _write(self, where: Zone, write: Write, run: _Run) -> None:
        ep = write.endpoint
        name, key = relative_name(ep.dns_name, where.name), (ep.dns_name, ep.record_type)
        etags = self._etags.setdefault(where.name, {})
        await run.request("apply")
        if write.action == "delete":
            await self.api.delete(where, name, ep.record_type, if_match=etags.get(key, ""))
            etags.pop(key, None)
        else:
            etag = "" if write.create else etags.get(key, "")
            stored = await self.api.put(
                where, name, ep.record_type, body_of(ep), if_match=etag, create=write.create
            )
            etags[key] = str(stored.get("etag") or "")
        run.written += 1


class _Run:
    """One apply's requests: each after the first is paced (the budget paced the call's first)."""

    __slots__ = ("pacer", "requests", "written")

    def __init__(self, pacer: Pacer) -> None:
        self.pacer, self.requests, self.written = pacer, 0, 0

    async def request(self, kind: str) -> None:
        if self.requests:
            await self.pacer(kind)
        self.requests += 1
