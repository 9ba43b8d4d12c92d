"""Scenario `rolling_restart`: restart every replica one by one, highest ordinal first, as a StatefulSet
rolling update does (SIGTERM, wait for the exit, start the same ordinal again, wait until it is ready and
runs its zones again, next).

A restarting replica keeps its member lease marked `restarting`, so its zones stay parked for it rather
than moving away and back: `zones_moved` counts the zones whose owner in any replica's view of the
assignment ever differed from their owner before the update (target 0). Also reported: per restart the
seconds until the replica ran its zones again, and the longest time any zone ran nowhere (sampled).
"""

from __future__ import annotations

import time
from typing import Any

from bench import observe
from bench.cluster import ClusterError
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


def _ever_moved(samples: list[observe.Sample], before: dict[str, str]) -> set[str]:
    """Zones some replica's view of the assignment gave to another owner than `before` did."""
    moved: set[str] = set()
    for sample in samples:
        for view in sample.views.values():
            for zone, owner in view.owners.items():
                if owner is not None and zone in before and owner != before[zone]:
                    moved.add(zone)
    return moved


def run(ctx: Context) -> dict[str, Any]:
    p = ctx.profile
    n = p.handoff_replicas
    limit = p.timings().lease_duration * 2 + p.timings().settle + 30
    result: dict[str, Any] = {
        "replicas": n,
        "zones": p.handoff_zones,
        "records_per_zone": p.handoff_records,
        "restart_grace_seconds": 30.0,
    }
    ctx.progress.step(f"{n} replicas over {p.handoff_zones} zones, restarted one by one")
    with synced_cluster(
        ctx,
        "rolling_restart",
        replicas=n,
        zones=p.handoff_zones,
        records_per_zone=p.handoff_records,
        sharded=True,
        interval=INTERVAL,
    ) as synced:
        cluster, zones = synced.cluster, synced.zones
        members = [identity(i) for i in range(n)]
        with observe.Sampler(targets(cluster), p.sample_period) as sampler:
            base = wait_owned(sampler, zones, members, within=limit, what="before the update")
            before = base.owner_map()
            t0 = base.t
            restarts: list[dict[str, Any]] = []
            events = []
            try:
                for ordinal in reversed(range(n)):
                    who = identity(ordinal)
                    ctx.progress.status(f"restarting {who}")
                    started = time.time()
                    events.append({"t": round(started - t0, 3), "label": f"restart {who}"})
                    cluster.restart(ordinal)
                    back = time.time()
                    cluster.wait_ready(ordinals=[ordinal])
                    full = wait_owned(
                        sampler, zones, members, within=limit, after=back, what=f"after restarting {who}"
                    )
                    restarts.append(
                        {
                            "identity": who,
                            "zones": sum(1 for o in before.values() if o == who),
                            "seconds_to_exit": round(back - started, 3),
                            "seconds_until_running_again": round(full.t - started, 3),
                        }
                    )
                    ctx.progress.step(
                        f"{who}: exited after {back - started:.2f}s, ran its zones again after "
                        f"{full.t - started:.2f}s"
                    )
                finished = time.time()
                samples = [s for s in sampler.since(t0) if s.t <= finished]
                moved = _ever_moved(samples, before)
                longest, zone = observe.longest_unowned(observe.unowned_spans(samples, zones))
                result.update(
                    {
                        "restarts": restarts,
                        "seconds": round(finished - t0, 3),
                        "zones_moved": len(moved),
                        "zones_moved_sample": sorted(moved)[:5],
                        "longest_unowned_seconds": round(longest, 3),
                        "longest_unowned_zone": zone,
                        "final_owner_changes": len(observe.moved(before, full.owner_map())),
                    }
                )
                time.sleep(max(1.0, 4 * p.sample_period))
            except (ScenarioError, ClusterError) as exc:
                result.update(error_result(exc))
                result["restarts"] = restarts
            finally:
                result["timeline"] = observe.timeline(sampler.since(t0 - 1), zones, t0)
                result["events"] = events
    return result
