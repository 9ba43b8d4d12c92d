"""What each replica of a running cluster costs the API server over a stretch of time, read from the
embedded API server's own per-client counts (`/_shardsync/clients`, shardsync/local/apiserver/clients.py):
the watch events sent to it and the requests it made, each replica told apart by its User-Agent
(`shardsync/<version> (<identity>)`). Used by the failover scenario and tests/multiprocess (issue 39).

The sharding protocol's share is the events of the Leases and the assignment ConfigMap (COORDINATION):
they are what grows with the replicas. The sources' events (Services, DNSEndpoints and the rest, their
status writes included) grow with the objects and their churn, and are reported apart.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from bench.cluster import Cluster
from shardsync.kube.objects import LEASES
from shardsync.local import seed
from shardsync.local.apiserver.admin import RemoteFaults
from shardsync.local.apiserver.clients import client_of
from shardsync.sharding.election import coordinator_lease_name

COORDINATION = ("leases", "configmaps")  # the member and coordinator Leases, the assignment


@dataclass(frozen=True)
class Cost:
    identity: str
    coordinator: bool
    seconds: float
    watch_events: int
    requests: int
    by_request: dict[str, int] = field(default_factory=dict)  # the requests that moved, by kind
    by_watch: dict[str, int] = field(default_factory=dict)  # the watch events sent, by resource

    @property
    def events_per_second(self) -> float:
        return self.watch_events / self.seconds

    @property
    def coordination_events_per_second(self) -> float:
        """Those of the Leases and the assignment: the sharding protocol's."""
        return sum(self.by_watch.get(resource, 0) for resource in COORDINATION) / self.seconds

    @property
    def requests_per_second(self) -> float:
        return self.requests / self.seconds


def coordinator_of(cluster: Cluster) -> str:
    """The holder of the coordinator Lease ("" when none)."""
    name = coordinator_lease_name(seed.INSTANCE)
    body = cluster.kube.get(LEASES, name, namespace=seed.NAMESPACE, request_timeout=10)
    spec = (body or {}).get("spec")
    return str(spec.get("holderIdentity") or "") if isinstance(spec, dict) else ""


def measure(cluster: Cluster, seconds: float) -> list[Cost]:
    """Each live replica's cost over the next `seconds` (this sleeps that long); the coordinator is the
    holder at the start, and it must still be at the end (ValueError otherwise: no steady state)."""
    infra = cluster.launcher.infra
    assert infra is not None, "the cluster's infrastructure is not running"
    counts = RemoteFaults(infra.api_url)
    coordinator = coordinator_of(cluster)
    before = counts.clients()
    started = time.monotonic()
    time.sleep(seconds)
    after = counts.clients()
    elapsed = time.monotonic() - started
    if coordinator_of(cluster) != coordinator:
        raise ValueError("the coordinator changed while the cost was measured")
    costs = []
    for replica in cluster.live():
        was, now = client_of(before, f"({replica.identity})"), client_of(after, f"({replica.identity})")
        moved = {k: v - was["byRequest"].get(k, 0) for k, v in now["byRequest"].items()}
        sent = {k: v - was["byWatch"].get(k, 0) for k, v in now["byWatch"].items()}
        costs.append(
            Cost(
                replica.identity,
                replica.identity == coordinator,
                elapsed,
                now["watchEvents"] - was["watchEvents"],
                now["requests"] - was["requests"],
                {k: v for k, v in moved.items() if v},
                {k: v for k, v in sent.items() if v},
            )
        )
    return costs


def summary(costs: list[Cost]) -> dict[str, Any]:
    """The JSON figures, as bench.simulate names them: the protocol's watch events a second sent to a
    replica that does not lead (mean and most) and to the coordinator; every watch event (the sources'
    too); requests a second."""
    members = [c for c in costs if not c.coordinator]
    lead = [c for c in costs if c.coordinator]

    def mean(values: list[float]) -> float | None:
        return round(sum(values) / len(values), 2) if values else None

    return {
        "seconds": round(costs[0].seconds, 1) if costs else None,
        "watch_events_per_second_per_member": mean([c.coordination_events_per_second for c in members]),
        "watch_events_per_second_per_member_max": max(
            (round(c.coordination_events_per_second, 2) for c in members), default=None
        ),
        "watch_events_per_second_coordinator": mean([c.coordination_events_per_second for c in lead]),
        "all_watch_events_per_second_per_member": mean([c.events_per_second for c in members]),
        "api_requests_per_second_per_member": mean([c.requests_per_second for c in members]),
        "api_requests_per_second_coordinator": mean([c.requests_per_second for c in lead]),
    }
