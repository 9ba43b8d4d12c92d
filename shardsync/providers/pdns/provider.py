"""`PdnsProvider`: the zones of one PowerDNS Authoritative server, through its HTTP API, as the Provider
protocol.

- `zones()`: `GET .../zones`, every zone but secondaries (kind Slave or Consumer: PowerDNS refuses to
  change their rrsets); the replica keeps those the domain filter admits, as for every provider;
- `records(zone)`: `GET .../zones/<id>`, mapped by rrsets.py, without the fence record;
- `apply(zone, changes, fence)`: one `PATCH .../zones/<id>` of the whole plan (rrsets.py), which PowerDNS
  applies in one transaction; with a token, the fence is checked first (fencing.py). A change that cannot
  be written (outside the zone, unquoted TXT, a second change of one rrset) is left out and reported by
  RecordsRejectedError while the rest is written; a PATCH PowerDNS refuses for its content is a
  BatchRejectedError, which the worker splits to find the record at fault;
- `acquire_fence(zone, token)`: the fence's (fencing.py); `fences_writes()` is False either way (the
  check is not atomic with the PATCH), so the sharding loops keep the conservative timing.
Every API call is bounded by the API's timeout (api.py); nothing here waits without a bound.
"""

from __future__ import annotations

from typing import Any, Protocol

from shardsync.logs import get_logger
from shardsync.providers.base import FenceToken, ProviderError, RecordsRejectedError
from shardsync.providers.pdns.fencing import Fence
from shardsync.providers.pdns.rrsets import endpoints_of, patch_of
from shardsync.records.endpoint import Changes, Endpoint, normalize_name

log = get_logger("shardsync.providers.pdns")

# Zone kinds whose rrsets the API does not let a client change.
READ_ONLY_KINDS = frozenset({"slave", "consumer"})


class Api(Protocol):
    """The calls of api.PdnsApi the provider makes."""

    base: str

    async def zones(self) -> Any: ...
    async def zone(self, zone_id: str) -> Any: ...
    async def patch(self, zone_id: str, rrsets: list[dict[str, Any]]) -> None: ...
    async def close(self) -> None: ...


def zone_ids(answer: Any) -> dict[str, str]:
    """Zone name → zone id from `GET .../zones`'s answer, secondaries left out; ProviderError when the
    answer is not a list. An entry without a name and id is skipped."""
    if not isinstance(answer, list):
        raise ProviderError("pdns zones: the answer is not a list of zones")
    ids: dict[str, str] = {}
    for item in answer:
        if not isinstance(item, dict):
            continue
        name, zone_id, kind = item.get("name"), item.get("id"), item.get("kind", "")
        if not (isinstance(name, str) and isinstance(zone_id, str) and name.strip(". ")):
            continue
        if isinstance(kind, str) and kind.lower() in READ_ONLY_KINDS:
            continue
        ids[normalize_name(name)] = zone_id
    return ids


class PdnsProvider:
    """The Provider protocol over `api`, fenced by `fence` (module docstring)."""

    name = "pdns"

    def __init__(self, api: Api, fence: Fence) -> None:
        self.api = api
        self.fence = fence
        self._ids: dict[str, str] = {}

    # -- the Provider protocol ----------------------------------------------------------------------------

    async def zones(self) -> list[str]:
        self._ids = zone_ids(await self.api.zones())
        return sorted(self._ids)

    async def records(self, zone: str) -> list[Endpoint]:
        zone = normalize_name(zone)
        answer = await self.api.zone(await self._zone_id(zone))
        try:
            read = endpoints_of(zone, answer, skip=self.fence.reserved(zone))
        except ValueError as exc:
            raise ProviderError(f"pdns zone {zone}: {exc}") from exc
        if read.unreadable:
            log.warning("pdns rrsets skipped: unreadable", zone=zone, rrsets=read.unreadable)
        return read.endpoints

    async def apply(self, zone: str, changes: Changes, fence: FenceToken | None = None) -> None:
        zone = normalize_name(zone)
        try:
            patch = patch_of(zone, changes, reserved=self.fence.reserved(zone))
        except ValueError as exc:
            raise ProviderError(f"zone {zone}: {exc}") from exc
        for rejected in patch.rejected:
            log.warning(
                "pdns change skipped", zone=zone, record=rejected.endpoint.dns_name, reason=rejected.reason
            )
        if patch.rrsets:
            zone_id = await self._zone_id(zone)
            if fence is not None:
                await self.fence.check(zone, fence)
            await self.api.patch(zone_id, patch.rrsets)
            log.debug("pdns zone patched", zone=zone, rrsets=len(patch.rrsets), first=patch.describe())
        if patch.rejected:
            raise RecordsRejectedError(zone, patch.rejected)

    async def acquire_fence(self, zone: str, token: FenceToken) -> None:
        await self.fence.acquire(normalize_name(zone), token)

    async def fences_writes(self) -> bool:
        """False, with the fence or without (base.NegotiatesFencing): the server refuses a stale replica's
        PATCH only before it is sent, not atomically with it (fencing.py), so the replicas keep the
        conservative timing of a lease-timed provider."""
        return False

    async def close(self) -> None:
        try:
            await self.api.close()
        finally:
            await self.fence.close()

    # -- internals ------------------------------------------------------------------------------------------

    async def _zone_id(self, zone: str) -> str:
        """The API's id of the zone: from the last listing, else from a new one (a zone just created)."""
        zone_id = self._ids.get(zone)
        if zone_id is None:
            await self.zones()
            zone_id = self._ids.get(zone)
        if zone_id is None:
            raise ProviderError(f"zone {zone} is not served by {self.api.base} (or is a secondary)")
        return zone_id
