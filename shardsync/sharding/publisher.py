"""The coordinator's decision of when to publish a new generation of the assignment, and what it holds.

`Publisher` is the coordinator's brain as a pure state machine (rules 2, 6, 7): fed the members it sees and
the pins, it proposes generation g+1 only when the membership (live, non-draining members, and restarting
ones within their grace), a weight, a pin or the ring parameters changed, once the change has been quiet for
`settle` seconds (a burst — a rolling restart, scaling by several — makes one generation), or at the latest
`max_delay` after the first unpublished change. The proposal's slot table and overrides are the stored ones
rebalanced (sharding/balance.py) on the zones the coordinator knows: zones move only from members gone and to
members new. Zones that appear or go with no membership change are evened (with their own generation) once
quiet for `settle`, when some member holds more than its band allows (sharding/balance.py: over 1.05 x its
share, or over the integer optimum where that is tighter).

What it vouches for (rule 2, for rule 4). A generation is published once every member whose Lease is live
on the coordinator's clock has acknowledged the stored one, or `ack_wait` after it was first held back
for that; it then carries `acknowledged` (the generation every live member had acknowledged) and
`departed` (the members it drops because their Lease lapsed, with the renewTime last seen). A replica
that gains a zone in it then hears from that zone's previous owner alone (sharding/handoff.py). The wait
costs nothing in practice: members acknowledge as soon as they have released, and a zone moving in the
next generation waited for every laggard under rule 4 anyway.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from shardsync.sharding.assignment import Assignment, Layout, Member, validate_pins
from shardsync.sharding.balance import over_band, rebalance
from shardsync.sharding.clock import rfc3339
from shardsync.sharding.membership import MemberStatus
from shardsync.sharding.ring import RingParams
from shardsync.sharding.states import MemberState

# Zones that appeared or went are evened when a member holds more than its band allows, with at least
# MIN_PER_MEMBER zones a member (below that the bands are a zone wide: every new zone would move another).
MIN_PER_MEMBER = 10

DEFAULT_SETTLE = 2.0  # --settle-delay
DEFAULT_RESTART_GRACE = 30.0  # --restart-grace


@dataclass(frozen=True, slots=True)
class PublisherConfig:
    settle: float = DEFAULT_SETTLE  # quiet period that ends a burst of changes
    max_delay: float = 10.0  # publish by then even if changes keep coming
    restart_grace: float = DEFAULT_RESTART_GRACE  # how long a restarting member's zones stay parked for it
    ring: RingParams = field(default_factory=RingParams)
    # How long a generation waits for every live member to acknowledge the stored one before it is
    # published without that certificate (whoever gains a zone in it then hears from every member).
    ack_wait: float = 10.0

    def __post_init__(self) -> None:
        if not 0 <= self.settle <= self.max_delay:
            raise ValueError("settle must be between 0 and max_delay")
        if self.ack_wait < 0:
            raise ValueError("ack_wait must not be negative")
        if self.restart_grace < 0:
            raise ValueError("restart_grace must not be negative")


@dataclass(slots=True)
class _Pending:
    layout: Layout
    first_change: float  # when the layout first differed from the published one
    last_change: float  # when the desired layout last changed


class Publisher:
    """Decides when the coordinator publishes a new generation, and what it holds.

    Round: `proposal = observe(statuses, pins, now, wall)`; when not None, write it (create, or replace
    with the stored resourceVersion); on success `committed(proposal)`; on 409 read the stored one and
    `reset(stored)`. Until committed, every call proposes again (with the latest view), so a failed write
    is simply retried on the next round. `statuses` come from the coordinator's LivenessTracker
    (`statuses(now)`, judged at the time its view was last known current); call `observe` only once the
    leases have been listed: a member missing from `statuses` counts as gone. `next_wakeup()` says when to
    call again without events.
    """

    def __init__(
        self,
        identity: str,
        config: PublisherConfig | None = None,
        stored: Assignment | None = None,
        zones: Callable[[], Iterable[str]] = tuple,
    ):
        self.identity = identity
        self.config = config if config is not None else PublisherConfig()
        self.zones = zones  # the zones the coordinator knows, to balance the slot table on
        self.current = stored  # the last generation known to be written (rule 7: failover continues here)
        self._pending: _Pending | None = None
        self._restarting_since: dict[str, float] = {}
        self._highest_acked = 0
        self._held_since: float | None = None  # a proposal waits for acknowledgements since then
        self._even_due = False  # an even generation is due (held back by the acknowledgements)
        self.problems: list[str] = []  # what the last `observe` found wrong with the pins, for the log
        # Zones that appear or go change the balance with no membership change: the zone set last looked
        # at (by identity: the replica replaces its set when it changes), since when, and whether checked.
        self._zones_seen: object = None
        self._zones_since = 0.0
        self._zones_checked = False

    def _members(self, statuses: Mapping[str, MemberStatus], now: float) -> tuple[Member, ...]:
        """Who belongs in the assignment at `now`: ready members, and restarting members that are already
        in it for up to `restart_grace` after the coordinator first saw them restarting (their zones
        stay parked for them). Draining and expired members are left out."""
        current_ids = self.current.identities if self.current is not None else frozenset()
        for identity in list(self._restarting_since):
            status = statuses.get(identity)
            if status is None or status.state is not MemberState.RESTARTING:
                del self._restarting_since[identity]
        members = []
        for identity, status in sorted(statuses.items()):
            if status.state is MemberState.READY:
                members.append(Member(identity, status.weight))
            elif status.state is MemberState.RESTARTING and identity in current_ids:
                since = self._restarting_since.setdefault(identity, now)
                if now - since < self.config.restart_grace:
                    members.append(Member(identity, status.weight))
        return tuple(members)

    def observe(
        self, statuses: Mapping[str, MemberStatus], pins: Mapping[str, str], now: float, wall: datetime
    ) -> Assignment | None:
        """The assignment to publish now, or None when nothing is to be published yet."""
        for status in statuses.values():
            if status.observed_generation is not None:
                self._highest_acked = max(self._highest_acked, status.observed_generation)
        self._track_zones(now)
        members = self._members(statuses, now)
        valid_pins, self.problems = validate_pins(pins)
        layout = Layout(members, self.config.ring, tuple(sorted(valid_pins.items())))
        ids = {m.identity for m in members}
        self.problems += [
            f"zone {zone} is pinned to {identity}, which is not a member; its ring owner serves it"
            for zone, identity in layout.pins
            if identity not in ids
        ]
        if self.current is not None and self.current.layout == layout:
            self._pending = None
            if self._even_due or self._uneven(now):
                self._even_due = True
                return self._vouched(layout, statuses, now, wall, even=True)
            self._held_since = None
            return None
        if self._pending is None:
            self._pending = _Pending(layout, now, now)
        elif self._pending.layout != layout:
            self._pending.layout = layout
            self._pending.last_change = now
        pending = self._pending
        settled = min(pending.last_change + self.config.settle, pending.first_change + self.config.max_delay)
        if now < settled and not self._only_lost(layout, statuses):
            return None
        return self._vouched(layout, statuses, now, wall)

    def _vouched(
        self,
        layout: Layout,
        statuses: Mapping[str, MemberStatus],
        now: float,
        wall: datetime,
        even: bool = False,
    ) -> Assignment | None:
        """The proposal with what the coordinator vouches for, once every live member acknowledged the
        stored generation (or `ack_wait` after it was first held back); None while it waits."""
        current = self.current
        acknowledged = 0
        departed: dict[str, str] = {}
        if current is not None:
            live = [s for s in statuses.values() if s.live]
            acknowledged = min([current.generation, *(s.observed_generation or 0 for s in live)])
            if acknowledged < current.generation:
                if self._held_since is None:
                    self._held_since = now
                if now < self._held_since + self.config.ack_wait:
                    return None
            kept = {m.identity for m in layout.members}
            for identity in sorted(current.identities - kept):
                status = statuses.get(identity)
                if status is not None and not status.live:
                    departed[identity] = status.renew_time or ""
        self._held_since = None
        self._even_due = False
        return self._proposal(layout, wall, even, acknowledged, departed)

    def _only_lost(self, layout: Layout, statuses: Mapping[str, MemberStatus]) -> bool:
        """The change is only members whose lease expired (crashes): their zones run nowhere until the next
        generation, so it is published at once; the settle delay batches planned changes (scaling, drains,
        restarts), whose zones keep running meanwhile."""
        current = self.current
        if current is None or not current.slots or layout.ring != current.ring:
            return False
        if layout.pins != current.layout.pins or not set(layout.members) < set(current.members):
            return False
        lost = [m.identity for m in current.members if m not in layout.members]
        return all(
            (status := statuses.get(identity)) is not None and status.state is MemberState.EXPIRED
            for identity in lost
        )

    def _proposal(
        self,
        layout: Layout,
        wall: datetime,
        even: bool,
        acknowledged: int,
        departed: Mapping[str, str],
    ) -> Assignment:
        current = self.current
        weights = {m.identity: m.weight for m in layout.members}
        pins = dict(layout.pins)
        slots: tuple[str, ...] = ()
        overrides: Mapping[str, str] = {}
        if weights:
            balanced = rebalance(
                current.slots if current is not None else (),
                weights,
                self.zones(),
                overrides=current.overrides if current is not None else None,
                pins=pins,
                even=even,
            )
            slots, overrides = balanced.owners, balanced.overrides
        return Assignment(
            generation=self.next_generation(),
            members=layout.members,
            ring=layout.ring,
            pins=pins,
            created_at=rfc3339(wall),
            coordinator=self.identity,
            slots=slots,
            overrides=overrides,
            acknowledged=acknowledged,
            departed=departed,
        )

    def _track_zones(self, now: float) -> None:
        zones = self.zones()
        if zones is not self._zones_seen:
            # The first set seen is the baseline (a new coordinator changes nothing by itself, rule 7), and
            # an empty set has nothing to balance: neither asks for a check.
            first = self._zones_seen is None
            # Zones appearing on a table balanced on no zones at all (the replicas started before the
            # provider had any) are checked at once: every replica starts on them now, so each second of
            # settling is spent on the blind table's imbalance and the evening then moves zones mid-way.
            blind = not first and not _names(self._zones_seen)
            self._zones_seen, self._zones_checked = zones, first or not zones
            self._zones_since = now - self.config.settle if blind else now

    def _uneven(self, now: float) -> bool:
        """Whether the zones, quiet for `settle` since they last changed, sit unevenly on the published
        assignment (a member over its band, with at least MIN_PER_MEMBER zones a member): then zones move
        from the busiest members to those with room, with no membership change. Checked once per zone
        set."""
        zones = self._zones_seen
        current = self.current
        if self._zones_checked or now < self._zones_since + self.config.settle or current is None:
            return False
        self._zones_checked = True
        weights = {m.identity: m.weight for m in current.members}
        names = _names(zones)
        if not current.slots or len(names) < MIN_PER_MEMBER * len(weights):
            return False
        return over_band(current.owner_of, weights, names)

    def next_generation(self) -> int:
        """One above the stored generation, and above any generation a member has acknowledged: even if the
        ConfigMap was lost or unreadable, generations never go backwards."""
        stored = self.current.generation if self.current is not None else 0
        return max(stored, self._highest_acked) + 1

    def committed(self, assignment: Assignment) -> None:
        """The proposal was written: it is now the generation to build on."""
        self.current = assignment
        if self._pending is not None and self._pending.layout == assignment.layout:
            self._pending = None

    def reset(self, stored: Assignment | None) -> None:
        """Someone else's write won (409): continue from what is stored."""
        self.current = stored

    def next_wakeup(self) -> float | None:
        """The monotonic time at which `observe` may decide differently with no new event: the end of the
        settle delay (or, once settled, of the wait for acknowledgements), or the end of a restarting
        member's grace."""
        times = [since + self.config.restart_grace for since in self._restarting_since.values()]
        if not self._zones_checked and self._zones_seen is not None:
            times.append(self._zones_since + self.config.settle)
        if self._held_since is not None:
            # Settled, waiting for acknowledgements: each one wakes the coordinator (a member Lease
            # event); this is the latest it waits without them.
            times.append(self._held_since + self.config.ack_wait)
        elif self._pending is not None:
            p = self._pending
            times.append(min(p.last_change + self.config.settle, p.first_change + self.config.max_delay))
        return min(times) if times else None


def _names(zones: object) -> list[str]:
    return list(zones) if isinstance(zones, Iterable) else []
