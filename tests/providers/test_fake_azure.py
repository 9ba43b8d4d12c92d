"""The fake provider's `azure` profile: Azure Resource Manager's documented limits (a read bucket of 250
refilled at 25/s for every request, a write bucket of 200 refilled at 10/s, Microsoft.Network's 1,000 writes
per five minutes refused without a block), an apply costing a write per record set plus its fence bumps,
and listing pages of 100, as the bench's provider_budget runs meet them. The provider itself is tested
against a contract fake of Azure's own API (tests/providers/azure/test_azure.py)."""

from __future__ import annotations

import pytest

from shardsync.providers.fake.profile import AZURE, PROFILES, AccountThrottledError, profile_from_json
from shardsync.providers.fake.store import FakeStore
from shardsync.records.endpoint import Changes, Endpoint
from tests.providers.fake_helpers import FakeClock

ZONE = "example.org"


def a(name: str, ip: str = "192.0.2.1") -> Endpoint:
    return Endpoint.new(f"{name}.{ZONE}", "A", [ip])


def test_an_apply_costs_a_write_per_record_set_and_the_write_bucket_refills_at_ten_a_second() -> None:
    clock = FakeClock()
    store = FakeStore(profile=AZURE, clock=clock)
    store.add_zone(ZONE)
    # 190 record sets and their 10 fence bumps (one per batch of 20): the whole bucket of 200
    store.apply(ZONE, Changes(create=[a(f"r{i}") for i in range(190)]), writer="r0")
    with pytest.raises(AccountThrottledError, match="write limit") as info:
        store.apply(ZONE, Changes(create=[a("late")]), writer="r1")  # the account's, whichever replica
    assert info.value.retry_after == pytest.approx(0.1)
    store.zones(client="r1")  # reads have their own bucket
    clock.now += 0.2
    store.apply(ZONE, Changes(create=[a("late")]), writer="r1")  # a record set and its fence bump


def test_a_thousand_writes_in_five_minutes_then_writes_wait_for_the_oldest_to_leave() -> None:
    clock = FakeClock()
    store = FakeStore(profile=AZURE, clock=clock)
    store.add_zone(ZONE)
    for i in range(500):  # two writes each (a record set, the fence bump), at 4 writes a second
        store.apply(ZONE, Changes(create=[a(f"r{i}")]), writer="r0")
        clock.now += 0.5
    with pytest.raises(AccountThrottledError, match="1000 writes") as info:
        store.apply(ZONE, Changes(create=[a("late")]), writer="r0")
    assert info.value.retry_after == 50  # 250 s on, the first writes leave the window at 300 s
    assert store.profile_blocks == 0  # no five-minute block: reads go on
    store.records(ZONE, client="r0")
    clock.now += 50
    store.apply(ZONE, Changes(create=[a("late")]), writer="r0")


def test_listings_are_pages_of_100_and_the_profile_is_one_entry_of_the_table() -> None:
    store = FakeStore(profile=AZURE)
    store.add_zone(ZONE, [a(f"r{i}") for i in range(250)])
    page, after = store.records_page(ZONE)
    assert len(page) == 100 and after is not None
    assert PROFILES["azure"] is AZURE
    assert profile_from_json({"name": "azure"}) == AZURE
    assert AZURE.to_json()["writeWindow"] == 1000
