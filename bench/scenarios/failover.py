"""Scenario `failover`: kill -9 one replica, and separately the coordinator, with every zone synced.

Per case: `seconds_until_rewritten` — from the kill until every zone the victim ran was written again by a
survivor (the survivor's fence on it, exact from the provider's audit; target <= 5 s);
`seconds_to_full_ownership` — until the survivors run every zone under a newer generation (sampled);
`seconds_without_coordinator` — until every survivor names the same surviving coordinator (sampled); and the
longest time one of the victim's zones ran nowhere. The killed replica stays dead during the measurement
(a node that is gone), then is started again and the cluster settles before the next case.

Before the kills, `steady_api_cost`: for STEADY_SECONDS of steady state, the watch events a second sent to a
replica that does not lead (mean and most) and to the coordinator, and the requests a second, from the API
server's own per-client counts (bench/api_cost.py; issue 39: at most 3 for a replica that does not lead).
"""

from __future__ import annotations

import time
from typing import Any

from bench import api_cost, observe
from bench.cluster import Cluster, ClusterError
from bench.scenarios.common import (
    Context,
    ScenarioError,
    Synced,
    error_result,
    synced_cluster,
    targets,
    wait_owned,
)

INTERVAL = 10.0
TARGET_SECONDS = 5.0  # issue 13: at the default flags
STEADY_SECONDS = 10.0  # ten renewals of every Lease at the default flags


def _rewritten(
    cluster: Cluster, zones: set[str], killed_at: float, victim: str, within: float
) -> float | None:
    """Seconds from the kill until survivors had fenced every one of `zones` (None: not within)."""
    deadline = time.monotonic() + within
    found: dict[str, float] = {}
    since = 0
    while time.monotonic() < deadline:
        entries = cluster.admin.audit(since=since)
        if entries:
            since = entries[-1].seq + 1
        for zone, entry in observe.first_fence(entries, zones, killed_at, excluded={victim}).items():
            found.setdefault(zone, entry.end_wall)
        if set(found) >= zones:
            return max(found.values(), default=killed_at) - killed_at
        time.sleep(0.1)
    return None


def _case(ctx: Context, synced: Synced, case: str) -> dict[str, Any]:
    p = ctx.profile
    cluster, zones = synced.cluster, synced.zones
    t = p.timings()
    limit = t.lease_duration * 2 + t.settle + 30
    with observe.Sampler(targets(cluster), p.sample_period) as sampler:
        everyone = [r.identity for r in cluster.live()]
        base = wait_owned(sampler, zones, everyone, within=limit, what=f"before killing the {case}")
        t0 = base.t
        coordinators = base.coordinators()
        if len(coordinators) != 1:
            raise ScenarioError(f"replicas disagree on the coordinator: {sorted(coordinators)}")
        coordinator = coordinators.pop()
        # A replica that is not the coordinator: the highest ordinal, as a scale-down would pick.
        victim = coordinator if case == "coordinator" else max(i for i in everyone if i != coordinator)
        ordinal = next(r.ordinal for r in cluster.live() if r.identity == victim)
        its_zones = {z for z, owner in base.owner_map().items() if owner == victim}
        survivors = [i for i in everyone if i != victim]
        entry: dict[str, Any] = {"victim": victim, "coordinator_before": coordinator, "zones": len(its_zones)}
        events = []
        try:
            ctx.progress.status(f"kill -9 {victim} ({case}, {len(its_zones)} zones)")
            killed_at = time.time()
            events.append({"t": round(killed_at - t0, 3), "label": f"kill -9 {victim}"})
            cluster.kill(ordinal)
            full = wait_owned(
                sampler,
                zones,
                survivors,
                within=limit,
                after=killed_at,
                min_generation=observe.generation(base) + 1,
                what=f"after killing {victim}",
            )
            rewritten = _rewritten(cluster, its_zones, killed_at, victim, within=limit)
            led = sampler.wait_for(
                lambda s: len(s.coordinators()) == 1 and s.coordinators() <= set(survivors), limit, killed_at
            )
            spans = observe.unowned_spans(
                [s for s in sampler.since(killed_at) if s.t <= full.t], sorted(its_zones)
            )
            longest, _ = observe.longest_unowned(spans)
            target = TARGET_SECONDS
            entry.update(
                {
                    "seconds_until_rewritten": None if rewritten is None else round(rewritten, 3),
                    "seconds_to_full_ownership": round(full.t - killed_at, 3),
                    "seconds_without_coordinator": None
                    if led is None
                    else round(max(0.0, led.t - killed_at), 3),
                    "coordinator_after": sorted(led.coordinators())[0] if led is not None else None,
                    "longest_unowned_seconds": round(longest, 3),
                    "target_seconds": target,
                    "meets_target": rewritten is not None and rewritten <= target,
                }
            )
            ctx.progress.step(
                f"killed {case} {victim}: its {len(its_zones)} zones rewritten by survivors after "
                f"{entry['seconds_until_rewritten']}s, full ownership after "
                f"{entry['seconds_to_full_ownership']}s, no coordinator for "
                f"{entry['seconds_without_coordinator']}s"
            )
            time.sleep(max(1.0, 4 * p.sample_period))
        finally:
            entry["timeline"] = observe.timeline(sampler.since(t0 - 1), zones, t0)
            entry["events"] = events
    # Bring the killed ordinal back, so the next case starts from N replicas again.
    ctx.progress.status(f"starting {victim} again")
    cluster.start_ordinal(ordinal)
    cluster.wait_ready(ordinals=[ordinal])
    cluster.wait_settled(True, p.settle_timeout + t.lease_duration * 2)
    return entry


def run(ctx: Context) -> dict[str, Any]:
    p = ctx.profile
    t = p.timings()
    n = max(2, p.handoff_replicas)
    result: dict[str, Any] = {
        "replicas": n,
        "zones": p.handoff_zones,
        "records_per_zone": p.handoff_records,
        "default_flags": p.default_flags,
        "lease_duration": t.lease_duration,
        "renew_interval": t.renew_interval,
        "settle_delay": t.settle,
        "target_seconds": TARGET_SECONDS,
    }
    ctx.progress.step(f"{n} replicas over {p.handoff_zones} zones, lease {t.lease_duration:g}s")
    with synced_cluster(
        ctx,
        "failover",
        replicas=n,
        zones=p.handoff_zones,
        records_per_zone=p.handoff_records,
        sharded=True,
        interval=INTERVAL,
    ) as synced:
        ctx.progress.status(f"measuring what each replica costs the API server ({STEADY_SECONDS:g}s)")
        try:
            result["steady_api_cost"] = api_cost.summary(api_cost.measure(synced.cluster, STEADY_SECONDS))
        except ValueError as exc:  # the coordinator changed meanwhile: no steady state to report
            result["steady_api_cost"] = error_result(exc)
        cost = result["steady_api_cost"]
        ctx.progress.step(
            f"steady state: a replica that does not lead is sent "
            f"{cost.get('watch_events_per_second_per_member')} watch events/s, the coordinator "
            f"{cost.get('watch_events_per_second_coordinator')}"
        )
        for case in ("replica", "coordinator"):
            try:
                result[case] = _case(ctx, synced, case)
            except (ScenarioError, ClusterError) as exc:
                ctx.progress.step(f"killing the {case}: FAILED: {exc}")
                result[case] = error_result(exc)
                break
    return result
