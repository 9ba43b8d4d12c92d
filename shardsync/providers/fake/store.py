"""The fake provider's data: zones, records and fences in memory; every call gated, every write audited.

`FakeStore` is one thread-safe backend that both faces share: `FakeProvider` (provider.py, in-process,
`--provider=fake`) and the HTTP server (server.py, `shardsync fake-provider`, shared by several replica
processes). A provider call (zones, records, apply, acquire_fence) first passes the gate (limits.py: injected
throttling, rate, concurrency, latency), then runs atomically under the store's data lock, where the
injected failures (faults.py) are checked. Changes that cannot apply (create of an existing RRset, delete of
a missing one, a name outside the zone) refuse the whole batch (InvalidChangesError, a BatchRejectedError),
as an injected record failure does. A profile (profile.py, e.g. `route53`) adds the documented rules of a
real API: exact deletes, batch and page limits, PriorRequestNotComplete and an account-wide token bucket.

Fences (design §2 rule 8) are a per-zone compare-and-set, kept beside the records and never listed with
them: `acquire_fence` succeeds when the zone has no fence, already holds that exact token, or holds an older
generation's token; `apply` with a token succeeds only while the zone's fence is exactly that token. An
apply without a token is unfenced and always allowed (active/passive mode, the webhook face).

Every write that passed the gate is audited (audit.py), refused ones too; `seed` adds zones by the layout
of seed.py.

Each zone has a version, new whenever its records change (a write, `add_zone`): `records_if_changed` with
the version a caller saw answers "unchanged" without listing (base.ReadsIfChanged; the server's ETag and
304). The fence is not among the records, so taking it leaves the version alone.
"""

from __future__ import annotations

import bisect
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Mapping

from shardsync.endpoint import Changes, Endpoint, ZoneIndex, normalize_name, same_targets
from shardsync.providers.base import BatchRejectedError, FencedError, FenceToken, ProviderError
from shardsync.providers.fake.audit import DEFAULT_AUDIT_LIMIT, AuditEntry, AuditLog
from shardsync.providers.fake.faults import Faults, InjectedFaults
from shardsync.providers.fake.limits import ANONYMOUS, Gate, Limits
from shardsync.providers.fake.profile import NONE, Enforcer, Profile
from shardsync.providers.fake.seed import seeded_records, zone_name

Key = tuple[str, str, str]


class UnknownZoneError(ProviderError):
    """The zone is not served by this provider."""


class InvalidChangesError(BatchRejectedError):
    """The changes cannot apply to the zone as it is (create of an existing RRset, delete of a missing one,
    a name outside the zone). Nothing of the batch was applied."""


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
    ) -> None:
        self._faults = InjectedFaults(faults)
        # The gate has its own lock, apart from the data's, so that calls waiting for a slot never hold up
        # calls already running.
        self._gate = Gate(
            limits, injected=self._faults.throttle, clock=clock, wall_clock=wall_clock, sleep=sleep
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
        self._enforcer.admit()
        with self._gate.call(client), self._data:
            return sorted(self._zones)

    def zones_and_versions(self, client: str = ANONYMOUS) -> tuple[list[str], dict[str, str]]:
        """One zone listing call, with each zone's version (base.ListsVersions); a zone with an injected
        failure has none, so a caller asks it (and meets the failure) instead of taking it as unchanged."""
        self._enforcer.admit()
        with self._gate.call(client), self._data:
            zones = sorted(self._zones)
            failing = self._faults.failing_zones()
            return zones, {z: self._versions[z] for z in zones if z not in failing}

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
    ) -> tuple[str, list[Endpoint] | None, Key | None]:
        """One listing call as `records_page`, with the zone's version read in the same step; with `seen`,
        conditional: (version, None, None) when the zone is still at that version. A conditional call
        passes the gate, the profile and the injected faults like any listing: only the answer is small."""
        zone = normalize_name(zone)
        self._enforcer.admit()
        with self._gate.call(client), self._data:
            self._faults.check_zone(zone)
            current = self._zone(zone)
            version = self._versions[zone]
            if seen is not None and seen == version:
                return version, None, None
            records = sorted(current.values(), key=lambda e: e.key)
        start = 0 if after is None else bisect.bisect_right([r.key for r in records], after)
        page, more = self._enforcer.page(records, start, limit)
        return version, page, (page[-1].key if more is not None and page else None)

    def all_records(self, client: str = ANONYMOUS) -> list[Endpoint]:
        """Every zone's records in one call (the webhook protocol is not zone-scoped)."""
        self._enforcer.admit()
        with self._gate.call(client), self._data:
            out: list[Endpoint] = []
            for zone in sorted(self._zones):
                self._faults.check_zone(zone)
                out.extend(sorted(self._zones[zone].values(), key=lambda e: e.key))
            return out

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
        if generation is None and fence is not None:
            generation = fence.generation
        self._enforcer.admit()
        self._enforcer.begin_change(zone)
        try:
            with self._gate.call(writer) as started, self._data:
                try:
                    self._zone(zone)
                    self._faults.check_zone(zone)
                    # Under a profile the fence is [DELETE fence "<token>", CREATE fence "<token>"] inside
                    # the batch: it counts toward the batch's size, and its DELETE is the compare.
                    self._enforcer.check_batch(_with_fence(zone, changes, fence))
                    if fence is not None:
                        current = self._fences.get(zone)
                        if current != fence:
                            held = current.to_text() if current else "no fence"
                            raise FencedError(f"zone {zone}: fence holds {held}, not {fence.to_text()}")
                    self._faults.check_records(changes)
                    staged = self._stage(zone, changes)
                except ProviderError as exc:
                    self._audit.record("apply", zone, writer, generation, fence, started, exc)
                    raise
                _commit(self._zones[zone], staged)
                self._changed(zone)
                self._audit.record("apply", zone, writer, generation, fence, started, len(changes))
        finally:
            self._enforcer.end_change(zone)

    def apply_by_name(self, changes: Changes, *, writer: str) -> None:
        """Apply changes spanning any zones, placing each RRset in its most specific zone (the webhook face).

        Unfenced. All zones commit together or none does; one audit entry per zone touched.
        """
        self._enforcer.admit()
        with self._gate.call(writer) as started, self._data:
            index = self._zone_index()
            parts: dict[str, Changes] = {}
            try:
                for attr in ("create", "update_old", "update_new", "delete"):
                    for ep in getattr(changes, attr):
                        zone = index.zone_of(ep.dns_name)
                        if zone is None:
                            raise InvalidChangesError(f"{ep.dns_name}: in no zone this provider serves")
                        getattr(parts.setdefault(zone, Changes()), attr).append(ep)
                staged: dict[str, dict[Key, Endpoint | None]] = {}
                for zone, part in sorted(parts.items()):
                    self._faults.check_zone(zone)
                    self._faults.check_records(part)
                    staged[zone] = self._stage(zone, part)
            except ProviderError as exc:
                for zone in sorted(parts):
                    self._audit.record("apply", zone, writer, None, None, started, exc)
                raise
            for zone, zone_staged in staged.items():
                _commit(self._zones[zone], zone_staged)
                self._changed(zone)
                self._audit.record("apply", zone, writer, None, None, started, len(parts[zone]))

    def acquire_fence(self, zone: str, token: FenceToken, *, writer: str | None = None) -> None:
        """Make `token` the zone's fence: a compare-and-set (see the module docstring)."""
        zone = normalize_name(zone)
        writer = writer or token.identity
        self._enforcer.admit()
        self._enforcer.begin_change(zone)
        try:
            self._set_fence(zone, token, writer)
        finally:
            self._enforcer.end_change(zone)

    def _set_fence(self, zone: str, token: FenceToken, writer: str) -> None:
        with self._gate.call(writer) as started, self._data:
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

    def _stage(self, zone: str, changes: Changes) -> dict[Key, Endpoint | None]:
        """Validate `changes` against the zone; return key -> new value (None: delete). Changes nothing."""
        records = self._zones[zone]
        index = self._zone_index()
        staged: dict[Key, Endpoint | None] = {}

        def current(key: Key) -> Endpoint | None:
            return staged[key] if key in staged else records.get(key)

        everything = (*changes.create, *changes.update_old, *changes.update_new, *changes.delete)
        for ep in everything:
            if index.zone_of(ep.dns_name) != zone:
                raise InvalidChangesError(f"{ep.dns_name}: not in zone {zone}")
        if len(changes.update_old) != len(changes.update_new):
            raise InvalidChangesError("updateOld and updateNew differ in length")
        # Deletes first, then updates, then creates: a batch may delete an RRset and create it anew.
        exact = self._enforcer.profile.exact_deletes
        for ep in changes.delete:
            now = current(ep.key)
            if now is None:
                raise InvalidChangesError(f"delete {_describe(ep)}: no such record")
            if exact and (now.ttl != ep.ttl or not same_targets(now.targets, ep.targets)):
                # Route53: "the values must match the current values exactly"
                raise InvalidChangesError(f"delete {_describe(ep)}: values differ from the current ones")
            staged[ep.key] = None
        for old, new in zip(changes.update_old, changes.update_new, strict=True):
            if old.key != new.key:
                raise InvalidChangesError(f"update {_describe(old)} -> {_describe(new)}: not the same RRset")
            if current(old.key) is None:
                raise InvalidChangesError(f"update {_describe(old)}: no such record")
            staged[new.key] = new
        for ep in changes.create:
            if current(ep.key) is not None:
                raise InvalidChangesError(f"create {_describe(ep)}: already exists")
            staged[ep.key] = ep
        return staged


def _commit(records: dict[Key, Endpoint], staged: Mapping[Key, Endpoint | None]) -> None:
    for key, value in staged.items():
        if value is None:
            records.pop(key, None)
        else:
            records[key] = value


def _with_fence(zone: str, changes: Changes, fence: FenceToken | None) -> Changes:
    """The batch as a Route53-like API would count it: with the fence's DELETE and CREATE."""
    if fence is None:
        return changes
    record = Endpoint(f"_shardsync-fence.{zone}", "TXT", (f'"{fence.to_text()}"',))
    return Changes(
        create=[*changes.create, record],
        update_old=changes.update_old,
        update_new=changes.update_new,
        delete=[*changes.delete, record],
    )


def _describe(ep: Endpoint) -> str:
    ident = f" [{ep.set_identifier}]" if ep.set_identifier else ""
    return f"{ep.dns_name} {ep.record_type}{ident}"
