"""The bench's sizes: `full` (the issue's figures, about 15 minutes on 2 cores), `quick` (about 2 minutes)
and `smoke` (seconds; for the test suite, figures meaningless).

The fake provider is latency-bound: every call costs `latency` and a replica may have
`provider_concurrency` calls in flight (a cloud DNS API's per-client limit), so one replica can do at most
`provider_concurrency / latency` calls per second and N replicas ideally N times that. Converging a zone
from empty costs three calls (fence, read, write); a steady-state resync costs one (read).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    # the provider
    latency: float = 0.02
    provider_concurrency: int = 2
    # the replicas' sharding timings (design defaults: 15s, 5s, 2s)
    lease_duration: float = 15.0
    renew_interval: float = 5.0
    settle_delay: float = 2.0
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
    # planner and apiserver micro-benchmarks
    planner_records: int = 100_000
    planner_repeat: int = 5
    apiserver_seconds: float = 3.0
    # time limits: a scenario step that takes longer is recorded as failed
    settle_timeout: float = 90.0
    converge_timeout: float = 240.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


FULL = Profile(name="full")

QUICK = Profile(
    name="quick",
    lease_duration=4.0,
    renew_interval=1.0,
    settle_delay=0.5,
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
    planner_records=50_000,
    planner_repeat=1,
    apiserver_seconds=1.0,
    settle_timeout=30.0,
    converge_timeout=60.0,
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
    planner_records=2_000,
    planner_repeat=1,
    apiserver_seconds=0.3,
    settle_timeout=30.0,
    converge_timeout=30.0,
)

PROFILES = {p.name: p for p in (FULL, QUICK, SMOKE)}
