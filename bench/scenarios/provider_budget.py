"""Scenario `provider_budget`: Z zones x R records behind one account limit (the fake provider's `--profile
route53`: an account bucket of `budget_rate` calls/s and `budget_burst`, pages of 300, `budget_latency` per
call), with the replicas sharing that limit (`--provider-rate-limit`, `--provider-burst`) and caching each
zone's records (`--provider-cache-time`). Then the same on a cluster of its own for each other profile of
`PROFILE_RUNS` (cloudflare: 1,200 requests per five minutes, then five minutes of 429; azure: ARM's
buckets and Microsoft.Network's 1,000 writes per five minutes, a write per record set; google: Cloud DNS's
change limits and 300 requests per minute, that figure assumed) at
`budget_profile_replicas` (1 and 4), under `profiles.<profile>`; the fake provider counts the five-minute
blocks (`five_minute_blocks`). A run may cap the zones and records where the account could not write the
profile's in the time (azure).

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
from dataclasses import dataclass, replace
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


@dataclass(frozen=True, slots=True)
class AccountRun:
    """A profile of the fake provider that the scenario runs beside route53's, the budget its replicas
    are given under it (`--provider-rate-limit`, `--provider-burst`), and at most how many zones and
    records per zone it syncs (None: the bench profile's)."""

    rate: float
    burst: int
    why: str
    most_zones: int | None = None
    most_records: int | None = None


# One entry per profile of the fake provider (`--profile`).
PROFILE_RUNS: dict[str, AccountRun] = {
    "cloudflare": AccountRun(
        rate=3.8,
        burst=4,
        why="1,200 requests per 5 minutes is 4/s; at 3.8/s the buckets of N replicas let through at most "
        "4 + N + 300 x 3.8 = 1,148 + N in any five minutes",
    ),
    "azure": AccountRun(
        rate=3.0,
        burst=10,
        why="Microsoft.Network takes 1,000 writes per 5 minutes (3.3/s), ARM's write bucket 200 + 10/s; the "
        "fake provider's apply is one call where Azure writes each record set and a fence bump per batch "
        "(a one-record change: 2 writes), so the run is sized for the window: the first sync of 40 zones "
        "x 5 records is about 40 x 12 = 480 writes, each size's 60 changes 120 more",
        most_zones=40,
        most_records=5,
    ),
    "google": AccountRun(
        rate=4.5,
        burst=5,
        why="Cloud DNS's per-minute request quota, 300 here (assumed: Google does not publish the default), "
        "is 5/s; at 4.5/s the buckets of N replicas let through at most 5 + N + 60 x 4.5 = 275 + N in any "
        "minute",
    ),
}


def run(ctx: Context) -> dict[str, Any]:
    p = ctx.profile
    result = _run_profile(
        ctx,
        "route53",
        AccountRun(p.budget_rate, p.budget_burst, "the account bucket itself"),
        p.budget_replicas,
    )
    result["model_external_dns"] = model_external_dns(p.budget_zones, p.budget_records, p.budget_rate)
    model = result["model_external_dns"]
    ctx.progress.step(
        f"external-dns model: {model['list_calls_per_loop']} list calls per loop = "
        f"{model['seconds_per_loop']}s per loop at {p.budget_rate:g}/s"
    )
    result["profiles"] = {
        name: _run_profile(ctx, name, account, p.budget_profile_replicas)
        for name, account in PROFILE_RUNS.items()
    }
    return result


def _run_profile(ctx: Context, name: str, account: AccountRun, sizes: tuple[int, ...]) -> dict[str, Any]:
    """One cluster under the fake provider's profile `name`, scaled through `sizes` (module docstring)."""
    p = ctx.profile
    route53 = name == "route53"
    zones = (
        p.budget_zones
        if route53
        else min(p.budget_profile_zones, account.most_zones or p.budget_profile_zones)
    )
    records = (
        p.budget_records
        if route53
        else min(p.budget_profile_records, account.most_records or p.budget_profile_records)
    )
    ctx.progress.step(
        f"{name}: {zones} zones x {records} records, replicas limited to {account.rate:g} calls/s (burst "
        f"{account.burst}), {p.budget_latency * 1000:.0f} ms per call; replicas {sizes}"
    )
    flags = replica_flags(
        p,
        sharded=True,
        interval=INTERVAL,
        extra=(
            f"--provider-rate-limit={account.rate:g}",
            f"--provider-burst={account.burst}",
            f"--provider-cache-time={CACHE_TIME}",
        ),
    )
    spec = replace(cluster_spec(p, flags), latency=p.budget_latency, provider_concurrency=None)
    cluster = Cluster(ctx.cluster_dir(f"provider_budget_{name}"), spec)
    result: dict[str, Any] = {
        "profile": name,
        "zones": zones,
        "records_per_zone": records,
        "account_rate": account.rate,
        "account_burst": account.burst,
        "account_note": account.why,
        "latency_seconds": p.budget_latency,
        "event_rate_per_second": p.budget_event_rate,
        "target_p99_seconds": TARGET_P99,
        "target_calls_per_change": TARGET_CALLS_PER_CHANGE,
        "runs": {},
    }
    try:
        cluster.start()
        if route53:
            cluster.admin.set_profile("route53", accountRate=account.rate, accountBurst=account.burst)
        else:
            cluster.admin.set_profile(name)  # the API's own documented limits
        names = zone_names(zones)
        ctx.progress.status(f"{name}: seeding {zones} Services and DNSEndpoints")
        cluster.seed_objects(names, records - 1)
        opened = time.time()
        cluster.open_zones(zones)
        sent = 0
        order = list(range(zones))
        random.Random(7).shuffle(order)
        for n in sizes:
            run = _size(ctx, cluster, names, order, n, sent, opened, result)
            sent += run["changes"]
            result["runs"][str(n)] = run
        result["five_minute_blocks"] = cluster.admin.profile_blocks()
        result["records_checked"] = check_records(cluster, names, records) or "ok"  # costs account calls
    except ClusterError as exc:
        raise ScenarioError(f"provider_budget ({name}): {exc}") from None
    finally:
        try:
            if cluster.launcher.infra is not None and cluster.launcher.infra.provider.alive():
                ctx.safety[f"provider_budget_{name}" if not route53 else "provider_budget"] = observe.safety(
                    cluster.audit()
                )
        finally:
            cluster.stop()
    return result


def _size(
    ctx: Context,
    cluster: Cluster,
    names: list[str],
    order: list[int],
    n: int,
    sent: int,
    opened: float,
    result: dict[str, Any],
) -> dict[str, Any]:
    """Scale to `n` replicas, wait for the steady state, send the changes and measure them."""
    p = ctx.profile
    zones = len(names)
    before = cluster.assignment()
    scaled = time.time()
    _, throttled_at_scale = _calls(cluster)
    blocks_at_scale = cluster.admin.profile_blocks()
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
        "five_minute_blocks": cluster.admin.profile_blocks() - blocks_at_scale,
        "steady_after_seconds": round(steady_at - scaled, 1),
    }
    run["meets_target"] = (
        run["observed"] == count
        and (run["p99_seconds"] or 0.0) <= TARGET_P99
        and (run["calls_per_change"] or 0.0) <= TARGET_CALLS_PER_CHANGE
        and run["throttled"] == 0
        and run["five_minute_blocks"] == 0
    )
    ctx.progress.step(
        f"{n} replica(s): p50 {run['p50_seconds']}s, p99 {run['p99_seconds']}s, "
        f"{run['calls_per_change']} calls/change, {run['throttled']} throttled "
        f"({run['throttled_since_scale']} since the scale), {run['five_minute_blocks']} five-minute blocks, "
        f"steady {run['steady_after_seconds']}s after it"
    )
    return run
