"""The delete guard (shardsync.reconcile.delete_guard) in the worker, against the in-process fake provider:
deletes the namespace policy causes are made while they are few, refused with an Event when they would take
more than the threshold of the zone's owned records, and ordinary deletes never count."""

from __future__ import annotations

import anyio
import pytest

from shardsync.kube.events import EventRecorder
from shardsync.kube.objects import ObjectRef
from shardsync.providers.fake.provider import FakeProvider
from shardsync.providers.fake.store import FakeStore
from shardsync.reconcile.delete_guard import REASON, DeleteGuard
from shardsync.reconcile.worker import Worker, WorkerOptions
from shardsync.records.desired import DesiredIndex
from shardsync.records.endpoint import RESOURCE_LABEL, Changes, Endpoint
from shardsync.records.registry import TxtRegistry
from tests.waits import eventually

pytestmark = pytest.mark.anyio

ZONE = "ex.com"


class Recording(EventRecorder):
    """Keeps what is recorded instead of writing it."""

    def __init__(self) -> None:
        super().__init__(None, "test")
        self.recorded: list[tuple[ObjectRef, str]] = []

    def record(self, ref: ObjectRef, reason: str, message: str, etype: str = "Warning") -> None:
        self.recorded.append((ref, reason))


def publish(desired: DesiredIndex, names: list[str]) -> None:
    for name in names:
        key = f"service/team-a/{name}"
        ep = Endpoint.new(f"{name}.ex.com", "A", ["192.0.2.1"], labels={RESOURCE_LABEL: key})
        desired.set_object(key, [ep])


async def test_policy_deletes_beyond_the_threshold_are_refused_and_the_rest_of_the_sync_goes_on() -> None:
    store = FakeStore()
    store.add_zone(ZONE)
    provider = FakeProvider(store, "r0")
    desired = DesiredIndex([ZONE])
    names = [f"n{i}" for i in range(10)]
    publish(desired, names)
    refused: set[str] = set()
    events = Recording()
    guard = DeleteGuard(lambda name, _type: name in refused, 0.5, "shard", events)
    options = WorkerOptions(interval=0.05, event_delay=0, concurrency=1)
    worker = Worker(provider, TxtRegistry(owner_id="shard"), desired, options, events=events, guard=guard)

    def names_in_zone() -> set[str]:
        return {ep.dns_name for ep in store.peek(ZONE) if ep.record_type == "A"}

    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        worker.own(ZONE)
        await eventually(lambda: names_in_zone() == {f"{n}.ex.com" for n in names})
        # A policy typo refuses 6 of the 10 names: their objects no longer give them.
        refused |= {f"n{i}.ex.com" for i in range(6)}
        for i in range(6):
            desired.set_object(f"service/team-a/n{i}", [])
        publish(desired, ["fresh"])  # the rest of the sync still happens
        worker.mark_dirty([ZONE])
        await eventually(lambda: "fresh.ex.com" in names_in_zone())
        await eventually(lambda: sum(1 for _, reason in events.recorded if reason == REASON) >= 6)
        assert len(names_in_zone()) == 11  # nothing deleted
        # An ordinary delete (an object removed) is not the policy's and goes through.
        desired.set_object("service/team-a/n9", [])
        worker.mark_dirty([ZONE])
        await eventually(lambda: "n9.ex.com" not in names_in_zone())
        # The admin fixes most of the typo: 2 refused names of 10 owned are deleted.
        refused -= {f"n{i}.ex.com" for i in range(2, 6)}
        publish(desired, [f"n{i}" for i in range(2, 6)])
        worker.mark_dirty([ZONE])
        left = {f"{n}.ex.com" for n in ["n2", "n3", "n4", "n5", "n6", "n7", "n8", "fresh"]}
        await eventually(lambda: names_in_zone() == left)
        tg.cancel_scope.cancel()
    refs = {ref.name for ref, reason in events.recorded if reason == REASON}
    assert refs == {f"n{i}" for i in range(6)}


def test_a_guard_of_one_lets_every_delete_through_and_no_policy_means_no_guard() -> None:
    gone = Endpoint.new("a.ex.com", "A", ["192.0.2.1"], labels={"owner": "shard"})
    changes = Changes(delete=[gone])
    assert DeleteGuard(lambda *_: True, 1.0, "shard")(ZONE, changes, [gone]) == changes
    assert DeleteGuard(lambda *_: True, 0.5, "shard")(ZONE, changes, [gone]).delete == []
    assert DeleteGuard.of(None, 0.5, "shard", None) is None
