"""The member lease loop against the embedded API server: create and renew with labels and annotations,
survive a concurrent edit (409), self-fence when cut off and count the failures, remember when it sent each
renewal (a watch that echoes one is current), and leave by deleting the lease."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from prometheus_client import REGISTRY

from shardsync.kube.client import Kube
from shardsync.kube.objects import LEASES
from shardsync.local.apiserver import ApiServer
from shardsync.sharding.member_loop import MemberLoop
from shardsync.sharding.membership import member_lease_name
from shardsync.sharding.site import Site
from shardsync.sharding.timings import Timings
from tests.sharding.cluster import INSTANCE, LEASE, NAMESPACE, RENEW, user_agent, wait_for

pytestmark = pytest.mark.anyio

TIMINGS = Timings.derive(LEASE, RENEW)


@asynccontextmanager
async def running(*tasks: Callable[[], Coroutine[Any, Any, Any]]) -> AsyncIterator[None]:
    async with anyio.create_task_group() as tg:
        for task in tasks:
            tg.start_soon(task)
        try:
            yield
        finally:
            tg.cancel_scope.cancel()


@asynccontextmanager
async def members(apiserver: ApiServer, *identities: str, weight: int = 1) -> AsyncIterator[list[MemberLoop]]:
    kubes = [Kube(apiserver.api_client(user_agent=user_agent(i))) for i in identities]
    loops = [
        MemberLoop(Site(k, NAMESPACE, INSTANCE, i, TIMINGS, weight=weight))
        for k, i in zip(kubes, identities, strict=True)
    ]
    try:
        async with running(*(loop.run for loop in loops)):
            yield loops
    finally:
        for kube in kubes:
            kube.api_client.close()  # type: ignore[no-untyped-call]


@pytest.fixture
def admin(apiserver: ApiServer) -> Any:
    kube = Kube(apiserver.api_client(user_agent="test-admin"))
    yield kube
    kube.api_client.close()  # type: ignore[no-untyped-call]


async def read_lease(admin: Kube, identity: str) -> dict[str, Any]:
    body = await admin.get(LEASES, member_lease_name(INSTANCE, identity), namespace=NAMESPACE)
    assert body is not None
    return body


def renew_failures() -> float:
    return REGISTRY.get_sample_value("shardsync_lease_renew_failures_total", {"lease": "member"}) or 0.0


async def test_the_lease_is_created_renewed_and_carries_labels_and_annotations(
    apiserver: ApiServer, admin: Kube
) -> None:
    async with members(apiserver, "m0", weight=3) as (loop,):
        loop.acknowledge(7)
        await wait_for(lambda: loop.last_renewed is not None, 5, "first write")
        lease = await read_lease(admin, "m0")
        assert lease["metadata"]["labels"] == {
            "app.kubernetes.io/name": "shardsync",
            "app.kubernetes.io/instance": INSTANCE,
        }
        assert lease["metadata"]["annotations"] == {
            "shardsync.io/weight": "3",
            "shardsync.io/observed-generation": "7",
        }
        assert lease["spec"]["holderIdentity"] == "m0"
        assert lease["spec"]["leaseDurationSeconds"] == LEASE
        assert loop.may_write() and loop.fence_epoch == 1
        first = lease["spec"]["renewTime"]
        await anyio.sleep(RENEW * 2.5)
        lease = await read_lease(admin, "m0")
        assert lease["spec"]["renewTime"] != first
        assert lease["spec"]["acquireTime"] != lease["spec"]["renewTime"]  # acquired once, renewed since
        assert loop.fence_epoch == 1  # never lapsed

        loop.set_draining()
        assert await loop.flush(2.0)
        lease = await read_lease(admin, "m0")
        assert lease["metadata"]["annotations"]["shardsync.io/draining"] == "true"


async def test_a_concurrent_edit_is_reread_and_kept(apiserver: ApiServer, admin: Kube) -> None:
    async with members(apiserver, "m0") as (loop,):
        await wait_for(lambda: loop.last_renewed is not None, 5, "first write")
        failures = renew_failures()
        lease = await read_lease(admin, "m0")
        lease["metadata"]["annotations"]["example.com/owner-team"] = "dns"
        await admin.replace(LEASES, member_lease_name(INSTANCE, "m0"), lease, namespace=NAMESPACE)
        renewed = loop.last_renewed
        await wait_for(lambda: loop.last_renewed != renewed, 2, "a renewal after the edit")
        await wait_for(lambda: loop.last_renewed != renewed, 2, "the next renewal")
        lease = await read_lease(admin, "m0")
        assert lease["metadata"]["annotations"]["example.com/owner-team"] == "dns"
        assert renew_failures() == failures  # the 409 was re-read and retried at once, not a failure
        assert loop.may_write()


async def test_cut_off_it_stops_writing_and_rereads_when_back(apiserver: ApiServer) -> None:
    async with members(apiserver, "m0") as (m0,):
        await wait_for(m0.may_write, 5, "renewing")
        regained: list[float] = []
        m0.on_regained.append(regained.append)
        failures = renew_failures()
        apiserver.faults.refuse(user_agent="(m0)")
        sent = m0.last_renewed
        assert sent is not None
        await wait_for(lambda: not m0.may_write(), LEASE, "self-fence")
        # Writes stop a fence margin before anyone could judge the lease lapsed (peer_view's tests).
        assert m0.clock.monotonic() - sent >= LEASE - TIMINGS.fence_margin - 0.05
        assert renew_failures() > failures
        epoch = m0.fence_epoch
        apiserver.faults.allow(user_agent="(m0)")
        await wait_for(m0.may_write, 5, "renewed again")
        assert m0.fence_epoch == epoch + 1  # whoever read under the old epoch must read again
        assert len(regained) == 1  # the peer view restarts its timers


async def test_it_remembers_when_each_renew_time_was_sent(apiserver: ApiServer, admin: Kube) -> None:
    async with members(apiserver, "m0") as (loop,):
        await wait_for(lambda: loop.last_renewed is not None, 5, "first write")
        stamp = (await read_lease(admin, "m0"))["spec"]["renewTime"]
        sent = loop.sent_at(stamp)
        assert sent is not None and sent <= loop.clock.monotonic()
        assert loop.sent_at("2001-01-01T00:00:00.000000Z") is None and loop.sent_at(None) is None


async def test_close_stops_renewing_and_keeps_the_lease(apiserver: ApiServer, admin: Kube) -> None:
    async with members(apiserver, "m0") as (loop,):
        await wait_for(lambda: loop.last_renewed is not None, 5, "first write")
        loop.set_restarting()
        assert await loop.flush(2.0)
        await loop.close()
        stamp = (await read_lease(admin, "m0"))["spec"]["renewTime"]
        await anyio.sleep(RENEW * 2.5)
        lease = await read_lease(admin, "m0")
        assert lease["spec"]["renewTime"] == stamp
        assert lease["metadata"]["annotations"]["shardsync.io/restarting"] == "true"
