"""The worker's Events name the source object an endpoint's `resource` label points to, with the kind and
apiVersion the source table gives that label (a label of no source in the table: a core v1 object)."""

from __future__ import annotations

import anyio
import pytest

from shardsync.kube.events import EventRecorder
from shardsync.kube.objects import ObjectRef
from shardsync.providers.fake.faults import Faults
from shardsync.providers.fake.provider import FakeProvider
from shardsync.providers.fake.store import FakeStore
from shardsync.reconcile.worker import Worker, WorkerOptions
from shardsync.records.desired import DesiredIndex
from shardsync.records.endpoint import RESOURCE_LABEL, Endpoint
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


async def test_a_rejected_record_is_reported_on_its_source_object() -> None:
    bad = {"bad-crd.ex.com", "bad-ingress.ex.com", "bad-pod.ex.com", "bad-node.ex.com", "bad-vs.ex.com"}
    store = FakeStore(faults=Faults(fail_records=frozenset(bad)))
    store.add_zone(ZONE)
    desired = DesiredIndex([ZONE])
    for resource, name in (
        ("crd/dns/records", "bad-crd"),
        ("ingress/web/app", "bad-ingress"),
        ("pod/default/p", "bad-pod"),
        ("node/n1", "bad-node"),  # a cluster-scoped object: no namespace in its label
        ("httpproxy/default/v", "bad-vs"),  # no source of ours: a core v1 object of that kind
        ("service/default/ok", "fine"),
    ):
        ep = Endpoint.new(f"{name}.ex.com", "A", ["192.0.2.1"], labels={RESOURCE_LABEL: resource})
        desired.set_object(resource, [ep])
    events = Recording()
    options = WorkerOptions(interval=60, event_delay=0, concurrency=1)
    worker = Worker(FakeProvider(store, "r0"), TxtRegistry(owner_id="shard"), desired, options, events=events)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        worker.own(ZONE)
        await eventually(lambda: len(events.recorded) == 5)
        tg.cancel_scope.cancel()
    assert {(ref.kind, ref.api_version, ref.namespace, ref.name) for ref, _ in events.recorded} == {
        ("DNSEndpoint", "externaldns.k8s.io/v1alpha1", "dns", "records"),
        ("Ingress", "networking.k8s.io/v1", "web", "app"),
        ("Pod", "v1", "default", "p"),
        ("Node", "v1", "", "n1"),
        ("httpproxy", "v1", "default", "v"),
    }
    assert {reason for _, reason in events.recorded} == {"DNSRecordRejected"}
