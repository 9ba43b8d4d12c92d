"""Eight real replicas on the embedded API server at the default timings, one minute of steady state: what
each one costs the API server, read from the server's own per-client counts (issue 39). A replica that does
not lead follows the coordinator Lease and the coordinator's member Lease by watch (one renewal of each a
second) and never reads the coordinator Lease; only the coordinator follows every member Lease."""

from __future__ import annotations

import time
from typing import Any

import pytest

from shardsync.local import seed
from shardsync.local.apiserver.clients import client_of
from shardsync.objects import LEASES
from shardsync.sharding.election import coordinator_lease_name
from tests.multiprocess.conftest import StartCluster
from tests.multiprocess.harness import DEFAULT_TIMINGS, Harness, identity

pytestmark = pytest.mark.multiprocess

REPLICAS = 8
STEADY = 60.0
PER_MEMBER = 3.0  # watch events a second a replica that does not lead may receive (issue 39)


def holder(h: Harness) -> str:
    body = h.cluster.kube.get(LEASES, coordinator_lease_name(seed.INSTANCE), namespace=seed.NAMESPACE)
    assert body is not None, "no coordinator Lease"
    return str(body["spec"].get("holderIdentity") or "")


def delta(before: dict[str, Any], after: dict[str, Any], who: str) -> dict[str, Any]:
    """A replica's requests and watch events between two readings of the server's counts."""
    was, now = client_of(before, f"({who})"), client_of(after, f"({who})")
    requests = {k: v - was["byRequest"].get(k, 0) for k, v in now["byRequest"].items()}
    return {
        "watch_events": now["watchEvents"] - was["watchEvents"],
        "requests": now["requests"] - was["requests"],
        "by_request": {k: v for k, v in requests.items() if v},
    }


def test_a_replica_that_does_not_lead_receives_few_events_and_never_polls_the_coordinator_lease(
    start_cluster: StartCluster,
) -> None:
    h = start_cluster(zones=40, replicas=REPLICAS, default_timing=True)
    # /shards on a replica that follows only a few member Leases lists them all when asked: the poller the
    # harness runs would be counted as that replica's requests, and no operator polls it ten times a second.
    h.sampler.stop()
    coordinator = holder(h)
    generation = h.cluster.assignment()
    time.sleep(2 * DEFAULT_TIMINGS.renew_interval)  # past the last acquisitions' reads
    before = h.faults.clients()
    started = time.monotonic()
    time.sleep(STEADY)
    after = h.faults.clients()
    seconds = time.monotonic() - started
    assert holder(h) == coordinator, "the coordinator changed during the steady window"
    final = h.cluster.assignment()
    assert generation is not None and final is not None and final.generation == generation.generation

    get_coordinator = f"get leases/{coordinator_lease_name(seed.INSTANCE)}"
    rows = {who: delta(before, after, who) for who in (identity(i) for i in range(REPLICAS))}
    for who, row in sorted(rows.items()):
        role = "coordinator" if who == coordinator else "member"
        print(
            f"\n{who} ({role}): {row['watch_events'] / seconds:.2f} watch events/s, "
            f"{row['requests'] / seconds:.2f} requests/s {row['by_request']}"
        )
    members = {who: row for who, row in rows.items() if who != coordinator}
    assert len(members) == REPLICAS - 1
    for who, row in members.items():
        assert row["watch_events"] / seconds <= PER_MEMBER, (who, row)
        assert row["by_request"].get(get_coordinator, 0) == 0, (who, row)  # never read, only watched
    # The coordinator follows every member Lease, each renewed once a second (its own included).
    lead = rows[coordinator]
    assert lead["watch_events"] / seconds >= (REPLICAS - 1) / DEFAULT_TIMINGS.renew_interval
    total = sum(row["watch_events"] for row in rows.values()) / seconds
    assert total <= 3 * REPLICAS + REPLICAS, total
