"""The simulated cluster: the engine, the API server, the ledger and the replicas, and what fans out from a
write (who is woken, who switches generation)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from datetime import datetime

from bench.simulate.api import Api, Traffic
from bench.simulate.engine import Engine, Ledger
from bench.simulate.params import Timing, identity
from bench.simulate.replica import Replica
from bench.simulate.zones import Parsed, ZoneBook
from shardsync.sharding.assignment import Assignment
from shardsync.sharding.clock import FakeClock, wall_at


class Cluster:
    def __init__(self, zones: list[str], timing: Timing, book: ZoneBook) -> None:
        self.clock = FakeClock()
        self.engine = Engine(self.clock)
        self.t0 = self.engine.now
        self.timing = timing
        self.book = book
        self.zones = zones
        self.traffic = Traffic(self.t0)
        self.running = 0  # processes up, each with its watches open
        self.full_watchers: set[str] = set()  # replicas following every member Lease
        self.followers: dict[str, set[str]] = {}  # a member Lease -> the replicas following it by name
        self.api = Api(self.clock, self.traffic, lambda: self.running, self.recipients)
        self.ledger = Ledger(len(zones))
        self.replicas: dict[str, Replica] = {}
        self.silent: set[str] = set()  # Leases still stored whose holder no longer renews them
        self.pending: dict[str, None] = {}  # replicas with zones waiting for rule 4 (in order)
        self.stale_waits: list[float] = []  # see Replica.check
        self.published: list[tuple[float, Parsed]] = []

    @property
    def now(self) -> float:
        return self.engine.now

    def wall(self, now: float) -> datetime:
        return wall_at(self.clock, now)

    def add(self, ordinal: int, weight: int = 1) -> Replica:
        replica = Replica(self, identity(ordinal), ordinal, weight)
        self.replicas[replica.identity] = replica
        return replica

    def live(self) -> list[Replica]:
        return [r for r in self.replicas.values() if r.running]

    @property
    def parsed(self) -> Parsed:
        """The latest published assignment with its owner index."""
        return self.published[-1][1]

    # -- bookkeeping the replicas call -----------------------------------------------------------------

    def recipients(self, identity: str) -> Iterable[str]:
        """Who is sent a write of `identity`'s member Lease (a replica follows it either way, not both)."""
        return itertools.chain(self.full_watchers, self.followers.get(identity, ()))

    def started(self, replica: Replica) -> None:
        self.running += 1
        self.silent.discard(replica.identity)

    def halted(self, replica: Replica) -> None:
        self.running -= 1
        self.pending.pop(replica.identity, None)
        if replica.identity in self.api.members:
            self.silent.add(replica.identity)

    def coordinator(self) -> Replica | None:
        """The running replica that holds the coordinator Lease, if any."""
        lease = self.api.coordinator
        replica = self.replicas.get(lease.holder) if lease is not None and lease.holder else None
        return replica if replica is not None and replica.running else None

    def coordinator_stopped(self, now: float) -> None:
        """The coordinator Lease was released, or its holder stopped: every candidate, which has timed it
        from its watch, runs a round when it is free (at once when released, a lease duration after its
        last write when its holder crashed)."""
        for replica in self.live():
            replica.resume(now)

    def member_changed(self, now: float) -> None:
        """A member Lease write other than a plain renewal: the coordinator and every replica waiting on
        rule 4 look again (their loops are woken by every member Lease event)."""
        holder = self.coordinator()
        if holder is not None:
            holder.wake_coordinator(now)
        for name in list(self.pending):
            self.replicas[name].wake_check(now)

    def expiry_visible(self, now: float) -> bool:
        """Could some member look expired at `now` to a replica whose view is current? Only one whose Lease
        has not been written for a lease duration, i.e. one that stopped renewing."""
        duration = self.timing.lease_duration
        for name in self.silent:
            slot = self.api.members.get(name)
            if slot is not None and slot.written_at + duration <= now:
                return True
        return False

    def publish(self, proposal: Assignment, now: float) -> None:
        """Write the ConfigMap; every running replica's watch delivers it."""
        data = proposal.to_configmap_data()
        parsed = self.book.parse(data, self.zones)
        self.api.publish(data, parsed.assignment, now)
        self.published.append((now, parsed))
        for replica in self.live():
            replica.later(now, replica.on_assignment)

    def quiet(self) -> bool:
        """Nothing left to do: no zone waits for rule 4, the coordinator has nothing to publish."""
        if self.pending:
            return False
        holder = self.coordinator()
        return holder is not None and holder.publisher is not None and holder.publisher.next_wakeup() is None
