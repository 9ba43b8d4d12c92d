"""Scenario `event_latency`: with Z zones x R records synced, change one Service at a time at a steady rate
(a new external IP, so its record `web.<zone>` gets a new target) and time each change from just before the
API request until the fake provider committed the write that carries it.

The write is found in the provider's audit: the first successful apply to that zone that started after the
change was sent (in the steady state nothing else writes to a zone: the periodic resync, once a minute
here, finds nothing to change). At the end every changed zone is read back to check it really holds the new
address. Each change goes to a different zone, so latencies do not queue behind each other's zone.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any

from bench.cluster import Cluster
from bench.scenarios.common import Context, percentile, rounded, synced_cluster
from shardsync.local import seed
from shardsync.providers.fake.audit import AuditEntry

TARGET_P99 = 1.0
INTERVAL = 60.0
WAIT_AFTER = 10.0  # how long the last changes may take before they count as missing
ADDRESS_BASE = 100_000  # seed.address() indexes far from the seeded objects' addresses


@dataclass(frozen=True, slots=True)
class Change:
    index: int  # the Service's (and zone's) index
    zone: str
    address: str
    sent: float  # Unix time just before the API request


def run(ctx: Context) -> dict[str, Any]:
    p = ctx.profile
    count = max(1, min(int(p.event_rate * p.event_seconds), p.event_zones))
    ctx.progress.step(
        f"{p.event_replicas} replica(s), {p.event_zones} zones x {p.event_records} records; then {count} "
        f"Service changes at {p.event_rate:g}/s"
    )
    with synced_cluster(
        ctx,
        "event_latency",
        replicas=p.event_replicas,
        zones=p.event_zones,
        records_per_zone=p.event_records,
        sharded=True,
        interval=INTERVAL,
    ) as synced:
        cluster = synced.cluster
        ctx.progress.step(f"synced in {synced.converge_seconds:.1f}s; sending changes")
        order = list(range(len(synced.zones)))
        random.Random(5).shuffle(order)
        changes: list[Change] = []
        started = time.monotonic()
        for k in range(count):
            delay = started + k / p.event_rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            index = order[k]
            address = seed.address(ADDRESS_BASE + k)
            sent = time.time()
            cluster.set_service_address(index, address)
            changes.append(Change(index, synced.zones[index], address, sent))
            ctx.progress.status(f"{k + 1}/{count} changes sent")
        latencies = match_changes(ctx, cluster, changes)
        wrong = []
        for change in changes:
            found = [
                list(ep.targets)
                for ep in cluster.admin.records(change.zone)
                if ep.dns_name == f"web.{change.zone}" and ep.record_type == "A"
            ]
            if found != [[change.address]]:
                wrong.append(f"{change.zone}: web has {found}, wanted {change.address}")
    values = list(latencies.values())
    p99 = percentile(values, 99)
    result = {
        "replicas": p.event_replicas,
        "zones": p.event_zones,
        "records_per_zone": p.event_records,
        "rate_per_second": p.event_rate,
        "changes": count,
        "observed": len(values),
        "missing": count - len(values),
        "p50_seconds": rounded(percentile(values, 50), 4),
        "p99_seconds": rounded(p99, 4),
        "max_seconds": rounded(max(values) if values else 0.0, 4),
        "mean_seconds": rounded(sum(values) / len(values) if values else 0.0, 4),
        "target_p99_seconds": TARGET_P99,
        "meets_target": bool(values) and p99 <= TARGET_P99 and count == len(values),
        "records_checked": wrong[:5] or "ok",
        "latencies_seconds": [round(v, 4) for v in values],
    }
    ctx.progress.step(
        f"p50 {result['p50_seconds']}s, p99 {result['p99_seconds']}s, max {result['max_seconds']}s "
        f"({len(values)}/{count} seen)"
    )
    return result


def match_changes(ctx: Context, cluster: Cluster, changes: list[Change]) -> dict[int, float]:
    """Change number -> seconds until the provider committed it, polling the audit until all are seen or
    WAIT_AFTER has passed since the last was sent."""
    pending = dict(enumerate(changes))
    latencies: dict[int, float] = {}
    deadline = time.monotonic() + WAIT_AFTER
    by_zone: dict[str, list[AuditEntry]] = {}
    since = 0
    while pending and time.monotonic() < deadline:
        entries = cluster.admin.audit(since=since)
        if entries:
            since = entries[-1].seq + 1
        for entry in entries:
            if entry.op == "apply" and entry.outcome == "ok" and entry.changes > 0:
                by_zone.setdefault(entry.zone, []).append(entry)
        for k, change in list(pending.items()):
            writes = [e for e in by_zone.get(change.zone, []) if e.start_wall >= change.sent]
            if writes:
                latencies[k] = min(e.end_wall for e in writes) - change.sent
                del pending[k]
        ctx.progress.status(f"{len(latencies)}/{len(changes)} changes written")
        time.sleep(0.1)
    return latencies
