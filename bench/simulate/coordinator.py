"""The coordinator side of one simulated replica: what Candidate and CoordinatorLoop do, with election.py
and publisher.py deciding (the member side is replica.py, which inherits this).

Every replica is a candidate and follows the coordinator Lease by watch (each write reaches it at once, and
a process that starts counts the Lease it finds as just renewed). While a running holder renews, no other
candidate has anything to do: it stays dormant and makes no request, and resumes when the Lease is
released (a round at once) or its holder stops (a round a lease duration after the last write it saw);
the first to decide writes, the others see that write and wait again. The holder renews every renew
interval from its own last write. While `is_leader`, it follows every member Lease, runs a `Publisher`
created from the stored assignment, and writes each proposal if the stored one is still what it builds
on. It re-evaluates when its inputs can change: a member Lease write other than a plain renewal, its own
renewal when some member has stopped renewing (only then can an expiry become visible), the publisher's
`next_wakeup`, and leadership.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from bench.simulate.params import INSTANCE
from shardsync.sharding.election import Action, Election
from shardsync.sharding.publisher import Publisher

if TYPE_CHECKING:
    from bench.simulate.cluster import Cluster
    from bench.simulate.view import View


class CoordinatorSide:
    c: Cluster
    identity: str
    running: bool
    peers: View
    started_at: float
    election: Election | None
    publisher: Publisher | None
    next_round_at: float
    dormant: bool
    publisher_wakeup: float
    _evaluations: set[float]

    def later(self, t: float, action: Callable[[float], None]) -> None:
        raise NotImplementedError

    def follow(self, now: float) -> None:
        raise NotImplementedError

    def reset_coordinator_side(self, now: float) -> None:
        """What a new process knows of the election: the Lease as it finds it, first seen now."""
        self.started_at = now
        self.election = Election(
            INSTANCE, self.identity, self.c.timing.lease_duration, self.c.timing.renew_deadline
        )
        self.publisher = None
        self.next_round_at = now
        self.dormant = False
        self._evaluations = set()
        self.publisher_wakeup = math.inf
        self.later(now, self._round)

    def leading(self, now: float) -> bool:
        return self.election is not None and self.election.is_leader(now)

    def wake_coordinator(self, t: float) -> None:
        if t not in self._evaluations:
            self._evaluations.add(t)
            self.later(t, self._run_evaluation)

    def _run_evaluation(self, now: float) -> None:
        self._evaluations.discard(now)
        self.evaluate(now)

    def _publisher_wakeup(self, now: float) -> None:
        if now == self.publisher_wakeup:
            self.evaluate(now)

    def _watched(self, now: float) -> None:
        """What the watch of the coordinator Lease delivered up to `now`: its last write, seen when it was
        written (or when we started, for one written before)."""
        entry = self.c.api.coordinator_as_of(now)
        if self.election is not None and entry is not None:
            written, lease = entry
            self.election.observe(lease, max(written, self.started_at))

    def _round(self, now: float) -> None:
        """One election round (Candidate._round): decide from what the watch delivered, write if so."""
        election = self.election
        if election is None or now != self.next_round_at:
            return
        timing = self.c.timing
        was_leader = election.is_leader(now)
        self._watched(now)
        decision = election.decide(now, self.c.wall(now))
        if decision.action is Action.WAIT or decision.write is None:
            holder = self.c.coordinator()
            if holder is not None and holder is not self:
                # A running holder renews every interval: nothing to do until it stops (`resume`).
                self.dormant, self.next_round_at = True, math.inf
                self.follow(now)
                return
            left = (decision.expires_at if decision.expires_at is not None else now) - now
            delay = max(0.01, min(timing.renew_interval, left))
        else:
            stored = self.c.api.write_coordinator(decision.write, self.identity, now)
            election.written(stored, now, now)
            delay = timing.renew_interval
        self.next_round_at = now + delay
        self.later(self.next_round_at, self._round)
        if election.is_leader(now) != was_leader:
            self.wake_coordinator(now)
        self.follow(now)

    def resume(self, now: float) -> None:
        """The Lease was released or its holder stopped: a round when it is free on our clock."""
        if not self.dormant or self.election is None:
            return
        self._watched(now)
        decision = self.election.decide(now, self.c.wall(now))
        at = decision.expires_at if decision.action is Action.WAIT and decision.expires_at else now
        self.dormant = False
        self.next_round_at = max(now, at)
        self.later(self.next_round_at, self._round)

    def release_coordinator(self, now: float) -> None:
        if self.election is not None:
            record = self.election.release(self.c.wall(now))
            if record is not None:
                self.c.api.write_coordinator(record, self.identity, now)
                self.c.coordinator_stopped(now)

    def evaluate(self, now: float) -> None:
        """One publishing round (CoordinatorLoop._publish_round)."""
        if self.election is None or not self.election.is_leader(now):
            self.publisher = None
            return
        self.follow(now)  # every member Lease, listed at once
        if self.publisher is None:
            self.c.traffic.request(self.identity, now)  # the stored assignment, read once
            self.publisher = Publisher(
                self.identity, self.c.timing.publisher_config(), self.c.api.assignment, lambda: self.c.zones
            )
        publisher = self.publisher
        pins = dict(publisher.current.pins) if publisher.current is not None else {}
        proposal = publisher.observe(self.peers.statuses(now), pins, now, self.c.wall(now))
        if proposal is not None:
            if self.c.api.assignment == publisher.current:  # the resourceVersion precondition
                publisher.committed(proposal)
                self.c.publish(proposal, now)
            else:
                publisher.reset(self.c.api.assignment)
        wake = publisher.next_wakeup()
        if wake is not None and wake > now and wake != self.publisher_wakeup:
            self.later(wake, self._publisher_wakeup)
        self.publisher_wakeup = wake if wake is not None and wake > now else math.inf
