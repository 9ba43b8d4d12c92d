"""The assignment document (validated, corrupt ones rejected, pins) and the Publisher's rules 2, 6 and 7,
timed on a FakeClock."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import datetime
from typing import Any

import orjson
import pytest

from shardsync.sharding.assignment import (
    CONFIGMAP_KEY,
    Assignment,
    CorruptAssignment,
    Member,
    is_successor,
    validate_pins,
)
from shardsync.sharding.balance import rebalance
from shardsync.sharding.clock import FakeClock
from shardsync.sharding.publisher import Publisher, PublisherConfig
from shardsync.sharding.ring import Ring, RingParams
from shardsync.sharding.states import MemberState

from .helpers import ready, status, up_to_date

ZONES = [f"zone-{i}.example.org" for i in range(2000)]


def sample(**changes: Any) -> Assignment:
    base = Assignment(
        generation=4,
        members=(Member("b", 2), Member("a", 1)),
        ring=RingParams("md5", 160),
        pins={"Pinned.Example.ORG.": "a"},
        created_at="2026-01-01T00:00:00Z",
        coordinator="a",
    )
    return replace(base, **changes)


# --- the document -----------------------------------------------------------------------------------------


def test_round_trip_through_configmap_data() -> None:
    a = sample()
    data = a.to_configmap_data()
    assert list(data) == [CONFIGMAP_KEY]
    doc = orjson.loads(data[CONFIGMAP_KEY])
    assert doc["members"] == [{"identity": "a", "weight": 1}, {"identity": "b", "weight": 2}]
    assert doc["pins"] == {"pinned.example.org": "a"}
    assert doc["ring"] == {"hash": "md5", "vnodes": 160}
    back = Assignment.from_configmap_data(data)
    assert back == a
    assert [back.owner_of(z) for z in ZONES] == [a.owner_of(z) for z in ZONES]


def test_what_the_coordinator_vouches_for_round_trips_and_is_left_out_when_empty() -> None:
    stamp = "2026-01-01T00:00:09.000000Z"
    vouched = sample(acknowledged=3, departed={"c": stamp})
    doc = orjson.loads(vouched.to_configmap_data()[CONFIGMAP_KEY])
    assert doc["acknowledged"] == 3 and doc["departed"] == {"c": stamp}
    assert doc["version"] == 1  # no new version: builds that do not know the fields read the same owners
    assert Assignment.from_configmap_data(vouched.to_configmap_data()) == vouched
    assert vouched.layout == sample().layout
    plain = orjson.loads(sample().to_configmap_data()[CONFIGMAP_KEY])
    assert "acknowledged" not in plain and "departed" not in plain
    assert Assignment.from_document(plain).acknowledged == 0 and not Assignment.from_document(plain).departed


def test_configmap_object_carries_labels_and_the_precondition() -> None:
    obj = sample().to_configmap("dns", resource_version="99")
    assert obj["metadata"] == {
        "name": "dns-assignment",
        "labels": {"app.kubernetes.io/name": "shardsync", "app.kubernetes.io/instance": "dns"},
        "resourceVersion": "99",
    }
    assert "resourceVersion" not in sample().to_configmap("dns")["metadata"]


def good_doc() -> dict[str, Any]:
    return dict(orjson.loads(sample().to_configmap_data()[CONFIGMAP_KEY]))


def corrupt(**changes: Any) -> dict[str, str]:
    doc = good_doc()
    for key, value in changes.items():
        if value is ...:
            del doc[key]
        else:
            doc[key] = value
    return {CONFIGMAP_KEY: orjson.dumps(doc).decode()}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (None, "no 'assignment.json' key"),
        ({}, "no 'assignment.json' key"),
        ({CONFIGMAP_KEY: "{not json"}, "is not JSON"),
        ({CONFIGMAP_KEY: "[1, 2]"}, "not a JSON object"),
        (corrupt(version=4), "unsupported assignment version"),
        (corrupt(version=3, slots=[0, 1]), "'overrides' must be dict"),
        (corrupt(version=3, slots=[0, 1], overrides={"x.org": 2}), "names no member"),
        (corrupt(version=3, slots=[0, 1], overrides={"x.org": True}), "names no member"),
        (corrupt(version=3, slots=[0, 1], overrides={".": 0}), "not a zone name"),
        (corrupt(version="2"), "unsupported assignment version"),
        (corrupt(version=2, slots=[0, 1, 0]), "power of two"),
        (corrupt(version=2, slots=[0, 99]), r"slots\[1\] = 99 names no member"),
        (corrupt(version=2, slots=[0, True]), "names no member"),
        (corrupt(generation=...), "'generation' must be int"),
        (corrupt(generation="5"), "'generation' must be int"),
        (corrupt(generation=True), "'generation' must be int"),
        (corrupt(generation=0), "at least 1"),
        (corrupt(ring={"hash": "crc32", "vnodes": 160}), "unknown ring hash"),
        (corrupt(ring={"hash": "md5", "vnodes": -1}), "vnodes must be between"),
        (corrupt(ring={"hash": "md5"}), "'vnodes' must be int"),
        (corrupt(members={"a": 1}), "'members' must be list"),
        (corrupt(members=["a"]), r"members\[0\] is not an object"),
        (corrupt(members=[{"identity": "", "weight": 1}]), "empty identity"),
        (corrupt(members=[{"identity": "a", "weight": 0}]), "weight must be between"),
        (corrupt(members=[{"identity": "a", "weight": 1.5}]), "'weight' must be int"),
        (corrupt(members=[{"identity": "a", "weight": 1}, {"identity": "a", "weight": 1}]), "duplicate"),
        (corrupt(pins=["a"]), "'pins' must be dict"),
        (corrupt(pins={"x.org": ""}), "names no member"),
        (corrupt(pins={"x.org": 3}), "names no member"),
        (corrupt(pins={".": "a"}), "not a zone name"),
        (corrupt(createdAt=...), "'createdAt' must be str"),
        (corrupt(acknowledged=4), "not below generation 4"),
        (corrupt(acknowledged=-1), "not below generation"),
        (corrupt(acknowledged="3"), "acknowledged must be an integer"),
        (corrupt(acknowledged=True), "acknowledged must be an integer"),
        (corrupt(departed=["c"]), "'departed' must be dict"),
        (corrupt(departed={"c": 5}), "is not a member's renewTime"),
        (corrupt(departed={"a": "2026-01-01T00:00:00.000000Z"}), "a is still a member"),
    ],
)
def test_corrupt_assignments_are_rejected_with_a_clear_error(
    data: dict[str, str] | None, message: str
) -> None:
    with pytest.raises(CorruptAssignment, match=message):
        Assignment.from_configmap_data(data)


def test_owner_of_follows_the_ring_of_the_members() -> None:
    a = sample(pins={})
    ring = Ring({"a": 1, "b": 2})
    assert all(a.owner_of(z) == ring.owner_of(z) for z in ZONES)
    assert a.zones_of("a", ZONES) == {z for z in ZONES if ring.owner_of(z) == "a"}


def test_zones_of_answers_for_the_zones_asked_each_time() -> None:
    a = sample(pins={})
    ring = Ring({"a": 1, "b": 2})
    owned = a.zones_of("a", ZONES)
    owned.clear()  # the caller's own set: the next answer is whole
    assert a.zones_of("a", set(ZONES)) == {z for z in ZONES if ring.owner_of(z) == "a"}
    fewer = ZONES[: len(ZONES) // 2]
    assert a.zones_of("a", fewer) == {z for z in fewer if ring.owner_of(z) == "a"}
    assert a.zones_of("b", fewer) == {z for z in fewer if ring.owner_of(z) == "b"}
    assert a.zones_of("a", ZONES) == {z for z in ZONES if ring.owner_of(z) == "a"}


def test_a_pin_wins_over_the_ring() -> None:
    a = sample()
    assert a.owner_of("pinned.example.org") == "a"
    assert a.owner_of("PINNED.example.org.") == "a"
    e = a.explain("pinned.example.org")
    assert e.owner == "a" and e.pin_effective and e.reason == "pinned to a"
    assert a.pin_problems() == []


def test_a_pin_to_an_absent_member_is_reported_and_the_ring_owner_serves_the_zone() -> None:
    a = sample(pins={"pinned.example.org": "gone"})
    ring_owner = Ring({"a": 1, "b": 2}).owner_of("pinned.example.org")
    assert a.owner_of("pinned.example.org") == ring_owner
    assert a.pin_problems() == [
        "zone pinned.example.org is pinned to gone, which is not a member; its ring owner serves it"
    ]
    e = a.explain("pinned.example.org")
    assert e.pinned_to == "gone" and not e.pin_effective and e.owner == ring_owner
    assert e.reason.startswith("pinned to gone, which is not a member: ring owner used")
    # The pin stays in the document: it takes effect again when its member comes back.
    back = Assignment.from_configmap_data(a.to_configmap_data())
    assert back.with_members([Member("a"), Member("gone")]).owner_of("pinned.example.org") == "gone"


def test_explain_names_the_ring_point_and_weight() -> None:
    e = sample(pins={}).explain("zone-1.example.org")
    assert e.placement is not None and e.owner == e.placement.owner
    assert f"belongs to {e.owner} (weight {e.placement.weight}" in e.reason
    assert Assignment(1, ()).explain("x.org").reason == "no members: nobody owns it"


def test_what_if_more_replicas_moves_only_to_the_new_ones() -> None:
    three = Assignment(5, (Member("r-0"), Member("r-1"), Member("r-2")))
    four = three.with_members([*three.members, Member("r-3")])
    moves = three.moved(four, ZONES)
    assert {m.after for m in moves} == {"r-3"}
    assert 0.2 <= len(moves) / len(ZONES) <= 0.3


def test_only_a_newer_generation_replaces_the_current_one() -> None:
    assert is_successor(None, sample())
    assert is_successor(sample(generation=3), sample(generation=4))
    assert not is_successor(sample(generation=4), sample(generation=4))
    assert not is_successor(sample(generation=5), sample(generation=4))


def test_validate_pins() -> None:
    valid, problems = validate_pins({"A.org.": "x", "": "y", "b.org": ""})
    assert valid == {"a.org": "x"}
    assert len(problems) == 2


# --- the Publisher: rule 2 (publish on change, after settling) ----------------------------------------------


def observe(
    pub: Publisher, members: dict[str, Any], pins: dict[str, str], now: float, wall: datetime
) -> Assignment | None:
    """`pub.observe` with every member having acknowledged the stored generation, as members do once they
    have released what it took from them (the publisher holds a generation back until they have)."""
    return pub.observe(up_to_date(members, pub.current.generation if pub.current else None), pins, now, wall)


def test_first_generation_after_the_settle_delay() -> None:
    clock = FakeClock()
    pub = Publisher("a", PublisherConfig(settle=2.0))
    members = ready("a", "b", "c", now=clock.monotonic())
    assert observe(pub, members, {}, clock.monotonic(), clock.now()) is None
    assert pub.next_wakeup() == clock.monotonic() + 2
    clock.advance(1.9)
    assert observe(pub, members, {}, clock.monotonic(), clock.now()) is None
    clock.advance(0.1)
    proposal = observe(pub, members, {}, clock.monotonic(), clock.now())
    assert proposal is not None
    assert proposal.generation == 1
    assert [m.identity for m in proposal.members] == ["a", "b", "c"]
    assert proposal.coordinator == "a"
    assert proposal.created_at == "2026-01-01T00:00:02Z"
    pub.committed(proposal)
    clock.advance(60)
    assert observe(pub, members, {}, clock.monotonic(), clock.now()) is None
    assert pub.next_wakeup() is None


def publish(
    pub: Publisher, clock: FakeClock, members: dict[str, Any], pins: dict[str, str] | None = None
) -> Assignment:
    """Observe until the publisher proposes (bounded), then commit it."""
    for _ in range(100):
        proposal = observe(pub, members, pins or {}, clock.monotonic(), clock.now())
        if proposal is not None:
            pub.committed(proposal)
            return proposal
        clock.advance(0.5)
    raise AssertionError("nothing published within 50 s")


def test_a_burst_of_joins_makes_one_generation() -> None:
    clock = FakeClock()
    pub = Publisher("a")
    first = publish(pub, clock, ready("a", "b", "c"))
    t0 = clock.monotonic()
    assert observe(pub, ready("a", "b", "c", "d"), {}, t0, clock.now()) is None
    clock.advance(1.5)
    assert observe(pub, ready("a", "b", "c", "d", "e"), {}, clock.monotonic(), clock.now()) is None
    clock.advance(1.9)  # 3.4 s after the first join, 1.9 s after the last: still settling
    assert observe(pub, ready("a", "b", "c", "d", "e"), {}, clock.monotonic(), clock.now()) is None
    clock.advance(0.1)
    proposal = observe(pub, ready("a", "b", "c", "d", "e"), {}, clock.monotonic(), clock.now())
    assert proposal is not None and proposal.generation == first.generation + 1
    assert {m.identity for m in proposal.members} == {"a", "b", "c", "d", "e"}


def test_endless_churn_is_published_by_max_delay() -> None:
    clock = FakeClock()
    pub = Publisher("a", PublisherConfig(settle=2.0, max_delay=10.0))
    publish(pub, clock, ready("a"))
    t0 = clock.monotonic()
    for i in range(30):
        proposal = observe(
            pub, ready("a", *(f"n{j}" for j in range(i + 1))), {}, clock.monotonic(), clock.now()
        )
        if proposal is not None:
            break
        clock.advance(1.5)
    assert proposal is not None
    assert clock.monotonic() - t0 == pytest.approx(10.5)


def test_a_crash_is_published_without_the_settle_delay() -> None:
    # A crashed member's zones run nowhere until the next generation: no batching for an expiry.
    clock = FakeClock()
    pub = Publisher("a", PublisherConfig(settle=2.0))
    g1 = publish(pub, clock, ready("a", "b"))
    crashed = {**ready("a"), "b": status("b", MemberState.EXPIRED)}
    g2 = observe(pub, crashed, {}, clock.monotonic(), clock.now())
    assert g2 is not None and g2.generation == g1.generation + 1 and g2.identities == {"a"}


def test_a_change_that_reverts_within_the_settle_delay_publishes_nothing() -> None:
    clock = FakeClock()
    pub = Publisher("a")
    publish(pub, clock, ready("a", "b"))
    assert observe(pub, ready("a"), {}, clock.monotonic(), clock.now()) is None
    clock.advance(1)
    assert observe(pub, ready("a", "b"), {}, clock.monotonic(), clock.now()) is None
    clock.advance(30)
    assert observe(pub, ready("a", "b"), {}, clock.monotonic(), clock.now()) is None


def test_weight_pin_and_ring_changes_publish_too() -> None:
    clock = FakeClock()
    pub = Publisher("a")
    g1 = publish(pub, clock, ready("a", "b"))
    heavier = {**ready("a"), "b": status("b", weight=3)}
    g2 = publish(pub, clock, heavier)
    assert g2.generation == g1.generation + 1 and dict((m.identity, m.weight) for m in g2.members)["b"] == 3
    g3 = publish(pub, clock, heavier, {"x.example.org": "a"})
    assert g3.generation == g2.generation + 1 and dict(g3.pins) == {"x.example.org": "a"}
    pub.config = replace(pub.config, ring=RingParams(vnodes=200))
    g4 = publish(pub, clock, heavier, {"x.example.org": "a"})
    assert g4.generation == g3.generation + 1 and g4.ring.vnodes == 200


def test_pins_to_absent_members_are_published_and_reported() -> None:
    clock = FakeClock()
    pub = Publisher("a")
    g = publish(pub, clock, ready("a", "b"), {"x.example.org": "nobody", "": "a"})
    assert dict(g.pins) == {"x.example.org": "nobody"}
    assert any("pinned to nobody" in p for p in pub.problems)
    assert any("not a zone name" in p for p in pub.problems)


# --- rule 2: what a generation vouches for ---------------------------------------------------------------


def test_a_generation_waits_until_every_live_member_acknowledged_the_stored_one() -> None:
    clock = FakeClock()
    pub = Publisher("a", PublisherConfig(settle=1.0, ack_wait=3.0))
    g1 = publish(pub, clock, ready("a", "b"))
    # c joins while b is still releasing what g1 took from it: g2 waits for b's acknowledgement.
    lagging = {**ready("a", "c", acked=g1.generation), "b": status("b", acked=g1.generation - 1)}
    assert pub.observe(lagging, {}, clock.monotonic(), clock.now()) is None
    clock.advance(1.0)
    held_at = clock.monotonic()
    assert pub.observe(lagging, {}, held_at, clock.now()) is None  # settled, but b has not acknowledged
    assert pub.next_wakeup() == held_at + 3.0
    clock.advance(0.2)
    g2 = pub.observe(ready("a", "b", "c", acked=g1.generation), {}, clock.monotonic(), clock.now())
    assert g2 is not None and g2.acknowledged == g1.generation and not g2.departed
    assert g2.identities == {"a", "b", "c"}


def test_a_member_that_never_acknowledges_holds_a_generation_back_at_most_ack_wait() -> None:
    clock = FakeClock()
    pub = Publisher("a", PublisherConfig(settle=1.0, ack_wait=3.0))
    g1 = publish(pub, clock, ready("a", "b"))
    stuck = {**ready("a", "c", acked=g1.generation), "b": status("b", acked=None)}
    assert pub.observe(stuck, {}, clock.monotonic(), clock.now()) is None
    clock.advance(1.0)
    assert pub.observe(stuck, {}, clock.monotonic(), clock.now()) is None
    clock.advance(2.9)
    assert pub.observe(stuck, {}, clock.monotonic(), clock.now()) is None
    clock.advance(0.1)
    g2 = pub.observe(stuck, {}, clock.monotonic(), clock.now())
    assert g2 is not None and g2.acknowledged == 0  # vouches for nothing: acquirers hear from everyone


def test_a_lapsed_member_does_not_hold_a_generation_back_and_is_named_departed() -> None:
    clock = FakeClock()
    pub = Publisher("a", PublisherConfig(settle=1.0))
    g1 = publish(pub, clock, ready("a", "b", "c", "d"))
    stamp = "2026-01-01T00:00:05.123456Z"
    members = {
        **ready("a", acked=g1.generation),
        "b": status("b", MemberState.EXPIRED, acked=g1.generation - 1, renew_time=stamp),
        "c": status("c", MemberState.DRAINING, acked=g1.generation),
    }  # d's lease is gone: it released everything before deleting it
    g2 = publish(pub, clock, members)
    assert g2.identities == {"a"} and g2.acknowledged == g1.generation
    assert dict(g2.departed) == {"b": stamp}  # c is live (it acknowledges), d has no lease


def test_a_crashed_member_is_published_at_once_with_what_its_lease_last_said() -> None:
    clock = FakeClock()
    pub = Publisher("a", PublisherConfig(settle=2.0))
    g1 = publish(pub, clock, ready("a", "b"))
    stamp = "2026-01-01T00:00:01.000000Z"
    crashed = {**ready("a", acked=g1.generation), "b": status("b", MemberState.EXPIRED, renew_time=stamp)}
    g2 = pub.observe(crashed, {}, clock.monotonic(), clock.now())
    assert g2 is not None and g2.departed == {"b": stamp} and g2.acknowledged == g1.generation


# --- rule 6: draining leaves at once, restarting is parked for a grace period ------------------------------


def test_expired_and_draining_members_are_dropped_after_settling() -> None:
    clock = FakeClock()
    pub = Publisher("a")
    g1 = publish(pub, clock, ready("a", "b", "c"))
    members = {**ready("a"), "b": status("b", MemberState.DRAINING), "c": status("c", MemberState.EXPIRED)}
    t0 = clock.monotonic()
    g2 = publish(pub, clock, members)
    assert clock.monotonic() - t0 == pytest.approx(2.0)
    assert g2.generation == g1.generation + 1 and [m.identity for m in g2.members] == ["a"]


def test_a_restarting_member_keeps_its_place_for_the_grace_period() -> None:
    clock = FakeClock()
    pub = Publisher("a", PublisherConfig(settle=2.0, restart_grace=30.0))
    g1 = publish(pub, clock, ready("a", "b"))
    restarting = {**ready("a"), "b": status("b", MemberState.RESTARTING)}
    t0 = clock.monotonic()
    assert observe(pub, restarting, {}, clock.monotonic(), clock.now()) is None
    assert pub.next_wakeup() == t0 + 30
    clock.advance(29.9)
    assert observe(pub, restarting, {}, clock.monotonic(), clock.now()) is None  # parked, not moved
    clock.advance(0.1)
    assert observe(pub, restarting, {}, clock.monotonic(), clock.now()) is None  # grace over: settling
    clock.advance(2)
    g2 = observe(pub, restarting, {}, clock.monotonic(), clock.now())
    assert g2 is not None and g2.generation == g1.generation + 1
    assert [m.identity for m in g2.members] == ["a"]


def test_a_member_back_from_restart_within_grace_causes_no_generation_at_all() -> None:
    clock = FakeClock()
    pub = Publisher("a")
    publish(pub, clock, ready("a", "b"))
    restarting = {**ready("a"), "b": status("b", MemberState.RESTARTING)}
    for _ in range(20):
        assert observe(pub, restarting, {}, clock.monotonic(), clock.now()) is None
        clock.advance(1)
    for _ in range(60):
        assert observe(pub, ready("a", "b"), {}, clock.monotonic(), clock.now()) is None
        clock.advance(1)
    # A second restart gets a fresh grace period.
    for _ in range(25):
        assert observe(pub, restarting, {}, clock.monotonic(), clock.now()) is None
        clock.advance(1)


def test_a_restarting_member_that_was_never_published_is_not_added() -> None:
    clock = FakeClock()
    pub = Publisher("a")
    g1 = publish(pub, clock, ready("a"))
    clock.advance(10)
    members = {**ready("a"), "new": status("new", MemberState.RESTARTING)}
    assert observe(pub, members, {}, clock.monotonic(), clock.now()) is None
    clock.advance(5)
    assert observe(pub, members, {}, clock.monotonic(), clock.now()) is None
    assert pub.current == g1


# --- rule 7: failover continues from the stored generation; generations never go backwards ---------------


def test_a_new_coordinator_continues_from_the_stored_generation() -> None:
    clock = FakeClock()
    table = rebalance([], {"a": 1, "b": 1}).owners
    stored = Assignment(7, (Member("a"), Member("b")), created_at="x", coordinator="old", slots=table)
    pub = Publisher("b", stored=stored)
    for _ in range(10):
        assert observe(pub, ready("a", "b"), {}, clock.monotonic(), clock.now()) is None
        clock.advance(1)
    g = publish(pub, clock, ready("b"))
    assert g.generation == 8 and g.coordinator == "b"


def test_a_stored_ring_assignment_is_republished_as_a_slot_table() -> None:
    # Version 1 (a ring, written by an earlier build) is read, and replaced by the next coordinator.
    clock = FakeClock()
    stored = Assignment(7, (Member("a"), Member("b")), created_at="x", coordinator="old")
    assert stored.to_document()["version"] == 1 and Assignment.from_document(stored.to_document()) == stored
    g = publish(Publisher("b", stored=stored), clock, ready("a", "b"))
    assert g.generation == 8 and len(g.slots) == 1024 and set(g.slots) == {"a", "b"}
    assert g.to_document()["version"] == 2
    assert Assignment.from_configmap_data(g.to_configmap_data()) == g


def test_generations_never_go_backwards_even_without_a_stored_assignment() -> None:
    clock = FakeClock()
    pub = Publisher("a")  # the ConfigMap was lost or is unreadable
    members = {"a": status("a", acked=12), "b": status("b", acked=11)}
    assert publish(pub, clock, members).generation == 13


def test_an_unwritten_proposal_is_proposed_again_and_a_lost_race_resets() -> None:
    clock = FakeClock()
    pub = Publisher("a")
    publish(pub, clock, ready("a"))
    clock.advance(2)
    observe(pub, ready("a", "b"), {}, clock.monotonic(), clock.now())
    clock.advance(2)
    first = observe(pub, ready("a", "b"), {}, clock.monotonic(), clock.now())
    assert first is not None
    clock.advance(1)  # the write failed; next round proposes again, same generation, latest view
    again = observe(pub, ready("a", "b", "c"), {}, clock.monotonic(), clock.now())
    assert again is None  # the view changed: settle again
    clock.advance(2)
    again = observe(pub, ready("a", "b", "c"), {}, clock.monotonic(), clock.now())
    assert again is not None and again.generation == first.generation
    # Another coordinator wrote generation 9 meanwhile (409): continue from it.
    pub.reset(Assignment(9, (Member("a"), Member("b"))))
    clock.advance(2)
    after = observe(pub, ready("a", "b", "c"), {}, clock.monotonic(), clock.now())
    assert after is not None and after.generation == 10


def test_config_is_validated() -> None:
    with pytest.raises(ValueError):
        PublisherConfig(settle=5, max_delay=1)
    with pytest.raises(ValueError):
        PublisherConfig(restart_grace=-1)
    with pytest.raises(ValueError):
        PublisherConfig(ack_wait=-1)


def test_zones_that_appear_after_the_members_are_balanced_by_a_generation_of_their_own() -> None:
    # The replicas started before the provider had zones: the first table was balanced on empty slots only.
    clock = FakeClock()
    zones: list[str] = []
    pub = Publisher("a", PublisherConfig(settle=1.0), zones=lambda: zones)
    first = publish(pub, clock, ready("a", "b", "c", "d"))
    zones = [f"z{i:03d}.example" for i in range(160)]  # a new list: the replica replaced its set
    # Balanced blind: evened at once (every replica is converging them now), no settle delay.
    even = observe(pub, ready("a", "b", "c", "d"), {}, clock.monotonic(), clock.now())
    assert even is not None
    pub.committed(even)
    assert even.generation == first.generation + 1 and even.members == first.members
    load = Counter(even.owner_of(zone) for zone in zones)
    assert max(load.values()) <= 41  # 40 each, within a zone
    # Once even, the same zones publish nothing more.
    clock.advance(5)
    assert observe(pub, ready("a", "b", "c", "d"), {}, clock.monotonic(), clock.now()) is None
    # A new coordinator takes the zones it finds as they are (rule 7: it changes nothing by itself).
    successor = Publisher("b", PublisherConfig(settle=1.0), stored=first, zones=lambda: zones)
    for _ in range(5):
        assert observe(successor, ready("a", "b", "c", "d"), {}, clock.monotonic(), clock.now()) is None
        clock.advance(1)
