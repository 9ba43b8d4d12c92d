"""A coordinator stopped gracefully gives its lease back and from then on its /shards no longer names
itself as coordinator (its last observation of the lease still does), so `shardsync local`'s table does not
show a stopped replica as the coordinator; the survivors name the successor once it has taken over."""

from __future__ import annotations

import pytest

from shardsync.local.apiserver import ApiServer
from tests.sharding.cluster import LEASE, cluster, describe, wait_for

pytestmark = pytest.mark.anyio


async def test_a_stopped_coordinator_stops_naming_itself(apiserver: ApiServer) -> None:
    async with cluster(apiserver, zones=10) as c:
        for identity in ("r0", "r1"):
            await c.add(identity)
        await wait_for(c.settled, 20, f"settle: {describe(c)}")
        leader = next(n for n in c.nodes.values() if n.sharded.is_coordinator())
        assert (await leader.sharded.snapshot(leader))["coordinator"] == leader.identity
        other = next(n for n in c.nodes.values() if n is not leader)
        await c.stop(leader)
        assert leader.sharded.candidate.leader == leader.identity  # its last observation
        assert (await leader.sharded.snapshot(leader))["coordinator"] == ""
        await wait_for(lambda: other.sharded.is_coordinator(), LEASE, "handover")
        assert (await other.sharded.snapshot(other))["coordinator"] == other.identity
