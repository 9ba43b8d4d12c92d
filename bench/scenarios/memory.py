"""Scenario `memory`: peak resident memory (VmHWM) of each replica for N = 1, 2, 4 with the same zones,
read once the zones were synced and a few seconds of steady state (resyncs every second) have passed.
With sharding each replica reconciles 1/N of the zones, so its peak should fall roughly as 1/N plus the
constant every replica pays (interpreter, client libraries, the source caches it watches in full)."""

from __future__ import annotations

import time
from typing import Any

from bench.procstat import peak_rss_mib
from bench.scenarios.common import Context, ScenarioError, error_result, rounded, synced_cluster

STEADY_SECONDS = 3.0
INTERVAL = 1.0


def _one(ctx: Context, replicas: int) -> dict[str, Any]:
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
    ) as synced:
        ctx.progress.status(f"{replicas}: steady state for {STEADY_SECONDS:g}s")
        time.sleep(STEADY_SECONDS)
        cluster = synced.cluster
        peaks = {identity: peak_rss_mib(pid) for identity, pid in cluster.pids().items()}
        infra = {name: peak_rss_mib(pid) for name, pid in cluster.infra_pids().items()}
    values = [v for v in peaks.values() if v is not None]
    if not values:
        raise ScenarioError(f"{name}: no replica's peak RSS could be read")
    entry = {
        "replicas": replicas,
        "peak_rss_mib": {k: rounded(v, 1) for k, v in sorted(peaks.items())},
        "max_mib": rounded(max(values), 1),
        "mean_mib": rounded(sum(values) / len(values), 1),
        "infrastructure_peak_rss_mib": {k: rounded(v, 1) for k, v in sorted(infra.items())},
    }
    ctx.progress.step(f"{replicas} replica(s): peak RSS per replica max {entry['max_mib']} MiB")
    return entry


def run(ctx: Context) -> dict[str, Any]:
    p = ctx.profile
    result: dict[str, Any] = {"zones": p.memory_zones, "records_per_zone": p.memory_records, "runs": {}}
    for replicas in p.memory_replicas:
        ctx.progress.step(f"{replicas} replica(s): {p.memory_zones} zones x {p.memory_records} records")
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
