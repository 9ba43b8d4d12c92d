"""The bench's sizes: `full` (the issue's figures, about 15 minutes on 2 cores, plus about half an hour of
chaos and 18 minutes of provider_budget), `quick` (about 14 minutes, 9 of them provider_budget)
and `smoke` (seconds; for the test suite, figures meaningless).

The fake provider is latency-bound: every call costs `latency` and a replica may have
`provider_concurrency` calls in flight (a cloud DNS API's per-client limit), so one replica can do at most
`provider_concurrency / latency` calls per second and N replicas ideally N times that. Converging a zone
from empty costs three calls (fence, read, write); a steady-state resync costs one (read).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from shardsync.sharding.timings import Timings


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    # the provider
    latency: float = 0.02
    provider_concurrency: int = 2
    # the replicas' sharding timing flags; None: not passed, the replicas use their defaults (for the fake
    # provider, which fences: shardsync.sharding.timings.FENCED)
    lease_duration: float | None = None
    renew_interval: float | None = None
    settle_delay: float | None = None
    worker_concurrency: int = 8
    # scaling: Z zones x R records from empty, for each N, sharded and --sharding=off
    scaling_replicas: tuple[int, ...] = (1, 2, 4, 8)
    scaling_zones: int = 1000
    scaling_records: int = 20
    scaling_steady_seconds: float = 5.0
    # event_latency: one change at a time at `event_rate`/s for `event_seconds`, on a synced set
    event_replicas: int = 1
    event_zones: int = 1000
    event_records: int = 100
    event_rate: float = 5.0
    event_seconds: float = 30.0
    # rebalance, failover, rolling_restart: N replicas over Z zones
    handoff_replicas: int = 4
    handoff_zones: int = 1000
    handoff_records: int = 10
    sample_period: float = 0.25
    # memory: peak RSS per replica for each N, same zones (the scaling sizes: its runs are reused)
    memory_replicas: tuple[int, ...] = (1, 2, 4)
    memory_zones: int = 1000
    memory_records: int = 20
    # memory_at_scale: a large cluster's objects over many zones, N replicas each (bench.scale_objects)
    scale_services: int = 20_000
    scale_pods: int = 10_000
    scale_nodes: int = 200
    scale_dns_endpoints: int = 5_000
    scale_zones: int = 2_000
    memory_repeats: int = 3  # runs per N; the median's sync CPU is reported (memory_at_scale.combine)
    scale_pod_source_replicas: tuple[int, ...] = (1,)  # memory_at_scale's runs with --source=pod too
    # provider_budget: Z zones x R records under one account limit (fake --profile route53), replicas
    # 1, 2, 4 in turn; at each, `budget_events` changes at `budget_event_rate`/s in the steady state
    budget_replicas: tuple[int, ...] = (1, 2, 4)
    budget_zones: int = 1000
    budget_records: int = 200
    budget_rate: float = 10.0
    budget_burst: int = 50
    budget_latency: float = 0.05
    budget_event_rate: float = 2.0
    budget_events: int = 60
    budget_timeout: float = 900.0  # syncing 1,000 zones at 10 calls/s alone takes 5 minutes
    # provider_budget under each other profile (provider_budget.PROFILE_RUNS: cloudflare's 1,200 requests
    # per five minutes): fewer zones, as the account allows 4 calls/s
    budget_profile_replicas: tuple[int, ...] = (1, 4)
    budget_profile_zones: int = 300
    budget_profile_records: int = 20
    # status_startup: DNSEndpoints whose observedGeneration one replica writes at start-up (default flags)
    status_objects: int = 1000
    # planner and apiserver micro-benchmarks
    planner_records: int = 100_000
    planner_repeat: int = 5
    apiserver_seconds: float = 3.0
    # chaos: `chaos_faults` faults drawn from `chaos_seed` on `chaos_replicas` replicas over `chaos_zones`
    # zones under source churn (bench/chaos/). Its own sharding timings: with the design defaults a fault
    # would take a minute to recover from, and 200 of them must fit in about half an hour.
    chaos_faults: int = 200
    chaos_seed: int = 16
    chaos_replicas: int = 3
    chaos_zones: int = 60
    chaos_lease_duration: float = 4.0
    chaos_renew_interval: float = 1.0
    chaos_settle_delay: float = 0.5
    chaos_restart_grace: float = 8.0
    chaos_interval: float = 5.0
    # time limits: a scenario step that takes longer is recorded as failed
    settle_timeout: float = 90.0
    converge_timeout: float = 240.0

    @property
    def default_flags(self) -> bool:
        """The replicas run with the default timing flags."""
        return self.lease_duration is None and self.renew_interval is None and self.settle_delay is None

    def timings(self) -> Timings:
        """The timings the replicas use (the fake provider fences its writes)."""
        return Timings.resolve(True, self.lease_duration, self.renew_interval, self.settle_delay)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


FULL = Profile(name="full")

QUICK = Profile(
    name="quick",
    scaling_zones=160,
    scaling_records=10,
    scaling_steady_seconds=1.0,
    event_zones=100,
    event_records=20,
    event_seconds=6.0,
    handoff_replicas=3,
    handoff_zones=150,
    handoff_records=5,
    memory_zones=160,
    memory_records=10,
    scale_services=5_000,
    scale_pods=2_500,
    scale_nodes=50,
    scale_dns_endpoints=1_250,
    scale_zones=500,
    memory_repeats=1,
    budget_zones=100,
    budget_records=20,
    budget_events=20,
    budget_timeout=180.0,
    budget_profile_zones=100,
    budget_profile_records=10,
    planner_records=50_000,
    planner_repeat=1,
    apiserver_seconds=1.0,
    settle_timeout=30.0,
    converge_timeout=60.0,
    chaos_faults=20,
    chaos_zones=30,
)

SMOKE = Profile(
    name="smoke",
    lease_duration=3.0,
    renew_interval=0.5,
    settle_delay=0.2,
    scaling_replicas=(1, 2),
    scaling_zones=12,
    scaling_records=3,
    scaling_steady_seconds=0.5,
    event_zones=6,
    event_records=3,
    event_rate=5.0,
    event_seconds=1.0,
    handoff_replicas=2,
    handoff_zones=12,
    handoff_records=2,
    sample_period=0.2,
    memory_replicas=(1,),
    memory_zones=12,
    memory_records=3,
    scale_services=30,
    scale_pods=20,
    scale_nodes=3,
    scale_dns_endpoints=10,
    scale_zones=6,
    memory_repeats=1,
    budget_replicas=(1, 2),
    budget_zones=8,
    budget_records=3,
    budget_rate=50.0,
    budget_events=4,
    budget_event_rate=4.0,
    budget_latency=0.01,
    budget_timeout=30.0,
    budget_profile_replicas=(1, 2),
    budget_profile_zones=6,
    budget_profile_records=3,
    planner_records=2_000,
    planner_repeat=1,
    apiserver_seconds=0.3,
    settle_timeout=30.0,
    converge_timeout=30.0,
    chaos_faults=3,
    chaos_zones=8,
    status_objects=30,
)

PROFILES = {p.name: p for p in (FULL, QUICK, SMOKE)}
