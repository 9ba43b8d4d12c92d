"""The per-zone record cache (shardsync.providers.cache, `--provider-cache-time`) over the in-process fake
provider: hits, updates from our own writes, and a new listing after expiry, a (re)acquired zone, a fence
failure and a write that shows the cache was wrong. Calls are counted by the budget wrapper's metrics, as
/metrics shows them."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from shardsync.providers.base import BatchRejectedError, FencedError, FenceToken, ThrottledError
from shardsync.providers.budget import BudgetedProvider
from shardsync.providers.cache import CachedProvider, StaleCacheError
from shardsync.providers.fake.faults import Faults
from shardsync.providers.fake.provider import FakeProvider
from shardsync.providers.fake.store import FakeStore
from shardsync.reconcile.worker import Worker, WorkerOptions
from shardsync.records.desired import DesiredIndex
from shardsync.records.endpoint import RESOURCE_LABEL, Changes, Endpoint
from shardsync.records.registry import TxtRegistry
from tests.providers.fake_helpers import FakeClock
from tests.waits import eventually

pytestmark = pytest.mark.anyio

ZONE = "ex.com"


def calls(kind: str) -> float:
    return REGISTRY.get_sample_value("shardsync_provider_calls_total", {"kind": kind}) or 0.0


def a(name: str, ip: str) -> Endpoint:
    return Endpoint.new(name, "A", [ip], labels={RESOURCE_LABEL: f"service/default/{name.split('.')[0]}"})


def cached(
    store: FakeStore, clock: FakeClock, identity: str = "r0", cache_time: float = 60
) -> CachedProvider:
    return CachedProvider(BudgetedProvider(FakeProvider(store, identity), None), cache_time, clock=clock)


def store_with(*records: Endpoint) -> FakeStore:
    store = FakeStore()
    store.add_zone(ZONE, records)
    return store


async def test_reads_are_served_from_the_cache_and_follow_our_writes() -> None:
    store = store_with(a("www.ex.com", "192.0.2.1"))
    provider = cached(store, FakeClock())
    listed = calls("records")
    first = await provider.records(ZONE)
    assert [e.targets for e in first] == [("192.0.2.1",)]
    assert all(not e.labels for e in first)  # as a provider that keeps no labels lists them
    await provider.apply(
        ZONE,
        Changes(
            create=[a("api.ex.com", "192.0.2.9")], update_old=first, update_new=[a("www.ex.com", "192.0.2.2")]
        ),
    )
    again = await provider.records(ZONE)
    assert calls("records") - listed == 1  # one listing, then the cache
    assert sorted((e.dns_name, e.targets) for e in again) == [
        ("api.ex.com", ("192.0.2.9",)),
        ("www.ex.com", ("192.0.2.2",)),
    ]
    listing = [e.without_labels() for e in await provider.inner.records(ZONE)]
    assert sorted(again, key=lambda e: e.key) == sorted(listing, key=lambda e: e.key)  # as a listing says
    await provider.apply(ZONE, Changes(delete=[a("api.ex.com", "192.0.2.9")]))
    assert [e.dns_name for e in await provider.records(ZONE)] == ["www.ex.com"]


async def test_listed_again_after_the_cache_time() -> None:
    clock = FakeClock()
    provider = cached(store_with(), clock, cache_time=30)
    listed = calls("records")
    await provider.records(ZONE)
    clock.now += 29
    await provider.records(ZONE)
    assert calls("records") - listed == 1
    clock.now += 1
    await provider.records(ZONE)
    assert calls("records") - listed == 2


async def test_listed_again_when_the_zone_is_acquired_and_after_a_fence_failure() -> None:
    store = store_with()
    provider = cached(store, FakeClock())
    listed = calls("records")
    await provider.acquire_fence(ZONE, FenceToken(1, "r0"))
    await provider.records(ZONE)
    await provider.acquire_fence(ZONE, FenceToken(2, "r0"))  # (re)acquired under a new generation
    await provider.records(ZONE)
    assert calls("records") - listed == 2
    store.acquire_fence(ZONE, FenceToken(3, "r1"), writer="r1")  # another replica owns it now
    with pytest.raises(FencedError):
        await provider.apply(ZONE, Changes(create=[a("www.ex.com", "192.0.2.1")]), FenceToken(2, "r0"))
    await provider.records(ZONE)
    assert calls("records") - listed == 3


async def test_a_write_that_shows_the_cache_was_wrong_lists_again_without_blaming_records() -> None:
    store = store_with()
    provider = cached(store, FakeClock())
    await provider.records(ZONE)
    await provider.records(ZONE)  # served from the cache
    store.apply(ZONE, Changes(create=[a("www.ex.com", "192.0.2.7")]), writer="someone-else")
    with pytest.raises(StaleCacheError):  # a plain ProviderError: the worker re-plans, no bisection
        await provider.apply(ZONE, Changes(create=[a("www.ex.com", "192.0.2.1")]))
    fresh = await provider.records(ZONE)  # listed again
    assert [e.targets for e in fresh] == [("192.0.2.7",)]
    with pytest.raises(BatchRejectedError) as refused:  # refused after a fresh listing: the batch's fault
        await provider.apply(ZONE, Changes(create=[a("www.ex.com", "192.0.2.1")]))
    assert not isinstance(refused.value, StaleCacheError)


async def test_a_throttled_write_keeps_the_cache() -> None:
    store = store_with()
    provider = cached(store, FakeClock())
    listed = calls("records")
    await provider.records(ZONE)
    store.set_faults(Faults(throttle_next=1))
    with pytest.raises(ThrottledError):
        await provider.apply(ZONE, Changes(create=[a("www.ex.com", "192.0.2.1")]))
    await provider.records(ZONE)
    assert calls("records") - listed == 1


async def test_a_steady_state_change_costs_one_write_call() -> None:
    """Through the worker: after the first sync, each change is one apply, no listing; the periodic resync
    within the cache time costs no call at all."""
    import anyio

    store = store_with()
    provider = cached(store, FakeClock(), cache_time=3600)
    desired = DesiredIndex([ZONE])
    desired.set_object("service/default/www", [a("www.ex.com", "192.0.2.1")])
    worker = Worker(
        provider,
        TxtRegistry(owner_id="shard"),
        desired,
        WorkerOptions(interval=0.2, event_delay=0, concurrency=2),
    )

    def web() -> tuple[str, ...]:
        return next((e.targets for e in store.peek(ZONE) if e.dns_name == "www.ex.com"), ())

    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        worker.own(ZONE, FenceToken(1, "r0"))
        await eventually(lambda: web() == ("192.0.2.1",))
        before = {kind: calls(kind) for kind in ("records", "apply", "fence")}
        for n in range(2, 6):
            worker.mark_dirty(desired.set_object("service/default/www", [a("www.ex.com", f"192.0.2.{n}")]))
            await eventually(lambda n=n: web() == (f"192.0.2.{n}",))  # type: ignore[misc]
        await anyio.sleep(0.6)  # a few periodic resyncs
        tg.cancel_scope.cancel()
    spent = {kind: calls(kind) - before[kind] for kind in before}
    assert spent == {"records": 0, "apply": 4, "fence": 0}
