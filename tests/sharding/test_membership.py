"""Member leases: the Kubernetes form, malformed annotations, liveness on the observer's clock (rule 1),
member states, and self-fencing (rule 5). Every timing rule runs on a FakeClock."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest

from shardsync.sharding.clock import FakeClock, microtime
from shardsync.sharding.membership import (
    LivenessTracker,
    MalformedLease,
    MemberLease,
    identity_from_name,
    label_selector,
    may_write,
    member_lease_name,
    write_deadline,
)
from shardsync.sharding.states import MemberState

INSTANCE = "dns"


def lease_object(identity: str = "dns-0", **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"dns-member-{identity}",
            "resourceVersion": "41",
            "labels": {"app.kubernetes.io/name": "shardsync", "app.kubernetes.io/instance": "dns", "x": "y"},
            "annotations": {"kubectl.kubernetes.io/last-applied": "{}", **annotations},
        },
        "spec": {
            "holderIdentity": identity,
            "leaseDurationSeconds": 15,
            "renewTime": "2026-01-01T00:00:05.000000Z",
            "acquireTime": "2026-01-01T00:00:00.000000Z",
        },
    }


def test_names_and_selector() -> None:
    assert member_lease_name("dns", "dns-0") == "dns-member-dns-0"
    assert identity_from_name("dns", "dns-member-dns-0") == "dns-0"
    assert identity_from_name("dns", "dns-coordinator") is None
    assert identity_from_name("dns", "dns-member-") is None
    assert label_selector("dns") == "app.kubernetes.io/name=shardsync,app.kubernetes.io/instance=dns"


def test_reads_a_lease_in_kubernetes_form() -> None:
    obj = lease_object(
        **{
            "shardsync.io/weight": "3",
            "shardsync.io/draining": "true",
            "shardsync.io/observed-generation": "7",
        }
    )
    lease = MemberLease.from_object(obj, INSTANCE)
    assert lease.identity == "dns-0"
    assert lease.holder == "dns-0"
    assert lease.lease_duration == 15
    assert lease.renew_time == "2026-01-01T00:00:05.000000Z"
    assert (lease.weight, lease.draining, lease.restarting, lease.observed_generation) == (3, True, False, 7)
    assert lease.resource_version == "41"
    assert lease.problems == ()


def test_round_trip_keeps_our_fields_and_everyone_elses() -> None:
    lease = MemberLease.from_object(
        lease_object(**{"shardsync.io/restarting": "true", "shardsync.io/observed-generation": "2"}), INSTANCE
    )
    obj = lease.to_object()
    assert obj["metadata"]["name"] == "dns-member-dns-0"
    assert obj["metadata"]["resourceVersion"] == "41"
    assert obj["metadata"]["labels"] == {
        "app.kubernetes.io/name": "shardsync",
        "app.kubernetes.io/instance": "dns",
        "x": "y",
    }
    assert obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied"] == "{}"
    assert obj["metadata"]["annotations"]["shardsync.io/restarting"] == "true"
    assert "shardsync.io/draining" not in obj["metadata"]["annotations"]
    assert obj["spec"]["holderIdentity"] == "dns-0"
    assert MemberLease.from_object(obj, INSTANCE) == lease


@pytest.mark.parametrize(
    ("annotations", "expected", "problem"),
    [
        ({"shardsync.io/weight": "heavy"}, ("weight", 1), "not an integer"),
        ({"shardsync.io/weight": "0"}, ("weight", 1), "between 1 and"),
        ({"shardsync.io/draining": "yes"}, ("draining", False), '"true" or "false"'),
        ({"shardsync.io/restarting": "1"}, ("restarting", False), '"true" or "false"'),
        ({"shardsync.io/observed-generation": "-4"}, ("observed_generation", None), "not a generation"),
        ({"shardsync.io/observed-generation": "g7"}, ("observed_generation", None), "not a generation"),
    ],
)
def test_malformed_annotations_are_reported_not_raised(
    annotations: dict[str, str], expected: tuple[str, object], problem: str
) -> None:
    lease = MemberLease.from_object(lease_object(**annotations), INSTANCE)
    field, value = expected
    assert getattr(lease, field) == value
    assert len(lease.problems) == 1 and problem in lease.problems[0]


def test_odd_spec_is_reported_and_defaulted() -> None:
    obj = lease_object()
    obj["spec"] = {"holderIdentity": "someone-else", "leaseDurationSeconds": "15"}
    lease = MemberLease.from_object(obj, INSTANCE)
    assert lease.lease_duration == 15
    assert any("held by 'someone-else'" in p for p in lease.problems)
    assert any("leaseDurationSeconds" in p for p in lease.problems)


@pytest.mark.parametrize(
    "obj",
    [
        {},
        {"metadata": {"name": "dns-coordinator"}},
        {"metadata": {"name": "other-member-a"}},
        {"metadata": {"name": "dns-member-a"}, "spec": "nope"},
    ],
)
def test_objects_that_are_not_member_leases_raise(obj: dict[str, Any]) -> None:
    with pytest.raises(MalformedLease):
        MemberLease.from_object(obj, INSTANCE)


def test_new_and_renewed_records() -> None:
    clock = FakeClock()
    lease = MemberLease.new(INSTANCE, "dns-1", clock.now(), lease_duration=15)
    assert lease.holder == "dns-1" and lease.acquire_time == lease.renew_time == microtime(clock.now())
    clock.advance(5)
    renewed = lease.renewed(clock.now())
    assert renewed.acquire_time == lease.acquire_time
    assert renewed.renew_time == microtime(clock.now())
    taken_back = replace(lease, holder="").renewed(clock.now())
    assert taken_back.holder == "dns-1" and taken_back.acquire_time == microtime(clock.now())


# --- rule 1: liveness on the observer's monotonic clock ---------------------------------------------------


def current_view() -> LivenessTracker:
    """A tracker whose view of the leases counts as always current (the watch never lags)."""
    tracker = LivenessTracker()
    tracker.mark_synced(math.inf)
    return tracker


def renewal(lease: MemberLease, n: int) -> MemberLease:
    # A renewal as another machine would write it; the text is never compared with our clock.
    return replace(lease, renew_time=f"1999-01-01T00:00:{n:02d}.000000Z")


def test_a_member_is_live_while_its_renewals_keep_changing() -> None:
    clock = FakeClock()
    tracker = current_view()
    lease = MemberLease.new(INSTANCE, "dns-0", clock.now())
    assert tracker.observe(lease, clock.monotonic())
    for n in range(10):
        clock.advance(5)
        assert tracker.observe(renewal(lease, n), clock.monotonic())
        status = tracker.status("dns-0", clock.monotonic())
        assert status is not None and status.live
        assert status.state is MemberState.READY


def test_a_member_expires_a_lease_duration_after_the_last_change_we_saw() -> None:
    clock = FakeClock()
    tracker = current_view()
    lease = MemberLease.new(INSTANCE, "dns-0", clock.now(), lease_duration=15)
    tracker.observe(lease, clock.monotonic())
    clock.advance(10)
    # The same record again (a relist, a resync): proves nothing, the timer does not restart.
    assert not tracker.observe(lease, clock.monotonic())
    clock.advance(4.9)
    status = tracker.status("dns-0", clock.monotonic())
    assert status is not None and status.state is MemberState.READY
    clock.advance(0.1)
    status = tracker.status("dns-0", clock.monotonic())
    assert status is not None and status.state is MemberState.EXPIRED
    assert status.expired() and not status.expired(margin=2)
    assert status.expires_at(margin=2) == status.last_change + 17


def test_after_an_outage_an_expiry_counts_only_once_it_persists_a_renew_interval() -> None:
    # The API was unreachable for 10 s: nobody's renewal got through, ours neither. When the view is current
    # again, peers get one renew interval to show up before any of them counts as expired.
    clock = FakeClock()
    tracker = LivenessTracker(grace=1.0)
    lease = MemberLease.new(INSTANCE, "dns-0", clock.now(), lease_duration=3)
    start = clock.monotonic()
    tracker.resync([lease], start)
    for _ in range(3):  # renewals echoed every second: the view stays current, no grace
        clock.advance(1)
        tracker.mark_synced(clock.monotonic())
    assert tracker.current_since == start
    clock.advance(10)  # the outage: no echo, no renewal
    tracker.mark_synced(clock.monotonic())  # our first renewal after it comes back through the watch
    status = tracker.status("dns-0", clock.monotonic())
    assert status is not None and status.live  # silent for 13 s, but the view was stale for 10 of them
    clock.advance(0.9)
    tracker.observe(renewal(lease, 1), clock.monotonic())  # it renews within the grace: never expired
    status = tracker.status("dns-0", clock.monotonic())
    assert status is not None and status.live
    # A member that stays silent expires a renew interval after the view became current.
    other = MemberLease.new(INSTANCE, "dns-1", clock.now(), lease_duration=3)
    tracker.observe(other, start)
    status = tracker.status("dns-1", clock.monotonic())
    assert status is not None and status.live and status.expires_at() == start + 13.0 + 1.0
    clock.advance(0.2)
    tracker.mark_synced(clock.monotonic())
    status = tracker.status("dns-1", clock.monotonic())
    assert status is not None and status.state is MemberState.EXPIRED


def test_an_observer_that_proves_its_view_only_now_and_then_says_whether_there_was_a_gap() -> None:
    # A replica that followed a few Leases and now lists them all (it took over the coordinator Lease): its
    # view was not proven for a while, but the API answered all along, so a silent member expires on time.
    clock = FakeClock()
    tracker = LivenessTracker(grace=1.0)
    lease = MemberLease.new(INSTANCE, "dns-0", clock.now(), lease_duration=3)
    start = clock.monotonic()
    tracker.observe(lease, start)  # its renewals seen by a watch of it alone, never proven current
    clock.advance(3.5)
    tracker.resync([lease], clock.monotonic(), gap=False)
    status = tracker.status("dns-0", clock.monotonic())
    assert status is not None and status.state is MemberState.EXPIRED and status.expires_at() == start + 3
    # The same list after the API failed us lately: the silent member gets the grace.
    other = LivenessTracker(grace=1.0)
    other.observe(lease, start)
    other.resync([lease], clock.monotonic(), gap=True)
    status = other.status("dns-0", clock.monotonic())
    assert status is not None and status.live and status.expires_at() == clock.monotonic() + 1.0


def test_remote_timestamps_and_our_wall_clock_do_not_matter() -> None:
    clock = FakeClock()
    tracker = current_view()
    # renewTime a year in the past and our wall clock jumping: only the change and our monotonic time count.
    lease = replace(MemberLease.new(INSTANCE, "dns-0", clock.now()), renew_time="2025-01-01T00:00:00.000000Z")
    tracker.observe(lease, clock.monotonic())
    clock.jump_wall(86400)
    clock.advance(14)
    status = tracker.status("dns-0", clock.monotonic())
    assert status is not None and status.live


def test_a_first_sighting_counts_as_a_fresh_renewal() -> None:
    # A new observer (a new coordinator) gives every member a full lease duration, as client-go does.
    clock = FakeClock()
    tracker = current_view()
    stale = replace(MemberLease.new(INSTANCE, "dns-0", clock.now()), renew_time="2020-01-01T00:00:00.000000Z")
    clock.advance(1000)
    tracker.observe(stale, clock.monotonic())
    clock.advance(14)
    status = tracker.status("dns-0", clock.monotonic())
    assert status is not None and status.state is MemberState.READY


def test_a_released_lease_is_expired_at_once() -> None:
    clock = FakeClock()
    tracker = current_view()
    tracker.observe(replace(MemberLease.new(INSTANCE, "dns-0", clock.now()), holder=""), clock.monotonic())
    status = tracker.status("dns-0", clock.monotonic())
    assert status is not None and status.state is MemberState.EXPIRED
    assert status.expired(margin=100)


def test_member_states() -> None:
    clock = FakeClock()
    tracker = current_view()
    base = MemberLease.new(INSTANCE, "dns-0", clock.now())
    tracker.observe(replace(base, draining=True), clock.monotonic())
    tracker.observe(replace(base, identity="dns-1", holder="dns-1", restarting=True), clock.monotonic())
    now = clock.monotonic()
    assert tracker.statuses(now)["dns-0"].state is MemberState.DRAINING
    assert tracker.statuses(now)["dns-1"].state is MemberState.RESTARTING
    clock.advance(60)
    now = clock.monotonic()
    # A restarting member stays restarting once its lease lapses (its zones are parked, not lost) ...
    assert tracker.statuses(now)["dns-1"].state is MemberState.RESTARTING
    assert tracker.statuses(now)["dns-1"].expired()
    # ... a draining one whose lease lapsed is simply expired.
    assert tracker.statuses(now)["dns-0"].state is MemberState.EXPIRED


def test_resync_forgets_deleted_leases() -> None:
    clock = FakeClock()
    tracker = current_view()
    a = MemberLease.new(INSTANCE, "a", clock.now())
    b = MemberLease.new(INSTANCE, "b", clock.now())
    tracker.resync([a, b], clock.monotonic())
    tracker.resync([a], clock.monotonic())
    assert list(tracker.statuses(clock.monotonic())) == ["a"]
    assert tracker.status("b", clock.monotonic()) is None
    tracker.forget("a")
    assert tracker.statuses(clock.monotonic()) == {}


def test_silence_on_a_stale_view_expires_nobody() -> None:
    # Rule 5: a replica whose watch has stalled must not read the silence as everyone's expiry.
    clock = FakeClock()
    tracker = LivenessTracker()
    lease = MemberLease.new(INSTANCE, "dns-0", clock.now())
    tracker.observe(lease, clock.monotonic())
    clock.advance(60)
    status = tracker.status("dns-0", clock.monotonic())
    assert status is not None and status.state is MemberState.READY  # never synced: nothing expires
    tracker.resync([lease], clock.monotonic() - 50)  # a list taken 50 s ago, 10 s after the last change
    status = tracker.status("dns-0", clock.monotonic())
    assert status is not None and status.as_of == clock.monotonic() - 50 and status.live
    tracker.mark_synced(clock.monotonic() - 44)  # the watch delivered our own renewal sent 44 s ago
    status = tracker.status("dns-0", clock.monotonic())
    assert status is not None and status.state is MemberState.EXPIRED
    assert not status.expired(margin=2) and status.expires_at(margin=2) == clock.monotonic() - 43
    tracker.mark_synced(clock.monotonic() - 100)  # older proofs never move the view back
    assert tracker.synced_at == clock.monotonic() - 44


# --- rule 5: self-fencing ----------------------------------------------------------------------------------


def test_self_fencing_stops_writes_a_margin_before_anyone_may_take_over() -> None:
    clock = FakeClock()
    assert not may_write(None, clock.monotonic(), 15, 3)
    sent = clock.monotonic()  # the renew request that succeeded was sent now
    assert write_deadline(sent, 15, 3) == sent + 12
    clock.advance(11.9)
    assert may_write(sent, clock.monotonic(), 15, 3)
    clock.advance(0.1)
    assert not may_write(sent, clock.monotonic(), 15, 3)
    # An observer that saw that renewal no earlier than `sent` calls the member expired only at sent + 15
    # (+ its own margin): writes have stopped well before.
    tracker = current_view()
    tracker.observe(MemberLease.new(INSTANCE, "dns-0", clock.now()), sent)
    status = tracker.status("dns-0", clock.monotonic())
    assert status is not None and not status.expired()
