"""The fake provider's `cloudflare` profile: Cloudflare's documented account limit (1,200 requests per five
minutes, then five minutes of nothing but 429), its batch size and its listing pages, as the bench's
provider_budget runs meet them. The provider itself is tested against a contract fake of Cloudflare's own
API (tests/providers/test_cloudflare.py)."""

from __future__ import annotations

import pytest

from shardsync.providers.base import BatchRejectedError
from shardsync.providers.fake.profile import CLOUDFLARE, PROFILES, AccountThrottledError, profile_from_json
from shardsync.providers.fake.store import FakeStore
from shardsync.records.endpoint import Changes, Endpoint
from tests.providers.fake_helpers import FakeClock

ZONE = "example.org"


def a(name: str, ip: str = "192.0.2.1") -> Endpoint:
    return Endpoint.new(f"{name}.{ZONE}", "A", [ip])


def test_1200_requests_in_five_minutes_then_every_request_is_refused_for_five_minutes() -> None:
    clock = FakeClock()
    store = FakeStore(profile=CLOUDFLARE, clock=clock)
    store.add_zone(ZONE)
    for i in range(1200):
        store.zones(client=f"replica-{i % 4}")  # the account's limit, whichever replica asks
        clock.now += 0.1  # 120 s for all of them
    with pytest.raises(AccountThrottledError, match="429") as info:
        store.records(ZONE, client="replica-0")
    assert info.value.retry_after == 300 and store.profile_blocks == 1
    clock.now += 250  # the first requests have left the window, but the block holds
    with pytest.raises(AccountThrottledError) as info:
        store.zones(client="replica-1")
    assert info.value.retry_after == 50 and store.profile_blocks == 1
    clock.now += 50
    store.zones(client="replica-1")
    assert store.profile_blocks == 1


def test_a_steady_four_requests_a_second_never_blocks() -> None:
    clock = FakeClock()
    store = FakeStore(profile=CLOUDFLARE, clock=clock)
    store.add_zone(ZONE)
    for _ in range(4 * 900):  # 15 minutes at 1,200 per 300 s
        store.zones()
        clock.now += 0.25
    assert store.profile_blocks == 0


def test_a_batch_holds_at_most_200_operations_an_update_counting_once() -> None:
    store = FakeStore(profile=CLOUDFLARE)
    store.add_zone(ZONE, [a(f"u{i}") for i in range(100)])
    changes = Changes(
        create=[a(f"c{i}") for i in range(100)],
        update_old=[a(f"u{i}") for i in range(100)],
        update_new=[a(f"u{i}", "192.0.2.2") for i in range(100)],
    )
    store.apply(ZONE, changes, writer="r0")  # 200: under Route53's count (an UPSERT twice) it would be 300
    with pytest.raises(BatchRejectedError, match="limit 200"):
        store.apply(ZONE, Changes(create=[a(f"d{i}") for i in range(201)]), writer="r0")


def test_the_profile_is_one_entry_of_the_table_and_named_over_the_admin_api() -> None:
    assert PROFILES["cloudflare"] is CLOUDFLARE
    assert profile_from_json({"name": "cloudflare"}) == CLOUDFLARE
    assert CLOUDFLARE.to_json()["windowRequests"] == 1200
