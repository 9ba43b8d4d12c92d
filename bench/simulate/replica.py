"""One simulated replica: what MemberLoop, PeerView and ShardedOwnership do, with the pure protocol modules
deciding and the simulated API server in place of Kubernetes; the coordinator side (Candidate,
CoordinatorLoop) is coordinator.py's, which this inherits.

Member side. The member Lease is renewed every renew interval from the last write (an acknowledgement or a
flag change is a write, and restarts the interval, as in MemberLoop's renew loop). On a new generation
(`is_successor`) the replica releases what it no longer owns (`handoff`), acknowledges the generation in one
Lease write, then starts each gained zone when `may_acquire` allows (rule 4). The member Leases it follows
(view.py) are the peers `peers_to_hear` names for its pending zones (or every member), plus the
coordinator's; before acting on them it needs them proven current after it took the view, as
ShardedOwnership does: following every Lease, by the echo of an early renewal it asks for once per view
(a replica that just started writes its Lease twice); following a few, by reading them.

Rule 4 is re-checked when its verdict can change: a new generation, a peer's Lease write other than a plain
renewal (an acknowledgement, a flag, a deletion), the replica's own renewal (which moves its view's
`as_of` while it follows everyone), and the `retry_at` it was given. The real loop also wakes on every
followed renewal, to the same verdict. Pending zones with the same previous owner get the same verdict (the
zone enters `may_acquire` only through its owner in the previous generation), so one representative is
asked per group.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from bench.simulate.coordinator import CoordinatorSide
from bench.simulate.params import INSTANCE
from bench.simulate.view import View
from shardsync.sharding.assignment import Assignment, is_successor
from shardsync.sharding.handoff import handoff, may_acquire, peers_to_hear
from shardsync.sharding.membership import MemberLease

if TYPE_CHECKING:
    from bench.simulate.cluster import Cluster


class Replica(CoordinatorSide):
    def __init__(self, cluster: Cluster, identity: str, ordinal: int, weight: int = 1) -> None:
        self.c = cluster
        self.identity = identity
        self.ordinal = ordinal
        self.weight = weight
        self.incarnation = 0
        self.running = False
        self.renewing = False
        self.draining = False
        self.restarting = False
        self.acked: int | None = None
        self.last_renewed: float | None = None
        self.next_renew_at = math.inf
        self._reset_process()

    def _reset_process(self) -> None:
        """What a new process knows: nothing but its identity."""
        self.peers = View(self.c, self.identity, lambda: self.reads)
        self.view: Assignment | None = None
        self.previous: Assignment | None = None
        self.received_at = -math.inf  # when the view was taken
        self.reads = 0  # assignment reads, to order them against the proofs of the member view
        self.view_read = 0  # `reads` when the view was taken
        self.fresh_asked = -1
        self.active: set[str] = set()
        self.pending: set[str] = set()
        self.stale_since: float | None = None
        self.expiry_asked = math.nan  # the blocker expiry a fresh member view was asked for
        self.election = None
        self.publisher = None
        self.next_round_at = math.inf
        self.dormant = False
        self._checks: set[float] = set()
        self._evaluations = set()
        self.publisher_wakeup = math.inf  # the one the real loop would sleep until (it recomputes each pass)

    # -- scheduling ------------------------------------------------------------------------------------

    def later(self, t: float, action: Callable[[float], None]) -> None:
        incarnation = self.incarnation

        def fire(now: float) -> None:
            if self.running and self.incarnation == incarnation:
                action(now)

        self.c.engine.at(t, fire)

    def wake_check(self, t: float) -> None:
        """Rule 4 again at `t` (one check per instant however many wake-ups)."""
        if t not in self._checks:
            self._checks.add(t)
            self.later(t, self._run_check)

    def _run_check(self, now: float) -> None:
        self._checks.discard(now)
        self.check(now)

    # -- the member Lease ------------------------------------------------------------------------------

    def write(self, now: float, renewal: bool = False) -> None:
        """One write of our Lease with every change asked for so far (MemberLoop._write)."""
        api, timing = self.c.api, self.c.timing
        slot = api.members.get(self.identity)
        if renewal and slot is not None:
            api.renew_member(self.identity, now)
        else:
            base = slot.content if slot is not None else None
            if base is None:
                base = MemberLease.new(INSTANCE, self.identity, self.c.wall(now), timing.lease_duration)
            api.write_member(
                replace(
                    base,
                    holder=self.identity,
                    lease_duration=timing.lease_duration,
                    weight=self.weight,
                    draining=self.draining,
                    restarting=self.restarting,
                    observed_generation=self.acked if self.acked is not None else base.observed_generation,
                ),
                now,
            )
        self.last_renewed = now
        self.peers.echoed(now)  # a watch of every member Lease delivers our write at once
        self.next_renew_at = now + timing.renew_interval
        self.later(self.next_renew_at, self._renew)
        if not renewal:
            self.c.member_changed(now)

    def _renew(self, now: float) -> None:
        if not self.renewing or now != self.next_renew_at:
            return  # superseded by an earlier write
        self.write(now, renewal=True)
        if self.pending:
            self.check(now)
        if self.publisher is not None and self.c.expiry_visible(now):
            self.wake_coordinator(now)

    # -- the member Leases followed -------------------------------------------------------------------

    def hearing(self) -> frozenset[str] | None:
        """ShardState.hearing: whom the pending zones must hear from (None: everyone)."""
        if not self.pending or self.view is None or self.draining:
            return frozenset()
        return peers_to_hear(self.pending, self.identity, self.view, self.previous)

    def follow(self, now: float) -> None:
        """PeerView.follow, with what leading and the coordinator Lease's holder say."""
        coordinator = self.c.api.coordinator
        holder = coordinator.holder if coordinator is not None else ""
        self.peers.follow(self.hearing(), self.leading(now), holder, now)

    def ask_fresh_view(self, now: float) -> None:
        """A member view proven current now: an early renewal whose echo proves a watch of every Lease,
        or a read of each Lease followed not read since the view was taken."""
        if self.peers.everyone:
            self.write(now, renewal=True)
        else:
            self.peers.confirm(now, self.view_read)

    # -- the process -----------------------------------------------------------------------------------

    def start(self, now: float) -> None:
        """A new process (ShardedOwnership.run): read the assignment, write the Lease acknowledging it (it
        runs nothing yet), list the Leases, then follow the assignment and run election rounds."""
        self.incarnation += 1
        self._reset_process()
        self.running, self.renewing = True, True
        self.draining = self.restarting = False
        self.c.started(self)
        current = self.c.api.assignment
        self.reads += 1
        # The assignment read, and the lists and watches of the coordinator Lease and the assignment.
        self.c.traffic.request(self.identity, now, 5)
        if current is not None:
            self.acked = current.generation
        self.write(now)
        self.reset_coordinator_side(now)
        self.follow(now)
        if current is not None:
            self.on_assignment(now)

    def on_assignment(self, now: float) -> None:
        """The ConfigMap watch delivered a generation (ShardedOwnership._pass, _switch and _handoff)."""
        latest = self.c.api.assignment
        if latest is None or not is_successor(self.view, latest):
            return
        old = self.view
        self.previous, self.view = old, latest
        self.reads += 1
        self.view_read = self.reads
        self.received_at = now
        parsed = self.c.parsed
        running = self.active | self.pending
        candidates = running.union(parsed.zones_of(self.identity))
        plan = handoff(self.identity, latest, candidates, running)
        release = set(plan.release)
        if old is not None and latest.generation > old.generation + 1:
            release |= plan.keep & self.active  # a skipped generation: kept zones go through rule 4 again
        self.pending -= release
        stopped = release & self.active
        self.active -= stopped
        self.c.ledger.stop(stopped, self.identity, now)
        if self.acked is None or self.acked < latest.generation:
            self.acked = latest.generation  # rule 3: everything not ours is stopped; now say so
            self.write(now)
        if self.draining:
            if self.identity not in latest.identities and not self.active:
                self.leave(now)
            return
        self.pending |= plan.gain - self.active
        self.follow(now)
        if self.pending:
            # Checked once the other replicas' acknowledgements of this same instant are in: a check
            # before them could only find them missing.
            self.c.pending[self.identity] = None
            self.wake_check(now)

    def check(self, now: float) -> None:
        """Rule 4 for every pending zone (ShardedOwnership._acquire)."""
        view = self.view
        if not self.pending or view is None or self.draining:
            return
        hearing = self.hearing()
        self.follow(now)
        fresh = self.peers.fresh_for(hearing, self.view_read)
        statuses = self.peers.statuses(now)
        previous = self.previous
        groups: dict[str | None, list[str]] = {}
        if previous is not None and previous.generation == view.generation - 1:
            owner_of = previous.owner_of
            for zone in self.pending:
                groups.setdefault(owner_of(zone), []).append(zone)
        else:
            groups[None] = list(self.pending)
        retry_at = math.inf
        margin = self.c.timing.acquire_margin
        received = self.received_at
        for zones in groups.values():
            verdict = may_acquire(
                zones[0],
                self.identity,
                view,
                previous,
                statuses,
                margin,
                now=now,
                received_at=received,
                silence=fresh,
            )
            if verdict.allowed:
                self.pending.difference_update(zones)
                self.active.update(zones)
                self.c.ledger.run(zones, self.identity, now)
            elif verdict.retry_at is not None:
                retry_at = min(retry_at, verdict.retry_at)
        if not fresh and self.pending:
            # Acknowledgements counted; a silent peer needs a member view proven current since the
            # assignment was read: ask for it (once per view), and look again once the other replicas'
            # acknowledgements of this same instant are in.
            if self.fresh_asked != self.view_read:
                self.fresh_asked = self.view_read
                self.ask_fresh_view(now)
                self.wake_check(now)
            return
        if not self.pending or retry_at > now:
            self._stale_over(now)
        if not self.pending:
            self.c.pending.pop(self.identity, None)
            self.follow(now)
        elif retry_at > now:
            if retry_at < math.inf:
                self.wake_check(retry_at)
        else:
            # The blocker's expiry has passed on our clock, but our view is only as current as its last
            # proof: ShardState asks for a fresh one (once per expiry), which proves the blocker silent,
            # and the check runs again then.
            if self.stale_since is None:
                self.stale_since = now
            if self.expiry_asked != retry_at:
                self.expiry_asked = retry_at
                self.ask_fresh_view(now)
                self.wake_check(now)

    def _stale_over(self, now: float) -> None:
        if self.stale_since is not None:
            self.c.stale_waits.append(now - self.stale_since)
            self.stale_since = None

    # -- stopping --------------------------------------------------------------------------------------

    def _halt(self, now: float) -> None:
        """The process is gone: every scheduled step of it is void, nothing it ran is written any more."""
        self.c.ledger.stop(self.active, self.identity, now)
        self.running = self.renewing = False
        self.incarnation += 1
        self.active, self.pending = set(), set()
        self.publisher = None
        self.peers.drop()
        self.c.halted(self)
        if self.c.api.coordinator is not None and self.c.api.coordinator.holder == self.identity:
            self.c.coordinator_stopped(now)

    def crash(self, now: float) -> None:
        """kill -9: no release, no Lease write; the Lease stays until it is seen to lapse."""
        self._halt(now)

    def restart(self, now: float) -> None:
        """SIGTERM in a StatefulSet that keeps this ordinal (ShardedOwnership._restart): stop writing,
        release every zone, mark the Lease restarting, stop renewing it, give the coordinator Lease back."""
        self.c.ledger.stop(self.active, self.identity, now)
        self.active, self.pending = set(), set()
        self.restarting = True
        self.write(now)
        self.release_coordinator(now)
        self._halt(now)

    def drain(self, now: float) -> None:
        """SIGTERM when leaving for good (ShardedOwnership._drain): mark the Lease draining and wait, at most
        the drain timeout, for a generation without us; `on_assignment` then leaves."""
        self.draining = True
        self.pending = set()
        self.c.pending.pop(self.identity, None)
        self.write(now)
        self.later(now + self.c.timing.drain_timeout, self.leave)

    def leave(self, now: float) -> None:
        """Release everything, delete the Lease, give the coordinator Lease back, exit."""
        self.c.ledger.stop(self.active, self.identity, now)
        self.active = set()
        self.c.api.delete_member(self.identity, now)
        self.release_coordinator(now)
        self._halt(now)
        self.c.member_changed(now)
