"""Coordinator election and publishing against the embedded API server: one leader among candidates, a
released lease taken over at once with one more transition, the assignment created and then replaced with
resourceVersion preconditions, and a coordinator that continues from whatever generation is stored."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import pytest

from shardsync.kube.client import Kube
from shardsync.kube.objects import CONFIGMAPS, LEASES, Resource
from shardsync.local.apiserver import ApiServer
from shardsync.sharding.assignment import Assignment, Member, configmap_name
from shardsync.sharding.assignment_watch import AssignmentWatch
from shardsync.sharding.candidate import Candidate
from shardsync.sharding.coordinator_loop import CoordinatorLoop
from shardsync.sharding.election import coordinator_lease_name
from shardsync.sharding.member_loop import MemberLoop
from shardsync.sharding.peer_view import PeerView
from shardsync.sharding.site import Site
from shardsync.sharding.timings import Timings
from tests.sharding.cluster import INSTANCE, LEASE, NAMESPACE, RENEW, SETTLE, user_agent, wait_for

pytestmark = pytest.mark.anyio

TIMINGS = Timings.derive(LEASE, RENEW, SETTLE)


@asynccontextmanager
async def kubes(apiserver: ApiServer, *identities: str) -> AsyncIterator[list[Kube]]:
    clients = [Kube(apiserver.api_client(user_agent=user_agent(i))) for i in identities]
    try:
        yield clients
    finally:
        for kube in clients:
            kube.api_client.close()  # type: ignore[no-untyped-call]


def coordinator(site: Site, tg: anyio.abc.TaskGroup) -> CoordinatorLoop:
    """A replica's coordinator side and what it needs (member lease, followed leases, assignment watch),
    started in `tg`."""
    members, watch, candidate = MemberLoop(site), AssignmentWatch(site), Candidate(site)
    loop = CoordinatorLoop(site, PeerView(site, members, candidate), watch, candidate)
    for task in (members.run, loop.peers.run, watch.run, loop.run):
        tg.start_soon(task)
    return loop


async def read(kube: Kube, resource: Resource, name: str) -> dict[str, Any]:
    body = await kube.get(resource, name, namespace=NAMESPACE)
    assert body is not None, f"{resource} {name} not found"
    return body


async def stored(admin: Kube) -> Assignment:
    body = await read(admin, CONFIGMAPS, configmap_name(INSTANCE))
    return Assignment.from_configmap_data(body["data"])


async def stored_with(admin: Kube, members: set[str], within: float = 5.0) -> Assignment:
    """The stored assignment once it lists exactly `members` (bounded)."""
    with anyio.fail_after(within):
        while True:
            body = await admin.get(CONFIGMAPS, configmap_name(INSTANCE), namespace=NAMESPACE)
            if body is not None:
                current = Assignment.from_configmap_data(body["data"])
                if {m.identity for m in current.members} == members:
                    return current
            await anyio.sleep(0.05)


async def test_one_leader_and_a_released_lease_is_taken_over_at_once(apiserver: ApiServer) -> None:
    ids = ("c0", "c1", "c2")
    async with kubes(apiserver, *ids, "admin") as clients, anyio.create_task_group() as tg:
        candidates = [
            Candidate(Site(k, NAMESPACE, INSTANCE, i, TIMINGS)) for k, i in zip(clients, ids, strict=False)
        ]
        for candidate in candidates:
            tg.start_soon(candidate.run)

        def leaders() -> list[str]:
            return [c.identity for c in candidates if c.is_leader()]

        await wait_for(lambda: len(leaders()) == 1 and all(c.leader for c in candidates), 5, "one leader")
        leader = leaders()[0]
        await anyio.sleep(3 * RENEW)
        assert leaders() == [leader] and {c.leader for c in candidates} == {leader}
        lease = await read(clients[-1], LEASES, coordinator_lease_name(INSTANCE))
        assert lease["spec"]["holderIdentity"] == leader and lease["spec"]["leaseTransitions"] == 0
        assert lease["metadata"]["labels"]["app.kubernetes.io/instance"] == INSTANCE

        first = next(c for c in candidates if c.identity == leader)
        await first.release()
        took = await wait_for(
            lambda: len(leaders()) == 1 and leaders()[0] != leader, 2 * RENEW + 1, "takeover"
        )
        assert took < LEASE  # no waiting out the lease: it was handed back
        lease = await read(clients[-1], LEASES, coordinator_lease_name(INSTANCE))
        assert lease["spec"]["leaseTransitions"] == 1
        tg.cancel_scope.cancel()


async def test_the_coordinator_publishes_and_continues_from_the_stored_generation(
    apiserver: ApiServer,
) -> None:
    async with kubes(apiserver, "p0", "p1", "p2", "admin") as clients, AsyncExitStack() as stack:
        admin = clients[-1]
        tg = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(tg.cancel_scope.cancel)

        def start(index: int) -> CoordinatorLoop:
            return coordinator(Site(clients[index], NAMESPACE, INSTANCE, f"p{index}", TIMINGS), tg)

        loops = [start(0), start(1)]
        await wait_for(lambda: sum(loop.is_leader() for loop in loops) == 1, 5, "a coordinator")
        first = await stored_with(admin, {"p0", "p1"})
        assert first.generation == 1 and first.coordinator in ("p0", "p1")
        body = await read(admin, CONFIGMAPS, configmap_name(INSTANCE))
        assert body["metadata"]["labels"]["app.kubernetes.io/name"] == "shardsync"

        # An operator pins a zone and writes generation 10 by hand; the coordinator builds on it.
        pinned = Assignment(
            10, first.members, first.ring, {"pinned.example": "p1"}, "", "operator", first.slots
        )
        body["data"] = pinned.to_configmap_data()
        await admin.replace(CONFIGMAPS, configmap_name(INSTANCE), body, namespace=NAMESPACE)
        await anyio.sleep(5 * RENEW)
        assert (await stored(admin)).generation == 10  # the membership did not change: nothing published

        loops.append(start(2))
        after = await stored_with(admin, {"p0", "p1", "p2"})
        assert after.generation == 11
        assert dict(after.pins) == {"pinned.example": "p1"}
        assert after.members == (Member("p0"), Member("p1"), Member("p2"))


async def test_a_released_lease_is_taken_within_a_fraction_of_a_renew_interval(apiserver: ApiServer) -> None:
    # Rounds every 2 s: a successor that waited for its next round would take up to 2 s. Its watch of the
    # coordinator Lease sees it handed back and wakes the candidates at once (the SIGTERM handover).
    slow = Timings.derive(6, 2.0, 0.1)
    async with kubes(apiserver, "s0", "s1", "admin") as clients, AsyncExitStack() as stack:
        tg = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(tg.cancel_scope.cancel)
        loops = []
        for kube, identity in zip(clients, ("s0", "s1"), strict=False):
            loops.append(coordinator(Site(kube, NAMESPACE, INSTANCE, identity, slow), tg))
        await wait_for(lambda: sum(loop.is_leader() for loop in loops) == 1, 8, "a coordinator")
        await anyio.sleep(2.5)  # every candidate is between two rounds now
        leader = next(loop for loop in loops if loop.is_leader())
        successor = next(loop for loop in loops if loop is not leader)
        await leader.release()
        took = await wait_for(successor.is_leader, 2.0, "the successor")
        assert took < 1.0


async def test_a_corrupt_assignment_keeps_the_last_good_generation_until_the_coordinator_rewrites_it(
    apiserver: ApiServer,
) -> None:
    # The fuzz tests (tests/fuzz) feed the watch every kind of corrupt ConfigMap; this is the end of the
    # story: the replicas keep the last good generation and the coordinator writes a newer one over it.
    async with kubes(apiserver, "q0", "q1", "admin") as clients, AsyncExitStack() as stack:
        admin = clients[-1]
        tg = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(tg.cancel_scope.cancel)
        watches = []
        for index in range(2):
            watches.append(
                coordinator(Site(clients[index], NAMESPACE, INSTANCE, f"q{index}", TIMINGS), tg).watch
            )
        good = await stored_with(admin, {"q0", "q1"})
        await wait_for(lambda: all(w.current == good for w in watches), 5, "both see the first generation")

        body = await read(admin, CONFIGMAPS, configmap_name(INSTANCE))
        body["data"] = {"assignment.json": '{"version": 1, "generation": "ten", ' + "x" * 100_000}
        await admin.replace(CONFIGMAPS, configmap_name(INSTANCE), body, namespace=NAMESPACE)
        with anyio.fail_after(10):
            while True:
                fresh = await admin.get(CONFIGMAPS, configmap_name(INSTANCE), namespace=NAMESPACE)
                try:
                    rewritten = Assignment.from_configmap_data((fresh or {}).get("data"))
                    break
                except ValueError:
                    assert all(
                        w.current is not None and w.current.generation >= good.generation for w in watches
                    )
                    await anyio.sleep(0.05)
        assert rewritten.generation > good.generation
        assert {m.identity for m in rewritten.members} == {"q0", "q1"}
