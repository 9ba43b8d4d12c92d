"""Scenario `provider_budget`: Z zones x R records behind one account limit (the fake provider's `--profile
route53`: an account bucket of `budget_rate` calls/s and `budget_burst`, pages of 300, `budget_latency` per
call), with the replicas sharing that limit (`--provider-rate-limit`, `--provider-burst`) and caching each
zone's records (`--provider-cache-time`).

One cluster syncs every zone with one replica, then scales to 2 and 4; at each size, once the moved zones
are acquired and the calls have gone quiet (the steady state), Service changes go out at `budget_event_rate`
per second, each to another zone, and each is timed from just before the API request until the provider
committed the write carrying it (event_latency's matching, on the audit). Per size: p50/p99, provider
calls per applied change (every call the replicas made meanwhile, by their own /metrics), and the calls the
provider throttled meanwhile (`throttled`) and since the size was set, the handoff included
(`throttled_since_scale`).

Beside it, `model_external_dns`: external-dns's loop for the same zones under the same limit, computed, not
run: each loop lists every zone (pages of 300 RRsets, an ownership TXT record beside each record) and the
hosted zones (pages of 100), so a loop takes list calls / rate seconds, and a change waits for the next
loop: half a loop on average, a whole loop at worst.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import replace
from typing import Any

from bench import observe
from bench.cluster import Cluster, ClusterError, zone_names
from bench.scenarios.common import (
    Context,
    ScenarioError,
    check_records,
    cluster_spec,
    percentile,
    replica_flags,
    rounded,
    wait_converged,
)
from bench.scenarios.event_latency import Change, match_changes
from shardsync.local import seed

INTERVAL = 300.0  # the periodic resync; with the cache it lists nothing anyway
CACHE_TIME = "1h"
QUIET = 2.0  # seconds without a provider call that count as the steady state
ADDRESS_BASE = 200_000
ROUTE53_PAGE = 300  # ListResourceRecordSets
ROUTE53_ZONES_PAGE = 100  # ListHostedZones
TARGET_P99 = 2.0
TARGET_CALLS_PER_CHANGE = 1.1


def model_external_dns(zones: int, records_per_zone: int, rate: float) -> dict[str, Any]:
    """external-dns's loop over the same zones at the same account rate (see the module docstring)."""
    rrsets = 2 * records_per_zone  # each record and its ownership TXT record
    calls = zones * math.ceil(rrsets / ROUTE53_PAGE) + math.ceil(zones / ROUTE53_ZONES_PAGE)
    loop = calls / rate
    return {
        "model": True,
        "list_calls_per_loop": calls,
        "seconds_per_loop": round(loop, 1),
        "p50_seconds": round(loop / 2, 1),
        "p99_seconds": round(loop * 0.99, 1),
        "note": "computed, not run: list calls per loop / account rate; a change waits for the next loop",
    }


def _calls(cluster: Cluster) -> tuple[float, float]:
    """(provider calls, throttled calls) of the live replicas so far, by their /metrics."""
    calls = throttled = 0.0
    for replica in cluster.live():
        made = cluster.metric(replica, "shardsync_provider_calls_total")
        refused = cluster.metric(replica, "shardsync_provider_throttled_total")
        if made is None or refused is None:
            raise ScenarioError(f"{replica.identity} did not answer /metrics")
        calls, throttled = calls + made, throttled + refused
    return calls, throttled


def _wait_quiet(cluster: Cluster, within: float) -> float:
    """Wait until the replicas made no provider call for QUIET seconds; returns the seconds waited."""
    started = time.monotonic()
    last, since = _calls(cluster)[0], time.monotonic()
    while time.monotonic() - since < QUIET:
        if time.monotonic() - started > within:
            raise ScenarioError(f"provider calls did not stop within {within:.0f}s")
        time.sleep(0.25)
        now = _calls(cluster)[0]
        if now != last:
            last, since = now, time.monotonic()
    return time.monotonic() - started


def _wait_moved(cluster: Cluster, moved: dict[str, str], after: float, within: float) -> None:
    """Wait until each moved zone was fenced by its new owner (its acquisition) after `after`."""
    deadline = time.monotonic() + within
    pending = dict(moved)
    since = 0
    while pending:
        entries = cluster.admin.audit(since=since)
        if entries:
            since = entries[-1].seq + 1
        for e in entries:
            if (
                e.op == "fence"
                and e.outcome == "ok"
                and e.start_wall >= after
                and pending.get(e.zone) == e.writer
            ):
                del pending[e.zone]
        if time.monotonic() > deadline:
            raise ScenarioError(f"{len(pending)} moved zones not acquired within {within:.0f}s")
        time.sleep(0.25)


def run(ctx: Context) -> dict[str, Any]:
    p = ctx.profile
    zones, records = p.budget_zones, p.budget_records
    ctx.progress.step(
        f"{zones} zones x {records} records, account limit {p.budget_rate:g} calls/s (burst "
        f"{p.budget_burst}), {p.budget_latency * 1000:.0f} ms per call; replicas {p.budget_replicas}"
    )
    flags = replica_flags(
        p,
        sharded=True,
        interval=INTERVAL,
        extra=(
            f"--provider-rate-limit={p.budget_rate:g}",
            f"--provider-burst={p.budget_burst}",
            f"--provider-cache-time={CACHE_TIME}",
        ),
    )
    spec = replace(cluster_spec(p, flags), latency=p.budget_latency, provider_concurrency=None)
    cluster = Cluster(ctx.cluster_dir("provider_budget"), spec)
    result: dict[str, Any] = {
        "zones": zones,
        "records_per_zone": records,
        "account_rate": p.budget_rate,
        "account_burst": p.budget_burst,
        "latency_seconds": p.budget_latency,
        "event_rate_per_second": p.budget_event_rate,
        "target_p99_seconds": TARGET_P99,
        "target_calls_per_change": TARGET_CALLS_PER_CHANGE,
        "runs": {},
        "model_external_dns": model_external_dns(zones, records, p.budget_rate),
    }
    try:
        cluster.start()
        cluster.admin.set_profile("route53", accountRate=p.budget_rate, accountBurst=p.budget_burst)
        names = zone_names(zones)
        ctx.progress.status(f"seeding {zones} Services and DNSEndpoints")
        cluster.seed_objects(names, records - 1)
        opened = time.time()
        cluster.open_zones(zones)
        sent = 0
        order = list(range(zones))
        random.Random(7).shuffle(order)
        for n in p.budget_replicas:
            before = cluster.assignment()
            scaled = time.time()
            _, throttled_at_scale = _calls(cluster)
            ctx.progress.status(f"{n} replica(s): scaling")
            cluster.scale(n)
            cluster.wait_ready()
            cluster.wait_settled(True, p.settle_timeout)
            if before is None:
                first = wait_converged(cluster, names, opened, p.budget_timeout, ctx.progress)
                result["converge_seconds"] = round(max(e.end_wall for e in first.values()) - opened, 1)
            else:
                after = cluster.assignment()
                assert after is not None
                moved = {z: o for z in names if (o := after.owner_of(z)) != before.owner_of(z) and o}
                ctx.progress.status(f"{n} replicas: waiting for {len(moved)} moved zones")
                _wait_moved(cluster, moved, scaled, p.budget_timeout)
            _wait_quiet(cluster, p.budget_timeout)
            steady_at = time.time()
            calls0, throttled0 = _calls(cluster)
            count = p.budget_events
            changes: list[Change] = []
            started = time.monotonic()
            for k in range(count):
                delay = started + k / p.budget_event_rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                index = order[(sent + k) % zones]
                address = seed.address(ADDRESS_BASE + sent + k)
                at = time.time()
                cluster.set_service_address(index, address)
                changes.append(Change(index, names[index], address, at))
                ctx.progress.status(f"{n} replica(s): {k + 1}/{count} changes sent")
            sent += count
            latencies = list(match_changes(ctx, cluster, changes).values())
            time.sleep(QUIET)  # calls still in flight land in the counters
            calls1, throttled1 = _calls(cluster)
            run = {
                "replicas": n,
                "changes": count,
                "observed": len(latencies),
                "p50_seconds": rounded(percentile(latencies, 50), 3),
                "p99_seconds": rounded(percentile(latencies, 99), 3),
                "max_seconds": rounded(max(latencies) if latencies else 0.0, 3),
                "calls_per_change": rounded((calls1 - calls0) / max(len(latencies), 1), 3),
                "throttled": int(throttled1 - throttled0),
                "throttled_since_scale": int(throttled1 - throttled_at_scale),
                "steady_after_seconds": round(steady_at - scaled, 1),
            }
            run["meets_target"] = (
                run["observed"] == count
                and (run["p99_seconds"] or 0.0) <= TARGET_P99
                and (run["calls_per_change"] or 0.0) <= TARGET_CALLS_PER_CHANGE
                and run["throttled"] == 0
            )
            result["runs"][str(n)] = run
            ctx.progress.step(
                f"{n} replica(s): p50 {run['p50_seconds']}s, p99 {run['p99_seconds']}s, "
                f"{run['calls_per_change']} calls/change, {run['throttled']} throttled "
                f"({run['throttled_since_scale']} since the scale), steady {run['steady_after_seconds']}s "
                "after it"
            )
        result["records_checked"] = check_records(cluster, names, records) or "ok"  # costs account calls
    except ClusterError as exc:
        raise ScenarioError(f"provider_budget: {exc}") from None
    finally:
        try:
            if cluster.launcher.infra is not None and cluster.launcher.infra.provider.alive():
                ctx.safety["provider_budget"] = observe.safety(cluster.audit())
        finally:
            cluster.stop()
    model = result["model_external_dns"]
    ctx.progress.step(
        f"external-dns model: {model['list_calls_per_loop']} list calls per loop = "
        f"{model['seconds_per_loop']}s per loop at {p.budget_rate:g}/s"
    )
    return result
