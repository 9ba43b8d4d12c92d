"""Chaos over real replica processes: the bench's chaos run (bench/chaos/) at a small size, with its verdict
asserted.

A seeded sequence of faults, one after another, each followed by the cluster's recovery: kill -9 of a
replica and of the coordinator, SIGSTOP/SIGCONT, scaling, a rolling restart, the API server paused 10 s,
one replica cut off from the API server, the provider frozen, provider latency spikes and error bursts;
all the while Services are created, changed and deleted. The plan is a pure function of the seed (printed;
`SHARDSYNC_CHAOS_SEED` replays it, `SHARDSYNC_CHAOS_FAULTS` changes the count). Processes keep their own
timing, so a replay repeats the faults, not every interleaving. `python -m bench --only chaos` is the
long run (200 faults).

Verdict: no two replicas wrote one zone at overlapping times (the provider's audit), every record the
objects ask for is in the provider and nothing else of ours, the records of another owner seeded
beforehand are untouched, every zone was owned again within the liveness bound after each fault, no
replica exited by itself, every zone runs at the replica holding its fence, and the published generation
never went backwards.
"""

from __future__ import annotations

import os

import pytest

from bench import observe
from bench.chaos.churn import seed_foreign
from bench.chaos.run import ChaosSettings, run_chaos
from shardsync.sharding.timings import Timings
from tests.multiprocess.conftest import StartCluster
from tests.multiprocess.harness import LEASE, RENEW, SETTLE, Generations

pytestmark = pytest.mark.multiprocess

DEFAULT_SEED = 171  # its 18 faults include every kind (tests/bench/test_chaos_parts.py checks it)
DEFAULT_FAULTS = 18
SEED = int(os.environ.get("SHARDSYNC_CHAOS_SEED", DEFAULT_SEED))
FAULTS = int(os.environ.get("SHARDSYNC_CHAOS_FAULTS", DEFAULT_FAULTS))
ZONES = 30
INTERVAL = 3.0  # a missed change is repaired at the next periodic reconcile at the latest
RESTART_GRACE = 5.0
LATENCY = 0.02  # per provider call: writes last long enough for an overlap to show
FOREIGN_PER_ZONE = 2


def test_chaos_keeps_one_writer_per_zone_and_ends_with_the_desired_records(
    start_cluster: StartCluster,
) -> None:
    h = start_cluster(
        zones=ZONES, replicas=3, interval=INTERVAL, restart_grace=RESTART_GRACE, latency=LATENCY
    )
    # Seeded while the replicas run (the harness starts them): the verdict reads the replicas' writes only.
    foreign = seed_foreign(h.cluster.provider_url, h.zones, FOREIGN_PER_ZONE)
    settings = ChaosSettings(
        seed=SEED,
        faults=FAULTS,
        timings=Timings.derive(LEASE, RENEW, SETTLE, RESTART_GRACE),
        per_zone=h.per_zone,
        churn_period=0.2,
        converge_timeout=60.0,
        base_latency=LATENCY,
    )
    print(f"\nchaos seed {SEED} (replay: SHARDSYNC_CHAOS_SEED={SEED}), {FAULTS} faults")
    with Generations(h.cluster) as generations:
        result = run_chaos(h.cluster, h.faults, h.sampler, h.zones, foreign, settings, say=print)
    print({k: v for k, v in result.items() if k != "outcomes"})
    assert result["faults"] == FAULTS
    assert result["overlapping_writes"] == 0, result["examples"]
    assert result["desired_missing"] == 0, result["examples"]["missing"]
    assert result["stale_records"] == 0, result["examples"]["stale"]
    assert result["foreign_touched"] == 0
    assert result["late_recoveries"] == 0, result["examples"]["late"]
    assert result["settled_after_seconds"] is not None
    assert result["unexpected_exits"] == []
    assert result["faults_not_carried_out"] == 0, [o for o in result["outcomes"] if "note" in o]
    settled = h.fresh_sample()
    owners = settled.owner_map()
    assert set(owners) == set(h.zones)
    assert all(len(ids) == 1 for ids in settled.holders().values())
    assert not h.fence_problems(owners)
    published = generations.values()
    assert published == sorted(published), published
    assert observe.generation(settled) == published[-1]
