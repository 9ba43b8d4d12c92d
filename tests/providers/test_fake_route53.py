"""The fake provider's `route53` profile: the semantics Route53 documents and moto does not enforce.

moto's server speaks Route53's wire format but, probed on this machine, applies a stale
`[DELETE "v1", CREATE "v3"]` after v1 became v2, leaves two RRsets after a CREATE over an existing one and
applies part of a refused batch (shared/field-notes.md). These tests prove the rules the fence relies on
against the fake's profile instead: exact deletes, all-or-nothing batches, batch and page limits,
PriorRequestNotComplete, the account token bucket, and the fence compare-and-swap under two writers.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import anyio
import pytest

from bench.audit import overlapping_writes
from shardsync.providers.base import FencedError, FenceToken
from shardsync.providers.fake.client import FakeAdmin, FakeHTTPProvider
from shardsync.providers.fake.command import configure
from shardsync.providers.fake.limits import FakeThrottledError, Limits
from shardsync.providers.fake.profile import (
    ROUTE53,
    AccountThrottledError,
    BatchTooLargeError,
    PriorRequestNotCompleteError,
    batch_size,
)
from shardsync.providers.fake.provider import FakeProvider
from shardsync.providers.fake.server import FakeServer
from shardsync.providers.fake.store import FakeStore, InvalidChangesError
from shardsync.records.endpoint import Changes, Endpoint
from tests.providers.fake_helpers import FakeClock, Latency, change_in_flight

ZONE = "example.org"
UNLIMITED = ROUTE53.with_account(rate=1e9, burst=1_000_000_000)


def a(name: str, *targets: str, ttl: int = 300) -> Endpoint:
    return Endpoint.new(f"{name}.{ZONE}", "A", targets or ["192.0.2.1"], ttl=ttl)


def route53_store(records: int = 0, *, clock: FakeClock | None = None, **kw: object) -> FakeStore:
    profile = kw.pop("profile", UNLIMITED)
    store = FakeStore(profile=profile, clock=clock or FakeClock(), **kw)  # type: ignore[arg-type]
    store.add_zone(ZONE, [a(f"host-{i:04d}", f"10.0.{i // 250}.{i % 250 + 1}") for i in range(records)])
    return store


# ---- what a batch may do ----


def test_a_delete_must_name_the_current_values_exactly_and_the_batch_is_all_or_nothing() -> None:
    store = route53_store(1)
    current = store.peek(ZONE)[0]
    for stale in (a("host-0000", "10.9.9.9"), a("host-0000", "10.0.0.1", ttl=60)):
        with pytest.raises(InvalidChangesError, match="values differ"):
            store.apply(ZONE, Changes(create=[a("new")], delete=[stale]), writer="w")
    assert store.peek(ZONE) == [current]  # the CREATE before the bad DELETE did not apply either
    store.apply(ZONE, Changes(delete=[current]), writer="w")
    assert store.peek(ZONE) == []


def test_a_create_over_an_existing_rrset_fails_the_batch() -> None:
    store = route53_store(1)
    with pytest.raises(InvalidChangesError, match="already exists"):
        store.apply(ZONE, Changes(create=[a("other"), a("host-0000", "10.1.1.1")]), writer="w")
    assert [r.dns_name for r in store.peek(ZONE)] == [f"host-0000.{ZONE}"]


def test_batch_limits_count_records_and_value_characters_an_upsert_twice() -> None:
    store = route53_store(600)
    creates = [a(f"c{i}") for i in range(1000)]
    assert batch_size(Changes(create=creates)) == (1000, 9_000)
    with pytest.raises(BatchTooLargeError, match="1001 records"):
        store.apply(ZONE, Changes(create=[*creates, a("one-more")]), writer="w")
    olds = store.peek(ZONE)[:501]
    news = [Endpoint.new(o.dns_name, "A", ["192.0.2.9"], ttl=300) for o in olds]
    with pytest.raises(BatchTooLargeError, match="1002 records"):  # 501 UPSERTs count 1,002
        store.apply(ZONE, Changes(update_old=olds, update_new=news), writer="w")
    store.apply(ZONE, Changes(update_old=olds[:500], update_new=news[:500]), writer="w")
    txt = [Endpoint.new(f"t{i}.{ZONE}", "TXT", ["x" * 4000]) for i in range(9)]
    with pytest.raises(BatchTooLargeError, match="36000 characters"):
        store.apply(ZONE, Changes(create=txt), writer="w")
    # the fence's DELETE and CREATE count too: 999 records + 2 is over 1,000
    token = FenceToken(1, "w")
    store.acquire_fence(ZONE, token)
    with pytest.raises(BatchTooLargeError):
        store.apply(ZONE, Changes(create=creates[:999]), token, writer="w")
    store.apply(ZONE, Changes(create=creates[:998]), token, writer="w")


def test_listing_comes_in_pages_of_at_most_300() -> None:
    store = route53_store(700)
    sizes, after = [], None
    while True:
        page, after = store.records_page(ZONE, "r", after=after)
        sizes.append(len(page))
        if after is None:
            break
    assert sizes == [300, 300, 100]
    small, nxt = store.records_page(ZONE, "r", limit=50)
    assert len(small) == 50 and nxt == small[-1].key
    assert len(store.records(ZONE)) == 700


# ---- PriorRequestNotComplete and the account bucket ----


def test_prior_request_not_complete_while_a_change_is_in_flight_or_processing() -> None:
    clock = FakeClock()
    store = route53_store(clock=clock, profile=UNLIMITED.with_account())
    store.add_zone("other.org")
    store.set_profile(replace(UNLIMITED, processing=2.0))
    store.apply(ZONE, Changes(create=[a("x")]), writer="w")
    with pytest.raises(PriorRequestNotCompleteError) as info:
        store.apply(ZONE, Changes(create=[a("y")]), writer="w")
    assert info.value.retry_after == pytest.approx(2.0)
    store.apply("other.org", Changes(create=[Endpoint.new("x.other.org", "A", ["192.0.2.1"])]), writer="w")
    clock.now += 2.0
    store.apply(ZONE, Changes(create=[a("y")]), writer="w")


def test_a_change_in_flight_refuses_a_second_change_to_its_zone() -> None:
    latency = Latency()
    store = FakeStore(limits=Limits(latency=0.001), profile=UNLIMITED, sleep=latency)
    store.add_zone(ZONE)
    in_flight = change_in_flight(store, latency, ZONE, Changes(create=[a("x")]))
    with in_flight, pytest.raises(PriorRequestNotCompleteError):
        store.apply(ZONE, Changes(create=[a("y")]), writer="w")
    store.apply(ZONE, Changes(create=[a("y")]), writer="w")
    assert len(store.peek(ZONE)) == 2


def test_the_account_bucket_is_shared_by_every_client_and_refills() -> None:
    clock = FakeClock()
    store = route53_store(clock=clock, profile=ROUTE53)  # 50 burst, 10/s
    for i in range(50):
        store.zones(client=f"replica-{i % 3}")
    with pytest.raises(AccountThrottledError, match="Throttling") as info:
        store.records(ZONE, client="replica-9")
    assert info.value.retry_after == pytest.approx(0.1)
    clock.now += 0.11
    store.records(ZONE, client="replica-9")
    with pytest.raises(AccountThrottledError):
        store.zones(client="replica-0")


# ---- the fence: a compare-and-swap under two writers ----


def test_a_stale_owners_batch_fails_whole_and_never_overlaps_the_new_owner() -> None:
    store = route53_store(10, profile=UNLIMITED)
    old, new = FenceToken(1, "replica-a"), FenceToken(2, "replica-b")
    store.acquire_fence(ZONE, old, writer="replica-a")
    store.apply(ZONE, Changes(create=[a("from-a")]), old, writer="replica-a")
    store.acquire_fence(ZONE, new, writer="replica-b")
    before = store.peek(ZONE)
    stale = Changes(create=[a("late-a")], delete=[before[0]])
    with pytest.raises(FencedError):
        store.apply(ZONE, stale, old, writer="replica-a")
    assert store.peek(ZONE) == before
    with pytest.raises(FencedError):  # nor can the stale owner take the fence back
        store.acquire_fence(ZONE, old, writer="replica-a")
    store.apply(ZONE, Changes(create=[a("from-b")]), new, writer="replica-b")
    assert store.fence_of(ZONE) == new


def test_two_writers_racing_through_fence_moves_never_write_one_zone_at_once() -> None:
    # Real threads and a real latency: each writer keeps writing with the token it last acquired while
    # the other takes the fence at a newer generation; the audit must show no overlapping writes.
    store = FakeStore(limits=Limits(latency=0.002), profile=UNLIMITED)
    store.add_zone(ZONE)
    generation = iter(range(1, 1000))
    lock = threading.Lock()
    results: dict[str, list[str]] = {"replica-a": [], "replica-b": []}

    def writer(identity: str) -> None:
        for round_ in range(15):
            with lock:
                token = FenceToken(next(generation), identity)
            try:
                store.acquire_fence(ZONE, token, writer=identity)
            except (FencedError, FakeThrottledError):
                results[identity].append("lost")
                time.sleep(0.003)
                continue
            for i in range(3):
                time.sleep(0.003)  # room for the other writer to take the fence
                try:
                    store.apply(ZONE, Changes(create=[a(f"{identity}-{round_}-{i}")]), token, writer=identity)
                    results[identity].append("ok")
                except FencedError:
                    results[identity].append("fenced")
                    break
                except FakeThrottledError:  # PriorRequestNotComplete: the other writer's change in flight
                    results[identity].append("busy")

    threads = [threading.Thread(target=writer, args=(name,)) for name in results]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    audit = store.audit(zone=ZONE)
    assert overlapping_writes(audit) == []
    assert overlapping_writes(audit, include_refused=True) == []  # busy zones refuse before the gate
    ok = [e for e in audit if e.op == "apply" and e.outcome == "ok"]
    assert ok and len(store.peek(ZONE)) == len(ok)
    assert all(e.fence == FenceToken.from_text(e.fence or "").to_text() for e in ok)
    assert any(r == "fenced" for r in results["replica-a"] + results["replica-b"])


# ---- over HTTP: Retry-After, pages, the admin API and the command's flags ----


@pytest.fixture
def served() -> Iterator[tuple[FakeStore, FakeServer]]:
    store = route53_store(650, profile=ROUTE53)
    with FakeServer(store, port=0) as server:
        yield store, server


def test_over_http_throttling_carries_retry_after_and_listing_pages(
    served: tuple[FakeStore, FakeServer],
) -> None:
    store, server = served

    async def main() -> None:
        provider = FakeHTTPProvider(server.url, "replica-0")
        try:
            assert len(await provider.records(ZONE)) == 650  # three pages, three requests
            with FakeAdmin(server.url) as admin:
                profile = admin.set_profile("route53", accountRate=1, accountBurst=1)
                assert (profile.account_rate, profile.account_burst, profile.page_size) == (1.0, 1, 300)
            await provider.zones()
            with pytest.raises(FakeThrottledError, match="429") as info:
                await provider.zones()
            assert info.value.retry_after == 1.0
        finally:
            await provider.close()

    anyio.run(main)
    assert store.profile.name == "route53"


def test_in_process_provider_pages_too() -> None:
    store = route53_store(301)

    async def main() -> int:
        return len(await FakeProvider(store, "r").records(ZONE))

    assert anyio.run(main) == 301


def test_the_command_takes_the_profile_and_the_account_budget() -> None:
    parser = argparse.ArgumentParser()
    configure(parser)
    args = parser.parse_args(["--profile", "route53", "--account-rate", "5", "--account-burst", "7"])
    assert (args.profile, args.account_rate, args.account_burst) == ("route53", 5.0, 7)
    assert parser.parse_args([]).profile == "none"
