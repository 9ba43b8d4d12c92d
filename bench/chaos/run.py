"""One chaos run on a started cluster, and its verdict: the part the bench scenario (`python -m bench --only
chaos`) and the multi-process test share.

`run_chaos` draws the plan from the seed, runs it under source churn (executor.py, churn.py), lifts every
fault, brings the StatefulSet back to its starting size, waits for one owner per zone and for the records
the objects ask for, and judges:

- `overlapping_writes`: successful writes of two replicas to one zone at overlapping times (the provider's
  audit; the foreign seeding writer left out);
- `desired_missing`: records the Services and DNSEndpoints in the API ask for at the end that the provider
  does not hold (after waiting up to `converge_timeout` for them);
- `foreign_touched`: records of another owner id, seeded before the chaos, not exactly as seeded;
- `max_unowned_seconds`: the longest time one zone ran at no replica (sampled from /shards), faults
  included; and per fault the recovery (from the fault's end until every zone ran at exactly one live
  replica again), which must stay within the liveness bound (`late_recoveries`: 0).

The liveness bound comes from the replicas' timings (lease duration, renew interval, settle delay, restart
grace: the same values their flags get) plus an allowance for starting a process on a busy machine.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench import observe
from bench.audit import overlapping_writes
from bench.chaos.churn import SourceChurn, foreign_touched
from bench.chaos.executor import Executor, Say
from bench.chaos.plan import plan
from bench.cluster import Cluster
from bench.records import Record, actual_records, desired_by_zone
from shardsync.local import seed
from shardsync.local.apiserver.admin import RemoteFaults
from shardsync.providers.fake.audit import AuditEntry
from shardsync.providers.fake.faults import Faults
from shardsync.records.endpoint import Endpoint
from shardsync.sharding.timings import Timings


@dataclass(frozen=True, slots=True)
class ChaosSettings:
    seed: int
    faults: int
    timings: Timings  # the replicas' (their flags say the same)
    start_replicas: int = 3
    replica_counts: tuple[int, ...] = (2, 3, 4)
    per_zone: int = 1  # DNSEndpoint records per zone (the Service adds one)
    churn_period: float = 0.3
    start_allowance: float = 15.0  # seconds to start a replica process on a busy machine
    start_timeout: float = 60.0
    converge_timeout: float = 120.0
    base_latency: float = 0.0  # the provider's latency outside latency spikes


def liveness_bound(t: Timings, start_allowance: float) -> float:
    """Seconds from a fault's end until every zone must run at exactly one replica again: a silent
    replica's lease runs out and its zones move (lease + acquire margin), a restarting one's zones stay
    parked (restart grace), the coordinator batches (settle) and the members renew and acknowledge (two
    renew intervals), and a process restarted by the fault gets `start_allowance` to come up."""
    return round(
        t.lease_duration
        + t.acquire_margin
        + t.restart_grace
        + t.settle
        + 2 * t.renew_interval
        + start_allowance,
        1,
    )


def replica_writes(audit: Sequence[AuditEntry]) -> list[AuditEntry]:
    prefix = f"{seed.STATEFULSET}-"
    return [e for e in audit if e.writer.startswith(prefix)]


def record_differences(
    cluster: Cluster, zones: Sequence[str], foreign: Mapping[str, Sequence[Endpoint]]
) -> tuple[set[Record], set[Record]]:
    """(desired records the provider lacks, records it holds that nothing asks for), foreign ones aside."""
    desired = desired_by_zone(cluster.kube, zones)
    missing: set[Record] = set()
    stale: set[Record] = set()
    for zone in zones:
        foreign_names = {ep.dns_name for ep in foreign.get(zone, ())}
        have = actual_records(ep for ep in cluster.admin.records(zone) if ep.dns_name not in foreign_names)
        missing |= desired[zone] - have
        stale |= have - desired[zone]
    return missing, stale


def wait_records(
    cluster: Cluster, zones: Sequence[str], foreign: Mapping[str, Sequence[Endpoint]], within: float
) -> tuple[set[Record], set[Record], float]:
    """Wait until the zones hold exactly the desired records; the differences left and the seconds taken."""
    started = time.monotonic()
    while True:
        missing, stale = record_differences(cluster, zones, foreign)
        if (not missing and not stale) or time.monotonic() - started > within:
            return missing, stale, time.monotonic() - started
        time.sleep(0.5)


def run_chaos(
    cluster: Cluster,
    api: RemoteFaults,
    sampler: observe.Sampler,
    zones: Sequence[str],
    foreign: Mapping[str, Sequence[Endpoint]],
    settings: ChaosSettings,
    say: Say = print,
) -> dict[str, Any]:
    """Run the plan of `settings.seed` on a cluster whose replicas own every zone, and return the verdict
    (see the module docstring). `foreign`: the records of another owner seeded beforehand, by zone."""
    s = settings
    bound = liveness_bound(s.timings, s.start_allowance)
    faults = plan(
        s.seed,
        s.faults,
        s.timings.lease_duration,
        start_replicas=s.start_replicas,
        replica_counts=s.replica_counts,
    )
    say(f"chaos seed {s.seed}: {len(faults)} faults, liveness bound {bound:.1f}s")
    executor = Executor(
        cluster,
        api,
        sampler,
        zones,
        bound,
        say=say,
        base_latency=s.base_latency,
        start_timeout=s.start_timeout,
    )
    started = time.time()
    churn = SourceChurn(cluster.kube, zones, s.per_zone, s.churn_period, random.Random(s.seed + 1))
    try:
        with churn:
            executor.run(faults)
    finally:
        # Whatever happened, nothing stays paused, frozen or failing (executor lifts its own faults too).
        api.clear()
        cluster.admin.set_faults(Faults())
        cluster.admin.set_limits({"latency": s.base_latency})
    chaos_seconds = time.time() - started
    quiet = time.time()
    executor.say(f"faults done after {chaos_seconds:.0f}s; back to {s.start_replicas} replicas")
    executor.scale(s.start_replicas)
    executor.tend()
    settled = executor.recover(quiet)
    missing, stale, records_seconds = wait_records(cluster, zones, foreign, s.converge_timeout)
    audit = cluster.audit()
    writes = replica_writes(audit)
    final = {zone: cluster.admin.records(zone) for zone in zones}
    spans = observe.unowned_spans(sampler.since(started), zones)
    longest, longest_zone = observe.longest_unowned(spans)
    recoveries = [o.recovery_seconds for o in executor.outcomes]
    late = [o for o in executor.outcomes if o.recovery_seconds is None or o.recovery_seconds > bound]
    result: dict[str, Any] = {
        "faults": len(executor.outcomes),
        "overlapping_writes": len(overlapping_writes(writes)),
        "desired_missing": len(missing),
        "foreign_touched": foreign_touched(final, foreign),
        "max_unowned_seconds": round(longest, 2),
        "seed": s.seed,
        "liveness_bound_seconds": bound,
        "late_recoveries": len(late),
        "max_recovery_seconds": round(max((r for r in recoveries if r is not None), default=0.0), 2),
        "stale_records": len(stale),
        "settled_after_seconds": None if settled is None else round(settled - quiet, 2),
        "records_as_desired_after_seconds": round(records_seconds, 2),
        "chaos_seconds": round(chaos_seconds, 1),
        "zones": len(zones),
        "longest_unowned_zone": longest_zone,
        "fault_kinds": dict(sorted(Counter(f.kind for f in faults).items())),
        "faults_not_carried_out": sum(1 for o in executor.outcomes if o.note),
        "unexpected_exits": executor.unexpected_exits,
        "churn": dict(churn.counts),
        "writes": len(writes),
        "fenced_writes": sum(1 for e in writes if e.outcome == "fenced"),
        "foreign_records": sum(len(v) for v in foreign.values()),
        "timings": {
            "lease_duration": s.timings.lease_duration,
            "renew_interval": s.timings.renew_interval,
            "settle_delay": s.timings.settle,
            "restart_grace": s.timings.restart_grace,
        },
        "examples": {
            "missing": sorted(missing)[:5],
            "stale": sorted(stale)[:5],
            "late": [o.to_json() for o in late[:5]],
        },
        "outcomes": [o.to_json() for o in executor.outcomes],
    }
    return result


def verdict_problems(result: Mapping[str, Any]) -> list[str]:
    """What the run's figures say went wrong (empty: the chaos run passed)."""
    problems = [
        f"{key} = {result[key]}"
        for key in ("overlapping_writes", "desired_missing", "foreign_touched", "late_recoveries")
        if result[key]
    ]
    if result["settled_after_seconds"] is None:
        problems.append("the replicas did not settle after the chaos")
    return problems
