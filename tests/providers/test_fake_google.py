"""The fake provider's `google` profile: Cloud DNS's documented limits of one change (1,000 additions and
1,000 deletions of record sets, 100,000 bytes of record data, 100 values per added set), its deletions
(an update's old side included) matching the current set exactly, deletions before additions, no refusal of
a second change under way to a zone, and the per-minute request quota whose default Google does not
publish (300 here, an assumption), as the bench's provider_budget runs meet them. The provider itself is
tested against a contract fake of Cloud DNS's own API (tests/providers/test_google.py)."""

from __future__ import annotations

import argparse

import pytest

from shardsync.providers.base import FenceToken
from shardsync.providers.fake.command import configure
from shardsync.providers.fake.limits import Limits
from shardsync.providers.fake.profile import (
    GOOGLE,
    PROFILES,
    ROUTE53,
    AccountThrottledError,
    BatchTooLargeError,
    PriorRequestNotCompleteError,
    change_size,
    profile_from_json,
)
from shardsync.providers.fake.store import FakeStore, InvalidChangesError
from shardsync.records.endpoint import Changes, Endpoint
from tests.providers.fake_helpers import FakeClock, Latency, change_in_flight

ZONE = "example.org"


def a(name: str, *ips: str, ttl: int = 300) -> Endpoint:
    return Endpoint.new(f"{name}.{ZONE}", "A", list(ips) or ["192.0.2.1"], ttl=ttl)


def test_300_requests_a_minute_then_requests_wait_for_the_oldest_to_leave_without_a_block() -> None:
    clock = FakeClock()
    store = FakeStore(profile=GOOGLE, clock=clock)
    store.add_zone(ZONE)
    for i in range(300):
        store.zones(client=f"replica-{i % 4}")  # the project's quota, whichever replica asks
        clock.now += 0.125  # 37.5 s for all of them
    with pytest.raises(AccountThrottledError, match="300 requests in 60s") as info:
        store.apply(ZONE, Changes(create=[a("late")]), writer="replica-0")  # writes count too
    assert info.value.retry_after == 23  # the first request leaves the minute at 60 s
    assert store.profile_blocks == 0
    clock.now += 22
    with pytest.raises(AccountThrottledError):
        store.records(ZONE, client="replica-1")
    clock.now += 0.5
    store.apply(ZONE, Changes(create=[a("late")]), writer="replica-0")
    assert store.profile_blocks == 0


def test_a_steady_four_and_a_half_requests_a_second_is_never_refused() -> None:
    clock = FakeClock()
    store = FakeStore(profile=GOOGLE, clock=clock)
    store.add_zone(ZONE)
    for _ in range(9 * 300):  # 10 minutes at 270 a minute
        store.zones()
        clock.now += 1 / 4.5
    assert store.profile_blocks == 0


def test_a_change_holds_1000_additions_and_1000_deletions_an_update_counting_in_both() -> None:
    store = FakeStore(profile=GOOGLE)
    store.add_zone(ZONE, [a(f"u{i}") for i in range(1000)])
    olds = store.peek(ZONE)
    news = [Endpoint.new(o.dns_name, "A", ["192.0.2.2"], ttl=300) for o in olds]
    assert change_size(Changes(update_old=olds, update_new=news)) == (1000, 1000, 18_000, 1)
    store.apply(ZONE, Changes(update_old=olds, update_new=news), writer="w")
    with pytest.raises(BatchTooLargeError, match="quota for additions per change: 1001, limit 1000"):
        store.apply(ZONE, Changes(create=[a(f"c{i}") for i in range(1001)]), writer="w")
    with pytest.raises(BatchTooLargeError, match="quota for deletions per change: 1001"):
        store.apply(ZONE, Changes(delete=[*store.peek(ZONE), a("c0")]), writer="w")
    assert store.peek(ZONE) == news  # nothing of either applied
    # the fence's deletion and addition count too: 999 creates and the fence are 1,000 additions
    token = FenceToken(1, "w")
    store.acquire_fence(ZONE, token)
    with pytest.raises(BatchTooLargeError, match="additions per change: 1001"):
        store.apply(ZONE, Changes(create=[a(f"c{i}") for i in range(1000)]), token, writer="w")
    store.apply(ZONE, Changes(create=[a(f"c{i}") for i in range(999)]), token, writer="w")


def test_a_change_holds_100000_bytes_of_record_data_and_100_values_a_set() -> None:
    store = FakeStore(profile=GOOGLE)
    store.add_zone(ZONE)
    txt = [Endpoint.new(f"t{i}.{ZONE}", "TXT", ['"' + "x" * 9998 + '"']) for i in range(10)]
    store.apply(ZONE, Changes(create=txt), writer="w")  # 100,000 bytes exactly
    with pytest.raises(BatchTooLargeError, match="total rrdata size per change: 100009"):
        store.apply(ZONE, Changes(create=[a("one-more")], delete=txt), writer="w")  # both sides count
    many = [f"192.0.2.{i}" for i in range(101)]
    with pytest.raises(BatchTooLargeError, match="resource records per rrset per change: 101"):
        store.apply(ZONE, Changes(create=[a("many", *many)]), writer="w")
    store.apply(ZONE, Changes(create=[a("many", *many[:100])]), writer="w")


def test_deletions_and_updates_old_sides_must_match_and_deletions_come_first() -> None:
    store = FakeStore(profile=GOOGLE)
    current = a("web", "192.0.2.1", ttl=300)
    store.add_zone(ZONE, [current])
    for stale in (a("web", "192.0.2.9"), a("web", "192.0.2.1", ttl=60)):
        with pytest.raises(InvalidChangesError, match="old values differ"):  # Cloud DNS: 412
            store.apply(
                ZONE,
                Changes(create=[a("new")], update_old=[stale], update_new=[a("web", "192.0.2.2")]),
                writer="w",
            )
        with pytest.raises(InvalidChangesError, match="values differ"):
            store.apply(ZONE, Changes(delete=[stale]), writer="w")
    assert store.peek(ZONE) == [current]  # the create beside the stale update did not land either
    # a deletion and an addition of the same set in one change: the deletion is applied first
    store.apply(ZONE, Changes(delete=[current], create=[a("web", "192.0.2.3")]), writer="w")
    store.apply(
        ZONE, Changes(update_old=[a("web", "192.0.2.3")], update_new=[a("web", "192.0.2.4")]), writer="w"
    )
    assert store.peek(ZONE) == [a("web", "192.0.2.4")]
    # under route53 an UPSERT needs no match: the profile is what makes the difference
    store.set_profile(ROUTE53)
    store.apply(ZONE, Changes(update_old=[current], update_new=[a("web", "192.0.2.5")]), writer="w")


def test_a_second_change_to_a_zone_is_not_refused_while_one_is_under_way() -> None:
    latency = Latency()
    store = FakeStore(limits=Limits(latency=0.001), profile=GOOGLE, sleep=latency)
    store.add_zone(ZONE)
    with change_in_flight(store, latency, ZONE, Changes(create=[a("x")])):
        store.apply(ZONE, Changes(create=[a("y")]), writer="w")  # Cloud DNS documents no refusal
    store.set_profile(ROUTE53.with_account(rate=1e9, burst=1_000_000_000))
    in_flight = change_in_flight(store, latency, ZONE, Changes(create=[a("z")]))
    with in_flight, pytest.raises(PriorRequestNotCompleteError):  # where Route53's profile refuses it
        store.apply(ZONE, Changes(create=[a("v")]), writer="w")
    assert [e.dns_name for e in store.peek(ZONE)] == [f"{n}.{ZONE}" for n in ("x", "y", "z")]


def test_the_profile_is_one_entry_of_the_table_named_over_the_admin_api_and_the_command() -> None:
    assert PROFILES["google"] is GOOGLE
    assert profile_from_json({"name": "google"}) == GOOGLE
    shown = GOOGLE.to_json()
    assert (shown["windowRequests"], shown["windowSeconds"], shown["blockSeconds"]) == (300, 60.0, 0.0)
    assert (shown["changeAdditions"], shown["changeDataBytes"], shown["exactUpdates"]) == (
        1000,
        100_000,
        True,
    )
    parser = argparse.ArgumentParser()
    configure(parser)
    assert parser.parse_args(["--profile", "google"]).profile == "google"
