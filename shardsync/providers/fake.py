"""The fake DNS provider: an in-memory backend with a cloud API's limits, injected faults, fences, an audit.

`FakeStore` is one thread-safe backend that both faces share: `FakeProvider` (in-process, `--provider=fake`)
and the HTTP server in `fake_server.py` (`shardsync fake-provider`, shared by several replica processes).

Every provider call (zones, records, apply, acquire_fence) passes a gate before it touches any data, as a
cloud DNS API does:
1. injected throttling (`Faults.throttle_next`, `Faults.throttle_ratio`) answers "throttled";
2. a per-client token bucket (`Limits.rate` calls/s, `Limits.burst`) answers "throttled" when empty;
3. at most `Limits.concurrency` calls per client are in flight; later ones wait up to
   `Limits.queue_timeout`, then are throttled. This keeps the fake latency-bound per client, so N replicas
   get N times the throughput of one, as they would from a real provider;
4. the call sleeps `Limits.latency` (in the calling thread), then runs atomically under the store's lock.
Clients are told apart by an identity string (the replica's identity).

Injected failures: `Faults.fail_zones` makes every records/apply call on those zones fail;
`Faults.fail_records` makes every apply touching one of those names fail whole, with BatchRejectedError
(as a provider that validates a batch before committing it would), so the worker isolates the bad record
by splitting the batch. Changes that cannot apply (create of an existing RRset, delete of a missing one)
are refused the same way.

Fences (design §2 rule 8) are a per-zone compare-and-set, kept beside the records and never listed with
them: `acquire_fence` succeeds when the zone has no fence, already holds that exact token, or holds an older
generation's token; `apply` with a token succeeds only while the zone's fence is exactly that token. An
apply without a token is unfenced and always allowed (active/passive mode, the webhook face).

The audit records every write that passed the gate: op (apply or fence), zone, writer identity, generation,
fence token, start and end on the store's monotonic clock and on the wall clock, outcome (ok, fenced,
error). Start is taken when the call gets its slot (before the latency), end when it commits, so an
interval covers the whole time the write was in the provider's hands. `overlapping_writes(audit)` finds
two writers whose successful applies to one zone overlap in time: the safety invariant says there are none.

Seeding (`FakeStore.seed(n, r)`): zones `zone-0000.example` … `zone-<n-1>.example` (four digits, more when
n > 10,000, so names sort in index order), each with r A records `host-0000.<zone>` … whose target is
`10.<i // 256 % 256>.<i % 256>.<j % 254 + 1>` for zone i, record j. Seeded records carry no TXT ownership
record, so a replica treats them as someone else's and leaves them alone.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Literal, TypeVar

import anyio
import anyio.to_thread

from shardsync.endpoint import Changes, Endpoint, ZoneIndex, normalize_name
from shardsync.providers.base import (
    BatchRejectedError,
    FencedError,
    FenceToken,
    ProviderError,
    ThrottledError,
)

Outcome = Literal["ok", "fenced", "error"]
Op = Literal["apply", "fence"]
Key = tuple[str, str, str]
T = TypeVar("T")

ANONYMOUS = "anonymous"
SEED_DOMAIN = "example"
DEFAULT_AUDIT_LIMIT = 1_000_000


class UnknownZoneError(ProviderError):
    """The zone is not served by this provider."""


class InvalidChangesError(BatchRejectedError):
    """The changes cannot apply to the zone as it is (create of an existing RRset, delete of a missing one,
    a name outside the zone). Nothing of the batch was applied."""


class InjectedError(ProviderError):
    """A failure injected on purpose through `Faults.fail_zones`."""


class InjectedRecordError(BatchRejectedError):
    """A record named in `Faults.fail_records` was in the batch: the whole batch was refused."""


class FakeThrottledError(ThrottledError):
    """Throttled, with the number of seconds after which a retry may succeed (sent as Retry-After)."""

    def __init__(self, message: str, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class Limits:
    """How the fake behaves like a remote API: latency and per-client limits. None means no limit."""

    latency: float = 0.0
    rate: float | None = None  # calls per second per client (token bucket)
    burst: int | None = None  # bucket size; default: one second's worth of calls
    concurrency: int | None = None  # calls per client in flight at once
    queue_timeout: float = 2.0  # how long a call waits for a concurrency slot before it is throttled

    def __post_init__(self) -> None:
        if self.latency < 0 or self.queue_timeout < 0:
            raise ValueError("latency and queue_timeout must be >= 0")
        if self.rate is not None and self.rate <= 0:
            raise ValueError("rate must be > 0 (None for no limit)")
        if self.burst is not None and self.burst < 1:
            raise ValueError("burst must be >= 1")
        if self.concurrency is not None and self.concurrency < 1:
            raise ValueError("concurrency must be >= 1 (None for no limit)")

    @property
    def bucket_size(self) -> float:
        if self.burst is not None:
            return float(self.burst)
        return float(max(1, math.ceil(self.rate or 1)))

    def to_json(self) -> dict[str, Any]:
        return {
            "latency": self.latency,
            "rateLimit": self.rate,
            "burst": self.burst,
            "concurrency": self.concurrency,
            "queueTimeout": self.queue_timeout,
        }

    def merged(self, data: Mapping[str, Any]) -> Limits:
        """These limits with the fields present in `data` (JSON names) replaced; raises ValueError."""
        names = {
            "latency": "latency",
            "rateLimit": "rate",
            "burst": "burst",
            "concurrency": "concurrency",
            "queueTimeout": "queue_timeout",
        }
        unknown = set(data) - set(names)
        if unknown:
            raise ValueError(f"unknown limits: {sorted(unknown)}")
        fields: dict[str, Any] = {}
        for key, attr in names.items():
            if key in data:
                value = data[key]
                if value is not None and (not isinstance(value, int | float) or isinstance(value, bool)):
                    raise ValueError(f"{key} must be a number or null")
                if attr in ("latency", "queue_timeout") and value is None:
                    value = 0.0
                if attr in ("burst", "concurrency") and value is not None:
                    value = int(value)
                fields[attr] = value
        return replace(self, **fields)


@dataclass(frozen=True, slots=True)
class Faults:
    """Errors injected on purpose."""

    throttle_next: int = 0  # the next N gated calls are throttled
    throttle_ratio: float = 0.0  # each gated call is throttled with this probability
    fail_records: frozenset[str] = frozenset()  # an apply touching one of these names fails
    fail_zones: frozenset[str] = frozenset()  # every records/apply call on these zones fails
    seed: int = 0  # of the random draws behind throttle_ratio, so a run can be replayed

    def __post_init__(self) -> None:
        if self.throttle_next < 0 or not 0.0 <= self.throttle_ratio <= 1.0:
            raise ValueError("throttle_next must be >= 0 and throttle_ratio within 0..1")

    def to_json(self) -> dict[str, Any]:
        return {
            "throttleNext": self.throttle_next,
            "throttleRatio": self.throttle_ratio,
            "failRecords": sorted(self.fail_records),
            "failZones": sorted(self.fail_zones),
            "seed": self.seed,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Faults:
        """Parse the admin API's JSON form; absent fields take their defaults. Raises ValueError."""
        unknown = set(data) - {"throttleNext", "throttleRatio", "failRecords", "failZones", "seed"}
        if unknown:
            raise ValueError(f"unknown faults: {sorted(unknown)}")
        try:
            return cls(
                throttle_next=int(data.get("throttleNext", 0)),
                throttle_ratio=float(data.get("throttleRatio", 0.0)),
                fail_records=frozenset(normalize_name(str(n)) for n in data.get("failRecords", ())),
                fail_zones=frozenset(normalize_name(str(z)) for z in data.get("failZones", ())),
                seed=int(data.get("seed", 0)),
            )
        except TypeError as exc:
            raise ValueError(f"bad faults: {exc}") from exc


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One write that reached the provider."""

    seq: int
    op: Op
    zone: str
    writer: str
    generation: int | None
    fence: str | None  # the token the write was conditional on (apply) or tried to set (fence)
    start: float  # store's monotonic clock
    end: float
    start_wall: float  # Unix time
    end_wall: float
    outcome: Outcome
    changes: int = 0
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "op": self.op,
            "zone": self.zone,
            "writer": self.writer,
            "generation": self.generation,
            "fence": self.fence,
            "start": self.start,
            "end": self.end,
            "startWall": self.start_wall,
            "endWall": self.end_wall,
            "outcome": self.outcome,
            "changes": self.changes,
            "message": self.message,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AuditEntry:
        op = data["op"]
        outcome = data["outcome"]
        if op not in ("apply", "fence") or outcome not in ("ok", "fenced", "error"):
            raise ValueError(f"bad audit entry: {data!r}")
        generation = data.get("generation")
        return cls(
            seq=int(data["seq"]),
            op=op,
            zone=str(data["zone"]),
            writer=str(data["writer"]),
            generation=None if generation is None else int(generation),
            fence=data.get("fence"),
            start=float(data["start"]),
            end=float(data["end"]),
            start_wall=float(data["startWall"]),
            end_wall=float(data["endWall"]),
            outcome=outcome,
            changes=int(data.get("changes", 0)),
            message=str(data.get("message", "")),
        )


def overlapping_writes(
    audit: Iterable[AuditEntry], *, include_refused: bool = False
) -> list[tuple[AuditEntry, AuditEntry]]:
    """Pairs (earlier, later) of applies by two different writers to one zone whose intervals overlap.

    Only successful applies count by default: a fenced or failed apply changed nothing. Intervals that
    merely touch (one ends exactly when the other starts) do not overlap.
    """
    by_zone: dict[str, list[AuditEntry]] = {}
    for entry in audit:
        if entry.op == "apply" and (include_refused or entry.outcome == "ok"):
            by_zone.setdefault(entry.zone, []).append(entry)
    found: list[tuple[AuditEntry, AuditEntry]] = []
    for entries in by_zone.values():
        entries.sort(key=lambda e: (e.start, e.end, e.seq))
        active: list[AuditEntry] = []
        for entry in entries:
            active = [a for a in active if a.end > entry.start]
            found.extend((a, entry) for a in active if a.writer != entry.writer)
            active.append(entry)
    return found


def zone_name(index: int, count: int) -> str:
    """Name of seeded zone `index` out of `count` (see the module docstring)."""
    width = max(4, len(str(max(count - 1, 0))))
    return f"zone-{index:0{width}d}.{SEED_DOMAIN}"


def seeded_records(index: int, zone: str, count: int) -> list[Endpoint]:
    """The `count` A records seeded into zone number `index`."""
    width = max(4, len(str(max(count - 1, 0))))
    prefix = f"10.{index // 256 % 256}.{index % 256}"
    return [
        Endpoint.new(f"host-{j:0{width}d}.{zone}", "A", [f"{prefix}.{j % 254 + 1}"]) for j in range(count)
    ]


@dataclass(slots=True)
class _Client:
    """Per-client gate state: calls in flight and the token bucket."""

    in_flight: int = 0
    tokens: float = 0.0
    refilled: float = 0.0
    primed: bool = False


class FakeStore:
    """The shared in-memory backend (see the module docstring). Every public method is thread-safe."""

    def __init__(
        self,
        *,
        limits: Limits | None = None,
        faults: Faults | None = None,
        audit_limit: int = DEFAULT_AUDIT_LIMIT,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._clock = clock
        self._wall_clock = wall_clock
        self._sleep = sleep
        # Data (zones, records, fences, audit) and gate state have separate locks so that calls waiting for
        # a slot never hold up calls already running.
        self._data = threading.Lock()
        self._zones: dict[str, dict[Key, Endpoint]] = {}
        self._fences: dict[str, FenceToken] = {}
        self._index: ZoneIndex | None = None
        self._audit: deque[AuditEntry] = deque(maxlen=audit_limit)
        self._seq = 0
        self._gate = threading.Condition()
        self._clients: dict[str, _Client] = {}
        self._limits = limits or Limits()
        self._faults = Faults()
        self._throttle_left = 0
        self._rng = random.Random(0)
        self.set_faults(faults or Faults())

    # ---- configuration (never gated) ----

    @property
    def limits(self) -> Limits:
        return self._limits

    def set_limits(self, limits: Limits) -> None:
        with self._gate:
            self._limits = limits
            for state in self._clients.values():
                state.primed = False  # refill buckets to the new size
            self._gate.notify_all()  # waiters re-check against a raised concurrency limit

    @property
    def faults(self) -> Faults:
        with self._gate:
            return replace(self._faults, throttle_next=self._throttle_left)

    def set_faults(self, faults: Faults) -> None:
        with self._gate:
            self._faults = faults
            self._throttle_left = faults.throttle_next
            self._rng = random.Random(faults.seed)

    def add_zone(self, zone: str, records: Iterable[Endpoint] = ()) -> None:
        """Serve `zone` (again), replacing its records with `records`. Its fence is kept."""
        zone = normalize_name(zone)
        with self._data:
            self._zones[zone] = {r.key: r for r in records}
            self._index = None

    def seed(self, zones: int, records_per_zone: int) -> list[str]:
        """Add the seeded zones 0..zones-1 (see the module docstring) that are not there yet."""
        names = [zone_name(i, zones) for i in range(zones)]
        with self._data:
            for i, name in enumerate(names):
                if name not in self._zones:
                    self._zones[name] = {r.key: r for r in seeded_records(i, name, records_per_zone)}
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
            entries = [e for e in self._audit if e.seq >= since]
        if zone is not None:
            zone = normalize_name(zone)
            entries = [e for e in entries if e.zone == zone]
        return entries

    def audit_dropped(self) -> int:
        """How many of the oldest entries fell off the bounded audit."""
        with self._data:
            return self._audit[0].seq if self._audit else self._seq

    def clear_audit(self) -> None:
        with self._data:
            self._audit.clear()
            self._seq = 0

    # ---- provider calls (gated) ----

    def zones(self, client: str = ANONYMOUS) -> list[str]:
        with self._call(client), self._data:
            return sorted(self._zones)

    def records(self, zone: str, client: str = ANONYMOUS) -> list[Endpoint]:
        zone = normalize_name(zone)
        with self._call(client), self._data:
            self._check_zone_fault(zone)
            return sorted(self._zone(zone).values(), key=lambda e: e.key)

    def all_records(self, client: str = ANONYMOUS) -> list[Endpoint]:
        """Every zone's records in one call (the webhook protocol is not zone-scoped)."""
        with self._call(client), self._data:
            out: list[Endpoint] = []
            for zone in sorted(self._zones):
                self._check_zone_fault(zone)
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
        with self._call(writer) as (start, start_wall), self._data:
            try:
                self._zone(zone)
                self._check_zone_fault(zone)
                if fence is not None:
                    current = self._fences.get(zone)
                    if current != fence:
                        held = current.to_text() if current else "no fence"
                        raise FencedError(f"zone {zone}: fence holds {held}, not {fence.to_text()}")
                self._check_record_faults(changes)
                staged = self._stage(zone, changes)
            except ProviderError as exc:
                outcome: Outcome = "fenced" if isinstance(exc, FencedError) else "error"
                self._log_write("apply", zone, writer, generation, fence, start, start_wall, outcome, exc)
                raise
            _commit(self._zones[zone], staged)
            self._log_write("apply", zone, writer, generation, fence, start, start_wall, "ok", len(changes))

    def apply_by_name(self, changes: Changes, *, writer: str) -> None:
        """Apply changes spanning any zones, placing each RRset in its most specific zone (the webhook face).

        Unfenced. All zones commit together or none does; one audit entry per zone touched.
        """
        with self._call(writer) as (start, start_wall), self._data:
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
                    self._check_zone_fault(zone)
                    self._check_record_faults(part)
                    staged[zone] = self._stage(zone, part)
            except ProviderError as exc:
                for zone in sorted(parts):
                    self._log_write("apply", zone, writer, None, None, start, start_wall, "error", exc)
                raise
            for zone, zone_staged in staged.items():
                _commit(self._zones[zone], zone_staged)
                self._log_write("apply", zone, writer, None, None, start, start_wall, "ok", len(parts[zone]))

    def acquire_fence(self, zone: str, token: FenceToken, *, writer: str | None = None) -> None:
        """Make `token` the zone's fence: a compare-and-set (see the module docstring)."""
        zone = normalize_name(zone)
        writer = writer or token.identity
        with self._call(writer) as (start, start_wall), self._data:
            try:
                self._zone(zone)
                self._check_zone_fault(zone)
                current = self._fences.get(zone)
                if current is not None and current != token and current.generation >= token.generation:
                    raise FencedError(
                        f"zone {zone}: fence holds {current.to_text()}, not older than {token.to_text()}"
                    )
            except ProviderError as exc:
                outcome: Outcome = "fenced" if isinstance(exc, FencedError) else "error"
                self._log_write(
                    "fence", zone, writer, token.generation, token, start, start_wall, outcome, exc
                )
                raise
            self._fences[zone] = token
            self._log_write("fence", zone, writer, token.generation, token, start, start_wall, "ok", 0)

    # ---- internals ----

    def _zone(self, zone: str) -> dict[Key, Endpoint]:
        try:
            return self._zones[zone]
        except KeyError:
            raise UnknownZoneError(f"unknown zone {zone!r}") from None

    def _zone_index(self) -> ZoneIndex:
        if self._index is None:
            self._index = ZoneIndex(self._zones)
        return self._index

    def _check_zone_fault(self, zone: str) -> None:
        if zone in self._faults.fail_zones:
            raise InjectedError(f"zone {zone}: injected failure")

    def _check_record_faults(self, changes: Changes) -> None:
        bad = self._faults.fail_records
        if not bad:
            return
        for ep in (*changes.create, *changes.update_old, *changes.update_new, *changes.delete):
            if ep.dns_name in bad:
                raise InjectedRecordError(f"record {ep.dns_name}: injected failure")

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
        for ep in changes.delete:
            if current(ep.key) is None:
                raise InvalidChangesError(f"delete {_describe(ep)}: no such record")
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

    def _log_write(
        self,
        op: Op,
        zone: str,
        writer: str,
        generation: int | None,
        fence: FenceToken | None,
        start: float,
        start_wall: float,
        outcome: Outcome,
        detail: int | Exception,
    ) -> None:
        # Called with the data lock held, so seq order is commit order.
        self._audit.append(
            AuditEntry(
                seq=self._seq,
                op=op,
                zone=zone,
                writer=writer,
                generation=generation,
                fence=fence.to_text() if fence else None,
                start=start,
                end=self._clock(),
                start_wall=start_wall,
                end_wall=self._wall_clock(),
                outcome=outcome,
                changes=detail if isinstance(detail, int) else 0,
                message=str(detail) if isinstance(detail, Exception) else "",
            )
        )
        self._seq += 1

    @contextmanager
    def _call(self, client: str) -> Iterator[tuple[float, float]]:
        """The gate (see the module docstring); yields the call's start (monotonic, wall)."""
        limits = self._limits
        with self._gate:
            self._admit(client, limits)
            state = self._clients.setdefault(client, _Client())
            if limits.concurrency is not None:

                def has_slot() -> bool:
                    limit = self._limits.concurrency
                    return limit is None or state.in_flight < limit

                if not self._gate.wait_for(has_slot, timeout=limits.queue_timeout):
                    raise FakeThrottledError(
                        f"client {client}: {state.in_flight} calls in flight (limit {limits.concurrency})",
                        retry_after=max(limits.latency, 0.1),
                    )
            state.in_flight += 1
        try:
            started = (self._clock(), self._wall_clock())
            if limits.latency > 0:
                self._sleep(limits.latency)
            yield started
        finally:
            with self._gate:
                state.in_flight -= 1
                self._gate.notify_all()

    def _admit(self, client: str, limits: Limits) -> None:
        # Called with the gate lock held.
        if self._throttle_left > 0:
            self._throttle_left -= 1
            raise FakeThrottledError("throttled (injected)")
        if self._faults.throttle_ratio and self._rng.random() < self._faults.throttle_ratio:
            raise FakeThrottledError("throttled (injected at random)")
        if limits.rate is None:
            return
        state = self._clients.setdefault(client, _Client())
        now = self._clock()
        size = limits.bucket_size
        if state.primed:
            state.tokens = min(size, state.tokens + (now - state.refilled) * limits.rate)
        else:
            state.tokens, state.primed = size, True
        state.refilled = now
        if state.tokens < 1.0:
            raise FakeThrottledError(
                f"client {client}: over the rate limit of {limits.rate:g} calls/s",
                retry_after=(1.0 - state.tokens) / limits.rate,
            )
        state.tokens -= 1.0


def _commit(records: dict[Key, Endpoint], staged: Mapping[Key, Endpoint | None]) -> None:
    for key, value in staged.items():
        if value is None:
            records.pop(key, None)
        else:
            records[key] = value


def _describe(ep: Endpoint) -> str:
    ident = f" [{ep.set_identifier}]" if ep.set_identifier else ""
    return f"{ep.dns_name} {ep.record_type}{ident}"


class FakeProvider:
    """The Provider protocol over a FakeStore in this process, as client `identity`.

    Store calls run in worker threads, because the store blocks them for latency and concurrency slots
    exactly as the HTTP server's handler threads are blocked; a cancelled call waits for its thread (at
    most queue_timeout + latency), so no write lands after the caller has stopped waiting.
    """

    name = "fake"

    def __init__(self, store: FakeStore, identity: str = ANONYMOUS, *, max_threads: int = 64) -> None:
        self.store = store
        self.identity = identity
        self._threads = anyio.CapacityLimiter(max_threads)

    async def _run(self, fn: Callable[[], T]) -> T:
        return await anyio.to_thread.run_sync(fn, limiter=self._threads)

    async def zones(self) -> list[str]:
        return await self._run(partial(self.store.zones, self.identity))

    async def records(self, zone: str) -> list[Endpoint]:
        return await self._run(partial(self.store.records, zone, self.identity))

    async def apply(self, zone: str, changes: Changes, fence: FenceToken | None = None) -> None:
        await self._run(partial(self.store.apply, zone, changes, fence, writer=self.identity))

    async def acquire_fence(self, zone: str, token: FenceToken) -> None:
        await self._run(partial(self.store.acquire_fence, zone, token, writer=self.identity))

    async def close(self) -> None:
        return None
