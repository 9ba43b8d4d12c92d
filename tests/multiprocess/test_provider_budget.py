"""Two real replicas under one account limit (the fake provider's `--profile route53` bucket, shared by every
client): with `--provider-rate-limit` set to that limit they split it by the zones each owns, so the
provider throttles none of their calls, neither while they sync every zone from empty nor in the steady
state, and with `--provider-cache-time` a change costs its write alone, no listing."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bench.cluster import Cluster, ClusterSpec, Replica, zone_names
from shardsync.local import seed
from tests.multiprocess.harness import LEASE, START_WITHIN, replica_flags
from tests.waits import eventually_sync

pytestmark = pytest.mark.multiprocess

ZONES = 30
ACCOUNT_RATE = 10.0
ACCOUNT_BURST = 20
CHANGES = 12


def total(cluster: Cluster, replicas: list[Replica], name: str, **labels: str) -> float:
    values = [cluster.metric(r, name, labels) for r in replicas]
    assert None not in values, f"a replica did not answer /metrics for {name}"
    return sum(v for v in values if v is not None)


def applied_after(cluster: Cluster, zone: str, sent: float) -> bool:
    return any(
        e.op == "apply" and e.outcome == "ok" and e.start_wall >= sent for e in cluster.admin.audit(zone=zone)
    )


def test_two_replicas_share_the_account_limit_without_throttling(tmp_path: Path) -> None:
    flags = (
        *replica_flags(interval=5.0),
        "--events",
        f"--provider-rate-limit={ACCOUNT_RATE:g}",
        f"--provider-burst={ACCOUNT_BURST}",
        "--provider-cache-time=1h",
    )
    spec = ClusterSpec(
        latency=0.01,
        provider_concurrency=None,
        replica_flags=flags,
        termination_grace=4 * LEASE,
        start_timeout=START_WITHIN,
    )
    with Cluster(tmp_path, spec) as cluster:
        cluster.admin.set_profile("route53", accountRate=ACCOUNT_RATE, accountBurst=ACCOUNT_BURST)
        names = zone_names(ZONES)
        cluster.seed_objects(names, 1)
        cluster.open_zones(ZONES)
        cluster.scale(2)
        cluster.wait_ready()
        cluster.wait_settled(True, START_WITHIN)
        eventually_sync(
            lambda: all(applied_after(cluster, zone, 0.0) for zone in names),
            within=START_WITHIN,
        )
        replicas = cluster.live()
        time.sleep(2.0)  # past the last first writes
        throttled = total(cluster, replicas, "shardsync_provider_throttled_total")
        listings = total(cluster, replicas, "shardsync_provider_calls_total", kind="records")
        applies = total(cluster, replicas, "shardsync_provider_calls_total", kind="apply")
        shares = [cluster.metric(r, "shardsync_provider_budget_share") for r in replicas]
        # Not one call throttled, the start and the first sync of every zone included (without the budget
        # this start is throttled over a hundred times; the steady state alone would not tell).
        assert throttled == 0

        sent: list[tuple[str, float]] = []
        for k in range(CHANGES):
            index = (k * 7) % ZONES
            at = time.time()
            cluster.set_service_address(index, seed.address(50_000 + k))
            sent.append((names[index], at))
            time.sleep(0.25)
        eventually_sync(
            lambda: all(applied_after(cluster, zone, at) for zone, at in sent),
            within=30,
        )

        assert total(cluster, replicas, "shardsync_provider_throttled_total") - throttled == 0
        assert total(cluster, replicas, "shardsync_provider_calls_total", kind="records") == listings
        # one write per change (two changes to one zone close together may share one)
        assert (
            0 < total(cluster, replicas, "shardsync_provider_calls_total", kind="apply") - applies <= CHANGES
        )
        # the shares: owned zones + 1 over zones + members, summing to the whole account
        assert None not in shares and sum(s for s in shares if s is not None) == pytest.approx(1.0, abs=0.01)
