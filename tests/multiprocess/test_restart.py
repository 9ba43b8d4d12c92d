"""A restarted replica process plans nothing before every source kind has listed: the zones hold its
records of Services and DNSEndpoints, the API server holds the Services' list (a fault on their path, as a
large cluster's list takes a minute at --kube-api-qps 5) while the DNSEndpoints list at once. Planning a
zone from the DNSEndpoints alone would, under --policy=sync, delete every Service's record; external-dns
plans nothing before its informers have synced, and neither may we. The provider's audit and the zones'
records are the witnesses.
"""

from __future__ import annotations

import time

import pytest

from bench.chaos.executor import user_agent_of
from tests.multiprocess.conftest import StartCluster
from tests.multiprocess.harness import identity, wait_for

pytestmark = pytest.mark.multiprocess

ZONES = 8
INTERVAL = 1.0


def test_a_restarted_replica_deletes_nothing_while_one_kind_is_still_listing(
    start_cluster: StartCluster,
) -> None:
    h = start_cluster(zones=ZONES, replicas=1, interval=INTERVAL)
    h.wait_records(within=20)
    h.cluster.scale(0)
    # The replica's own requests only: the test reads the Services to know what the zones should hold.
    replica = user_agent_of(identity(0))
    h.faults.refuse(user_agent=replica, path="/services", mode="hang")
    try:
        restarted_at = time.time()
        h.cluster.scale(1)

        def fenced_again() -> set[str]:
            return {e.zone for e in h.cluster.audit() if e.op == "fence" and e.start_wall >= restarted_at}

        # The new process holds its member lease and takes every zone's fence: it runs the zones.
        wait_for(lambda: fenced_again() == set(h.zones), within=30, what="every zone fenced again")
        time.sleep(3 * INTERVAL)  # each zone's reconcile comes round meanwhile, again and again
        writes = [e for e in h.cluster.audit() if e.start_wall >= restarted_at and e.op != "fence"]
        problems = h.record_problems()
    finally:
        h.faults.allow(user_agent=replica, path="/services")
    assert not writes, writes[:3]
    assert not problems, problems[:3]
    h.cluster.wait_ready(within=30)
    h.wait_records(within=10)
    after = [e for e in h.cluster.audit() if e.start_wall >= restarted_at and e.op != "fence"]
    print(f"\nrestart with the Services' list held: {len(after)} writes once it was served")
    assert not after, after[:3]  # the zones were right all along
