"""`--sharding=off`: only the elected coordinator reconciles, every zone, fenced by leaseTransitions; a
takeover fences the deposed leader out. Several replicas in one process against the embedded API server."""

from __future__ import annotations

import time

import pytest

from bench.audit import overlapping_writes
from shardsync.local.apiserver import ApiServer
from shardsync.ownership.active_passive import ActivePassiveOwnership
from tests.sharding.cluster import LEASE, Cluster, Node, cluster, wait_for

pytestmark = pytest.mark.anyio


def passive(node: Node) -> ActivePassiveOwnership:
    assert isinstance(node.ownership, ActivePassiveOwnership)
    return node.ownership


def sole_writer(c: Cluster) -> str | None:
    """The one node writing every zone while the others write none, else None."""
    writers = {i for i, n in c.nodes.items() if n.writing()}
    if len(writers) != 1:
        return None
    (leader,) = writers
    return leader if c.nodes[leader].writing() == set(c.zones) else None


async def test_only_the_coordinator_writes_and_a_takeover_fences_the_old_one_out(
    apiserver: ApiServer,
) -> None:
    async with cluster(apiserver, zones=20) as c:
        for identity in ("a0", "a1", "a2"):
            await c.add(identity, sharding=False)
        await wait_for(lambda: sole_writer(c) is not None, 10, "one active replica")
        leader = sole_writer(c)
        assert leader is not None
        token = passive(c.nodes[leader]).token
        assert token is not None and token.identity == leader
        await wait_for(lambda: all(c.store.fence_of(z) == token for z in c.zones), 5, "fences")
        for node in c.nodes.values():
            snap = await passive(node).snapshot(node)
            assert snap["coordinator"] == leader and snap["generation"] == token.generation
            assert {row["owner"] for row in snap["zones"]} == {leader}
            assert all(o.ready()[0] for o in (passive(n) for n in c.nodes.values()))

        crashed = time.monotonic()
        await c.crash(c.nodes[leader])
        took = await wait_for(lambda: sole_writer(c) is not None, 4 * LEASE, "a new active replica")
        print(f"active/passive failover after a crash: {took:.2f}s")
        successor = sole_writer(c)
        assert successor is not None and successor != leader
        new_token = passive(c.nodes[successor]).token
        assert new_token is not None and new_token.generation > token.generation
        await wait_for(lambda: all(c.store.fence_of(z) == new_token for z in c.zones), 5, "new fences")

        def successor_writes() -> list[float]:
            audit = c.store.audit()
            return [e.start for e in audit if e.writer == successor and e.op == "apply" and e.start > crashed]

        # the successor takes every fence first and writes after (fence-first acquisition): await a write
        await wait_for(lambda: bool(successor_writes()), 5, "the successor's first write")
        audit = c.store.audit()
        old = [e.end for e in audit if e.writer == leader and e.outcome == "ok" and e.op == "apply"]
        new = [e.start for e in audit if e.writer == successor and e.op == "apply" and e.start > crashed]
        assert old and new and max(old) < min(new)

        # A graceful stop releases the lease: the last one standing takes over within a round or two.
        stopping = time.monotonic()
        await c.stop(c.nodes[successor])
        took = await wait_for(lambda: sole_writer(c) is not None, 2 * LEASE, "handover")
        print(f"active/passive handover on a graceful stop: {time.monotonic() - stopping:.2f}s")
        assert took < LEASE
        assert not overlapping_writes(c.store.audit(), include_refused=True)
        assert not [e for e in c.store.audit() if e.outcome == "fenced"]
        assert not c.sampled_overlaps()
