"""The bookkeeping of sharded ownership as a pure state object: every branch of the shard loop's pass
(switch, release, acknowledge, gain, acquire, refused writes, draining), driven with plain values and a
fake monotonic time, no API server."""

from __future__ import annotations

from dataclasses import replace

import pytest

from shardsync.ownership.shard_state import Phase, ShardState
from shardsync.sharding.assignment import Assignment, Member
from shardsync.sharding.timings import Timings
from tests.sharding.helpers import ready, status

TIMINGS = Timings.derive(15, 5.0)
ZONES = frozenset(f"zone-{i}.example.org" for i in range(200))
G1 = Assignment(1, (Member("a"), Member("b")))
G2 = Assignment(2, (Member("a"), Member("b"), Member("c")))
G3 = Assignment(3, (Member("a"), Member("b"), Member("c")))
NOW = 1000.0


def state_under(view: Assignment, *, running: set[str] | None = None, epoch: int = 1) -> ShardState:
    """Identity "a" holding `view`, read under `epoch` at NOW, running `running` (default: all its zones)."""
    s = ShardState("a", TIMINGS)
    s.view_read(epoch, NOW)
    assert s.switch(view, NOW) is not None
    s.active = set(view.zones_of("a", ZONES)) if running is None else set(running)
    return s


def fields(s: ShardState) -> dict[str, object]:
    """The state's fields, read without letting the type checker narrow them across steps."""
    return {name: getattr(s, name) for name in ("view", "view_read_at", "requalify")}


def release_all(s: ShardState, zones: frozenset[str] = ZONES) -> list[str]:
    released = s.release_plan(zones)
    for zone in released:
        s.releasing(zone)
    return released


# -- rule 5: the write gate ---------------------------------------------------------------------------


def test_may_write_needs_a_fresh_lease_a_view_read_in_this_epoch_and_no_stop() -> None:
    s = ShardState("a", TIMINGS)
    assert s.read_epoch is None and not s.may_write(True, 1)  # never read
    assert s.needs_read(1)
    s.view_read(1, NOW)
    assert not s.needs_read(1) and s.may_write(True, 1)
    assert not s.may_write(False, 1)  # lease not fresh
    assert s.needs_read(2) and not s.may_write(True, 2)  # re-acquired since: read again first
    s.stop()
    assert s.phase is Phase.STOPPING and not s.may_write(True, 1)


def test_self_fencing_is_reported_once_per_stretch_of_writing() -> None:
    s = ShardState("a", TIMINGS)
    assert not s.self_fenced()  # was not writing
    s.writing = True
    assert s.self_fenced() and not s.writing
    assert not s.self_fenced()


# -- switching generations ---------------------------------------------------------------------------


def test_switch_only_to_a_successor_generation() -> None:
    s = ShardState("a", TIMINGS)
    assert s.switch(None, NOW) is None and fields(s)["view"] is None
    first = s.switch(G1, NOW)
    assert first is not None and first.old is None and first.new is G1
    assert s.switch(G1, NOW + 1) is None  # the same generation again
    assert s.switch(Assignment(0, (Member("a"),)), NOW + 1) is None  # an older one
    second = s.switch(G2, NOW + 2)
    assert second is not None and second.old is G1 and s.previous is G1 and s.view is G2
    assert fields(s)["view_read_at"] == NOW + 2  # we got hold of this view now
    assert not s.requalify


def test_a_skipped_generation_puts_the_kept_zones_through_rule_4_again() -> None:
    s = state_under(G1)
    kept = G1.zones_of("a", ZONES) & G3.zones_of("a", ZONES)
    moved = G1.zones_of("a", ZONES) - G3.zones_of("a", ZONES)
    assert kept and moved
    s.switch(G3, NOW + 1)
    assert fields(s)["requalify"]
    assert set(release_all(s)) == kept | moved  # everything, kept zones included
    assert not fields(s)["requalify"] and not s.active
    # They come back as pending, to be acquired under rule 4 against G3 (no G2 to reason with).
    assert s.gain(ZONES, NOW + 2)
    assert set(s.pending) == G3.zones_of("a", ZONES)


def test_the_next_generation_keeps_what_stays_ours_running() -> None:
    s = state_under(G1)
    s.switch(G2, NOW + 1)
    released = set(release_all(s))
    assert released == G1.zones_of("a", ZONES) - G2.zones_of("a", ZONES)
    assert s.active == G1.zones_of("a", ZONES) & G2.zones_of("a", ZONES)


def test_zones_the_provider_no_longer_serves_are_released() -> None:
    s = state_under(G1)
    gone = sorted(s.active)[0]
    assert release_all(s, ZONES - {gone}) == [gone]


# -- rule 3: release before acknowledging ------------------------------------------------------------


def test_the_generation_is_acknowledged_only_after_every_zone_not_ours_is_released() -> None:
    s = state_under(G1)
    s.switch(G2, NOW + 1)
    to_release = s.release_plan(ZONES)
    assert to_release
    assert s.acknowledgement(1, ZONES) is None  # still running zones that are not ours in G2
    for zone in to_release[:-1]:
        s.releasing(zone)
    assert s.acknowledgement(1, ZONES) is None
    s.releasing(to_release[-1])
    assert s.acknowledgement(1, ZONES) == 2
    assert s.acknowledgement(None, ZONES) == 2  # nothing acknowledged yet at all
    assert s.acknowledgement(2, ZONES) is None  # said already


def test_pending_zones_not_ours_any_more_are_forgotten_without_a_release() -> None:
    s = state_under(G1, running=set())
    assert s.gain(ZONES, NOW)
    s.switch(G2, NOW + 1)
    assert release_all(s) == []  # none of them ran
    assert set(s.pending) == G1.zones_of("a", ZONES) & G2.zones_of("a", ZONES)
    assert s.acknowledgement(1, ZONES) == 2


# -- rule 4: gaining and acquiring -------------------------------------------------------------------


def test_gain_queues_what_is_ours_and_neither_runs_nor_waits() -> None:
    s = state_under(G2, running=set())
    assert s.gain(ZONES, NOW)
    assert s.pending == dict.fromkeys(G2.zones_of("a", ZONES), NOW)
    assert s.gain(ZONES, NOW + 5)
    assert set(s.pending.values()) == {NOW}  # not re-queued: their wait counts from the first sight


def test_a_silent_peer_counts_as_gone_only_on_a_member_view_at_least_as_fresh_as_the_assignment() -> None:
    s = state_under(G2, running=set())
    s.gain(ZONES, NOW)
    assert not s.view_confirmed(None)  # no view yet
    assert not s.view_confirmed(NOW - 0.1)  # a view older than the assignment read
    assert s.view_confirmed(NOW)
    s.switch(G3, NOW + 2)  # a new view read: the member view must catch up again
    assert not s.view_confirmed(NOW + 1) and s.view_confirmed(NOW + 2)
    assert not ShardState("a", TIMINGS).view_confirmed(NOW)  # no assignment yet


def test_on_a_view_not_yet_fresh_only_acknowledgements_count() -> None:
    three = Assignment(1, (Member("a"), Member("b"), Member("c")))
    two = replace(Assignment(2, (Member("a"), Member("b"))), acknowledged=1)  # it vouches for the rest
    s = state_under(three)
    s.switch(two, NOW)
    release_all(s)
    s.gain(ZONES, NOW)
    expiry = NOW + 15 + TIMINGS.acquire_margin
    # c went silent long ago: on a fresh view it is gone; on a stale one its silence proves nothing.
    silent = {"b": status("b", acked=2, last_change=NOW), "c": status("c", acked=1, last_change=NOW - 20)}
    stale = s.acquire(expiry, silent, fresh=False)
    assert stale.acquired == () and not stale.refresh_now and s.pending
    # An acknowledgement needs no fresh view: it is never taken back.
    acked = {"b": status("b", acked=2, last_change=NOW), "c": status("c", acked=2, last_change=NOW)}
    unread = s.acquire(expiry, {"b": acked["b"]}, fresh=False)  # c's Lease not read yet: not gone
    assert unread.acquired == () and s.pending
    done = s.acquire(expiry, acked, fresh=False)
    assert done.acquired and not s.pending
    # Without the certificate a stale view clears nobody: every member must be heard from.
    unvouched = state_under(three)
    unvouched.switch(Assignment(2, (Member("a"), Member("b"))), NOW)
    release_all(unvouched)
    unvouched.gain(ZONES, NOW)
    assert unvouched.acquire(expiry, acked, fresh=False).acquired == ()


def test_acquire_waits_for_the_previous_owner_and_says_so_once() -> None:
    three = Assignment(1, (Member("a"), Member("b"), Member("c")))
    two = Assignment(2, (Member("a"), Member("b")))  # "c" leaves: "a" gains some of its zones
    s = state_under(three)
    s.switch(two, NOW)
    release_all(s)
    s.gain(ZONES, NOW)
    from_c = set(s.pending)
    assert from_c and all(three.owner_of(z) == "c" for z in from_c)
    # "c" has not acknowledged generation 2 and may still write them.
    peers = {
        "a": status("a", acked=2, last_change=NOW),
        "b": status("b", acked=2, last_change=NOW),
        "c": status("c", acked=1, last_change=NOW),
    }
    first = s.acquire(NOW + 1, peers)
    assert first.waiting_for == ("c",) and first.acquired == ()
    assert set(s.pending) == from_c
    assert first.delay == TIMINGS.renew_interval  # c expires later than one renew interval from now
    again = s.acquire(NOW + 2, peers)
    assert again.waiting_for is None and again.acquired == ()  # logged already for this generation
    # Close to c's expiry (lease + margin on our clock) the shell sleeps exactly until then.
    late = NOW + 15 + TIMINGS.acquire_margin - 1
    silent = {**peers, "c": status("c", acked=1, last_change=NOW, as_of=late)}
    assert s.acquire(late, silent).delay == pytest.approx(1.0)
    peers["c"] = status("c", acked=2, last_change=NOW + 3)
    done = s.acquire(NOW + 4, peers)
    assert {z for z, _ in done.acquired} == from_c and not s.pending
    assert {waited for _, waited in done.acquired} == {4.0}
    assert done.delay == TIMINGS.renew_interval


def test_acquire_with_nothing_pending_sleeps_a_renew_interval() -> None:
    s = state_under(G1)
    result = s.acquire(NOW, ready("a", "b", now=NOW))
    assert result.acquired == () and result.waiting_for is None and result.delay == TIMINGS.renew_interval


def test_an_unblocked_generation_acquires_at_once() -> None:
    s = state_under(G1, running=set())
    s.gain(ZONES, NOW)
    result = s.acquire(NOW, {i: status(i, acked=1, last_change=NOW) for i in ("a", "b")})
    assert {z for z, _ in result.acquired} == G1.zones_of("a", ZONES) == s.active


# -- a write refused by the fence --------------------------------------------------------------------


def test_a_fenced_zone_is_dropped_until_a_newer_generation_gives_it_again() -> None:
    s = state_under(G1)
    zone = next(z for z in sorted(s.active) if G2.owner_of(z) == "a" and G3.owner_of(z) == "a")
    assert s.fenced(zone) == 1
    assert zone in release_all(s)  # still ours in G1, but its fence says someone newer holds it
    assert s.gain(ZONES, NOW) and zone not in s.pending  # not under the generation that refused it
    assert s.acknowledgement(0, ZONES) == 1
    s.switch(G2, NOW + 1)
    assert s.dropped == {}
    release_all(s)
    assert s.gain(ZONES, NOW + 1) and zone in s.pending


def test_a_zone_fenced_before_any_view_is_dropped_under_generation_0() -> None:
    s = ShardState("a", TIMINGS)
    assert s.fenced("zone-1.example.org") == 0
    s.switch(G1, NOW)
    assert s.dropped == {}


def test_a_refusal_recorded_under_a_newer_generation_survives_the_switch_to_it() -> None:
    s = state_under(G1)
    s.dropped["zone-1.example.org"] = 2  # the worker's refusal arrived after the watch saw G2
    s.switch(G2, NOW)
    assert s.dropped == {"zone-1.example.org": 2}


# -- rule 6: draining and stopping -------------------------------------------------------------------


def test_a_draining_replica_gains_nothing_and_is_drained_once_the_view_lists_it_no_more() -> None:
    s = state_under(G1)
    s.start_draining()
    assert s.draining and s.may_write(True, 1)  # draining still writes what it holds
    assert not s.gain(ZONES, NOW) and not s.pending
    assert not s.drained()
    without_a = Assignment(2, (Member("b"),))
    s.switch(without_a, NOW + 1)
    assert not s.drained()  # still runs its zones
    release_all(s)
    assert s.drained()
    s.stop()
    assert s.stopping and not s.may_write(True, 1)


def test_forget_all_after_the_shell_released_everything() -> None:
    s = state_under(G1, running=set())
    s.gain(ZONES, NOW)
    s.active = {"zone-1.example.org"}
    s.forget_all()
    assert not s.active and not s.pending


def test_release_plan_without_a_view_is_a_programming_error() -> None:
    with pytest.raises(RuntimeError):
        ShardState("a", TIMINGS).release_plan(ZONES)


def test_owned_counts_the_running_and_waiting_zones_ours_in_the_view() -> None:
    assert ShardState("a", TIMINGS).owned() == 0
    s = state_under(G1)
    assert s.owned() == len(G1.zones_of("a", ZONES))


def test_a_peer_expired_on_our_clock_but_not_in_our_view_asks_for_a_fresh_view_instead_of_spinning() -> None:
    # bench.simulate found it: "c" crashed; on our clock its lease (+ margin) has run out, but our member
    # view was last current before that, so `may_acquire` still refuses with a retry time in the past.
    # A zero sleep would spin the shard loop until our next regular renewal (up to a renew interval).
    three = Assignment(1, (Member("a"), Member("b"), Member("c")))
    two = Assignment(2, (Member("a"), Member("b")))
    s = state_under(three)
    s.switch(two, NOW)
    release_all(s)
    s.gain(ZONES, NOW)
    expiry = NOW + 15 + TIMINGS.acquire_margin
    stale_view = {
        "a": status("a", acked=2, last_change=NOW),
        "b": status("b", acked=2, last_change=NOW),
        "c": status("c", acked=1, last_change=NOW, as_of=expiry - 0.5),
    }
    first = s.acquire(expiry + 0.25, stale_view)
    assert first.acquired == () and first.refresh_now and first.delay == TIMINGS.renew_interval
    again = s.acquire(expiry + 0.5, stale_view)
    assert not again.refresh_now and again.delay == TIMINGS.renew_interval  # asked once per expiry
    # A view current after c's expiry (the echo of an early renewal, or a read of c's Lease): c is gone.
    fresh = {**stale_view, "c": status("c", acked=1, last_change=NOW, as_of=expiry + 0.3)}
    done = s.acquire(expiry + 0.6, fresh)
    assert done.acquired and not s.pending


# -- whom to hear from (issue 39) -------------------------------------------------------------------


def test_hearing_names_the_previous_owners_of_the_pending_zones_under_a_vouched_generation() -> None:
    three = Assignment(1, (Member("a"), Member("b"), Member("c")))
    two = replace(Assignment(2, (Member("a"), Member("b"))), acknowledged=1)
    s = state_under(three)
    assert s.hearing() == frozenset()  # nothing pending
    s.switch(two, NOW)
    release_all(s)
    s.gain(ZONES, NOW)
    assert s.pending and s.hearing() == frozenset({"c"})
    unvouched = state_under(three)
    unvouched.switch(replace(two, acknowledged=0), NOW)
    release_all(unvouched)
    unvouched.gain(ZONES, NOW)
    assert unvouched.hearing() is None  # every member
    first_view = ShardState("a", TIMINGS)
    first_view.view_read(1, NOW)
    first_view.switch(two, NOW)
    first_view.gain(ZONES, NOW)
    assert first_view.hearing() is None  # a new process has no previous generation in hand


def test_a_departed_previous_owner_is_gone_a_margin_after_the_view_was_received() -> None:
    three = Assignment(1, (Member("a"), Member("b"), Member("c")))
    stamp = "2026-01-01T00:00:00.000000Z"
    two = replace(Assignment(2, (Member("a"), Member("b"))), acknowledged=1, departed={"c": stamp})
    s = state_under(three)
    s.switch(two, NOW)
    release_all(s)
    s.gain(ZONES, NOW)
    # Read just after we got generation 2: c's Lease still says what the coordinator saw.
    c = {"c": status("c", acked=1, last_change=NOW, renew_time=stamp)}
    early = s.acquire(NOW + 0.1, c)
    assert early.acquired == () and early.delay == pytest.approx(TIMINGS.acquire_margin - 0.1)
    done = s.acquire(NOW + TIMINGS.acquire_margin, c)
    assert done.acquired and not s.pending
