"""Rules 3 and 4: release first, acquire only once every peer that might still write the zone has
acknowledged the new generation or expired (plus a margin) on our own clock."""

from __future__ import annotations

import math
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from shardsync.sharding.assignment import Assignment, Member
from shardsync.sharding.clock import FakeClock
from shardsync.sharding.handoff import (
    handoff,
    may_acquire,
    peer_may_write,
    peers_to_hear,
    vouched,
    zone_state,
)
from shardsync.sharding.membership import LivenessTracker, MemberLease, MemberStatus
from shardsync.sharding.states import MemberState, ZoneState

from .helpers import status

ZONES = [f"zone-{i}.example.org" for i in range(400)]
G1 = Assignment(1, (Member("a"), Member("b")))
G2 = Assignment(2, (Member("a"), Member("b"), Member("c")))


def moved_to_c() -> str:
    """A zone that "a" owned in generation 1 and "c" owns in generation 2."""
    return next(z for z in ZONES if G1.owner_of(z) == "a" and G2.owner_of(z) == "c")


def test_handoff_releases_what_is_no_longer_owned_and_gains_the_rest() -> None:
    a_before = G1.zones_of("a", ZONES)
    h = handoff("a", G2, ZONES, running=a_before)
    assert h.release == {z for z in a_before if G2.owner_of(z) == "c"}
    assert h.release and not h.gain  # a new member only takes zones away
    assert h.keep == G2.zones_of("a", ZONES)
    c = handoff("c", G2, ZONES, running=())
    assert c.gain == G2.zones_of("c", ZONES) and not c.release and not c.keep


def test_handoff_starts_from_what_runs_not_from_the_previous_assignment() -> None:
    # A zone dropped after a refused (fenced) write is simply gained again; a zone running by mistake goes.
    owned = G2.zones_of("a", ZONES)
    dropped = next(iter(owned))
    stray = next(z for z in ZONES if G2.owner_of(z) != "a")
    h = handoff("a", G2, ZONES, running=(owned - {dropped}) | {stray})
    assert h.gain == {dropped} and h.release == {stray}


def test_acquire_once_the_previous_owner_acknowledged() -> None:
    zone = moved_to_c()
    peers = {"a": status("a", acked=1), "b": status("b", acked=2), "c": status("c", acked=2)}
    verdict = may_acquire(zone, "c", G2, G1, peers, margin=2)
    assert not verdict.allowed and verdict.waiting_for == ("a",)
    assert verdict.retry_at == peers["a"].expires_at(2)
    peers["a"] = status("a", acked=2)
    assert may_acquire(zone, "c", G2, G1, peers, margin=2).allowed


def test_acquire_once_the_silent_previous_owner_expired_plus_a_margin_on_our_clock() -> None:
    clock = FakeClock()
    zone = moved_to_c()
    tracker = LivenessTracker()
    tracker.mark_synced(math.inf)  # our view is current throughout
    lease = MemberLease.new("dns", "a", clock.now(), lease_duration=15)
    tracker.observe(replace(lease, observed_generation=1), clock.monotonic())
    tracker.observe(replace(lease, identity="b", holder="b", observed_generation=2), clock.monotonic())
    clock.advance(15)  # "a" went silent at t=0; "b" keeps renewing
    tracker.observe(replace(lease, identity="b", holder="b", observed_generation=2, renew_time="x"), 1015.0)
    peers = tracker.statuses(clock.monotonic())
    assert peers["a"].state is MemberState.EXPIRED  # not live any more ...
    assert not may_acquire(zone, "c", G2, G1, peers, margin=2).allowed  # ... but not surely gone yet
    clock.advance(2)
    assert may_acquire(zone, "c", G2, G1, tracker.statuses(clock.monotonic()), margin=2).allowed


def test_a_released_lease_does_not_hold_anyone_up() -> None:
    zone = moved_to_c()
    peers = {"a": status("a", acked=1, held=False), "b": status("b", acked=2)}
    assert may_acquire(zone, "c", G2, G1, peers, margin=2).allowed


def test_a_peer_that_acknowledged_the_previous_generation_blocks_only_its_own_zones() -> None:
    zone = moved_to_c()
    # "b" has acknowledged 1 but not yet 2: it did not own the zone in 1, so it cannot be writing it.
    peers = {"a": status("a", acked=2), "b": status("b", acked=1)}
    assert may_acquire(zone, "c", G2, G1, peers, margin=2).allowed


def test_a_peer_lagging_two_generations_blocks_everything() -> None:
    # In generation 1 the zone's owner may itself have been waiting for the owner in generation 0.
    zone = moved_to_c()
    peers = {"a": status("a", acked=2), "b": status("b", acked=0), "x": status("x", acked=None)}
    verdict = may_acquire(zone, "c", G2, G1, peers, margin=2)
    assert not verdict.allowed and verdict.waiting_for == ("b", "x")


def test_without_the_previous_assignment_every_live_peer_must_acknowledge() -> None:
    zone = moved_to_c()
    peers = {"a": status("a", acked=2), "b": status("b", acked=1)}
    assert not may_acquire(zone, "c", G2, None, peers, margin=2).allowed
    skipped = Assignment(0, ())
    assert not may_acquire(zone, "c", G2, skipped, peers, margin=2).allowed
    peers["b"] = status("b", acked=2)
    assert may_acquire(zone, "c", G2, None, peers, margin=2).allowed


# --- hearing from the previous owner alone, when the generation vouches for the rest (issue 39) ----------

G2_VOUCHED = replace(G2, acknowledged=1)


def test_only_the_previous_owners_are_heard_from_when_the_generation_vouches_for_the_rest() -> None:
    mine = G2.zones_of("c", ZONES)
    heard = peers_to_hear(mine, "c", G2_VOUCHED, G1)
    assert heard is not None and heard == frozenset(str(G1.owner_of(z)) for z in mine) <= {"a", "b"}
    kept = G2.zones_of("a", ZONES) & G1.zones_of("a", ZONES)
    assert peers_to_hear(kept, "a", G2_VOUCHED, G1) == frozenset()  # its own earlier zones: nobody
    # Everyone must be heard from without g-1 in hand, or without the certificate.
    assert peers_to_hear(mine, "c", G2_VOUCHED, None) is None
    assert peers_to_hear(mine, "c", G2_VOUCHED, Assignment(0, ())) is None
    assert peers_to_hear(mine, "c", G2, G1) is None
    assert not vouched(replace(Assignment(1, (Member("a"),)), acknowledged=0), Assignment(0, ()))


def test_a_vouched_generation_waits_for_the_previous_owner_alone() -> None:
    zone = moved_to_c()
    # "b" lags two generations: under a vouched generation it was live and acknowledged 1 when the
    # coordinator wrote 2, so this status is an old reading of it, and it cannot be writing a's zone.
    peers = {"a": status("a", acked=1), "b": status("b", acked=0)}
    verdict = may_acquire(zone, "c", G2_VOUCHED, G1, peers, margin=2)
    assert not verdict.allowed and verdict.waiting_for == ("a",)
    assert verdict.retry_at == peers["a"].expires_at(2)
    peers["a"] = status("a", acked=2)
    assert may_acquire(zone, "c", G2_VOUCHED, G1, peers, margin=2).allowed
    assert may_acquire(zone, "c", G2_VOUCHED, G1, {"b": status("b", acked=0)}, margin=2).allowed  # a is gone


def test_a_departed_owner_whose_lease_is_unchanged_is_gone_a_margin_after_we_got_the_view() -> None:
    zone = moved_to_c()
    stamp = "2026-01-01T00:00:01.000000Z"
    g2 = replace(G2, members=(Member("b"), Member("c")), acknowledged=1, departed={"a": stamp})
    owner_now = g2.owner_of(zone)
    assert owner_now is not None
    # Read after we got g2 at t=1000: "a" looks live to us (we have just started following it) ...
    peers = {"a": status("a", acked=1, last_change=1000.0, renew_time=stamp)}
    verdict = may_acquire(zone, owner_now, g2, G1, peers, margin=2, now=1000.5, received_at=1000.0)
    assert not verdict.allowed and verdict.retry_at == 1002.0
    # ... but its Lease still says what the coordinator saw when it judged it lapsed: gone once the
    # margin has run on our clock.
    assert may_acquire(zone, owner_now, g2, G1, peers, margin=2, now=1002.0, received_at=1000.0).allowed
    # It renewed since: it is live, and may have read the previous generation; wait for it as for anyone.
    renewed = {"a": status("a", acked=1, last_change=1000.0, renew_time="2026-01-01T00:00:04.000000Z")}
    verdict = may_acquire(zone, owner_now, g2, G1, renewed, margin=2, now=1002.0, received_at=1000.0)
    assert not verdict.allowed and verdict.retry_at == renewed["a"].expires_at(2)
    # Without `now` and `received_at`, departed is not taken into account; nor, on a view not yet known
    # fresher than the assignment (`silence=False`), is any silence: only an acknowledgement counts.
    assert not may_acquire(zone, owner_now, g2, G1, peers, margin=2).allowed
    stale = may_acquire(zone, owner_now, g2, G1, peers, margin=2, now=1e9, received_at=0.0, silence=False)
    assert not stale.allowed and stale.retry_at is None
    acked = {"a": status("a", acked=2, last_change=1000.0, renew_time=stamp)}
    assert may_acquire(zone, owner_now, g2, G1, acked, margin=2, silence=False).allowed
    # A previous owner not read yet is no previous owner gone, on a stale view.
    unread = may_acquire(zone, owner_now, g2, G1, {}, margin=2, silence=False)
    assert not unread.allowed and unread.waiting_for == ("a",) and unread.retry_at is None
    assert may_acquire(zone, owner_now, g2, G1, {}, margin=2).allowed  # on a fresh view: its Lease is gone


def test_without_a_vouched_generation_a_stale_view_clears_nobody() -> None:
    # Every member must be heard from: one missing from a stale view may be one still writing.
    zone = moved_to_c()
    everyone = {"a": status("a", acked=2), "b": status("b", acked=2)}
    assert may_acquire(zone, "c", G2, G1, everyone, margin=2).allowed
    stale = may_acquire(zone, "c", G2, G1, everyone, margin=2, silence=False)
    assert not stale.allowed and "fresher" in stale.reason


def test_a_peer_that_acknowledged_a_newer_generation_says_our_view_is_stale() -> None:
    zone = moved_to_c()
    peers = {"a": status("a", acked=3), "b": status("b", acked=2)}
    for new in (G2, G2_VOUCHED):
        verdict = may_acquire(zone, "c", new, G1, peers, margin=2)
        assert not verdict.allowed and verdict.waiting_for == ("a",) and verdict.retry_at is None
        assert "ours is old" in verdict.reason


def test_a_zone_that_had_no_owner_is_acquired_at_once() -> None:
    first = Assignment(1, (Member("a"),))
    empty = Assignment(0, ())
    peers = {"a": status("a", acked=0), "b": status("b", acked=0)}
    assert may_acquire(ZONES[0], "a", first, empty, peers, margin=2).allowed


def test_nobody_acquires_a_zone_it_does_not_own() -> None:
    zone = moved_to_c()
    verdict = may_acquire(zone, "a", G2, G1, {}, margin=2)
    assert not verdict.allowed and "not owned by a" in verdict.reason


def test_zone_states() -> None:
    assert zone_state(None, None, 2) is ZoneState.ORPHANED
    assert zone_state("a", None, 2) is ZoneState.ORPHANED
    assert zone_state("a", status("a", MemberState.EXPIRED), 2) is ZoneState.ORPHANED
    assert zone_state("a", status("a", MemberState.RESTARTING), 2) is ZoneState.PARKED
    assert zone_state("a", status("a", acked=2), 2) is ZoneState.ACTIVE
    assert zone_state("a", status("a", acked=1), 2) is ZoneState.PENDING
    assert zone_state("a", status("a", MemberState.DRAINING, acked=2), 2) is ZoneState.ACTIVE
    assert zone_state("a", status("a", acked=1), 2, acquired=True) is ZoneState.ACTIVE
    # the owner runs it: active, even while its own view of the member Leases is empty or stale
    assert zone_state("a", None, 2, acquired=True) is ZoneState.ACTIVE
    assert zone_state("a", status("a", MemberState.EXPIRED), 2, acquired=True) is ZoneState.ACTIVE
    assert zone_state("a", status("a", acked=2), 2, acquired=False) is ZoneState.PENDING
    assert zone_state("a", status("a", MemberState.RESTARTING), 2, acquired=False) is ZoneState.PARKED
    assert zone_state("a", status("a", acked=2), 2, acquired=False) is ZoneState.PENDING


# --- property: whoever may acquire, the zone's previous owner has acknowledged or expired ----------------

IDS = ["a", "b", "c", "d", "e"]


@st.composite
def handoff_case(draw: st.DrawFn) -> tuple[Assignment, Assignment, dict[str, MemberStatus], float]:
    def assignment(generation: int) -> Assignment:
        ids = draw(st.sets(st.sampled_from(IDS), max_size=5))
        return Assignment(generation, tuple(Member(i, draw(st.integers(1, 3))) for i in sorted(ids)))

    g = draw(st.integers(1, 6))
    previous, new = assignment(g - 1), assignment(g)
    now = 1000.0
    peers: dict[str, MemberStatus] = {}
    for identity in draw(st.sets(st.sampled_from(IDS))):
        peers[identity] = status(
            identity,
            weight=1,
            acked=draw(st.one_of(st.none(), st.integers(0, g + 1))),
            last_change=now - draw(st.floats(0, 40)),
            as_of=now,
            held=draw(st.booleans()),
        )
    return previous, new, peers, draw(st.floats(0, 5))


@settings(max_examples=300, deadline=None)
@given(handoff_case(), st.sampled_from(ZONES[:50]))
def test_acquiring_never_overlaps_a_previous_owner_that_neither_acked_nor_expired(
    case: tuple[Assignment, Assignment, dict[str, MemberStatus], float], zone: str
) -> None:
    previous, new, peers, margin = case
    owner = new.owner_of(zone)
    if owner is None:
        return
    verdict = may_acquire(zone, owner, new, previous, peers, margin)
    if not verdict.allowed:
        assert verdict.waiting_for
        return
    prev_owner = previous.owner_of(zone)
    if prev_owner is not None and prev_owner != owner and prev_owner in peers:
        p = peers[prev_owner]
        acked = p.observed_generation
        assert p.expired(margin) or (acked is not None and acked >= new.generation)
    # And no peer lagging more than one generation behind is still live.
    for identity, peer in peers.items():
        if identity != owner and not peer.expired(margin):
            acked = peer.observed_generation
            assert acked is not None and acked >= new.generation - 1
            assert not peer_may_write(peer, zone, new, previous, margin)


@settings(max_examples=300, deadline=None)
@given(handoff_case(), st.sampled_from(ZONES[:50]))
def test_under_a_vouched_generation_acquiring_never_overlaps_the_previous_owner(
    case: tuple[Assignment, Assignment, dict[str, MemberStatus], float], zone: str
) -> None:
    previous, new, peers, margin = case
    if previous.generation < 1:
        return
    new = replace(new, acknowledged=previous.generation)
    owner = new.owner_of(zone)
    if owner is None:
        return
    heard = peers_to_hear([zone], owner, new, previous)
    assert heard is not None and heard <= {previous.owner_of(zone)} - {None}
    verdict = may_acquire(zone, owner, new, previous, peers, margin)
    if not verdict.allowed:
        assert verdict.waiting_for
        return
    for identity in heard:
        if identity in peers:
            p = peers[identity]
            assert p.expired(margin) or (p.observed_generation or 0) >= new.generation
    assert all((p.observed_generation or 0) <= new.generation for i, p in peers.items() if i != owner)
