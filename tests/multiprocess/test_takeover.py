"""Real replica processes and an invalid DNSEndpoint that exists before they start: both replicas have
synced their sources before a coordinator exists, and yet the coordinator posts its Warning Event and writes
its status.observedGeneration promptly, without waiting for the 30 s periodic status sweep; after the
coordinator is frozen and killed, the other replica does the same for a change it saw as a non-writer."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest

from bench.cluster import Cluster, zone_names
from shardsync.kube.objects import EVENTS
from shardsync.local import seed
from shardsync.sources.crd import DNS_ENDPOINTS
from shardsync.sources.watcher import INVALID_REASON
from tests.waits import eventually_sync

pytestmark = pytest.mark.multiprocess

NAME = "invalid-before-start"


def endpoint(*targets: str) -> dict[str, Any]:
    return {
        "apiVersion": "externaldns.k8s.io/v1alpha1",
        "kind": "DNSEndpoint",
        "metadata": {"name": NAME, "namespace": seed.NAMESPACE},
        "spec": {
            "endpoints": [{"dnsName": f"bad.{zone_names(1)[0]}", "recordType": "A", "targets": list(targets)}]
        },
    }


def test_problems_and_statuses_of_objects_older_than_the_coordinator(cluster: Cluster) -> None:
    kube = cluster.kube
    names = zone_names(2)
    cluster.seed_objects(names, 1)
    cluster.open_zones(2)
    kube.create(DNS_ENDPOINTS, endpoint("not-an-address"), namespace=seed.NAMESPACE)

    def warnings() -> list[str]:
        body = kube.list(EVENTS, namespace=seed.NAMESPACE, field_selector=f"involvedObject.name={NAME}")
        return [str(e.get("message")) for e in body.get("items") or [] if e.get("reason") == INVALID_REASON]

    def observed() -> Any:
        obj = kube.get(DNS_ENDPOINTS, NAME, namespace=seed.NAMESPACE) or {}
        return (obj.get("status") or {}).get("observedGeneration")

    started = time.monotonic()
    cluster.scale(2)
    cluster.wait_ready()  # ready: member lease held and an assignment seen, so a coordinator was elected
    ready = time.monotonic()
    eventually_sync(lambda: any("not-an-address" in m for m in warnings()), within=10.0)
    eventually_sync(lambda: observed() == 1, within=5.0)
    took, to_ready = time.monotonic() - started, ready - started
    print(f"event and status {took:.1f}s after the start ({to_ready:.1f}s to ready)")

    # Failover: the coordinator freezes (SIGSTOP) and is then killed, so it never sees the change made
    # meanwhile; the other replica saw it as a non-writer and must post and write it once in office.
    shards = cluster.shards(cluster.live()[0]) or {}
    coordinator = next(r for r in cluster.live() if r.identity == shards.get("coordinator"))
    os.kill(coordinator.child.pid, signal.SIGSTOP)
    patch = {"spec": endpoint("still-not-an-address")["spec"]}
    kube.patch(DNS_ENDPOINTS, NAME, patch, namespace=seed.NAMESPACE)
    time.sleep(1.0)  # the survivor translates it, not being the writer
    coordinator.child.kill()
    # Its lease lapses (3 s plus a margin), the survivor takes office and catches up at once (5 s), long
    # before the periodic sweep (30 s).
    eventually_sync(lambda: observed() == 2, within=15.0)
    eventually_sync(lambda: any("still-not-an-address" in m for m in warnings()), within=5.0)
