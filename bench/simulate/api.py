"""The simulated API server: the objects as stored (member Leases, the coordinator Lease, the assignment
ConfigMap), and a count, per whole second, of every write it fans out to watchers and of every request
each replica makes.

No latency, no conflicts: a write is stored and delivered to every watcher at the instant it is made, and
writes are made one after another (so a resourceVersion precondition never fails). Who receives what, as
shardsync watches since issue 39: the coordinator Lease and the assignment ConfigMap go to every running
replica (each watches both by name: `broadcast`); a member Lease goes to every replica that follows every
member Lease (the coordinator, and a replica that must hear from everyone) and to those that follow that
one Lease by name (`received`, per replica; `recipients` says who).

A renewal only moves `written_at`; the Lease object with its renewTime is built when some replica's
tracker reads it (`member`), once per write, so a quiet cluster costs no more than a counter per renewal.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

from shardsync.sharding.assignment import CONFIGMAP_KEY, Assignment
from shardsync.sharding.clock import FakeClock, microtime, wall_at
from shardsync.sharding.election import CoordinatorLease
from shardsync.sharding.membership import MemberLease

MEMBER = "member_lease_writes"
COORDINATOR = "coordinator_lease_writes"
CONFIGMAP = "configmap_writes"
DELIVERIES = "deliveries"  # watch events sent, all replicas together
REQUESTS = "requests"  # API requests, all replicas together
KINDS = (MEMBER, COORDINATOR, CONFIGMAP, DELIVERIES, REQUESTS)
LEASES = (MEMBER, COORDINATOR)


class Traffic:
    """Counts by whole second since `t0`: by kind, and per replica (`received`: member Lease events sent to
    it; `broadcast`: events every running replica is sent; `requests`)."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.by_kind: dict[str, Counter[int]] = {kind: Counter() for kind in KINDS}
        self.received: Counter[tuple[str, int]] = Counter()
        self.broadcast: Counter[int] = Counter()
        self.requests: Counter[tuple[str, int]] = Counter()

    def second(self, t: float) -> int:
        return math.floor(t - self.t0 + 1e-9)

    def count(self, kind: str, t: float, n: int = 1) -> None:
        self.by_kind[kind][self.second(t)] += n

    def receive(self, identities: Iterable[str], t: float) -> None:
        s, received, n = self.second(t), self.received, 0
        for identity in identities:
            received[identity, s] += 1
            n += 1
        self.by_kind[DELIVERIES][s] += n

    def request(self, identity: str, t: float, n: int = 1) -> None:
        s = self.second(t)
        self.requests[identity, s] += n
        self.by_kind[REQUESTS][s] += n

    def of(self, identity: str, start: float, end: float) -> tuple[int, int]:
        """(watch events sent to, requests made by) `identity` over the whole seconds [start, end), every
        broadcast included (it ran throughout)."""
        seconds = range(self.second(start), self.second(end))
        events = sum(self.received[identity, s] + self.broadcast[s] for s in seconds)
        return events, sum(self.requests[identity, s] for s in seconds)

    def total(self, kinds: tuple[str, ...], start: float, end: float) -> int:
        s0, s1 = self.second(start), self.second(end)
        return sum(self.by_kind[k][s] for k in kinds for s in range(s0, s1))

    def rate(self, kinds: tuple[str, ...], start: float, end: float) -> float:
        """Per second over the whole seconds [start, end)."""
        seconds = self.second(end) - self.second(start)
        return self.total(kinds, start, end) / seconds if seconds > 0 else 0.0

    def peak(self, kinds: tuple[str, ...], start: float, end: float) -> int:
        """The busiest whole second in [start, end)."""
        s0, s1 = self.second(start), self.second(end)
        seconds = {s for k in kinds for s in self.by_kind[k] if s0 <= s < s1}
        return max((sum(self.by_kind[k][s] for k in kinds) for s in seconds), default=0)


@dataclass(slots=True)
class Slot:
    """A member Lease as stored: what its holder last asked for, and when it last wrote (renewals too)."""

    content: MemberLease
    written_at: float
    seq: int
    built: MemberLease | None = None
    built_seq: int = -1


class Api:
    def __init__(
        self,
        clock: FakeClock,
        traffic: Traffic,
        watchers: Callable[[], int],
        recipients: Callable[[str], Iterable[str]],
    ) -> None:
        self.clock = clock
        self.traffic = traffic
        self.watchers = watchers  # how many replicas run (each watches the coordinator Lease and ConfigMap)
        self.recipients = recipients  # who is sent a write of that member Lease
        self.members: dict[str, Slot] = {}
        self.deleted: dict[str, int] = {}  # identity -> seq of its deletion
        self.seq = 0  # bumped by every member Lease write or deletion
        self.coordinator: CoordinatorLease | None = None
        self.coordinator_writes: list[tuple[float, CoordinatorLease]] = []
        self.assignment: Assignment | None = None
        self.assignment_bytes = 0
        self._stamps: dict[float, str] = {}  # renewTime text by write time (replicas renew in step)

    def _broadcast(self, kind: str, by: str, now: float) -> None:
        traffic = self.traffic
        traffic.count(kind, now)
        traffic.request(by, now)
        traffic.broadcast[traffic.second(now)] += 1
        traffic.count(DELIVERIES, now, self.watchers())

    def _member_written(self, identity: str, now: float) -> None:
        self.traffic.count(MEMBER, now)
        self.traffic.request(identity, now)
        self.traffic.receive(self.recipients(identity), now)

    # -- member Leases -------------------------------------------------------------------------------

    def write_member(self, content: MemberLease, now: float) -> None:
        """Create or replace a member Lease (any change a holder asks for, stamped renewTime=now)."""
        self.seq += 1
        self.members[content.identity] = Slot(content, now, self.seq)
        self.deleted.pop(content.identity, None)
        self._member_written(content.identity, now)

    def renew_member(self, identity: str, now: float) -> None:
        """A renewal that changes nothing but renewTime."""
        slot = self.members[identity]
        self.seq += 1
        slot.written_at, slot.seq = now, self.seq
        self._member_written(identity, now)

    def delete_member(self, identity: str, now: float) -> None:
        if self.members.pop(identity, None) is not None:
            self.seq += 1
            self.deleted[identity] = self.seq
            self._member_written(identity, now)

    def member(self, identity: str) -> MemberLease:
        """The stored Lease, renewTime included (built once per write). The content is what its holder
        wrote (holder and acquireTime set), so this is `content.renewed(wall)`, with the text of each
        instant formatted once."""
        slot = self.members[identity]
        if slot.built is None or slot.built_seq != slot.seq:
            stamp = self._stamps.get(slot.written_at)
            if stamp is None:
                if len(self._stamps) > 4096:
                    self._stamps.clear()
                stamp = self._stamps[slot.written_at] = microtime(wall_at(self.clock, slot.written_at))
            slot.built = replace(slot.content, renew_time=stamp)
            slot.built_seq = slot.seq
        return slot.built

    def leases(self) -> Iterator[MemberLease]:
        for identity in self.members:
            yield self.member(identity)

    # -- the coordinator Lease and the assignment ----------------------------------------------------

    def write_coordinator(self, lease: CoordinatorLease, by: str, now: float) -> CoordinatorLease:
        self.coordinator = lease
        self.coordinator_writes.append((now, lease))
        self._broadcast(COORDINATOR, by, now)
        return lease

    def coordinator_as_of(self, t: float) -> tuple[float, CoordinatorLease] | None:
        """The last coordinator Lease write at or before `t`, with its time."""
        i = bisect.bisect_right(self.coordinator_writes, t, key=lambda entry: entry[0])
        return self.coordinator_writes[i - 1] if i else None

    def publish(self, data: dict[str, str], assignment: Assignment, now: float) -> None:
        self.assignment = assignment
        self.assignment_bytes = len(data[CONFIGMAP_KEY].encode())
        self._broadcast(CONFIGMAP, assignment.coordinator, now)
