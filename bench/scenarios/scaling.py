"""Scenario `scaling`: Z zones x R records converged from empty by N replicas, sharded and `--sharding=off`
(active/passive), for each N; then the steady-state resync rate.

Per run: the replicas start and settle with no zone in the provider; then every zone appears at once and
the run is timed until each zone's first write (audit) — `zones_per_second` = Z / that time. Then the
steady state, measured after a warm-up (the pass that reads every zone once more after its first write: at
least `WARMUP_SECONDS`, then until the record reads go quiet, at most `WARMUP_MAX_SECONDS`): every zone is
due every 100 ms (`--interval=100ms`, also what keeps zone discovery in step across replicas), so each
replica is saturated and `steady_reconciles_per_second` is the cluster's capacity to verify unchanged zones
(a read each, or none where the provider's zone listing names versions).
`speedup` = rate(N) / rate(sharded, 1), `efficiency` = speedup / N, `vs_active_passive` =
rate(sharded N) / rate(active/passive N). CPU use per process is measured over both windows; when our
processes (replicas, API server, fake provider, the bench) used nearly all the cores, the run is marked
`cpu_bound` and the report says so (other processes' load is shown beside it, never counted as ours).
"""

from __future__ import annotations

import os
import time
from typing import Any

from bench import observe
from bench.cluster import Cluster, Replica
from bench.procstat import CpuMeter, CpuUse, cores, peak_rss_mib
from bench.scenarios.common import (
    Context,
    ScenarioError,
    Synced,
    check_records,
    error_result,
    rounded,
    synced_cluster,
)
from shardsync.local import seed
from shardsync.providers.fake.audit import AuditEntry

INTERVAL = 0.1
WARMUP_SECONDS = 3.0  # after converging, before the steady window: at least this long
WARMUP_MAX_SECONDS = 30.0  # ... and at most this long, waiting for the read pass below to end
QUIET_READS_PER_SECOND = 5.0  # record reads/s (all replicas) under which that pass counts as ended
MODES = ("sharded", "active_passive")
CALLS_PER_ZONE = 3  # fence, read, write
READS = "shardsync_provider_calls_total"


def _steady(ctx: Context, synced: Synced) -> tuple[float, dict[str, float], CpuUse]:
    cluster = synced.cluster
    live = cluster.live()
    # Right after converging, every zone is read once more in full and planned with nothing to do: that
    # pass sets up the steady state (what later reconciles are verified against) and is not part of it.
    # It takes zones/replica reads at the provider's pace (~12 s for 1,000 zones on one replica), so the
    # window waits for the reads to go quiet, not a fixed time.
    _warm_up(cluster, live)
    meter = CpuMeter({**cluster.pids(), **cluster.infra_pids(), "bench": os.getpid()})
    before = {r.identity: cluster.reconciles_ok(r) for r in live}
    meter.start()
    time.sleep(ctx.profile.scaling_steady_seconds)
    cpu = meter.stop()
    after = {r.identity: cluster.reconciles_ok(r) for r in live}
    per_replica = {i: (after[i] - before[i]) / cpu.seconds for i in before}
    return sum(per_replica.values()), per_replica, cpu


def _warm_up(cluster: Cluster, live: list[Replica]) -> None:
    """Wait WARMUP_SECONDS, then until the replicas' record reads fall under QUIET_READS_PER_SECOND (a
    provider whose zone listing names no versions never goes quiet: WARMUP_MAX_SECONDS bounds it)."""

    def reads() -> float:
        return sum(cluster.metric(r, READS, {"kind": "records"}) or 0.0 for r in live)

    started = time.monotonic()
    time.sleep(WARMUP_SECONDS)
    before = reads()
    while time.monotonic() - started < WARMUP_MAX_SECONDS:
        time.sleep(1.0)
        now = reads()
        if now - before < QUIET_READS_PER_SECOND:
            return
        before = now


def per_writer_rates(first: dict[str, AuditEntry], opened_at: float) -> dict[str, float]:
    """Writer -> zones it converged per second, each over its own time (opening until its last zone),
    so a replica that drew more zones does not lower the others' rates."""
    last: dict[str, float] = {}
    count: dict[str, int] = {}
    for entry in first.values():
        last[entry.writer] = max(last.get(entry.writer, opened_at), entry.end_wall)
        count[entry.writer] = count.get(entry.writer, 0) + 1
    return {w: count[w] / (last[w] - opened_at) for w in count if last[w] > opened_at}


def _one(ctx: Context, mode: str, replicas: int) -> dict[str, Any]:
    p = ctx.profile
    name = f"scaling/{mode}-{replicas}"
    ctx.progress.step(f"{mode}, {replicas} replica(s): {p.scaling_zones} zones x {p.scaling_records} records")
    with synced_cluster(
        ctx,
        name,
        replicas=replicas,
        zones=p.scaling_zones,
        records_per_zone=p.scaling_records,
        sharded=mode == "sharded",
        interval=INTERVAL,
        measure_cpu=True,
        gate=True,
    ) as synced:
        ctx.progress.status(f"{mode}-{replicas}: steady state for {p.scaling_steady_seconds:g}s")
        steady, steady_per_replica, steady_cpu = _steady(ctx, synced)
        cluster = synced.cluster
        if mode == "sharded":
            pids = {**cluster.pids(), **cluster.infra_pids()}
            ctx.peaks[(replicas, p.scaling_zones, p.scaling_records)] = {
                k: peak_rss_mib(v) for k, v in pids.items()
            }
        sample = observe.poll_once({r.identity: r.url for r in cluster.live()})
        owners = sample.owner_map()
        most, mean = observe.load(owners, [r.identity for r in cluster.live()])
        problems = check_records(cluster, synced.zones, synced.records_per_zone)
        converge_cpu = synced.cpu
        assert converge_cpu is not None
        cpu_bound = converge_cpu.saturated() or steady_cpu.saturated()
        rates = per_writer_rates(synced.first_apply, synced.opened_at)
        entry: dict[str, Any] = {
            "replicas": replicas,
            "cpu_ms_per_reconcile": rounded(cpu_ms_per_reconcile(steady_cpu, steady), 3),
            "converge_seconds": rounded(synced.converge_seconds),
            "zones_per_second": rounded(synced.zones_per_second, 2),
            "ideal_zones_per_second": rounded(_ideal(ctx, mode, replicas), 2),
            "aggregate_zones_per_second": rounded(sum(rates.values()), 2),
            "zones_per_second_per_replica": {k: rounded(v, 2) for k, v in sorted(rates.items())},
            "steady_reconciles_per_second": rounded(steady, 1),
            "steady_per_replica": {k: rounded(v, 1) for k, v in sorted(steady_per_replica.items())},
            "zones_per_replica": {
                k: sum(1 for o in owners.values() if o == k) for k in sorted(steady_per_replica)
            },
            "load_max_over_mean": rounded(most / mean if mean else None),
            "setup_seconds": synced.phases,
            "cpu": {"converge": converge_cpu.to_json(), "steady": steady_cpu.to_json()},
            "cpu_bound": cpu_bound,
            "records_checked": problems or "ok",
        }
        ctx.progress.step(
            f"{mode}, {replicas}: converged in {synced.converge_seconds:.2f}s = "
            f"{synced.zones_per_second:.1f} zones/s; steady {steady:.0f} reconciles/s; CPU: ours "
            f"{converge_cpu.ours:.2f}/{cores()} cores (machine {converge_cpu.machine_busy_cores:.2f})"
            + (" (CPU-bound)" if cpu_bound else "")
        )
        return entry


def cpu_ms_per_reconcile(cpu: CpuUse, reconciles_per_second: float) -> float | None:
    """The replicas' CPU (ms) per steady-state reconcile: every zone is due every 100 ms and nothing
    changes, so this is the fixed cost of verifying an unchanged zone (the API server and the fake provider
    are not counted)."""
    replica_cores = sum(v for k, v in cpu.per_process.items() if k.startswith(f"{seed.STATEFULSET}-"))
    if reconciles_per_second <= 0:
        return None
    return replica_cores / reconciles_per_second * 1000


def _ideal(ctx: Context, mode: str, replicas: int) -> float:
    """What a purely latency-bound provider allows: calls/s per replica over calls per zone."""
    p = ctx.profile
    per_replica = p.provider_concurrency / p.latency / CALLS_PER_ZONE
    return per_replica * (replicas if mode == "sharded" else 1)


def _ratio(a: Any, b: Any) -> float | None:
    if not isinstance(a, int | float) or not isinstance(b, int | float) or not b:
        return None
    return round(a / b, 3)


def derive(result: dict[str, Any]) -> None:
    """Fill speedup, efficiency and vs_active_passive in from the measured rates (in place)."""
    base = result["sharded"].get("1", {}).get("zones_per_second")
    steady_base = result["sharded"].get("1", {}).get("steady_reconciles_per_second")
    for mode in MODES:
        for key, entry in result[mode].items():
            if "error" in entry:
                continue
            n = int(key)
            speedup = _ratio(entry["zones_per_second"], base)
            entry["speedup"] = speedup
            entry["efficiency"] = None if speedup is None else round(speedup / n, 3)
            steady_speedup = _ratio(entry["steady_reconciles_per_second"], steady_base)
            aggregate = _ratio(entry.get("aggregate_zones_per_second"), base)
            entry["aggregate_efficiency"] = None if aggregate is None else round(aggregate / n, 3)
            entry["steady_speedup"] = steady_speedup
            entry["steady_efficiency"] = None if steady_speedup is None else round(steady_speedup / n, 3)
    for key, entry in result["sharded"].items():
        if "error" in entry:
            continue
        passive = result["active_passive"].get(key, {})
        entry["vs_active_passive"] = _ratio(entry["zones_per_second"], passive.get("zones_per_second"))
        entry["steady_vs_active_passive"] = _ratio(
            entry["steady_reconciles_per_second"], passive.get("steady_reconciles_per_second")
        )
    bound = [(mode, key, e) for mode in MODES for key, e in result[mode].items() if e.get("cpu_bound")]
    result["cpu_bound_runs"] = [f"{mode} N={key}" for mode, key, _ in bound]
    if bound:
        result["note"] = (
            "CPU-bound: our processes used at least 85% of the cores in "
            f"{', '.join(map(_cpu_detail, bound))}; "
            "there the CPU, not the provider's latency, limited the rate (cpu.*.per_process_cores has it all)"
        )
    else:
        result["note"] = "latency-bound: our processes left the cores headroom in every run"


def _cpu_detail(run: tuple[str, str, dict[str, Any]]) -> str:
    mode, key, entry = run
    window = max(("converge", "steady"), key=lambda w: float(entry["cpu"][w]["ours_cores"]))
    cpu = entry["cpu"][window]
    per = cpu["per_process_cores"]
    replicas = [v for k, v in per.items() if k.startswith(f"{seed.STATEFULSET}-")]
    text = (
        f"{mode} N={key} ({window}: ours {cpu['ours_cores']:.2f} of {cpu['cores']} cores, machine "
        f"{cpu['machine_busy_cores']:.2f}; replicas "
        f"{sum(replicas):.2f} ({max(replicas, default=0):.2f} at most each), fake provider "
        f"{per.get('fake-provider', 0):.2f}, API server {per.get('apiserver', 0):.2f}, "
        f"bench {per.get('bench', 0):.2f}"
    )
    return text + ")"


def run(ctx: Context) -> dict[str, Any]:
    p = ctx.profile
    result: dict[str, Any] = {
        "zones": p.scaling_zones,
        "records_per_zone": p.scaling_records,
        "latency_ms": p.latency * 1000,
        "provider_concurrency": p.provider_concurrency,
        "worker_concurrency": p.worker_concurrency,
        "interval_seconds": INTERVAL,
        "sharded": {},
        "active_passive": {},
    }
    for mode in MODES:
        for replicas in p.scaling_replicas:
            try:
                result[mode][str(replicas)] = _one(ctx, mode, replicas)
            except ScenarioError as exc:
                ctx.progress.step(f"{mode}, {replicas}: FAILED: {exc}")
                result[mode][str(replicas)] = error_result(exc)
    derive(result)
    # The headline figure: one replica running every zone (no sharding overhead to blur it).
    result["cpu_ms_per_reconcile"] = result["sharded"].get("1", {}).get("cpu_ms_per_reconcile")
    return result
