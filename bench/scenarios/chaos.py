"""Scenario `chaos`: `chaos_faults` seeded faults on real replica processes under continuous source churn,
then the verdict (bench/chaos/run.py): overlapping writes, desired records missing and foreign records touched
must all be 0, and every zone must be owned again within the liveness bound after each fault.

The cluster: the embedded API server, the fake provider (its write audit is what proves "never two writers
at once"; a real DNS server keeps none), `chaos_replicas` replicas with the profile's chaos timings, and
`chaos_zones` zones, each with a Service, a DNSEndpoint and records of another owner id seeded before the
replicas start. `SHARDSYNC_CHAOS_SEED` overrides the profile's seed (a replay of a failed run).
"""

from __future__ import annotations

import os
from typing import Any

from bench import observe
from bench.chaos.churn import seed_foreign
from bench.chaos.run import ChaosSettings, liveness_bound, run_chaos, verdict_problems
from bench.cluster import Cluster, ClusterError, ClusterSpec, zone_names
from bench.scenarios.common import Context, ScenarioError, targets, wait_owned
from shardsync.durations import format_duration
from shardsync.local.apiserver.admin import RemoteFaults
from shardsync.sharding.timings import Timings

PER_ZONE = 1  # DNSEndpoint records per zone (the Service adds one)
FOREIGN_PER_ZONE = 2


def run(ctx: Context) -> dict[str, Any]:
    p = ctx.profile
    timings = Timings.derive(
        p.chaos_lease_duration, p.chaos_renew_interval, p.chaos_settle_delay, p.chaos_restart_grace
    )
    flags = (
        f"--interval={format_duration(p.chaos_interval)}",
        f"--concurrency={p.worker_concurrency}",
        f"--lease-duration={format_duration(p.chaos_lease_duration)}",
        f"--renew-interval={format_duration(p.chaos_renew_interval)}",
        f"--settle-delay={format_duration(p.chaos_settle_delay)}",
        f"--restart-grace={format_duration(p.chaos_restart_grace)}",
    )
    settings = ChaosSettings(
        seed=int(os.environ.get("SHARDSYNC_CHAOS_SEED", p.chaos_seed)),
        faults=p.chaos_faults,
        timings=timings,
        start_replicas=p.chaos_replicas,
        per_zone=PER_ZONE,
        start_timeout=p.settle_timeout,
        converge_timeout=p.converge_timeout,
        base_latency=p.latency,
    )
    spec = ClusterSpec(
        latency=p.latency,
        provider_concurrency=p.provider_concurrency,
        replica_flags=flags,
        termination_grace=2 * timings.lease_duration + timings.settle + 5,
        start_timeout=p.settle_timeout,
    )
    cluster = Cluster(ctx.cluster_dir("chaos"), spec)
    progress = ctx.progress
    try:
        progress.status("starting the API server and the fake provider")
        cluster.start()
        names = zone_names(p.chaos_zones)
        cluster.seed_objects(names, PER_ZONE)
        cluster.open_zones(p.chaos_zones)
        # Before any replica runs, so no replica write overlaps the seeding in the audit.
        foreign = seed_foreign(cluster.provider_url, names, FOREIGN_PER_ZONE)
        assert cluster.launcher.infra is not None
        api = RemoteFaults(cluster.launcher.infra.api_url)
        progress.status(f"starting {p.chaos_replicas} replicas")
        cluster.scale(p.chaos_replicas)
        cluster.wait_ready()
        with observe.Sampler(targets(cluster), p.sample_period) as sampler:
            everyone = [r.identity for r in cluster.live()]
            wait_owned(sampler, names, everyone, within=p.settle_timeout, what="before the chaos")
            progress.step(
                f"{len(everyone)} replicas own {len(names)} zones; lease {timings.lease_duration}s, "
                f"liveness bound {liveness_bound(timings, settings.start_allowance):.0f}s"
            )
            result = run_chaos(cluster, api, sampler, names, foreign, settings, say=progress.step)
    except ClusterError as exc:
        raise ScenarioError(f"chaos: {exc}") from None
    finally:
        try:
            if cluster.launcher.infra is not None and cluster.launcher.infra.provider.alive():
                ctx.safety["chaos"] = observe.safety(
                    [e for e in cluster.audit() if e.writer.startswith("shardsync-")]
                )
        except Exception as exc:  # best effort once the scenario failed
            progress.step(f"chaos: could not read the audit: {exc}")
        finally:
            cluster.stop()
    problems = verdict_problems(result)
    result["verdict"] = "OK" if not problems else "FAILED: " + "; ".join(problems)
    progress.step(
        f"{result['faults']} faults: overlapping writes {result['overlapping_writes']}, desired missing "
        f"{result['desired_missing']}, foreign touched {result['foreign_touched']}, max unowned "
        f"{result['max_unowned_seconds']}s, late recoveries {result['late_recoveries']}: {result['verdict']}"
    )
    return result
