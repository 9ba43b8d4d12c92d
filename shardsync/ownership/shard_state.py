"""The bookkeeping of sharded ownership, pure: no I/O and no clock (every time is passed in, monotonic), so
each branch of the handoff is unit-tested with plain values. `ShardedOwnership` (sharded.py) is the I/O
shell around it: it reads the member loop and the assignment watch, calls these steps in order, and does
what they say (worker.own / release, the lease acknowledgement, an early renewal, logs and metrics).

One pass of the shard loop, in this order (design §2; the rule numbers are the design's):
1. rule 5: nothing while self-fenced (`self_fenced`). After the member lease was renewed past its write
   fence (the member loop's fence epoch moved), the assignment is read afresh before anything else
   (`needs_read`, `view_read`): never act on the view held while fenced. Writes are allowed only under a
   view read in the current epoch (`may_write`).
2. `switch`: to a newer generation only (`assignment.is_successor`). A skipped generation puts the kept
   zones through rule 4 again (`requalify`): they may have had another owner meanwhile. A zone dropped
   after a refused write stays dropped only until a newer generation.
3. rule 3: `release_plan` names every running zone not owned in the view (plus the dropped ones and, after
   a skip, the kept ones); the shell releases each (`releasing`, then awaits the worker) and only then
   acknowledges the generation (`acknowledgement` says which, and says nothing while a zone not ours in
   the view still runs).
4. rule 4: `gain` queues the zones gained (not while draining, nor a zone fenced under this generation);
   `hearing` names the peers whose Leases the member view must hold for them (`handoff.peers_to_hear`:
   their previous owners, or everyone); `view_confirmed` says whether that view is at least as fresh as
   the assignment (a lagging view would hide a peer that is still writing: its silence proves nothing),
   and the shell asks for a fresh one when not (an early renewal whose echo proves it, or a read of the
   peers followed); `acquire` starts each zone `handoff.may_acquire` allows — on a view not yet fresh,
   only those whose peers all acknowledged (an acknowledgement is never taken back) — and says when the
   verdict may change.
Rule 6 (stopping): `start_draining` (leave for good: gain nothing, wait until the coordinator moved our
zones, `drained`), `stop` (no write from here on), `forget_all` once the shell released everything.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, field
from enum import Enum

from shardsync.sharding.assignment import Assignment, is_successor
from shardsync.sharding.handoff import handoff, may_acquire, peers_to_hear
from shardsync.sharding.membership import MemberStatus
from shardsync.sharding.timings import Timings


class Phase(Enum):
    RUNNING = "running"
    DRAINING = "draining"  # leaving for good: nothing gained, waiting for our zones to move
    STOPPING = "stopping"  # no write from here on


@dataclass(frozen=True, slots=True)
class Switch:
    """The view `switch` replaced (None at the first one) and the view it took."""

    old: Assignment | None
    new: Assignment


@dataclass(frozen=True, slots=True)
class Acquisition:
    """What one `acquire` did: the zones started (with how long each waited), the peers still in the way
    when that set is new (to log it once), how long the shell may sleep before asking again, and whether
    it should ask for a fresh member view (the verdict waits on a view fresher than we hold)."""

    acquired: tuple[tuple[str, float], ...]
    waiting_for: tuple[str, ...] | None
    delay: float
    refresh_now: bool = False


@dataclass(slots=True)
class ShardState:
    identity: str
    timings: Timings
    view: Assignment | None = None
    previous: Assignment | None = None  # the view before `view`, for rule 4 across one generation
    active: set[str] = field(default_factory=set)  # handed to the worker
    pending: dict[str, float] = field(default_factory=dict)  # gained, waiting for rule 4: zone -> since
    dropped: dict[str, int] = field(default_factory=dict)  # zone -> generation its fence refused us under
    read_epoch: int | None = None  # the member loop's fence epoch the view was (re)read under
    view_read_at: float | None = None  # when we got hold of the view
    expiry_refresh_asked_for: float | None = None  # the peer expiry a fresh member view was asked for
    requalify: bool = False  # a generation was skipped: kept zones go through rule 4 again
    phase: Phase = Phase.RUNNING
    writing: bool = False  # as far as the log knows (so self-fencing is logged once)
    waiting_logged: tuple[int, tuple[str, ...]] | None = None  # (generation, blockers) last logged

    # -- rule 5 -------------------------------------------------------------------------------------

    @property
    def draining(self) -> bool:
        return self.phase is Phase.DRAINING

    @property
    def stopping(self) -> bool:
        return self.phase is Phase.STOPPING

    def may_write(self, lease_fresh: bool, epoch: int) -> bool:
        """Our lease is fresh (rule 5), our view was read since it last lapsed, and we are not stopping."""
        return not self.stopping and lease_fresh and self.read_epoch == epoch

    def self_fenced(self) -> bool:
        """The lease is not fresh: writes stop. True when they just stopped (to log it once)."""
        was, self.writing = self.writing, False
        return was

    def needs_read(self, epoch: int) -> bool:
        """Whether the view must be read afresh first: the lease was (re)acquired since it was read."""
        return self.read_epoch != epoch

    def view_read(self, epoch: int, now: float) -> None:
        self.read_epoch = epoch
        self.view_read_at = now

    # -- a new generation ---------------------------------------------------------------------------

    def switch(self, latest: Assignment | None, now: float) -> Switch | None:
        """Take `latest` when it succeeds the view (a newer generation); None when it does not."""
        if latest is None or not is_successor(self.view, latest):
            return None
        old = self.view
        self.previous, self.view = old, latest
        self.view_read_at = now
        if old is not None and latest.generation > old.generation + 1:
            self.requalify = True
        self.dropped = {zone: g for zone, g in self.dropped.items() if g >= latest.generation}
        return Switch(old, latest)

    def owned(self) -> int:
        """How many of the zones we run or wait for are ours in the view."""
        if self.view is None:
            return 0
        return len(self.view.zones_of(self.identity, self.active | set(self.pending)))

    # -- rule 3 -------------------------------------------------------------------------------------

    def release_plan(self, zones: Set[str]) -> list[str]:
        """The running zones to release now, in order (their pending entries are gone already)."""
        view = self._view()
        plan = handoff(self.identity, view, zones, self.active | set(self.pending))
        release = set(plan.release) | (set(self.dropped) & self.active)
        if self.requalify:
            release |= plan.keep & self.active
            self.requalify = False
        for zone in release:
            self.pending.pop(zone, None)
        return sorted(release & self.active)

    def releasing(self, zone: str) -> None:
        """The shell is about to release `zone` from the worker."""
        self.active.discard(zone)

    def acknowledgement(self, acknowledged: int | None, zones: Set[str]) -> int | None:
        """The generation to acknowledge on the member lease, once every zone not ours in it is released;
        None when there is nothing new to say or something not ours still runs."""
        view = self.view
        if view is None or (acknowledged is not None and acknowledged >= view.generation):
            return None
        running = self.active | set(self.pending)
        if any(zone not in zones or view.owner_of(zone) != self.identity for zone in running):
            return None
        return view.generation

    # -- rule 4 -------------------------------------------------------------------------------------

    def gain(self, zones: Set[str], now: float) -> bool:
        """Queue the zones ours in the view that neither run nor wait; False while draining (nothing is
        gained then). A zone whose fence refused us under this generation waits for a newer one."""
        if self.draining:
            return False
        view = self._view()
        for zone in sorted(view.zones_of(self.identity, zones) - self.active - set(self.pending)):
            refused_under = self.dropped.get(zone)
            if refused_under is None or refused_under < view.generation:
                self.pending[zone] = now
        return True

    def hearing(self) -> frozenset[str] | None:
        """The peers the member view must hold before the pending zones may be acquired (None: every
        member; empty: nobody, or nothing pending)."""
        if not self.pending or self.view is None:
            return frozenset()
        return peers_to_hear(self.pending, self.identity, self.view, self.previous)

    def view_confirmed(self, synced_at: float | None) -> bool:
        """The member view was known current at or after the moment we got hold of the assignment (rule 4's
        precondition for judging a silent peer gone); when not, the shell asks for a fresh one at once
        rather than wait for the next regular renewal."""
        return synced_at is not None and self.view_read_at is not None and synced_at >= self.view_read_at

    def acquire(self, now: float, peers: Mapping[str, MemberStatus], fresh: bool = True) -> Acquisition:
        """Rule 4 for every pending zone: start those allowed. `fresh`: `view_confirmed`; without
        it only acknowledgements count (a silent peer is never deemed gone on a view older than the
        assignment), and what is left waits for the fresh view the gate asked for."""
        renew = self.timings.renew_interval
        if not self.pending:
            return Acquisition((), None, renew)
        view = self._view()
        margin = self.timings.acquire_margin
        retry_at: float | None = None
        blockers: set[str] = set()
        acquired: list[tuple[str, float]] = []
        received_at = self.view_read_at if self.view_read_at is not None else now
        for zone in sorted(self.pending):
            verdict = may_acquire(
                zone,
                self.identity,
                view,
                self.previous,
                peers,
                margin,
                now=now,
                received_at=received_at,
                silence=fresh,
            )
            if not verdict.allowed:
                blockers.update(verdict.waiting_for)
                if verdict.retry_at is not None:
                    retry_at = verdict.retry_at if retry_at is None else min(retry_at, verdict.retry_at)
                continue
            since = self.pending.pop(zone)
            self.active.add(zone)
            acquired.append((zone, now - since))
        waiting = (view.generation, tuple(sorted(blockers)))
        report = None
        if blockers and waiting != self.waiting_logged:
            self.waiting_logged = waiting
            report = waiting[1]
        if retry_at is not None and retry_at <= now:
            # A silent peer's lease has run out on our clock, but our member view was last known current
            # before that: it counts as gone only once a view after its expiry proves it did not renew.
            # Ask for that view now (once per expiry: the echo of an early renewal, or a read of the
            # peers followed) and sleep until it wakes us, instead of spinning until the regular renewal.
            ask = self.expiry_refresh_asked_for != retry_at
            self.expiry_refresh_asked_for = retry_at
            return Acquisition(tuple(acquired), report, renew, refresh_now=ask)
        delay = renew if retry_at is None else min(renew, retry_at - now)
        return Acquisition(tuple(acquired), report, delay)

    # -- a refused write ----------------------------------------------------------------------------

    def fenced(self, zone: str) -> int:
        """The zone's fence refused our write: drop it until a newer generation. Returns the generation
        it was dropped under (0 before any view)."""
        generation = self.view.generation if self.view is not None else 0
        self.dropped[zone] = generation
        return generation

    # -- rule 6 -------------------------------------------------------------------------------------

    def start_draining(self) -> None:
        self.phase = Phase.DRAINING

    def stop(self) -> None:
        self.phase = Phase.STOPPING

    def drained(self) -> bool:
        """The coordinator published a generation without us, and we released everything."""
        view = self.view
        return view is not None and self.identity not in view.identities and not self.active

    def forget_all(self) -> None:
        """The shell released every zone from the worker."""
        self.active.clear()
        self.pending.clear()

    def _view(self) -> Assignment:
        if self.view is None:
            raise RuntimeError("no assignment view yet")
        return self.view
