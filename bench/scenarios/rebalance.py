"""Scenario `rebalance`: graceful scale N -> N+1, then N+1 -> N, with every zone synced.

For each step: `moved` zones (their runner changed) against the ideal 1/(N+1) of all zones
(`moved_ratio` = moved fraction / ideal, target <= 1.10), max/mean zones per replica afterwards (target
<= 1.05; where the zones do not divide evenly the best possible is ceil(mean)/mean, which the coordinator
reaches: 150 zones on 4 replicas give 38/37.5 = 1.013), `seconds_to_full_ownership` (from the scale
command until a newer generation is in force and every zone runs at exactly one of the expected replicas),
and the longest time any zone ran nowhere. Ownership is sampled from every replica's /shards (resolution:
the sample period).
"""

from __future__ import annotations

import time
from typing import Any

from bench import observe
from bench.scenarios.common import (
    Context,
    ScenarioError,
    error_result,
    identity,
    synced_cluster,
    targets,
    wait_owned,
)

INTERVAL = 10.0
TARGET_MOVED_RATIO = 1.10
TARGET_MAX_OVER_MEAN = 1.05


def _step(
    samples: list[observe.Sample],
    zones: list[str],
    before: observe.Sample,
    after: observe.Sample,
    started: float,
    members: list[str],
    moved_with: str,
    up: bool,
) -> dict[str, Any]:
    old, new = before.owner_map(), after.owner_map()
    moved = observe.moved(old, new)
    bigger = len(members) + (0 if up else 1)
    ideal = 1 / bigger
    fraction = len(moved) / len(zones)
    most, mean = observe.load(new, members)
    spans = observe.unowned_spans([s for s in samples if started <= s.t <= after.t], zones)
    longest, _ = observe.longest_unowned(spans)
    if up:
        only_expected = all(new.get(z) == moved_with for z in moved)
    else:
        only_expected = all(old.get(z) == moved_with for z in moved)
    return {
        "from": bigger - 1 if up else bigger,
        "to": bigger if up else bigger - 1,
        "moved": len(moved),
        "moved_fraction": round(fraction, 4),
        "ideal_fraction": round(ideal, 4),
        "moved_ratio": round(fraction / ideal, 3),
        "moved_only_with_" + ("new" if up else "leaving") + "_replica": only_expected,
        "max_zones": most,
        "mean_zones": round(mean, 2),
        "max_over_mean": round(most / mean, 3) if mean else None,
        "zones_per_replica": {m: sum(1 for o in new.values() if o == m) for m in members},
        "seconds_to_full_ownership": round(after.t - started, 3),
        "longest_unowned_seconds": round(longest, 3),
        "generation": observe.generation(after),
    }


def run(ctx: Context) -> dict[str, Any]:
    p = ctx.profile
    n = p.handoff_replicas
    limit = p.timings().lease_duration * 2 + p.timings().settle + 30
    result: dict[str, Any] = {
        "zones": p.handoff_zones,
        "records_per_zone": p.handoff_records,
        "replicas": n,
        "targets": {"moved_ratio": TARGET_MOVED_RATIO, "max_over_mean": TARGET_MAX_OVER_MEAN},
    }
    ctx.progress.step(f"{n} -> {n + 1} -> {n} replicas over {p.handoff_zones} zones")
    with synced_cluster(
        ctx,
        "rebalance",
        replicas=n,
        zones=p.handoff_zones,
        records_per_zone=p.handoff_records,
        sharded=True,
        interval=INTERVAL,
    ) as synced:
        cluster, zones = synced.cluster, synced.zones
        members = [identity(i) for i in range(n)]
        newcomer = identity(n)
        with observe.Sampler(targets(cluster), p.sample_period) as sampler:
            base = wait_owned(sampler, zones, members, within=limit, what="before scaling")
            t0 = base.t
            events = []
            try:
                ctx.progress.status(f"scaling {n} -> {n + 1}")
                t_up = time.time()
                events.append({"t": round(t_up - t0, 3), "label": f"scale {n}->{n + 1}"})
                cluster.scale(n + 1, wait=False)
                up = wait_owned(
                    sampler,
                    zones,
                    [*members, newcomer],
                    within=limit,
                    after=t_up,
                    min_generation=observe.generation(base) + 1,
                    what=f"scale {n} -> {n + 1}",
                )
                result["up"] = _step(
                    sampler.since(t0), zones, base, up, t_up, [*members, newcomer], newcomer, True
                )
                ctx.progress.step(_say(result["up"]))
            except ScenarioError as exc:
                result["up"] = {"from": n, "to": n + 1, **error_result(exc)}
                ctx.progress.step(f"{n} -> {n + 1}: FAILED: {exc}")
                return result
            try:
                time.sleep(max(1.0, 4 * p.sample_period))  # a quiet moment between the steps, for the plot
                ctx.progress.status(f"scaling {n + 1} -> {n}")
                t_down = time.time()
                events.append({"t": round(t_down - t0, 3), "label": f"scale {n + 1}->{n}"})
                cluster.scale(n, wait=False)
                down = wait_owned(
                    sampler,
                    zones,
                    members,
                    within=limit,
                    after=t_down,
                    min_generation=observe.generation(up) + 1,
                    what=f"scale {n + 1} -> {n}",
                )
                result["down"] = _step(sampler.since(t0), zones, up, down, t_down, members, newcomer, False)
                ctx.progress.step(_say(result["down"]))
                cluster.wait_exited([n], cluster.spec.termination_grace)
                cluster.reap()
                time.sleep(max(1.0, 4 * p.sample_period))
            except ScenarioError as exc:
                result["down"] = {"from": n + 1, "to": n, **error_result(exc)}
                ctx.progress.step(f"{n + 1} -> {n}: FAILED: {exc}")
            finally:
                result["timeline"] = observe.timeline(sampler.since(t0 - 1), zones, t0)
                result["events"] = events
    return result


def _say(step: dict[str, Any]) -> str:
    return (
        f"{step['from']} -> {step['to']}: moved {step['moved']} zones ({step['moved_ratio']:.2f} x ideal), "
        f"max/mean {step['max_over_mean']}, full ownership after {step['seconds_to_full_ownership']:.2f}s, "
        f"longest unowned {step['longest_unowned_seconds']:.2f}s"
    )
