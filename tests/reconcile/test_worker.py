"""The per-zone pipeline against the in-process fake provider: create, update, delete, ownership, fences,
failures, release and dry run."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest

from shardsync.providers.base import FenceToken
from shardsync.providers.fake.faults import Faults
from shardsync.providers.fake.limits import Limits
from shardsync.providers.fake.provider import FakeProvider
from shardsync.providers.fake.store import FakeStore
from shardsync.reconcile.worker import NOT_WRITING_RETRY, Worker, WorkerOptions
from shardsync.records.desired import DesiredIndex
from shardsync.records.endpoint import RESOURCE_LABEL, Changes, Endpoint
from shardsync.records.registry import TxtRegistry
from tests.waits import eventually

pytestmark = pytest.mark.anyio

ZONE = "ex.com"


def svc(name: str, host: str, ip: str) -> Endpoint:
    return Endpoint.new(host, "A", [ip], labels={RESOURCE_LABEL: f"service/default/{name}"})


def names(store: FakeStore, zone: str = ZONE) -> dict[tuple[str, str], tuple[str, ...]]:
    return {(e.dns_name, e.record_type): e.targets for e in store.peek(zone)}


@asynccontextmanager
async def running(worker: Worker) -> AsyncIterator[Worker]:
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        try:
            yield worker
        finally:
            tg.cancel_scope.cancel()


def make(store: FakeStore, desired: DesiredIndex, identity: str = "r0", **opts: object) -> Worker:
    options = WorkerOptions(interval=60, event_delay=0, concurrency=4, **opts)  # type: ignore[arg-type]
    return Worker(FakeProvider(store, identity), TxtRegistry(owner_id="shard"), desired, options)


async def test_create_update_delete_with_ownership_records() -> None:
    store = FakeStore()
    store.add_zone(ZONE)
    desired = DesiredIndex([ZONE])
    worker = make(store, desired)
    async with running(worker):
        desired.set_object("service/default/web", [svc("web", "www.ex.com", "192.0.2.1")])
        worker.own(ZONE)
        await eventually(lambda: ("www.ex.com", "A") in names(store))
        txt = names(store)[("a-www.ex.com", "TXT")]
        assert txt == (
            '"heritage=external-dns,external-dns/owner=shard,external-dns/resource=service/default/web"',
        )

        worker.mark_dirty(desired.set_object("service/default/web", [svc("web", "www.ex.com", "192.0.2.2")]))
        await eventually(lambda: names(store).get(("www.ex.com", "A")) == ("192.0.2.2",))

        worker.mark_dirty(desired.set_object("service/default/web", []))
        await eventually(lambda: names(store) == {})


async def test_foreign_records_are_never_touched() -> None:
    store = FakeStore()
    foreign = Endpoint.new("www.ex.com", "A", ["198.51.100.7"])
    foreign_txt = Endpoint.new("a-www.ex.com", "TXT", ['"heritage=external-dns,external-dns/owner=other"'])
    store.add_zone(ZONE, [foreign, foreign_txt])
    desired = DesiredIndex([ZONE])
    desired.set_object("service/default/web", [svc("web", "www.ex.com", "192.0.2.1")])
    worker = make(store, desired)
    async with running(worker):
        worker.own(ZONE)
        await eventually(lambda: worker.statuses[ZONE].syncs >= 1)
    assert names(store)[("www.ex.com", "A")] == ("198.51.100.7",)
    assert [e.writer for e in store.audit() if e.op == "apply"] == []


async def test_fenced_write_drops_the_zone() -> None:
    store = FakeStore()
    store.add_zone(ZONE)
    desired = DesiredIndex([ZONE])
    fenced: list[tuple[str, FenceToken | None]] = []
    worker = make(store, desired)
    worker.on_fenced = lambda zone, token: fenced.append((zone, token))
    async with running(worker):
        worker.own(ZONE, FenceToken(generation=1, identity="r0"))
        await eventually(lambda: worker.statuses[ZONE].syncs >= 1)
        assert store.fence_of(ZONE) == FenceToken(1, "r0")
        # a newer owner takes the zone; our next write must be refused by the provider itself
        store.acquire_fence(ZONE, FenceToken(generation=2, identity="r1"), writer="r1")
        worker.mark_dirty(desired.set_object("service/default/web", [svc("web", "www.ex.com", "192.0.2.1")]))
        await eventually(lambda: bool(fenced))
    assert fenced == [(ZONE, FenceToken(1, "r0"))]
    assert ("www.ex.com", "A") not in names(store)


async def test_zones_gained_at_once_are_all_fenced_before_any_is_written() -> None:
    # A replica taking over a failed peer's zones must hold all of them at the provider quickly: with
    # fence, read and write in one pass per zone, the last fence would wait for every other zone's write.
    store = FakeStore(limits=Limits(latency=0.005))
    zones = [f"z{i:02d}.com" for i in range(20)]
    for zone in zones:
        store.add_zone(zone)
    desired = DesiredIndex(zones)
    for i, zone in enumerate(zones):
        desired.set_object(f"service/default/s{i}", [svc(f"s{i}", f"www.{zone}", "192.0.2.1")])
    worker = make(store, desired)
    async with running(worker):
        for zone in zones:
            worker.own(zone, FenceToken(3, "r0"))
        await eventually(lambda: all(("www." + z, "A") in names(store, z) for z in zones))
    fences = [e for e in store.audit() if e.op == "fence"]
    applies = [e for e in store.audit() if e.op == "apply"]
    assert sorted(e.zone for e in fences) == zones  # each fence taken once
    # every fence was under way before any zone was written (the last few overlap the first writes: a
    # runner that popped the last fence may record its start a little after another began a write)
    assert max(e.start for e in fences) <= min(e.end for e in applies)


async def test_before_the_desired_state_is_whole_zones_are_fenced_but_never_planned() -> None:
    # A restart: the zones hold our records of two Services, but only one Service is translated yet (its
    # kind listed, the other's still listing). Planning now would delete the other's records.
    store = FakeStore()
    zones = ["a.com", "b.com"]
    for zone in zones:
        store.add_zone(zone)
    full = DesiredIndex(zones)
    for zone in zones:
        full.set_object(f"service/default/web-{zone}", [svc("web", f"www.{zone}", "192.0.2.1")])
        full.set_object(f"service/default/api-{zone}", [svc("api", f"api.{zone}", "192.0.2.2")])
    async with running(make(store, full)) as first:
        for zone in zones:
            first.own(zone)
        await eventually(lambda: all(len(names(store, z)) == 4 for z in zones))  # 2 A + 2 TXT each
    before = {z: names(store, z) for z in zones}
    writes = len(store.audit())

    partial = DesiredIndex(zones)
    for zone in zones:
        partial.set_object(f"service/default/web-{zone}", [svc("web", f"www.{zone}", "192.0.2.1")])
    worker = make(store, partial, identity="r1")
    worker.inputs = anyio.Event()
    async with running(worker):
        worker.own("a.com", FenceToken(2, "r1"))  # a sharded replica's zone: fenced at once
        worker.own("b.com")  # unsharded: nothing to take first
        await eventually(lambda: store.fence_of("a.com") == FenceToken(2, "r1"))
        await eventually(lambda: worker._schedule.next_due() is None)  # both parked, neither planned
        assert [e.op for e in store.audit(since=writes)] == ["fence"]
        assert {z: names(store, z) for z in zones} == before
        assert all(worker.statuses[z].syncs == 0 for z in zones)

        for zone in zones:  # the other kind has listed: the desired state is whole
            worker.mark_dirty(
                partial.set_object(f"service/default/api-{zone}", [svc("api", f"api.{zone}", "192.0.2.2")])
            )
        worker.inputs.set()
        await eventually(lambda: all(worker.statuses[z].syncs >= 1 for z in zones))
    assert [e.op for e in store.audit(since=writes)] == ["fence"]  # nothing to change, nothing deleted
    assert {z: names(store, z) for z in zones} == before


async def test_failing_zone_backs_off_and_does_not_block_others() -> None:
    store = FakeStore(faults=Faults(fail_zones=frozenset({"bad.com"})))
    store.add_zone(ZONE)
    store.add_zone("bad.com")
    desired = DesiredIndex([ZONE, "bad.com"])
    desired.set_object("service/default/web", [svc("web", "www.ex.com", "192.0.2.1")])
    worker = make(store, desired)
    async with running(worker):
        worker.own("bad.com")
        worker.own(ZONE)
        await eventually(lambda: ("www.ex.com", "A") in names(store))
        await eventually(lambda: worker._schedule.failures("bad.com") >= 1)
        assert worker.statuses["bad.com"].last_error
        assert worker.statuses["bad.com"].syncs == 0
        # the failed zone is retried later, not in a hot loop
        due = worker._schedule.next_due()
        assert due is not None


class SlowApply(FakeProvider):
    """Tells the test when a write has reached the provider."""

    entered: anyio.Event

    async def apply(self, zone: str, changes: Changes, fence: FenceToken | None = None) -> None:
        self.entered.set()
        await super().apply(zone, changes, fence)


async def test_release_waits_for_the_write_in_flight_and_stops_writing() -> None:
    store = FakeStore(limits=Limits(latency=0.3))
    store.add_zone(ZONE)
    desired = DesiredIndex([ZONE])
    desired.set_object("service/default/web", [svc("web", "www.ex.com", "192.0.2.1")])
    provider = SlowApply(store, "r0")
    provider.entered = anyio.Event()
    worker = Worker(provider, TxtRegistry(owner_id="shard"), desired, WorkerOptions(event_delay=0))
    async with running(worker):
        worker.own(ZONE)
        with anyio.fail_after(5):
            await provider.entered.wait()
        asked = time.monotonic()
        await worker.release(ZONE)
        released = time.monotonic()
        writes = [e for e in store.audit() if e.op == "apply"]
        # release returned only after the write it interrupted had landed
        assert len(writes) == 1 and writes[0].outcome == "ok"
        assert asked < writes[0].end <= released
        worker.mark_dirty(desired.set_object("service/default/web", [svc("web", "www.ex.com", "192.0.2.9")]))
        await anyio.sleep(0.4)
    assert len(store.audit()) == 1, "no write after release"
    assert names(store)[("www.ex.com", "A")] == ("192.0.2.1",)


async def test_dry_run_writes_nothing() -> None:
    store = FakeStore()
    store.add_zone(ZONE)
    desired = DesiredIndex([ZONE])
    desired.set_object("service/default/web", [svc("web", "www.ex.com", "192.0.2.1")])
    worker = make(store, desired, dry_run=True)
    async with running(worker):
        worker.own(ZONE, FenceToken(generation=1, identity="r0"))
        await eventually(lambda: worker.statuses[ZONE].syncs >= 1)
    assert names(store) == {}
    assert store.audit() == []
    assert store.fence_of(ZONE) is None


async def test_a_throttled_zone_backs_off_at_least_as_long_as_the_provider_asked() -> None:
    store = FakeStore(faults=Faults(throttle_next=1))
    store.add_zone(ZONE)
    worker = make(store, DesiredIndex([ZONE]), max_backoff=30)
    worker.own(ZONE)
    # the injected throttle says Retry-After 1 s; the worker's own first back-off is about 0.5 s
    assert await worker._reconcile_guarded(ZONE) == 1.0
    assert worker.statuses[ZONE].last_error.startswith("throttled")
    assert await worker._reconcile_guarded(ZONE) is None


async def test_a_gained_zone_is_planned_only_once_its_desired_endpoints_are_rebuilt() -> None:
    """Per-shard state (records/desired.py): owning a zone whose objects were dropped asks for them again;
    until they are back the zone is not planned, so its records are not deleted as if nothing were desired."""
    store = FakeStore()
    store.add_zone(ZONE)
    desired = DesiredIndex([ZONE], restricted=True)
    web = [svc("web", "www.ex.com", "192.0.2.1")]
    desired.keep(ZONE)
    desired.set_object("service/default/web", web)
    worker = make(store, desired)
    async with running(worker):
        worker.own(ZONE)
        await eventually(lambda: ("www.ex.com", "A") in names(store))
        await worker.release(ZONE)
        assert desired.desired(ZONE) == []  # freed
        asked: list[set[str]] = []
        desired.on_rebuild = asked.append
        worker.own(ZONE)
        assert asked == [{"service/default/web"}]
        await anyio.sleep(0.3)  # several rebuild waits: the zone is looked at, never planned
        assert worker.statuses[ZONE].syncs == 0
        assert ("www.ex.com", "A") in names(store)
        worker.mark_dirty(desired.set_object("service/default/web", web))
        await eventually(lambda: worker.statuses[ZONE].syncs >= 1)
        assert names(store)[("www.ex.com", "A")] == ("192.0.2.1",)


class CountingReads(FakeProvider):
    """The in-process fake provider, counting its reads: conditional ones answered "unchanged", and full."""

    def __init__(self, store: FakeStore) -> None:
        super().__init__(store, "r0")
        self.unchanged = self.full = 0

    async def records(self, zone: str) -> list[Endpoint]:
        self.full += 1
        return await super().records(zone)

    async def records_if_changed(
        self, zone: str, version: str | None
    ) -> tuple[str | None, list[Endpoint] | None]:
        answer = await super().records_if_changed(zone, version)
        if answer[1] is None:
            self.unchanged += 1
        else:
            self.full += 1
        return answer


async def test_the_steady_state_is_a_conditional_read_and_a_change_at_the_provider_is_reverted() -> None:
    """A provider that names versions (base.ReadsIfChanged) is asked "changed since?" once a plan had
    nothing to do, and answers without the records; a record changed behind our back changes the version,
    and the zone is read in full and repaired at that pass; a desired change is read in full too."""
    store = FakeStore()
    store.add_zone(ZONE)
    desired = DesiredIndex([ZONE])
    desired.set_object("service/default/web", [svc("web", "www.ex.com", "192.0.2.1")])
    provider = CountingReads(store)
    options = WorkerOptions(interval=60, event_delay=0, concurrency=4)
    worker = Worker(provider, TxtRegistry(owner_id="shard"), desired, options)
    async with running(worker):
        worker.own(ZONE)
        for syncs in (1, 2):  # the write, then the plan with nothing to do
            worker.mark_dirty([ZONE])
            await eventually(lambda n=syncs: worker.statuses[ZONE].syncs >= n)  # type: ignore[misc]
        full = provider.full
        for syncs in (3, 4, 5):
            worker.mark_dirty([ZONE])
            await eventually(lambda n=syncs: worker.statuses[ZONE].syncs >= n)  # type: ignore[misc]
        assert (provider.unchanged, provider.full) == (3, full)
        [record] = [e for e in store.peek(ZONE) if e.record_type == "A"]
        store.apply(ZONE, Changes(delete=[record]), writer="someone-else")
        worker.mark_dirty([ZONE])
        await eventually(lambda: names(store).get(("www.ex.com", "A")) == ("192.0.2.1",))
        assert provider.full == full + 1
        worker.mark_dirty(desired.set_object("service/default/web", [svc("web", "www.ex.com", "192.0.2.9")]))
        await eventually(lambda: names(store).get(("www.ex.com", "A")) == ("192.0.2.9",))


async def test_a_zone_listing_with_versions_verifies_an_unchanged_zone_without_a_call() -> None:
    """With the zone listing's versions (base.ListsVersions, read every interval by zone discovery), a zone
    still at the version of its last plan that had nothing to do costs no provider call; a listing that
    names a new version (a record changed behind our back) makes the zone read in full and repaired, and a
    listing older than two intervals verifies nothing."""
    store = FakeStore()
    store.add_zone(ZONE)
    desired = DesiredIndex([ZONE])
    desired.set_object("service/default/web", [svc("web", "www.ex.com", "192.0.2.1")])
    provider = CountingReads(store)
    now = [0.0]
    options = WorkerOptions(interval=60, event_delay=0, concurrency=4)
    worker = Worker(provider, TxtRegistry(owner_id="shard"), desired, options, clock=lambda: now[0])

    def listing() -> None:  # what zone discovery hands the worker each interval
        worker.zones_listed({ZONE: store.records_if_changed(ZONE)[0]})

    async def resync(syncs: int) -> None:
        worker.mark_dirty([ZONE])
        await eventually(lambda: worker.statuses[ZONE].syncs >= syncs)

    async with running(worker):
        worker.own(ZONE)
        await resync(1)  # the write
        await resync(2)  # the plan with nothing to do
        calls = (provider.unchanged, provider.full)
        listing()
        for syncs in (3, 4, 5):
            await resync(syncs)
        assert (provider.unchanged, provider.full) == calls  # verified by the listing alone
        [record] = [e for e in store.peek(ZONE) if e.record_type == "A"]
        store.apply(ZONE, Changes(delete=[record]), writer="someone-else")
        listing()
        await resync(6)
        assert names(store).get(("www.ex.com", "A")) == ("192.0.2.1",)  # repaired at that pass
        assert provider.full == calls[1] + 1
        await resync(7)  # planned with nothing to do again, at the new version
        listing()
        calls = (provider.unchanged, provider.full)
        await resync(8)
        assert (provider.unchanged, provider.full) == calls
        now[0] += 3 * options.interval + 1  # discovery stopped listing: the zone is asked again
        await resync(9)
        assert (provider.unchanged, provider.full) == (calls[0] + 1, calls[1])


async def test_an_unchanged_zone_is_not_planned_again_but_a_changed_read_is() -> None:
    """The steady-state check: the same records read and the same desired endpoints skip the plan; a record
    changed behind our back (another writer) changes the read, and the zone is repaired."""
    store = FakeStore()
    store.add_zone(ZONE)
    desired = DesiredIndex([ZONE])
    desired.set_object("service/default/web", [svc("web", "www.ex.com", "192.0.2.1")])
    worker = make(store, desired)

    def ours() -> int:
        return len([e for e in store.audit() if e.op == "apply" and e.writer == "r0"])

    async with running(worker):
        worker.own(ZONE)
        await eventually(lambda: worker.statuses[ZONE].syncs >= 1)
        worker.mark_dirty([ZONE])
        await eventually(lambda: worker.statuses[ZONE].syncs >= 2)
        assert ZONE in worker._unchanged  # that plan had nothing to do: the next same read skips it
        writes = ours()
        worker.mark_dirty([ZONE])
        await eventually(lambda: worker.statuses[ZONE].syncs >= 3)
        assert ours() == writes
        [record] = [e for e in store.peek(ZONE) if e.record_type == "A"]
        store.apply(ZONE, Changes(delete=[record]), writer="someone-else")
        worker.mark_dirty([ZONE])
        await eventually(lambda: names(store).get(("www.ex.com", "A")) == ("192.0.2.1",))
        assert ours() == writes + 1


async def test_a_self_fenced_zone_is_retried_at_a_fixed_short_delay_not_a_growing_backoff() -> None:
    # An API outage self-fences the replica for as long as it lasts; the zones must write again as soon as
    # the lease is renewed, not after a backoff that grew through the outage (30 s and more).
    store = FakeStore()
    store.add_zone(ZONE)
    desired = DesiredIndex([ZONE])
    desired.set_object("service/default/web", [svc("web", "www.ex.com", "192.0.2.1")])
    writing = False
    worker = make(store, desired)
    worker.may_write = lambda: writing
    worker.own(ZONE)
    delays = [await worker._reconcile_guarded(ZONE) for _ in range(8)]
    assert delays == [NOT_WRITING_RETRY] * 8
    writing = True
    assert await worker._reconcile_guarded(ZONE) is None
    assert ("www.ex.com", "A") in names(store)
