"""kill -9 of real replica processes: a replica's zones are written again by the survivors within the lease
duration plus a few seconds (first their fences, then the changes made since the kill), and a killed
coordinator is replaced by a survivor while the published generation never goes backwards."""

from __future__ import annotations

import time

import pytest

from bench import observe
from tests.multiprocess.conftest import StartCluster
from tests.multiprocess.harness import (
    LEASE,
    Generations,
    Harness,
    fenced,
    first_writes,
    overlaps,
    replica_generations,
    wait_for,
)

pytestmark = pytest.mark.multiprocess

ZONES = 60
FEW = 3.0  # seconds beyond the lease duration: acquire margin, settle, publish, acknowledge, fence, write


def kill_and_fail_over(h: Harness, victim: str, base: observe.Sample, what: str) -> tuple[float, float]:
    """kill -9 `victim`, change the Services of its zones at once, and wait for the survivors to fence its
    zones and write those changes; returns (seconds until all fenced, seconds until all written)."""
    its = {z for z, owner in base.owner_map().items() if owner == victim}
    assert its, f"{victim} runs no zone"
    survivors = [i for i in h.live() if i != victim]
    killed_at = time.time()
    h.cluster.kill(h.ordinal(victim))
    for n, zone in enumerate(sorted(its)):
        h.set_service_address(h.zones.index(zone), f"198.19.{n // 250}.{n % 250 + 1}")
    limit = LEASE + FEW
    fences: dict[str, float] = {}

    def all_fenced() -> bool:
        firsts = first_writes(h.cluster.audit(), its, killed_at, excluded={victim})
        fences.update({z: e.end_wall - killed_at for z, e in firsts.items()})
        return set(fences) == its

    wait_for(all_fenced, limit + 2, f"{what}: survivors fence {victim}'s zones", poll=0.1)
    wait_for(lambda: not h.record_problems(its), limit + 2, f"{what}: survivors write the changes", poll=0.1)
    written = time.time() - killed_at
    full = h.wait_owned(
        within=limit + 5,
        expected=survivors,
        after=killed_at,
        min_generation=observe.generation(base) + 1,
        what=f"{what}: survivors own every zone",
    )
    spans = observe.unowned_spans([s for s in h.sampler.since(killed_at) if s.t <= full.t], its)
    longest, _ = observe.longest_unowned(spans)
    rewritten = max(fences.values())
    print(
        f"\n{what}: kill -9 {victim} ({len(its)} zones): fenced by survivors after {min(fences.values()):.2f}"
        f"..{rewritten:.2f}s, changes written after {written:.2f}s, full ownership after "
        f"{full.t - killed_at:.2f}s, longest unowned {longest:.2f}s (lease {LEASE:g}s)"
    )
    assert rewritten <= limit, fences
    assert written <= limit + 1.0  # the last record poll adds a little
    return rewritten, written


def test_kill_minus_nine_a_replica_then_the_coordinator(start_cluster: StartCluster) -> None:
    h = start_cluster(zones=ZONES, replicas=3)
    with Generations(h.cluster) as generations:
        base = h.wait_owned(within=30, what="three replicas")
        coordinator = h.coordinator()
        victim = max(i for i in h.live() if i != coordinator)
        kill_and_fail_over(h, victim, base, "replica")

        # The killed replica comes back (same identity) and gets zones again.
        h.cluster.start_ordinal(h.ordinal(victim))
        h.cluster.wait_ready(ordinals=[h.ordinal(victim)])
        back = h.wait_owned(within=30, what=f"{victim} back")
        assert victim in back.owner_map().values()

        coordinator = h.coordinator()
        survivors = [i for i in h.live() if i != coordinator]
        killed_at = time.time()
        kill_and_fail_over(h, coordinator, back, "coordinator")
        led = h.sampler.wait_for(
            lambda s: (
                set(survivors) <= set(s.views)
                and len(s.coordinators()) == 1
                and s.coordinators() <= set(survivors)
            ),
            LEASE + FEW,
            killed_at,
        )
        assert led is not None, h.describe()
        took = led.t - killed_at
        print(f"new coordinator {led.coordinators()} named by every survivor {took:.2f}s after the kill")
        final = h.wait_owned(within=10, expected=survivors, min_generation=observe.generation(back) + 1)

    published = generations.values()
    assert published and published == sorted(published), published
    assert published[-1] == observe.generation(final)
    for ident, seen in replica_generations(h.sampler.since(0)).items():
        assert seen == sorted(seen), (ident, seen)  # no replica went back either (0: none read yet)
    audit = h.cluster.audit()
    print(
        f"generations published {sorted(set(published))}; overlaps {len(overlaps(audit))}, "
        f"fenced writes {len(fenced(audit))}"
    )
    assert not overlaps(audit)
    assert not fenced(audit)
