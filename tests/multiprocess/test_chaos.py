"""Chaos over real replica processes: a seeded, reproducible sequence of faults while Service and DNSEndpoint
changes keep flowing, then quiet, then the verdict from the provider's audit and records.

The faults are drawn up front from `random.Random(seed)`: kill -9 a replica (started again after a drawn
delay), SIGTERM + start again (a rolling-restart step), scale the StatefulSet (spec.replicas first, then the
pods), pause the API server, cut one replica off the API (503, hang or dropped connection), kill -9 the
coordinator. The plan (kinds, planned times, durations, and which replica by rank among the live ones) is a
pure function of the seed; the seed is printed, and `SHARDSYNC_CHAOS_SEED` replays it
(`SHARDSYNC_CHAOS_SECONDS` changes the length). Processes keep their own timing, so a replay repeats the
faults, not every interleaving.

Verdict, after the faults stop and the replicas settle: no two replicas wrote one zone at overlapping times
(the audit), every zone holds exactly the records the objects ask for with their ownership TXT records,
every zone runs at exactly one replica (the one holding its fence), and the published generation never
went backwards.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from dataclasses import dataclass, field

import pytest

from bench import observe
from shardsync.kube import KubeError
from shardsync.local.apiserver.faults import check_mode
from tests.multiprocess.conftest import StartCluster
from tests.multiprocess.harness import (
    Churn,
    Generations,
    Harness,
    fenced,
    identity,
    overlaps,
    replica_entries,
    user_agent_of,
    writes_ok,
)

pytestmark = pytest.mark.multiprocess

DEFAULT_SEED = 4242
SEED = int(os.environ.get("SHARDSYNC_CHAOS_SEED", DEFAULT_SEED))
SECONDS = float(os.environ.get("SHARDSYNC_CHAOS_SECONDS", "60"))
ZONES = 40
INTERVAL = 3.0  # a missed change is repaired at the next periodic reconcile at the latest
RESTART_GRACE = 5.0
LATENCY = 0.02  # per provider call: writes last long enough for an overlap to show
START_REPLICAS = 3
REPLICA_COUNTS = (2, 3, 4)
KINDS = ("kill", "restart", "scale", "pause", "cut", "kill-coordinator")
CUT_MODES = ("503", "hang", "drop")
PAUSE_MODES = ("503", "hang")


@dataclass(frozen=True, slots=True)
class Fault:
    at: float  # seconds after the chaos started, as planned
    kind: str
    rank: int = 0  # which live replica, by ordinal rank modulo their number
    seconds: float = 0.0  # how long a pause, a cut or a killed replica's absence lasts
    replicas: int = 0  # the scale target
    mode: str = ""

    def describe(self) -> str:
        extra = {
            "kill": f"rank {self.rank}, back after {self.seconds:.1f}s",
            "restart": f"rank {self.rank}",
            "scale": f"to {self.replicas}",
            "pause": f"{self.seconds:.1f}s, {self.mode}",
            "cut": f"rank {self.rank}, {self.seconds:.1f}s, {self.mode}",
            "kill-coordinator": f"back after {self.seconds:.1f}s",
        }[self.kind]
        return f"+{self.at:5.1f}s {self.kind} ({extra})"


def plan(seed: int, seconds: float) -> list[Fault]:
    """The fault sequence of `seed`: the same list every time."""
    rng = random.Random(seed)
    faults = []
    replicas = START_REPLICAS
    at = rng.uniform(0.5, 2.0)
    while at < seconds:
        kind = rng.choice(KINDS)
        rank = rng.randrange(1000)
        if kind == "scale":
            target = rng.choice([n for n in REPLICA_COUNTS if n != replicas])
            faults.append(Fault(round(at, 2), kind, replicas=target))
            replicas = target
        elif kind == "pause":
            faults.append(
                Fault(
                    round(at, 2), kind, seconds=round(rng.uniform(1.0, 5.0), 2), mode=rng.choice(PAUSE_MODES)
                )
            )
        elif kind == "cut":
            faults.append(
                Fault(round(at, 2), kind, rank, round(rng.uniform(1.0, 6.0), 2), mode=rng.choice(CUT_MODES))
            )
        elif kind in ("kill", "kill-coordinator"):
            faults.append(Fault(round(at, 2), kind, rank, round(rng.uniform(0.0, 4.0), 2)))
        else:
            faults.append(Fault(round(at, 2), kind, rank))
        at += rng.uniform(1.5, 5.0)
    return faults


def test_the_plan_is_a_function_of_the_seed() -> None:
    assert plan(SEED, SECONDS) == plan(SEED, SECONDS)
    assert plan(SEED, SECONDS) != plan(SEED + 1, SECONDS)
    kinds = Counter(f.kind for f in plan(DEFAULT_SEED, 60))
    assert set(kinds) == set(KINDS), kinds  # the default seed exercises every kind of fault


@dataclass
class Chaos:
    """Runs a plan against a harness, StatefulSet-like: killed pods come back after their delay."""

    h: Harness
    returns: dict[int, float] = field(default_factory=dict)  # ordinal -> monotonic time to start it again
    done: list[str] = field(default_factory=list)

    def pick(self, rank: int) -> str | None:
        live = sorted(self.h.live(), key=self.h.ordinal)
        return live[rank % len(live)] if live else None

    def tick(self) -> None:
        """Start the killed replicas whose delay is over (unless scaling started or dropped them)."""
        cluster = self.h.cluster
        now = time.monotonic()
        for ordinal, due in sorted(self.returns.items()):
            if due <= now:
                del self.returns[ordinal]
                if ordinal < cluster.desired and ordinal not in cluster.replicas:
                    cluster.start_ordinal(ordinal)

    def kill(self, ident: str, away: float) -> None:
        ordinal = self.h.ordinal(ident)
        self.h.cluster.kill(ordinal)
        self.returns[ordinal] = time.monotonic() + away

    def apply(self, fault: Fault, elapsed: float) -> None:
        h = self.h
        what = ""
        if fault.kind == "kill":
            victim = self.pick(fault.rank)
            if victim is not None:
                self.kill(victim, fault.seconds)
                what = victim
        elif fault.kind == "kill-coordinator":
            latest = h.sampler.latest()
            named = sorted(latest.coordinators() & set(h.live())) if latest else []
            if named:
                self.kill(named[0], fault.seconds)
                what = named[0]
        elif fault.kind == "restart":
            victim = self.pick(fault.rank)
            if victim is not None:
                h.cluster.restart(h.ordinal(victim))
                what = victim
        elif fault.kind == "scale":
            self.scale(fault.replicas)
        elif fault.kind == "pause":
            h.faults.pause(seconds=fault.seconds, mode=check_mode(fault.mode))
        elif fault.kind == "cut":
            victim = self.pick(fault.rank)
            if victim is not None:
                h.faults.refuse(
                    user_agent=user_agent_of(victim),
                    mode=check_mode(fault.mode),
                    seconds=fault.seconds,
                )
                what = victim
        self.done.append(f"{fault.describe()} -> at +{elapsed:.1f}s {what}".rstrip())

    def scale(self, replicas: int, within: float = 15.0) -> None:
        """Scale as `kubectl scale` would, retrying while the API server answers 503 (paused)."""
        deadline = time.monotonic() + within
        while True:
            try:
                self.h.cluster.scale(replicas)
                return
            except KubeError as exc:
                if exc.status != 503 or time.monotonic() > deadline:
                    raise
                self.tick()
                time.sleep(0.2)

    def run(self, faults: list[Fault], seconds: float) -> None:
        """Apply each fault at its planned time (or as soon as the previous one is done), until `seconds`."""
        started = time.monotonic()
        for fault in [*faults, None]:
            until = fault.at if fault is not None else seconds
            while time.monotonic() - started < until:
                self.tick()
                time.sleep(0.05)
            if fault is not None:
                self.tick()
                self.apply(fault, time.monotonic() - started)

    def quiesce(self, replicas: int) -> None:
        """Lift every fault, bring back every killed replica, and scale to `replicas`."""
        self.h.faults.clear()
        self.returns = dict.fromkeys(self.returns, 0.0)
        self.tick()
        self.scale(replicas)
        for ordinal in range(replicas):
            if ordinal not in self.h.cluster.replicas:
                self.h.cluster.start_ordinal(ordinal)


def test_chaos_keeps_one_writer_per_zone_and_ends_with_the_desired_records(
    start_cluster: StartCluster,
) -> None:
    faults = plan(SEED, SECONDS)
    print(f"\nchaos seed {SEED} (replay: SHARDSYNC_CHAOS_SEED={SEED}), {SECONDS:g}s, {len(faults)} faults:")
    for fault in faults:
        print("  " + fault.describe())
    h = start_cluster(
        zones=ZONES, replicas=START_REPLICAS, interval=INTERVAL, restart_grace=RESTART_GRACE, latency=LATENCY
    )
    chaos = Chaos(h)
    with Generations(h.cluster) as generations:
        started = time.time()
        try:
            with Churn(h, range(ZONES), period=0.2, rng=random.Random(SEED + 1)) as churn:
                chaos.run(faults, SECONDS)
        finally:
            print("executed:\n  " + "\n  ".join(chaos.done))
        chaos_seconds = time.time() - started
        quiet_at = time.time()
        chaos.quiesce(START_REPLICAS)
        h.cluster.wait_ready(within=60)
        settled = h.wait_owned(within=60, after=quiet_at, what="after the chaos")
        synced = h.wait_records(within=30)
    audit = h.cluster.audit()
    owners = settled.owner_map()
    published = generations.values()
    writers = Counter(e.writer for e in writes_ok(audit))
    print(
        f"chaos {chaos_seconds:.1f}s: {churn.made} changes made ({churn.refused} refused by the API), "
        f"{len(replica_entries(audit))} writes by {dict(sorted(writers.items()))}; after the quiet: settled "
        f"{settled.t - quiet_at:.2f}s, records as desired {synced:.2f}s later; generations "
        f"{published[0] if published else None} -> {published[-1] if published else None}; "
        f"overlaps {len(overlaps(audit))}, fenced writes {len(fenced(audit))}"
    )
    assert not overlaps(audit), overlaps(audit)[:3]
    assert set(owners) == set(h.zones) and set(owners.values()) <= {identity(i) for i in range(3)}
    assert all(len(ids) == 1 for ids in settled.holders().values())
    assert not h.fence_problems(owners)
    assert published == sorted(published), published
    assert observe.generation(settled) == published[-1]
