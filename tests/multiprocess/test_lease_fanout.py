"""Eight real replicas on the embedded API server at the default timings, one minute of steady state: what
each one costs the API server, read from the server's own per-client counts (issue 39). A replica that does
not lead follows the coordinator Lease and the coordinator's member Lease by watch (one renewal of each a
second) and never reads the coordinator Lease; only the coordinator follows every member Lease."""

from __future__ import annotations

import time

import pytest

from bench import api_cost
from shardsync.local import seed
from shardsync.sharding.election import coordinator_lease_name
from tests.multiprocess.conftest import StartCluster
from tests.multiprocess.harness import DEFAULT_TIMINGS

pytestmark = pytest.mark.multiprocess

REPLICAS = 8
STEADY = 60.0
PER_MEMBER = 3.0  # watch events a second a replica that does not lead may receive (issue 39)


def test_a_replica_that_does_not_lead_receives_few_events_and_never_polls_the_coordinator_lease(
    start_cluster: StartCluster,
) -> None:
    h = start_cluster(zones=40, replicas=REPLICAS, default_timing=True)
    # /shards on a replica that follows only a few member Leases lists them all when asked: the poller the
    # harness runs would be counted as that replica's requests, and no operator polls it ten times a second.
    h.sampler.stop()
    generation = h.cluster.assignment()
    time.sleep(2 * DEFAULT_TIMINGS.renew_interval)  # past the last acquisitions' reads
    costs = api_cost.measure(h.cluster, STEADY)
    final = h.cluster.assignment()
    assert generation is not None and final is not None and final.generation == generation.generation
    for cost in costs:
        role = "coordinator" if cost.coordinator else "member"
        print(
            f"\n{cost.identity} ({role}): {cost.events_per_second:.2f} watch events/s, "
            f"{cost.requests_per_second:.2f} requests/s {cost.by_request}"
        )
    get_coordinator = f"get leases/{coordinator_lease_name(seed.INSTANCE)}"
    members = [c for c in costs if not c.coordinator]
    assert len(members) == REPLICAS - 1 and len(costs) == REPLICAS
    for cost in members:
        assert cost.events_per_second <= PER_MEMBER, cost
        assert cost.by_request.get(get_coordinator, 0) == 0, cost  # never read, only watched
    # The coordinator follows every member Lease, each renewed once a second (its own included).
    (lead,) = [c for c in costs if c.coordinator]
    assert lead.events_per_second >= (REPLICAS - 1) / DEFAULT_TIMINGS.renew_interval
    total = sum(c.events_per_second for c in costs)
    assert total <= 3 * REPLICAS + REPLICAS, total
