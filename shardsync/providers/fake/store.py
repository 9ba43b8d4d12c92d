"""The fake provider's data: zones, records and fences in memory; every call gated, every write audited.

`FakeStore` is one thread-safe backend that both faces share: `FakeProvider` (provider.py, in-process,
`--provider=fake`, calls from worker threads) and the HTTP server (server.py, `shardsync fake-provider`,
shared by several replica processes, calls from one event loop: the `*_async` methods). A provider call
(zones, records, apply, acquire_fence) first passes the gate (limits.py: injected throttling, rate,
concurrency, latency), then runs atomically under the store's data lock, where the injected failures
(faults.py) are checked. Changes that cannot apply (staging.py: create of an existing RRset, delete of a
missing one, a name outside the zone) refuse the whole batch (InvalidChangesError, a BatchRejectedError),
as an injected record failure does. A profile (profile.py, e.g. `route53`; its state: enforcer.py) adds
the documented rules of a real API: exact deletes, batch and page limits, PriorRequestNotComplete, an
account-wide token bucket and request windows.

Fences (design §2 rule 8) are a per-zone compare-and-set, kept beside the records and never listed with
them: `acquire_fence` succeeds when the zone has no fence, already holds that exact token, or holds an older
generation's token; `apply` with a token succeeds only while the zone's fence is exactly that token. An
apply without a token is unfenced and always allowed (`--once`, the webhook face's plain writes).

Every write that passed the gate is audited (audit.py), refused ones too; `seed` adds zones by the layout
of seed.py.

Each zone has a version, new whenever its records change (a write, `add_zone`): `records_if_changed` with
the version a caller saw answers "unchanged" without listing (base.ReadsIfChanged; the server's ETag and
304). The fence is not among the records, so taking it leaves the version alone.
"""

from __future__ import annotations

import asyncio
import bisect
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import TypeVar

from shardsync.providers.base import FencedError, FenceToken, ProviderError
from shardsync.providers.fake.audit import DEFAULT_AUDIT_LIMIT, AuditEntry, AuditLog
from shardsync.providers.fake.enforcer import Enforcer
from shardsync.providers.fake.faults import Faults, InjectedFaults
from shardsync.providers.fake.limits import ANONYMOUS, Gate, Limits
from shardsync.providers.fake.profile import NONE, Profile
from shardsync.providers.fake.seed import seeded_records, zone_name
from shardsync.providers.fake.staging import InvalidChangesError, Key, commit, stage, with_fence
from shardsync.records.endpoint import Changes, Endpoint, ZoneIndex, normalize_name

__all__ = ["FakeStore", "InvalidChangesError", "UnknownZoneError"]

Started = tuple[float, float]  # when a call got its slot: (monotonic, wall), as the audit records it
Listing = tuple[str, list[Endpoint] | None, Key | None]  # (zone version, page or None: unchanged, next)
T = TypeVar("T")


class UnknownZoneError(ProviderError):
    """The zone is not served by this provider."""


class FakeStore:
    """The shared in-memory backend (see the module docstring). Every public method is thread-safe."""

    def __init__(
        self,
        *,
        limits: Limits | None = None,
        faults: Faults | None = None,
        audit_limit: int = DEFAULT_AUDIT_LIMIT,
        profile: Profile = NONE,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        sleep_async: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._faults = InjectedFaults(faults)
        # The gate has its own lock, apart from the data's, so that calls waiting for a slot never hold up
        # calls already running.
        self._gate = Gate(
            limits,
            injected=self._faults.throttle,
            clock=clock,
            wall_clock=wall_clock,
            sleep=sleep,
            sleep_async=sleep_async,
        )
        self._enforcer = Enforcer(profile, clock=clock)
        self._data = threading.Lock()
        self._zones: dict[str, dict[Key, Endpoint]] = {}
        self._fences: dict[str, FenceToken] = {}
        # Each zone's version, for conditional reads: a new value whenever its records change. The store's
        # own random prefix keeps a version seen from another store (a restarted server) from matching.
        self._versions: dict[str, str] = {}
        self._prefix = secrets.token_hex(4)
        self._serial = 0
        self._index: ZoneIndex | None = None
        self._audit = AuditLog(audit_limit, clock=clock, wall_clock=wall_clock)

    # ---- configuration (never gated) ----

    @property
    def limits(self) -> Limits:
        return self._gate.limits

    def set_limits(self, limits: Limits) -> None:
        self._gate.set_limits(limits)

    @property
    def profile(self) -> Profile:
        return self._enforcer.profile

    def set_profile(self, profile: Profile) -> None:
        self._enforcer.set(profile)

    @property
    def profile_blocks(self) -> int:
        """The blocks the profile's request window started (Cloudflare's five minutes of 429)."""
        return self._enforcer.blocks

    @property
    def faults(self) -> Faults:
        return self._faults.current

    def set_faults(self, faults: Faults) -> None:
        self._faults.set(faults)

    def add_zone(self, zone: str, records: Iterable[Endpoint] = ()) -> None:
        """Serve `zone` (again), replacing its records with `records`. Its fence is kept."""
        zone = normalize_name(zone)
        with self._data:
            self._zones[zone] = {r.key: r for r in records}
            self._changed(zone)
            self._index = None

    def seed(self, zones: int, records_per_zone: int) -> list[str]:
        """Add the seeded zones 0..zones-1 (layout: seed.py) that are not there yet."""
        names = [zone_name(i, zones) for i in range(zones)]
        with self._data:
            for i, name in enumerate(names):
                if name not in self._zones:
                    self._zones[name] = {r.key: r for r in seeded_records(i, name, records_per_zone)}
                    self._changed(name)
            self._index = None
        return names

    # ---- inspection (never gated: for tests, the admin API and the bench) ----

    def peek(self, zone: str) -> list[Endpoint]:
        """The zone's records now, bypassing limits and faults."""
        with self._data:
            return sorted(self._zone(normalize_name(zone)).values(), key=lambda e: e.key)

    def fence_of(self, zone: str) -> FenceToken | None:
        with self._data:
            return self._fences.get(normalize_name(zone))

    def audit(self, since: int = 0, zone: str | None = None) -> list[AuditEntry]:
        """Audit entries with seq >= `since` (optionally of one zone), oldest first."""
        with self._data:
            entries = self._audit.since(since)
        if zone is not None:
            zone = normalize_name(zone)
            entries = [e for e in entries if e.zone == zone]
        return entries

    def audit_dropped(self) -> int:
        """How many of the oldest entries fell off the bounded audit."""
        with self._data:
            return self._audit.dropped()

    def clear_audit(self) -> None:
        with self._data:
            self._audit.clear()

    # ---- provider calls (gated) ----

    def zones(self, client: str = ANONYMOUS) -> list[str]:
        return self._gated(client, self._zone_names)

    async def zones_async(self, client: str = ANONYMOUS) -> list[str]:
        return await self._gated_async(client, self._zone_names)

    def zones_and_versions(self, client: str = ANONYMOUS) -> tuple[list[str], dict[str, str]]:
        """One zone listing call, with each zone's version (base.ListsVersions); a zone with an injected
        failure has none, so a caller asks it (and meets the failure) instead of taking it as unchanged."""
        return self._gated(client, self._zone_versions)

    async def zones_and_versions_async(self, client: str = ANONYMOUS) -> tuple[list[str], dict[str, str]]:
        return await self._gated_async(client, self._zone_versions)

    def records(self, zone: str, client: str = ANONYMOUS) -> list[Endpoint]:
        """Every record of the zone: one call, or under a profile with pages one call per page."""
        return self.records_if_changed(zone, client)[1] or []

    def records_if_changed(
        self, zone: str, client: str = ANONYMOUS, *, seen: str | None = None
    ) -> tuple[str, list[Endpoint] | None]:
        """The zone's version and every record (as `records`); or (version, None) when the zone is still at
        version `seen`: then the first call answers that alone, listing nothing (an HTTP 304)."""
        version, out, after = self.listing(zone, client, seen=seen)
        if out is None:
            return version, None
        while after is not None:
            _, page, after = self.listing(zone, client, after=after)
            out.extend(page or ())
        return version, out

    def records_page(
        self, zone: str, client: str = ANONYMOUS, *, after: Key | None = None, limit: int | None = None
    ) -> tuple[list[Endpoint], Key | None]:
        """One listing call: the zone's records sorted by key, from just after `after`, at most `limit` and
        the profile's page size; with the key to pass as `after` for the next page (None: the last page)."""
        _, page, nxt = self.listing(zone, client, after=after, limit=limit)
        return page or [], nxt

    def listing(
        self,
        zone: str,
        client: str = ANONYMOUS,
        *,
        after: Key | None = None,
        limit: int | None = None,
        seen: str | None = None,
    ) -> Listing:
        """One listing call as `records_page`, with the zone's version read in the same step; with `seen`,
        conditional: (version, None, None) when the zone is still at that version. A conditional call
        passes the gate, the profile and the injected faults like any listing: only the answer is small."""
        return self._gated(client, partial(self._list, normalize_name(zone), after, limit, seen))

    async def listing_async(
        self,
        zone: str,
        client: str = ANONYMOUS,
        *,
        after: Key | None = None,
        limit: int | None = None,
        seen: str | None = None,
    ) -> Listing:
        return await self._gated_async(client, partial(self._list, normalize_name(zone), after, limit, seen))

    def all_records(self, client: str = ANONYMOUS) -> list[Endpoint]:
        """Every zone's records in one call (the webhook protocol is not zone-scoped)."""
        return self._gated(client, self._every_record)

    async def all_records_async(self, client: str = ANONYMOUS) -> list[Endpoint]:
        return await self._gated_async(client, self._every_record)

    def apply(
        self,
        zone: str,
        changes: Changes,
        fence: FenceToken | None = None,
        *,
        writer: str,
        generation: int | None = None,
    ) -> None:
        """Apply `changes` to `zone` atomically; with `fence`, only while the zone's fence is exactly it.

        `generation` defaults to the fence's. Raises FencedError, UnknownZoneError, InvalidChangesError,
        InjectedError or ThrottledError; every attempt past the gate is audited.
        """
        zone = normalize_name(zone)
        op = partial(self._apply, zone, changes, fence, writer, generation)
        self._gated(writer, op, change=zone, writes=self._enforcer.writes_of(changes))

    async def apply_async(
        self,
        zone: str,
        changes: Changes,
        fence: FenceToken | None = None,
        *,
        writer: str,
        generation: int | None = None,
    ) -> None:
        zone = normalize_name(zone)
        op = partial(self._apply, zone, changes, fence, writer, generation)
        await self._gated_async(writer, op, change=zone, writes=self._enforcer.writes_of(changes))

    def acquire_fence(self, zone: str, token: FenceToken, *, writer: str | None = None) -> None:
        """Make `token` the zone's fence: a compare-and-set (see the module docstring)."""
        zone, writer = normalize_name(zone), writer or token.identity
        self._gated(writer, partial(self._set_fence, zone, token, writer), change=zone, writes=1)

    async def acquire_fence_async(self, zone: str, token: FenceToken, *, writer: str | None = None) -> None:
        zone, writer = normalize_name(zone), writer or token.identity
        op = partial(self._set_fence, zone, token, writer)
        await self._gated_async(writer, op, change=zone, writes=1)

    # ---- the gate around every provider call ----

    def _gated(
        self, client: str, op: Callable[[Started], T], change: str | None = None, writes: int = 0
    ) -> T:
        """Run `op` under the data lock once the profile and the gate admitted `client`'s call (blocking);
        `change`: the zone the call changes (PriorRequestNotComplete); `writes`: the write tokens it takes."""
        with self._admitted(change, writes), self._gate.call(client) as started, self._data:
            return op(started)

    async def _gated_async(
        self, client: str, op: Callable[[Started], T], change: str | None = None, writes: int = 0
    ) -> T:
        """`_gated` on an event loop: waiting for a slot and the latency take no thread."""
        with self._admitted(change, writes):
            async with self._gate.call_async(client) as started:
                with self._data:
                    return op(started)

    @contextmanager
    def _admitted(self, change: str | None, writes: int) -> Iterator[None]:
        """The profile's admission of a call (its write tokens), and the zone it changes marked as changing
        for as long as it runs."""
        self._enforcer.admit(writes)
        if change is not None:
            self._enforcer.begin_change(change)
        try:
            yield
        finally:
            if change is not None:
                self._enforcer.end_change(change)

    # ---- the provider calls' work (called with the data lock held) ----

    def _zone_versions(self, started: Started) -> tuple[list[str], dict[str, str]]:
        zones = self._zone_names(started)
        failing = self._faults.failing_zones()
        return zones, {z: self._versions[z] for z in zones if z not in failing}

    def _zone_names(self, started: Started) -> list[str]:
        return sorted(self._zones)

    def _list(
        self, zone: str, after: Key | None, limit: int | None, seen: str | None, started: Started
    ) -> Listing:
        self._faults.check_zone(zone)
        current = self._zone(zone)
        version = self._versions[zone]
        if seen is not None and seen == version:
            return version, None, None
        records = sorted(current.values(), key=lambda e: e.key)
        start = 0 if after is None else bisect.bisect_right([r.key for r in records], after)
        page, more = self._enforcer.page(records, start, limit)
        return version, page, (page[-1].key if more is not None and page else None)

    def _every_record(self, started: Started) -> list[Endpoint]:
        out: list[Endpoint] = []
        for zone in sorted(self._zones):
            self._faults.check_zone(zone)
            out.extend(sorted(self._zones[zone].values(), key=lambda e: e.key))
        return out

    def _apply(
        self,
        zone: str,
        changes: Changes,
        fence: FenceToken | None,
        writer: str,
        generation: int | None,
        started: Started,
    ) -> None:
        if generation is None and fence is not None:
            generation = fence.generation
        try:
            self._zone(zone)
            self._faults.check_zone(zone)
            # Under a profile the fence is [DELETE fence "<token>", CREATE fence "<token>"] inside the
            # batch: it counts toward the batch's size, and its DELETE is the compare.
            self._enforcer.check_batch(with_fence(zone, changes, fence))
            if fence is not None:
                current = self._fences.get(zone)
                if current != fence:
                    held = current.to_text() if current else "no fence"
                    raise FencedError(f"zone {zone}: fence holds {held}, not {fence.to_text()}")
            self._faults.check_records(changes)
            rules = self._enforcer.profile
            staged = stage(
                self._zones[zone],
                zone,
                changes,
                self._zone_index(),
                rules.exact_deletes,
                rules.exact_updates,
            )
        except ProviderError as exc:
            self._audit.record("apply", zone, writer, generation, fence, started, exc)
            raise
        commit(self._zones[zone], staged)
        self._changed(zone)
        self._audit.record("apply", zone, writer, generation, fence, started, len(changes))

    def _set_fence(self, zone: str, token: FenceToken, writer: str, started: Started) -> None:
        try:
            self._zone(zone)
            self._faults.check_zone(zone)
            current = self._fences.get(zone)
            if current is not None and current != token and current.generation >= token.generation:
                raise FencedError(
                    f"zone {zone}: fence holds {current.to_text()}, not older than {token.to_text()}"
                )
        except ProviderError as exc:
            self._audit.record("fence", zone, writer, token.generation, token, started, exc)
            raise
        self._fences[zone] = token
        self._audit.record("fence", zone, writer, token.generation, token, started, 0)

    # ---- internals (called with the data lock held) ----

    def _zone(self, zone: str) -> dict[Key, Endpoint]:
        try:
            return self._zones[zone]
        except KeyError:
            raise UnknownZoneError(f"unknown zone {zone!r}") from None

    def _changed(self, zone: str) -> None:
        self._serial += 1
        self._versions[zone] = f"{self._prefix}-{self._serial}"

    def _zone_index(self) -> ZoneIndex:
        if self._index is None:
            self._index = ZoneIndex(self._zones)
        return self._index
