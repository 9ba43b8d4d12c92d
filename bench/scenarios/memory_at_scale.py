"""Scenario `memory_at_scale`: what one replica costs in memory and CPU at a large cluster's size, for N = 1,
2 and 4 replicas sharing the zones (bench.scale_objects: Services of three shapes, Pods, Nodes, DNSEndpoints
over many zones; full profile 20,000 / 10,000 / 200 / 5,000 over 2,000 zones, quick a quarter).

Per N, a fresh cluster is seeded, every zone is opened, then the N replicas start; once every zone has had
its first write (the audit) and every replica's sources have listed (/readyz), each replica's CPU seconds
since its start are read (`sync_cpu_seconds`, the sum over replicas: listing, translating and the first
reconcile of each zone), then the steady state runs for a few seconds (`steady_cpu_cores` per replica) and
each replica's peak RSS (VmHWM) is read. That is done `memory_repeats` times per N (full profile: 3), each
time on a fresh cluster, and the median run is reported (`combine`). The baseline is one replica of a
cluster with the same zones and no source objects, measured the same way (`baseline_mib`: interpreter,
libraries, the zone list). External-dns's published figure (290 MiB at 8,209 Pods, external-dns#1030's
neighbourhood) is printed beside as the anchor.

`pod_source`: the same runs, fresh clusters of the same objects, with the replicas also running the pod
source (`--source=pod`, beside service and crd), for N in `scale_pod_source_replicas`: the Pods are then
one informer's objects for two kinds (sources.watcher). The seeded Pods carry no hostname annotation (they
publish nothing themselves), so the figure is what reading them as a source costs; `peak_vs_without` is
its peak RSS over the same N's without it.
"""

from __future__ import annotations

import time
from typing import Any

from bench.cluster import Cluster, ClusterError, zone_names
from bench.procstat import CpuMeter, cpu_seconds, peak_rss_mib, rss_mib
from bench.scale_objects import Sizes, seed
from bench.scenarios.common import (
    Context,
    ScenarioError,
    cluster_spec,
    error_result,
    replica_flags,
    rounded,
    wait_converged,
)
from shardsync.kube.client import KubeError

STEADY_SECONDS = 3.0
INTERVAL = 1.0  # steady state: each zone re-read every second
ANCHOR = {"replica": "external-dns", "pods": 8209, "peak_rss_mib": 290}


def sizes(ctx: Context) -> Sizes:
    p = ctx.profile
    return Sizes(p.scale_services, p.scale_pods, p.scale_nodes, p.scale_dns_endpoints, p.scale_zones)


POD_SOURCE = ("--source=pod",)  # beside the launcher's service and crd


def _run(
    ctx: Context, name: str, replicas: int, objects: Sizes | None, extra: tuple[str, ...] = ()
) -> dict[str, Any]:
    """One cluster: seed (unless `objects` is None), open the zones, start the replicas, converge, steady."""
    p = ctx.profile
    zones = p.scale_zones
    flags = replica_flags(p, sharded=True, interval=INTERVAL, extra=extra)
    cluster = Cluster(ctx.cluster_dir(name), cluster_spec(p, flags))
    try:
        cluster.start()
        names = zone_names(zones)
        seeded_in = 0.0
        if objects is not None:
            ctx.progress.status(f"{name}: seeding {objects.objects} objects")
            started = time.monotonic()
            seed(cluster.kube, objects, names)
            seeded_in = time.monotonic() - started
        opened_at = time.time()
        cluster.open_zones(zones)
        ctx.progress.status(f"{name}: starting {replicas} replica(s)")
        cluster.scale(replicas)
        if objects is not None:
            wait_converged(cluster, names, opened_at, p.converge_timeout, ctx.progress)
            # The first full sync also means every replica's sources have listed (/readyz): a replica of
            # four may write all its zones while it is still reading the other Services' pages.
            cluster.wait_ready(p.converge_timeout)
        else:
            cluster.wait_ready()
            cluster.wait_settled(True, p.settle_timeout)
        pids = cluster.pids()
        sync_cpu = {k: cpu_seconds(v) for k, v in pids.items()}
        ctx.progress.status(f"{name}: steady state for {STEADY_SECONDS:g}s")
        meter = CpuMeter(pids)
        meter.start()
        time.sleep(STEADY_SECONDS)
        steady = meter.stop()
        peaks = {k: peak_rss_mib(v) for k, v in pids.items()}
        now = {k: rss_mib(v) for k, v in pids.items()}
    except (ClusterError, KubeError) as exc:
        raise ScenarioError(f"{name}: {exc}") from None
    finally:
        cluster.stop()
    values = [v for v in peaks.values() if v is not None]
    cpus = [v for v in sync_cpu.values() if v is not None]
    if not values or not cpus:
        raise ScenarioError(f"{name}: the replicas' /proc figures could not be read")
    return {
        "replicas": replicas,
        "peak_rss_mib_per_replica": {k: rounded(v, 1) for k, v in sorted(peaks.items())},
        "peak_rss_mib": rounded(max(values), 1),
        # Resident after the steady state: the peak is the first sync, when every cache is still full.
        "rss_mib_after_steady_per_replica": {k: rounded(v, 1) for k, v in sorted(now.items())},
        "sync_cpu_seconds": rounded(sum(cpus), 2),
        "sync_cpu_seconds_per_replica": {k: rounded(v, 2) for k, v in sorted(sync_cpu.items())},
        "steady_cpu_cores_per_replica": {k: rounded(v, 3) for k, v in sorted(steady.per_process.items())},
        "seed_seconds": rounded(seeded_in, 1),
    }


def run(ctx: Context) -> dict[str, Any]:
    p = ctx.profile
    objects = sizes(ctx)
    result: dict[str, Any] = {
        "services": objects.services,
        "pods": objects.pods,
        "nodes": objects.nodes,
        "dns_endpoints": objects.dns_endpoints,
        "zones": objects.zones,
        "anchor": ANCHOR,
        "runs": {},
    }
    try:
        base = _run(ctx, "memory_at_scale/baseline", 1, None)
        baseline: float | None = base["peak_rss_mib"]
        base_cpu: float | None = base["sync_cpu_seconds"]
        result["baseline"] = base
        ctx.progress.step(f"baseline (no objects): peak RSS {baseline} MiB, CPU {base['sync_cpu_seconds']} s")
    except ScenarioError as exc:
        baseline = base_cpu = None
        result["baseline"] = error_result(exc)
    for replicas in p.memory_replicas:
        entry = _runs(ctx, f"memory_at_scale/{replicas}", replicas, objects)
        if "error" in entry:
            ctx.progress.step(f"{replicas}: FAILED: {entry['error']}")
            result["runs"][str(replicas)] = entry
            continue
        entry["baseline_mib"] = baseline
        entry["above_baseline_mib"] = rounded(entry["peak_rss_mib"] - baseline, 1) if baseline else None
        if base_cpu is not None:
            # What start-up (imports, settling) costs every replica alike, taken out: the sync's own share.
            entry["sync_cpu_above_baseline_seconds"] = rounded(
                entry["sync_cpu_seconds"] - replicas * base_cpu, 2
            )
        result["runs"][str(replicas)] = entry
        ctx.progress.step(
            f"{replicas} replica(s): peak RSS {entry['peak_rss_mib']} MiB per replica (baseline {baseline}; "
            f"external-dns: {ANCHOR['peak_rss_mib']} MiB at {ANCHOR['pods']} Pods), sync CPU "
            f"{entry['sync_cpu_seconds']} s summed"
        )
    derive(result)
    result["pod_source"] = pod_source(ctx, objects, result["runs"])
    return result


def _runs(
    ctx: Context, name: str, replicas: int, objects: Sizes, extra: tuple[str, ...] = ()
) -> dict[str, Any]:
    """One N's figures over `memory_repeats` fresh clusters (`combine`), or the error that stopped them."""
    p = ctx.profile
    try:
        return combine(
            [
                _run(ctx, name if p.memory_repeats == 1 else f"{name}/{i + 1}", replicas, objects, extra)
                for i in range(p.memory_repeats)
            ]
        )
    except ScenarioError as exc:
        return error_result(exc)


def pod_source(ctx: Context, objects: Sizes, without: dict[str, Any]) -> dict[str, Any]:
    """The runs with the pod source too (see the module docstring), each beside the same N's without."""
    runs: dict[str, Any] = {}
    for replicas in ctx.profile.scale_pod_source_replicas:
        entry = _runs(ctx, f"memory_at_scale/pod_source/{replicas}", replicas, objects, POD_SOURCE)
        runs[str(replicas)] = entry
        if "error" in entry:
            ctx.progress.step(f"{replicas} with --source=pod: FAILED: {entry['error']}")
            continue
        base = without.get(str(replicas), {}).get("peak_rss_mib")
        entry["peak_vs_without"] = round(entry["peak_rss_mib"] / base, 3) if base else None
        ctx.progress.step(
            f"{replicas} replica(s) with --source=pod: peak RSS {entry['peak_rss_mib']} MiB per replica "
            f"({base} without), sync CPU {entry['sync_cpu_seconds']} s summed"
        )
    return {"sources": ["service", "crd", "pod"], "runs": runs}


def combine(repeats: list[dict[str, Any]]) -> dict[str, Any]:
    """One N's figures from its repeated runs (fresh clusters alike): the run whose summed sync CPU is the
    median, whole, with the largest peak RSS of all of them; every repeat's CPU and peak listed
    (`repeats`). On a shared host the CPU of one run moves by a tenth or more from the next (the same code
    gave sync_cpu_vs_one 1.28 and 1.50 an hour apart), so a ratio of two single runs decides little."""
    ordered = sorted(repeats, key=lambda r: r["sync_cpu_seconds"])
    entry = dict(ordered[(len(ordered) - 1) // 2])
    if len(repeats) > 1:
        entry["peak_rss_mib"] = max(r["peak_rss_mib"] for r in repeats)
        entry["repeats"] = [
            {"sync_cpu_seconds": r["sync_cpu_seconds"], "peak_rss_mib": r["peak_rss_mib"]} for r in repeats
        ]
    return entry


def derive(result: dict[str, Any]) -> None:
    """The issue's ratios, against N = 1 (in place), and the sync CPU's above the baseline's (what start-up
    costs every replica alike left out: `sync_cpu_above_baseline_vs_one`)."""
    one = result["runs"].get("1", {})
    for entry in result["runs"].values():
        if "error" in entry or "error" in one:
            continue
        if one.get("above_baseline_mib") and entry.get("above_baseline_mib") is not None:
            entry["above_baseline_vs_one"] = round(entry["above_baseline_mib"] / one["above_baseline_mib"], 3)
        if one.get("sync_cpu_seconds"):
            entry["sync_cpu_vs_one"] = round(entry["sync_cpu_seconds"] / one["sync_cpu_seconds"], 3)
        own = entry.get("sync_cpu_above_baseline_seconds")
        own_one = one.get("sync_cpu_above_baseline_seconds")
        if own is not None and own_one:
            entry["sync_cpu_above_baseline_vs_one"] = round(own / own_one, 3)
