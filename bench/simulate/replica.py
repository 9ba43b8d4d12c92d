"""One simulated replica: what MemberLoop, ShardedOwnership, Candidate and CoordinatorLoop do, with the pure
protocol modules deciding and the simulated API server in place of Kubernetes.

Member side. The member Lease is renewed every renew interval from the last write (an acknowledgement or a
flag change is a write, and restarts the interval, as in MemberLoop's renew loop). Each write is delivered
back at once, so it marks the replica's member view current (`LivenessTracker.mark_synced`). On a new
generation (`is_successor`) the replica releases what it no longer owns (`handoff`), acknowledges the
generation in one Lease write, then starts each gained zone when `may_acquire` allows (rule 4). A replica
whose view was read after its last own write asks for an early renewal first, once per view, as
ShardedOwnership does (a replica that just started writes its Lease twice).

The tracker is fed lazily but exactly: before a replica reads statuses, every Lease written since its last
read is observed with the time it was written (each write changes renewTime, so only the latest write per
Lease matters), deleted Leases are forgotten, and a new process starts with a full list (`resync`), as the
informer does. Rule 4 is re-checked when its verdict can change: a new generation, a peer's Lease write
other than a plain renewal (an acknowledgement, a flag, a deletion), the replica's own renewal (which
moves its view's `as_of`), and the `retry_at` it was given. The real loop also wakes on every peer renewal,
to the same verdict. Pending zones with the same previous owner get the same verdict (the zone enters
`may_acquire` only through its owner in the previous generation), so one representative is asked per group.

Coordinator side. Every replica is a candidate: an election round (`Election.observe`, `decide`, and the
write) every renew interval, sooner when a lease it waits for lapses. While a running holder renews, every
other candidate's round would only wait again, so it stays dormant on its round grid and resumes when the
Lease is released or its holder stops, with what the skipped rounds would have observed (`resume`).
The holder, while `is_leader`, runs a `Publisher` created from the stored assignment, and writes each
proposal if the stored one is still what it builds on. It re-evaluates when its inputs can change: a
member Lease write other than a plain renewal, its own renewal when some member has stopped renewing
(only then can an expiry become visible: a member that renews every interval never looks expired), the
publisher's `next_wakeup`, and leadership.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from bench.simulate.params import INSTANCE
from shardsync.sharding.assignment import Assignment, is_successor
from shardsync.sharding.election import Action, Election
from shardsync.sharding.handoff import handoff, may_acquire
from shardsync.sharding.membership import LivenessTracker, MemberLease
from shardsync.sharding.publisher import Publisher

if TYPE_CHECKING:
    from bench.simulate.cluster import Cluster


class Replica:
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
        self.tracker = LivenessTracker(grace=self.c.timing.renew_interval)
        self.cursor = -1  # the API's write seq up to which the tracker has observed
        self.view: Assignment | None = None
        self.previous: Assignment | None = None
        self.reads = 0  # assignment reads, to order them against our own writes
        self.view_read = 0  # `reads` when the view was taken
        self.synced_read = -1  # `reads` at our last own write (its echo proves the member view current)
        self.fresh_asked = -1
        self.active: set[str] = set()
        self.pending: set[str] = set()
        self.stale_since: float | None = None
        self.expiry_asked = math.nan  # the blocker expiry an early renewal was asked for
        self.election: Election | None = None
        self.publisher: Publisher | None = None
        self.next_round_at = math.inf
        self.round_base = -math.inf  # our last election round: later ones fall every renew interval after it
        self.dormant = False
        self._checks: set[float] = set()
        self._evaluations: set[float] = set()
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
        self.synced_read = self.reads
        self.tracker.mark_synced(now)  # the watch delivers our write at once
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

    def sync(self) -> None:
        """Observe every Lease written since our last look, at the time it was written."""
        api = self.c.api
        if self.cursor == api.seq:
            return
        tracker, cursor = self.tracker, self.cursor
        for identity, slot in api.members.items():
            if slot.seq > cursor:
                tracker.observe(api.member(identity), slot.written_at)
        for identity, seq in api.deleted.items():
            if seq > cursor:
                tracker.forget(identity)
        self.cursor = api.seq

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
        if current is not None:
            self.acked = current.generation
        self.write(now)
        self.tracker.resync(self.c.api.leases(), now)
        self.cursor = self.c.api.seq
        self.election = Election(
            INSTANCE, self.identity, self.c.timing.lease_duration, self.c.timing.renew_deadline
        )
        self.next_round_at = now
        self.later(now, self._round)
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
        if self.synced_read < self.view_read:
            # The view was read after our last write: renew now, and act once its echo made the member
            # view at least as fresh as the assignment.
            if self.fresh_asked != self.view_read:
                self.fresh_asked = self.view_read
                self.write(now, renewal=True)
                self.wake_check(now)
            return
        self.sync()
        statuses = self.tracker.statuses(now)
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
        for zones in groups.values():
            verdict = may_acquire(zones[0], self.identity, view, previous, statuses, margin)
            if verdict.allowed:
                self.pending.difference_update(zones)
                self.active.update(zones)
                self.c.ledger.run(zones, self.identity, now)
            elif verdict.retry_at is not None:
                retry_at = min(retry_at, verdict.retry_at)
        if not self.pending or retry_at > now:
            self._stale_over(now)
        if not self.pending:
            self.c.pending.pop(self.identity, None)
        elif retry_at > now:
            if retry_at < math.inf:
                self.wake_check(retry_at)
        else:
            # The blocker's expiry has passed on our clock, but our view is only as current as our last
            # renewal: ShardState asks for an early renewal (once per expiry), whose echo proves the
            # blocker silent, and the check runs again then.
            if self.stale_since is None:
                self.stale_since = now
            if self.expiry_asked != retry_at:
                self.expiry_asked = retry_at
                self.write(now, renewal=True)
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
        self._release_coordinator(now)
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
        self._release_coordinator(now)
        self._halt(now)
        self.c.member_changed(now)

    def _release_coordinator(self, now: float) -> None:
        if self.election is not None:
            record = self.election.release(self.c.wall(now))
            if record is not None:
                self.c.api.write_coordinator(record, now)
                self.c.coordinator_stopped(now)

    # -- the coordinator -------------------------------------------------------------------------------

    def _round(self, now: float) -> None:
        """One election round (Candidate._round): read the Lease, decide, write."""
        election = self.election
        if election is None or now != self.next_round_at:
            return
        timing = self.c.timing
        was_leader = election.is_leader(now)
        election.observe(self.c.api.coordinator, now)
        decision = election.decide(now, self.c.wall(now))
        self.round_base = now
        if decision.action is Action.WAIT or decision.write is None:
            holder = self.c.coordinator()
            if holder is not None and holder is not self:
                # A running holder renews every interval, so every round would wait again: stay dormant
                # on our round grid until the Lease is released or its holder stops (`resume`).
                self.dormant, self.next_round_at = True, math.inf
                return
            left = (decision.expires_at if decision.expires_at is not None else now) - now
            delay = max(0.01, min(timing.renew_interval, left))
        else:
            stored = self.c.api.write_coordinator(decision.write, now)
            election.written(stored, now, now)
            delay = timing.renew_interval
        self.next_round_at = now + delay
        self.later(self.next_round_at, self._round)
        if election.is_leader(now) != was_leader:
            self.wake_coordinator(now)

    def resume(self, now: float) -> None:
        """Rounds again from the next point of our round grid, with the Election holding what the rounds
        skipped while dormant would have left in it: the last Lease record written before our previous
        grid point, seen at the first grid point after it was written."""
        if not self.dormant or self.election is None:
            return
        period = self.c.timing.renew_interval
        steps = max(0, math.ceil((now - self.round_base) / period - 1e-9))
        following = self.round_base + steps * period
        entry = self.c.api.coordinator_as_of(following - period)
        if entry is not None and entry[0] > self.round_base:
            written, record = entry
            seen = self.round_base + math.ceil((written - self.round_base) / period - 1e-9) * period
            self.election.observe(record, seen)
        self.dormant = False
        self.next_round_at = following
        self.later(following, self._round)

    def evaluate(self, now: float) -> None:
        """One publishing round (CoordinatorLoop._publish_round)."""
        if self.election is None or not self.election.is_leader(now):
            self.publisher = None
            return
        if self.publisher is None:
            self.publisher = Publisher(
                self.identity, self.c.timing.publisher_config(), self.c.api.assignment, lambda: self.c.zones
            )
        publisher = self.publisher
        self.sync()
        pins = dict(publisher.current.pins) if publisher.current is not None else {}
        proposal = publisher.observe(self.tracker.statuses(now), pins, now, self.c.wall(now))
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
