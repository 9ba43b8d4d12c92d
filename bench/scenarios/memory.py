"""Scenario `memory`: peak resident memory (VmHWM) of each replica for N = 1, 2, 4 with the same zones,
read once the zones were synced and then resynced for a few seconds. With sharding each replica reconciles
1/N of the zones, so its peak should fall roughly as 1/N plus the constant every replica pays (interpreter,
client libraries, the source caches it watches in full).

When the scaling scenario already ran sharded with the same N and sizes, its processes are the ones read
(`measured_in` says so) rather than starting the same runs again.
"""

from __future__ import annotations

import time
from typing import Any

from bench.procstat import peak_rss_mib
from bench.scenarios.common import Context, ScenarioError, error_result, rounded, synced_cluster

STEADY_SECONDS = 3.0
INTERVAL = 0.1  # as in the scaling runs, so both measure the same load

INFRASTRUCTURE = ("apiserver", "fake-provider")


def _measure(ctx: Context, replicas: int) -> dict[str, float | None]:
    p = ctx.profile
    name = f"memory/{replicas}"
    with synced_cluster(
        ctx,
        name,
        replicas=replicas,
        zones=p.memory_zones,
        records_per_zone=p.memory_records,
        sharded=True,
        interval=INTERVAL,
        gate=True,
    ) as synced:
        ctx.progress.status(f"{replicas}: resyncing for {STEADY_SECONDS:g}s")
        time.sleep(STEADY_SECONDS)
        cluster = synced.cluster
        return {k: peak_rss_mib(v) for k, v in {**cluster.pids(), **cluster.infra_pids()}.items()}


def _one(ctx: Context, replicas: int) -> dict[str, Any]:
    p = ctx.profile
    key = (replicas, p.memory_zones, p.memory_records)
    if key in ctx.peaks:
        peaks, measured_in = ctx.peaks[key], f"scaling/sharded-{replicas}"
    else:
        peaks, measured_in = _measure(ctx, replicas), f"memory/{replicas}"
    per_replica = {k: v for k, v in peaks.items() if k not in INFRASTRUCTURE}
    values = [v for v in per_replica.values() if v is not None]
    if not values:
        raise ScenarioError(f"{measured_in}: no replica's peak RSS could be read")
    entry = {
        "replicas": replicas,
        "peak_rss_mib": {k: rounded(v, 1) for k, v in sorted(per_replica.items())},
        "max_mib": rounded(max(values), 1),
        "mean_mib": rounded(sum(values) / len(values), 1),
        "infrastructure_peak_rss_mib": {k: rounded(peaks.get(k), 1) for k in INFRASTRUCTURE},
        "measured_in": measured_in,
    }
    ctx.progress.step(
        f"{replicas} replica(s): peak RSS per replica max {entry['max_mib']} MiB ({measured_in})"
    )
    return entry


def run(ctx: Context) -> dict[str, Any]:
    p = ctx.profile
    result: dict[str, Any] = {"zones": p.memory_zones, "records_per_zone": p.memory_records, "runs": {}}
    for replicas in p.memory_replicas:
        try:
            result["runs"][str(replicas)] = _one(ctx, replicas)
        except ScenarioError as exc:
            ctx.progress.step(f"{replicas}: FAILED: {exc}")
            result["runs"][str(replicas)] = error_result(exc)
    base = result["runs"].get("1", {}).get("mean_mib")
    for entry in result["runs"].values():
        if base and "mean_mib" in entry:
            entry["vs_one_replica"] = round(entry["mean_mib"] / base, 3)
    return result
