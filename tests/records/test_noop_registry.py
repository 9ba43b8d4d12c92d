"""`--registry=noop`: external-dns's noop registry. No ownership records are read or written, and every
managed record in an owned zone is ours (owner id "": the planner applies no ownership filter)."""

from __future__ import annotations

import anyio
import pytest

from shardsync.providers.fake.provider import FakeProvider
from shardsync.providers.fake.store import FakeStore
from shardsync.reconcile.worker import Worker, WorkerOptions
from shardsync.records.desired import DesiredIndex
from shardsync.records.endpoint import OWNER_LABEL, RESOURCE_LABEL, Changes, Endpoint
from shardsync.records.noop_registry import NoopRegistry
from shardsync.records.plan import SkipReason, plan
from shardsync.records.registry import TxtRegistry
from shardsync.replica.config import Settings
from shardsync.replica.wiring import registry_for
from tests.waits import eventually

ZONE = "ex.com"
OWNERSHIP_TXT = '"heritage=external-dns,external-dns/owner=other"'


def a(name: str, ip: str, resource: str | None = None) -> Endpoint:
    labels = {RESOURCE_LABEL: resource} if resource else {}
    return Endpoint.new(name, "A", [ip], labels=labels)


def test_read_keeps_every_record_as_listed_ownership_txt_included() -> None:
    records = [a("www.ex.com", "192.0.2.1"), Endpoint.new("a-www.ex.com", "TXT", [OWNERSHIP_TXT])]
    view = NoopRegistry().read(records)
    assert view.current == records
    assert not view.ownership_txts and not view.foreign_rows and not view.upgrades


def test_with_ownership_passes_the_changes_through_unchanged() -> None:
    changes = Changes(create=[a("new.ex.com", "192.0.2.1")], delete=[a("old.ex.com", "192.0.2.2")])
    result = NoopRegistry().with_ownership(changes)
    assert result.changes is changes and result.skipped == []


def test_owner_id_is_empty_and_managed_types_are_normalised() -> None:
    registry = NoopRegistry(["a", "cname"])
    assert registry.owner_id == ""
    assert registry.managed_types == frozenset({"A", "CNAME"})


def test_the_planner_treats_every_managed_record_as_ours() -> None:
    registry = NoopRegistry()
    current = registry.read(
        [
            a("www.ex.com", "192.0.2.1"),
            a("gone.ex.com", "192.0.2.9"),
            Endpoint.new("www.ex.com", "AAAA", ["2001:db8::1"], labels={OWNER_LABEL: "someone"}),
        ]
    ).current
    desired = [a("www.ex.com", "192.0.2.2", "service/default/web"), a("new.ex.com", "192.0.2.3")]
    result = plan(desired, current, "sync", registry.owner_id, registry.managed_types)
    assert [e.key for e in result.changes.update_new] == [("www.ex.com", "A", "")]
    assert OWNER_LABEL not in result.changes.update_new[0].labels  # no owner to stamp
    assert sorted(e.dns_name for e in result.changes.delete) == ["gone.ex.com", "www.ex.com"]
    assert [e.dns_name for e in result.changes.create] == ["new.ex.com"]
    assert result.skipped == []


def test_the_noop_planner_still_keeps_the_cname_rule() -> None:
    registry = NoopRegistry()
    current = [a("www.ex.com", "192.0.2.1")]  # stays: upsert-only deletes nothing
    desired = [Endpoint.new("www.ex.com", "CNAME", ["elsewhere.ex.com"])]
    result = plan(desired, current, "upsert-only", registry.owner_id, registry.managed_types)
    assert result.changes.create == []
    assert [s.reason for s in result.skipped] == [SkipReason.CNAME_CONFLICT]


def test_the_replica_selects_the_registry_from_the_flag() -> None:
    assert isinstance(registry_for(Settings(registry="noop")), NoopRegistry)
    txt = registry_for(Settings(registry="txt", txt_owner_id="green"))
    assert isinstance(txt, TxtRegistry) and txt.owner_id == "green"


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_worker_with_the_noop_registry_writes_no_ownership_records(anyio_backend: str) -> None:
    unowned = a("old.ex.com", "198.51.100.7")
    store = FakeStore()
    store.add_zone(ZONE, [unowned])
    desired = DesiredIndex([ZONE])
    desired.set_object("service/default/web", [a("www.ex.com", "192.0.2.1", "service/default/web")])
    worker = Worker(FakeProvider(store, "r0"), NoopRegistry(), desired, WorkerOptions(event_delay=0))
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        worker.own(ZONE)
        # The record nobody claimed is ours too, so it goes; nothing is written beside the new one.
        await eventually(lambda: {e.dns_name for e in store.peek(ZONE)} == {"www.ex.com"})
        tg.cancel_scope.cancel()
    assert [e.record_type for e in store.peek(ZONE)] == ["A"]
