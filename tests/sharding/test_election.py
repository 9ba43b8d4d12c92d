"""Coordinator election: client-go's tryAcquireOrRenew and ReleaseOnCancel as pure decisions, timed on our
own monotonic clock, and two candidates that cannot both win because writes carry a resourceVersion."""

from __future__ import annotations

from dataclasses import replace

import pytest

from shardsync.sharding.clock import FakeClock, microtime
from shardsync.sharding.election import (
    Action,
    CoordinatorLease,
    Election,
    decide,
    release,
)
from shardsync.sharding.membership import MalformedLease

INSTANCE = "dns"


def held_by(holder: str, transitions: int = 3) -> CoordinatorLease:
    return CoordinatorLease(
        INSTANCE,
        holder,
        15,
        acquire_time="2026-01-01T00:00:00.000000Z",
        renew_time="2026-01-01T00:00:10.000000Z",
        transitions=transitions,
        resource_version="7",
    )


def test_no_lease_yet_means_create_it() -> None:
    clock = FakeClock()
    d = decide("a", INSTANCE, None, None, clock.monotonic(), clock.now())
    assert d.action is Action.CREATE
    assert d.write is not None
    assert (d.write.holder, d.write.transitions, d.write.resource_version) == ("a", 0, None)
    assert d.write.acquire_time == d.write.renew_time == microtime(clock.now())


def test_a_lease_held_by_another_is_waited_for_until_it_lapses_on_our_clock() -> None:
    clock = FakeClock()
    seen_at = clock.monotonic()
    clock.advance(14.9)
    d = decide("b", INSTANCE, held_by("a"), seen_at, clock.monotonic(), clock.now())
    assert d.action is Action.WAIT and d.write is None and d.holder == "a"
    assert d.expires_at == seen_at + 15
    clock.advance(0.1)
    d = decide("b", INSTANCE, held_by("a"), seen_at, clock.monotonic(), clock.now())
    assert d.action is Action.ACQUIRE


def test_takeover_counts_a_transition_and_stamps_acquire_time() -> None:
    clock = FakeClock()
    old = held_by("a", transitions=3)
    clock.advance(20)
    d = decide("b", INSTANCE, old, clock.monotonic() - 20, clock.monotonic(), clock.now(), lease_duration=15)
    assert d.action is Action.ACQUIRE and d.write is not None
    assert d.write.holder == "b"
    assert d.write.transitions == 4
    assert d.write.acquire_time == d.write.renew_time == microtime(clock.now())
    assert d.write.resource_version == "7"  # the write is conditional on what we saw


def test_renewal_keeps_acquire_time_and_transitions() -> None:
    clock = FakeClock()
    mine = held_by("a", transitions=3)
    d = decide("a", INSTANCE, mine, clock.monotonic(), clock.monotonic(), clock.now())
    assert d.action is Action.RENEW and d.write is not None
    assert d.write.acquire_time == mine.acquire_time
    assert d.write.transitions == 3
    assert d.write.renew_time == microtime(clock.now())


def test_an_empty_holder_is_free_at_once() -> None:
    clock = FakeClock()
    free = replace(held_by("a"), holder="")
    d = decide("b", INSTANCE, free, clock.monotonic(), clock.monotonic(), clock.now())
    assert d.action is Action.ACQUIRE


def test_remote_renew_time_is_never_compared_with_our_clock() -> None:
    # renewTime years in the past, our wall clock jumping: still held, because we saw it change just now.
    clock = FakeClock()
    ancient = replace(held_by("a"), renew_time="2001-01-01T00:00:00.000000Z")
    clock.jump_wall(10**6)
    d = decide("b", INSTANCE, ancient, clock.monotonic(), clock.monotonic() + 1, clock.now())
    assert d.action is Action.WAIT


def test_release_clears_the_holder_like_release_on_cancel() -> None:
    clock = FakeClock()
    mine = held_by("a", transitions=3)
    released = release("a", mine, clock.now())
    assert released is not None
    assert (released.holder, released.lease_duration, released.transitions) == ("", 1, 3)
    assert released.resource_version == "7"
    assert release("b", mine, clock.now()) is None


def test_lease_object_round_trip_and_damaged_fields() -> None:
    lease = held_by("a")
    obj = lease.to_object()
    assert obj["metadata"]["name"] == "dns-coordinator"
    assert obj["metadata"]["labels"]["app.kubernetes.io/instance"] == "dns"
    assert obj["spec"]["leaseTransitions"] == 3
    assert CoordinatorLease.from_object(obj, INSTANCE) == lease
    obj["spec"] = {"holderIdentity": "a", "leaseDurationSeconds": "x", "leaseTransitions": -1}
    damaged = CoordinatorLease.from_object(obj, INSTANCE)
    assert (damaged.lease_duration, damaged.transitions) == (0, 0)
    # A damaged duration reads as already expired, so election never wedges on it.
    clock = FakeClock()
    assert decide("b", INSTANCE, damaged, clock.monotonic(), clock.monotonic(), clock.now()).action is (
        Action.ACQUIRE
    )
    with pytest.raises(MalformedLease):
        CoordinatorLease.from_object({"metadata": {"name": "dns-member-a"}}, INSTANCE)


class FakeLeaseStore:
    """The API server's part: a replace succeeds only at the current resourceVersion (409 otherwise)."""

    def __init__(self) -> None:
        self.lease: CoordinatorLease | None = None
        self.version = 0

    def write(self, lease: CoordinatorLease) -> CoordinatorLease | None:
        if (self.lease is None) != (lease.resource_version is None):
            return None  # create on an existing object, or replace of a missing one
        if self.lease is not None and lease.resource_version != self.lease.resource_version:
            return None  # 409 Conflict
        self.version += 1
        self.lease = replace(lease, resource_version=str(self.version))
        return self.lease


def test_two_candidates_deciding_from_the_same_view_cannot_both_win() -> None:
    clock = FakeClock()
    store = FakeLeaseStore()
    a, b = Election(INSTANCE, "a"), Election(INSTANCE, "b")
    for e in (a, b):
        e.observe(store.lease, clock.monotonic())
    da, db = a.decide(clock.monotonic(), clock.now()), b.decide(clock.monotonic(), clock.now())
    assert da.action is db.action is Action.CREATE
    assert da.write is not None and db.write is not None
    won_a, won_b = store.write(da.write), store.write(db.write)
    assert won_a is not None and won_b is None
    a.written(won_a, clock.monotonic(), clock.monotonic())
    b.observe(store.lease, clock.monotonic())
    assert a.is_leader(clock.monotonic()) and not b.is_leader(clock.monotonic())
    assert b.leader == "a"

    # "a" dies. Both "b" and a late "c" see it lapse and race to take over: one wins, one gets 409.
    c = Election(INSTANCE, "c")
    c.observe(store.lease, clock.monotonic())
    clock.advance(15)
    db, dc = b.decide(clock.monotonic(), clock.now()), c.decide(clock.monotonic(), clock.now())
    assert db.action is dc.action is Action.ACQUIRE
    assert db.write is not None and dc.write is not None
    results = [store.write(db.write), store.write(dc.write)]
    assert sum(r is not None for r in results) == 1
    assert store.lease is not None and store.lease.holder == "b" and store.lease.transitions == 1


def test_a_leader_that_cannot_renew_stops_leading_before_anyone_may_take_over() -> None:
    clock = FakeClock()
    store = FakeLeaseStore()
    a = Election(INSTANCE, "a", lease_duration=15, renew_deadline=10)
    b = Election(INSTANCE, "b", lease_duration=15, renew_deadline=10)
    a.observe(None, clock.monotonic())
    d = a.decide(clock.monotonic(), clock.now())
    assert d.write is not None
    sent = clock.monotonic()
    written = store.write(d.write)
    assert written is not None
    clock.advance(0.2)  # the answer takes a while: leadership counts from when the request was sent
    a.written(written, sent, clock.monotonic())
    b.observe(store.lease, clock.monotonic())
    clock.advance(9.7)
    assert a.is_leader(clock.monotonic())
    clock.advance(0.1)
    assert not a.is_leader(clock.monotonic())  # renew deadline passed: stop publishing
    assert b.decide(clock.monotonic(), clock.now()).action is Action.WAIT  # and nobody has taken over yet
    clock.advance(5.2)  # b saw the lease change 0.2 s after it was sent: 15 s from then
    assert b.decide(clock.monotonic(), clock.now()).action is Action.ACQUIRE


def test_graceful_stop_hands_over_at_once() -> None:
    clock = FakeClock()
    store = FakeLeaseStore()
    a, b = Election(INSTANCE, "a"), Election(INSTANCE, "b")
    a.observe(None, clock.monotonic())
    d = a.decide(clock.monotonic(), clock.now())
    assert d.write is not None
    written = store.write(d.write)
    assert written is not None
    a.written(written, clock.monotonic(), clock.monotonic())
    b.observe(store.lease, clock.monotonic())
    released = a.release(clock.now())
    assert released is not None and store.write(released) is not None
    b.observe(store.lease, clock.monotonic())
    assert b.decide(clock.monotonic(), clock.now()).action is Action.ACQUIRE
    assert Election(INSTANCE, "z").release(clock.now()) is None


def test_renew_deadline_must_be_shorter_than_the_lease() -> None:
    with pytest.raises(ValueError):
        Election(INSTANCE, "a", lease_duration=10, renew_deadline=10)
