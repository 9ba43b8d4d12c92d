"""Scenario `status_startup`: N DNSEndpoints exist before the replica starts, none with its
`status.observedGeneration` written; one replica with the default flags starts, and the bench times, from
its start, how long until every one of them has its status written (read back from the API server every
half second). The writes have their own token bucket (`--kube-api-status-qps`, default 50 a second, burst
100) instead of sharing `--kube-api-qps` 5 with the lists, where 1,000 took 75 s; the target is 30 s.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench import observe
from bench.cluster import Cluster, ClusterError, ClusterSpec, zone_names
from bench.scenarios.common import Context, ScenarioError, rounded
from shardsync.kube.client import BlockingKube
from shardsync.kube.limits import DEFAULT_STATUS_QPS
from shardsync.kube.objects import Obj, get
from shardsync.local import seed
from shardsync.sources.crd import DNS_ENDPOINTS

TARGET_SECONDS = 30.0
ZONES = 20
POLL = 0.5


def dns_endpoint(index: int, zone: str) -> Obj:
    """seed's DNSEndpoint with one name of its own (`app-<index>.<zone>`): many share a zone here."""
    body = seed.dns_endpoint(index, zone, 1)
    body["spec"]["endpoints"][0]["dnsName"] = f"app-{index}.{zone}"
    return body


def observed(kube: BlockingKube) -> int:
    """DNSEndpoints whose status.observedGeneration is their generation (a paged list)."""
    count, token = 0, ""
    while True:
        page = kube.list(DNS_ENDPOINTS, namespace=seed.NAMESPACE, limit=500, continue_token=token)
        count += sum(
            1
            for obj in page.get("items") or []
            if get(obj, "status", "observedGeneration") == get(obj, "metadata", "generation")
        )
        token = str(get(page, "metadata", "continue") or "")
        if not token:
            return count


def run(ctx: Context) -> dict[str, Any]:
    count = ctx.profile.status_objects
    ctx.progress.step(f"{count} DNSEndpoints over {ZONES} zones, then 1 replica with the default flags")
    cluster = Cluster(ctx.cluster_dir("status_startup"), ClusterSpec(provider_concurrency=None))
    try:
        cluster.start()
        zones = zone_names(ZONES)
        cluster.open_zones(ZONES)
        bodies = [dns_endpoint(i, zones[i % ZONES]) for i in range(count)]
        with ThreadPoolExecutor(max_workers=4) as pool:  # the API server is another process
            list(pool.map(lambda b: cluster.kube.create(DNS_ENDPOINTS, b, namespace=seed.NAMESPACE), bodies))
        if observed(cluster.kube):
            raise ScenarioError("statuses written before any replica ran")
        started = time.monotonic()
        cluster.scale(1)
        cluster.wait_ready()
        ready = time.monotonic() - started
        first: float | None = None
        done = 0
        deadline = started + 6 * TARGET_SECONDS
        while done < count:
            if time.monotonic() > deadline:
                raise ScenarioError(f"only {done} of {count} statuses written within {6 * TARGET_SECONDS:g}s")
            time.sleep(POLL)
            done = observed(cluster.kube)
            if done and first is None:
                first = time.monotonic() - started
            ctx.progress.status(f"{done}/{count} statuses written")
        seconds = time.monotonic() - started
        ctx.safety["status_startup"] = observe.safety(cluster.audit())
    except ClusterError as exc:
        raise ScenarioError(f"status_startup: {exc}") from None
    finally:
        cluster.stop()
    assert first is not None
    spread = seconds - first
    result = {
        "dns_endpoints": count,
        "replicas": 1,
        "status_qps": DEFAULT_STATUS_QPS,
        "seconds_to_ready": rounded(ready),
        "seconds_to_first_observed": rounded(first),
        "seconds_to_all_observed": rounded(seconds),
        "writes_per_second": rounded(count / spread, 1) if spread > 0 else None,
        "target_seconds": TARGET_SECONDS,
        "meets_target": seconds <= TARGET_SECONDS,
        "poll_seconds": POLL,
    }
    ctx.progress.step(f"all {count} observedGeneration written {seconds:.1f}s after the replica started")
    return result
