"""`CloudflareProvider`: Cloudflare zones as the Provider protocol, every batch fenced by a compare-and-swap.

- `zones()` lists the account's zones (or gets those `--zone-id-filter` names, as external-dns does);
- `records(zone)` lists the zone in pages of `--cloudflare-dns-records-per-page`, without the fence, as
  external-dns's endpoints (records.py), and remembers each record's id for the writes;
- `adjust_desired(endpoints)` is external-dns's AdjustEndpoints (records.py);
- `apply(zone, changes, fence)` writes the plan as `dns_records/batch` requests of at most
  `--batch-change-size` operations, `--batch-change-interval` apart, each headed by the fence's
  `[delete <fence id>, post fence]` (batches.py). A batch refused while the fence is no longer ours raises
  FencedError (the worker drops the zone); one refused for its content is sent again one record group at
  a time, as external-dns falls back to single records, and the groups still refused are reported with
  RecordsRejectedError while every other change applies;
- `acquire_fence(zone, token)` reads the fence and swaps it (batches.py), reading again when it lost a race.
The SDK's client is asynchronous (httpx on anyio): no worker threads.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any, Protocol

from shardsync.logs import get_logger
from shardsync.providers.base import (
    FencedError,
    FenceToken,
    Pacer,
    ProviderError,
    Rejected,
    fence_record_name,
    unpaced,
)
from shardsync.providers.batch_writer import BatchWriter
from shardsync.providers.cloudflare.batches import (
    FENCE_OPS,
    Op,
    anchor_body,
    fence_body,
    missing_ids,
    operations,
    request,
    split,
    token_of,
)
from shardsync.providers.cloudflare.errors import BatchFailedError
from shardsync.providers.cloudflare.records import (
    FREE_COMMENT_LIMIT,
    PAID_COMMENT_LIMIT,
    InvalidTargetError,
    Record,
    adjust,
    body_of,
    endpoints_of,
)
from shardsync.providers.fence_record import FenceMoved, acquire_by_swap, refused_by_fence
from shardsync.providers.zone_choice import LeftOutZones, one_per_name
from shardsync.records.endpoint import Changes, Endpoint, normalize_name

log = get_logger("shardsync.providers.cloudflare")

RecordKey = tuple[str, str, str]  # (name, type, target)


class Zone(Protocol):
    id: str
    name: str
    paid: bool


class Api(Protocol):
    """The Cloudflare calls the provider makes (api.CloudflareApi; tests may pass another)."""

    async def zones(self, pacer: Pacer) -> list[Any]: ...
    async def zone(self, zone_id: str) -> Any: ...
    async def records(
        self, zone_id: str, per_page: int, pacer: Pacer, *, name: str = "", type: str = ""
    ) -> list[dict[str, Any]]: ...
    async def batch(self, zone_id: str, body: dict[str, list[dict[str, Any]]]) -> dict[str, Any]: ...
    async def close(self) -> None: ...


class CloudflareProvider:
    """Cloudflare through `api` (module docstring)."""

    name = "cloudflare"

    def __init__(
        self,
        api: Api,
        *,
        zone_ids: tuple[str, ...] = (),
        per_page: int = 100,
        batch_size: int = 200,
        batch_interval: float = 1.0,
        proxied: bool = False,
        comment: str = "",
    ) -> None:
        self.api = api
        self.zone_ids = tuple(i for i in zone_ids if i)
        self.per_page = per_page
        self.batch_size = batch_size
        self._writer: BatchWriter[Op] = BatchWriter(
            log,
            "cloudflare",
            refused=BatchFailedError,
            interval=batch_interval,
            rejected_of=_rejected,
            partly_applied=True,
        )
        self.proxied = proxied
        self.comment = comment
        self._zones: dict[str, Zone] = {}
        self._ids: dict[str, dict[RecordKey, str]] = {}  # zone -> record key -> id, from reads and writes
        self._fences: dict[str, tuple[FenceToken, str]] = {}  # zone -> our token and its record's id
        self._left_out = LeftOutZones(log, "cloudflare", hint="choose with --zone-id-filter")
        # awaited before each further API request of one call (base.MultiRequest): the provider budget
        # paces and counts every listing page and batch, not only every call
        self.pacer: Pacer = unpaced

    # -- the Provider protocol ----------------------------------------------------------------------------

    async def zones(self) -> list[str]:
        if self.zone_ids:
            found = []
            for index, zone_id in enumerate(self.zone_ids):
                if index:
                    await self.pacer("zones")
                found.append(await self.api.zone(zone_id))
        else:
            found = await self.api.zones(self.pacer)
        chosen, left = one_per_name(found, lambda z: str(z.name))
        for zone in left:
            self._left_out.warn(zone.name, zone.id, chosen[zone.name].id)
        self._zones = chosen
        return sorted(chosen)

    async def records(self, zone: str) -> list[Endpoint]:
        zone = normalize_name(zone)
        listed = await self._read(zone, await self._zone_id(zone))
        return endpoints_of(listed)

    def adjust_desired(self, endpoints: list[Endpoint]) -> list[Endpoint]:
        return [
            adjust(
                ep,
                proxied_by_default=self.proxied,
                comment=self.comment,
                comment_limit=self._comment_limit(ep.dns_name),
            )
            for ep in endpoints
        ]

    async def apply(self, zone: str, changes: Changes, fence: FenceToken | None = None) -> None:
        zone = normalize_name(zone)
        zone_id = await self._zone_id(zone)
        if fence:
            await self._held(zone, zone_id, fence)
        if missing_ids(changes, self._id_of(zone)):
            await self.pacer("records")  # a record we change is not among the ids known: read them again
            await self._read(zone, zone_id)
        invalid: list[Rejected] = []
        ops = self._operations(zone, changes, invalid)
        batches = split(ops, self.batch_size - (FENCE_OPS if fence else 0))
        send = partial(self._send, zone, zone_id, fence=fence)
        await self._writer.write(zone, batches, send, self.pacer, already_rejected=invalid)

    async def acquire_fence(self, zone: str, token: FenceToken) -> None:
        zone = normalize_name(zone)
        zone_id = await self._zone_id(zone)
        reads = 0

        async def read() -> tuple[list[tuple[FenceToken | None, str]], FenceToken | None, bool]:
            nonlocal reads
            if reads:
                await self.pacer("fence")  # the first read was the call's first request
            reads += 1
            found = await self._read_fence(zone, zone_id)
            holders = [(t, i) for t, i in found if t is not None]
            holder = max((t for t, _ in holders), default=None)
            alone = len(found) == 2 and len(holders) == 1  # one token, beside the anchor
            if holder == token and alone:
                self._fences[zone] = (token, holders[0][1])
            return found, holder, alone

        async def swap(found: list[tuple[FenceToken | None, str]]) -> None:
            await self.pacer("fence")
            body = {
                "deletes": [{"id": i} for _, i in found],
                "posts": [anchor_body(zone), fence_body(zone, token)],
            }
            try:
                result = await self.api.batch(zone_id, body)
            except BatchFailedError as exc:
                raise FenceMoved(str(exc)) from None
            self._fences[zone] = (token, _posted_ids(result)[1])

        try:
            await acquire_by_swap(log, "cloudflare", zone, token, read, swap)
        except FencedError:
            self._fences.pop(zone, None)
            raise

    async def close(self) -> None:
        await self.api.close()

    # -- internals ------------------------------------------------------------------------------------------

    async def _zone_id(self, zone: str) -> str:
        if zone not in self._zones:
            await self.zones()  # a zone not seen yet: list again
        try:
            return self._zones[zone].id
        except KeyError:
            raise ProviderError(f"zone {zone!r}: no such Cloudflare zone (or filtered out)") from None

    def _comment_limit(self, name: str) -> int:
        labels = normalize_name(name).split(".")
        for at in range(len(labels)):
            zone = self._zones.get(".".join(labels[at:]))
            if zone is not None:
                return PAID_COMMENT_LIMIT if zone.paid else FREE_COMMENT_LIMIT
        return FREE_COMMENT_LIMIT

    async def _read(self, zone: str, zone_id: str) -> list[Record]:
        """The zone's records but the fence, their ids remembered."""
        raw = await self.api.records(zone_id, self.per_page, self.pacer)
        fence = fence_record_name(zone)
        listed = [r for r in map(Record.of, raw) if r.name != fence]
        self._ids[zone] = {r.key: r.id for r in listed}
        return listed

    def _id_of(self, zone: str) -> Any:
        ids = self._ids.get(zone, {})
        return lambda ep, target: ids.get((ep.dns_name, ep.record_type, target))

    def _operations(self, zone: str, changes: Changes, rejected: list[Rejected]) -> list[Op]:
        """The plan as operations; a value that cannot be written is reported, the rest go on."""

        def body(ep: Endpoint, target: str) -> dict[str, Any]:
            return body_of(ep, target, proxied_by_default=self.proxied, comment=self.comment)

        valid = Changes()
        for attr in ("create", "delete"):
            for ep in getattr(changes, attr):
                if self._writable(ep, body, rejected):
                    getattr(valid, attr).append(ep)
        for old, new in zip(changes.update_old, changes.update_new, strict=True):
            if self._writable(new, body, rejected):
                valid.update_old.append(old)
                valid.update_new.append(new)
        return operations(valid, self._id_of(zone), body)

    @staticmethod
    def _writable(ep: Endpoint, body: Any, rejected: list[Rejected]) -> bool:
        try:
            for target in ep.targets:
                body(ep, target)
        except InvalidTargetError as exc:
            rejected.append(Rejected(ep, str(exc)))
            return False
        return True

    async def _read_fence(self, zone: str, zone_id: str) -> list[tuple[FenceToken | None, str]]:
        """The fence and anchor records: (token, id) each, the token None for the anchor."""
        raw = await self.api.records(
            zone_id, self.per_page, self.pacer, name=fence_record_name(zone), type="TXT"
        )
        return [(token_of(str(r.get("content") or "")), str(r.get("id") or "")) for r in raw]

    async def _held(self, zone: str, zone_id: str, fence: FenceToken) -> None:
        """Learn our fence record's id (read it when not known): FencedError when the fence is not ours."""
        held = self._fences.get(zone)
        if held is not None and held[0] == fence:
            return
        await self.pacer("fence")
        for token, record_id in await self._read_fence(zone, zone_id):
            if token == fence:
                self._fences[zone] = (fence, record_id)
                return
        raise FencedError(f"zone {zone}: the fence no longer holds {fence.to_text()}")

    async def _send(
        self, zone: str, zone_id: str, batch: list[Op], index: int, total: int, *, fence: FenceToken | None
    ) -> None:
        """One batch of the call's `total`, headed by the fence when fenced; after a refused one,
        FencedError when the fence is no longer ours."""
        fence_id = self._fences[zone][1] if fence else ""  # `_held` read it, or the last batch wrote it
        head = fence_body(zone, fence) if fence else None
        try:
            result = await self.api.batch(zone_id, request(batch, fence_id, head))
        except BatchFailedError as exc:
            if fence is not None:
                await self._check_fence(zone, zone_id, fence, exc, index, total)
            raise
        posted = iter(_posted_ids(result))
        if fence:
            self._fences[zone] = (fence, next(posted, ""))
        ids = self._ids.setdefault(zone, {})
        for op in batch:
            key = (op.endpoint.dns_name, op.endpoint.record_type, op.target)
            if op.action == "delete":
                ids.pop(key, None)
            elif op.action == "post":
                ids[key] = next(posted, "")

    async def _check_fence(
        self, zone: str, zone_id: str, fence: FenceToken, error: Exception, index: int, total: int
    ) -> None:
        """After a refused batch: FencedError when the fence is no longer ours (else its id is read again)."""
        self._fences.pop(zone, None)
        try:
            await self._held(zone, zone_id, fence)
        except FencedError:
            raise refused_by_fence(log, "cloudflare", zone, fence, index, total, error) from None


def _posted_ids(result: dict[str, Any]) -> list[str]:
    return [str(r.get("id") or "") for r in result.get("posts") or ()]


def _rejected(ops: Sequence[Op], error: Exception) -> list[Rejected]:
    """Each endpoint of the refused operations once (an endpoint has an operation per value)."""
    seen: dict[tuple[str, str, str], Endpoint] = {}
    for op in ops:
        seen.setdefault(op.endpoint.key, op.endpoint)
    return [Rejected(ep, str(error)) for ep in seen.values()]
