"""Moving zones between replicas without two writers: release first (rule 3), acquire second (rule 4).

Pure. `handoff()` says what a replica releases and gains when it sees a new assignment; `may_acquire()` says
whether it may start a gained zone yet; `zone_state()` names a zone's state for /shards.

The acknowledgement protocol these rules rely on (the ownership layer that uses them keeps it):
- A replica switches only to a newer generation (`assignment.is_successor`).
- On seeing generation g it stops every zone it runs but does not own in g (an in-flight write finishes or
  is cancelled), and only then writes `observed-generation: g` on its member lease. So a replica whose
  observed generation is h writes at most the zones it owns in h, and never acquires anything under an
  older generation again.
- A replica that runs no zones (just started) has nothing to release: it writes the generation it has read
  in the same request that creates or renews its lease, so a new or crash-looping replica never holds
  everyone else's handoffs up.

Rule 4 as stated ("the previous owner acknowledged g, or expired, or there was none") is not quite enough
when a replica lags more than one generation: in g-1 the zone's owner may still have been waiting for the
owner in g-2, who may still be writing. So `may_acquire` asks it of every peer: each has acknowledged g,
or has acknowledged g-1 and did not own the zone in g-1 (knowable only with the g-1 assignment in hand), or
has expired plus a margin on our own clock. When every other peer is up to date this is the plain rule.

Hearing from one peer, not all (issue 39). The coordinator, which watches every member Lease, publishes g
only once every member live on its clock has acknowledged g-1 and says so in g (`acknowledged`), naming
the members it dropped because their Lease lapsed with the renewTime it last saw (`departed`; see
sharding/publisher.py). With g-1 in hand and g vouching for it, only the zone's owner in g-1 can still be
writing it: every other live member wrote at most its own g-1 zones, and a lapsed one had stopped writing
(rule 5) and writes again only after renewing and reading the assignment afresh, which then names g or
later. So `peers_to_hear` names that owner alone, and `may_acquire` asks of it: acknowledged g, expired
plus the margin on our clock, or departed with its Lease still at the renewTime the coordinator saw (read
after we got g, so a renewal since would show) once the margin has run on our clock since we got g.
Without g-1 in hand (a new process, a skipped generation) or without the certificate, every member is
heard from, as before. Either way a peer that acknowledged a generation newer than ours says our view is
stale: nothing is acquired until the newer one arrives.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from shardsync.sharding.assignment import Assignment
from shardsync.sharding.membership import MemberStatus
from shardsync.sharding.states import MemberState, ZoneState


@dataclass(frozen=True, slots=True)
class Handoff:
    """What one replica does on a new assignment: stop `release`, then start `gain` (each when allowed),
    and go on with `keep`."""

    release: frozenset[str]
    gain: frozenset[str]
    keep: frozenset[str]


def handoff(identity: str, new: Assignment, zones: Iterable[str], running: Iterable[str]) -> Handoff:
    """Split `zones` for `identity` under `new`, given the zones it runs now (`running`: active or pending).

    Starting from what actually runs rather than from the previous assignment also covers a first start
    (nothing runs), skipped generations and zones dropped after a refused (fenced) write. For a pure
    assignment-to-assignment diff pass `running=previous.zones_of(identity, zones)`.
    """
    owned = new.zones_of(identity, zones)
    now_running = set(running)
    return Handoff(
        release=frozenset(now_running - owned),
        gain=frozenset(owned - now_running),
        keep=frozenset(owned & now_running),
    )


@dataclass(frozen=True, slots=True)
class AcquireVerdict:
    allowed: bool
    waiting_for: tuple[str, ...]  # peers that have neither acknowledged nor expired
    reason: str
    retry_at: float | None = None  # when the first of them expires on our clock if nothing changes


def vouched(new: Assignment, previous: Assignment | None) -> bool:
    """Whether `new` vouches that every member but the previous owners was out of the way of its zones:
    `previous` is generation g-1 itself and `new` says every live member had acknowledged it."""
    return (
        previous is not None
        and previous.generation == new.generation - 1
        and new.acknowledged >= max(1, previous.generation)
    )


def peers_to_hear(
    zones: Iterable[str], identity: str, new: Assignment, previous: Assignment | None
) -> frozenset[str] | None:
    """The peers `identity` must hear from before it starts `zones` under `new` (rule 4): their owners in
    `previous` when `new` vouches for everyone else; None when it must hear from every member."""
    if not vouched(new, previous):
        return None
    assert previous is not None
    owners = {previous.owner_of(zone) for zone in zones}
    return frozenset(owner for owner in owners if owner is not None and owner != identity)


def departed_at(peer: MemberStatus, new: Assignment, received_at: float, margin: float) -> float:
    """When `peer` counts as gone because `new` names it departed and its Lease, as read after `new` was
    received at `received_at`, still says what the coordinator saw: `margin` after `received_at` (the
    coordinator judged it lapsed before publishing). Infinity when that does not apply."""
    seen = new.departed.get(peer.identity)
    if seen is None or seen != (peer.renew_time or ""):
        return math.inf
    return received_at + margin


def peer_may_write(
    peer: MemberStatus,
    zone: str,
    new: Assignment,
    previous: Assignment | None,
    margin: float,
    now: float = -math.inf,
    received_at: float = math.inf,
    silence: bool = True,
) -> bool:
    """Whether `peer` might still be writing `zone` as far as the generation-`new` owner can tell at `now`,
    having received `new` at `received_at` (both on its monotonic clock; the defaults leave `departed`
    out of account). Without `silence`, only what the peer said counts (its acknowledgement), never what
    its silence suggests (expiry, departed): that needs a view fresher than `new`, an acknowledgement
    does not (it is never taken back)."""
    if silence and (peer.expired(margin) or now >= departed_at(peer, new, received_at, margin)):
        return False
    acked = peer.observed_generation
    if acked is not None and acked >= new.generation:
        return False
    # Acknowledged g-1: it writes at most what it owned in g-1, so only that owner can be writing the zone.
    released_for_previous = (
        acked is not None
        and acked == new.generation - 1
        and previous is not None
        and previous.generation == acked
        and previous.owner_of(zone) != peer.identity
    )
    return not released_for_previous


def may_acquire(
    zone: str,
    identity: str,
    new: Assignment,
    previous: Assignment | None,
    peers: Mapping[str, MemberStatus],
    margin: float,
    *,
    now: float = -math.inf,
    received_at: float = math.inf,
    silence: bool = True,
) -> AcquireVerdict:
    """Rule 4: may `identity`, which owns `zone` in `new`, start it now?

    `previous` is the assignment this replica held before `new` (used only when it is generation g-1;
    otherwise every live peer must have acknowledged g). `peers` are the member statuses from this
    replica's own LivenessTracker, judged at the time its view was last known current
    (`MemberStatus.as_of`), so a stale view never expires anyone; they must hold every peer
    `peers_to_hear` names (or every member, when it names none), read after `new` was received at
    `received_at`. A member whose lease is gone is not a peer (it deletes its lease only after releasing),
    and neither is this replica's own earlier incarnation (a StatefulSet runs one pod per name, so a
    restarted replica takes its parked zones back at once). `margin` is added to a silent peer's lease
    duration before it counts as gone; with the self-fencing margin it absorbs clock-rate differences
    between replicas. `now` is this replica's monotonic clock (a departed peer's margin runs on it).
    Without `silence` (a view not yet known fresher than `new`) only an acknowledgement clears a peer,
    and only the one previous owner a vouched `new` names can be heard from that way (a member missing
    from such a view may simply not have been read yet).
    """
    if new.owner_of(zone) != identity:
        return AcquireVerdict(False, (), f"{zone} is not owned by {identity} in generation {new.generation}")
    ahead = tuple(
        peer_id
        for peer_id, peer in sorted(peers.items())
        if peer_id != identity and (peer.observed_generation or 0) > new.generation
    )
    if ahead:
        return AcquireVerdict(
            False,
            ahead,
            f"{', '.join(ahead)} acknowledged a generation after {new.generation}: ours is old",
        )
    if vouched(new, previous):
        assert previous is not None
        owner = previous.owner_of(zone)
        if owner is None or owner == identity or (owner not in peers and silence):
            candidates = []  # nobody else owned it, or its Lease is gone (read after we got `new`)
        elif owner in peers:
            candidates = [peers[owner]]
        else:  # not read yet: absence says nothing until the view is fresh
            return AcquireVerdict(False, (owner,), f"waiting to read the lease of {owner}")
    elif not silence:
        # Every member must be heard from, and a member missing from a stale view may be one still writing.
        return AcquireVerdict(False, (), f"waiting for a member view fresher than {new.generation}")
    else:
        candidates = [peer for peer_id, peer in sorted(peers.items()) if peer_id != identity]
    blockers = [
        peer
        for peer in candidates
        if peer_may_write(peer, zone, new, previous, margin, now, received_at, silence)
    ]
    if not blockers:
        return AcquireVerdict(True, (), "every other member has released it or expired")
    names = tuple(peer.identity for peer in blockers)
    retry_at = min(min(p.expires_at(margin), departed_at(p, new, received_at, margin)) for p in blockers)
    return AcquireVerdict(
        False,
        names,
        f"waiting for {', '.join(names)} to acknowledge generation {new.generation} or expire",
        retry_at if silence else None,
    )


def zone_state(
    owner: str | None, owner_status: MemberStatus | None, generation: int, acquired: bool | None = None
) -> ZoneState:
    """The state of a zone owned by `owner` in `generation`, for /shards.

    `acquired` is given by the owner itself, which knows whether it runs the zone: a zone it runs is
    active whatever its view of the member Leases says (that view can be empty for a moment, as when it
    stops following every member and its roster has not been listed yet); other replicas judge from the
    owner's acknowledgement (acknowledged → active, an approximation: it may still wait on a previous
    owner).
    """
    if acquired:
        return ZoneState.ACTIVE
    if owner is None or owner_status is None:
        return ZoneState.ORPHANED
    if owner_status.state is MemberState.RESTARTING:
        return ZoneState.PARKED
    if owner_status.state is MemberState.EXPIRED:
        return ZoneState.ORPHANED
    if acquired is not None:
        return ZoneState.PENDING
    acked = owner_status.observed_generation
    return ZoneState.ACTIVE if acked is not None and acked >= generation else ZoneState.PENDING
