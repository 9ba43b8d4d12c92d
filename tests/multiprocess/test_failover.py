"""kill -9 of real replica processes: a replica's zones are written again by the survivors within the lease
duration plus a few seconds (first their fences, then the changes made since the kill), and a killed
coordinator is replaced by a survivor while the published generation never goes backwards."""

from __future__ import annotations

import time

import pytest

from bench import observe
from tests.multiprocess.conftest import StartCluster
from tests.multiprocess.failover import kill_and_fail_over
from tests.multiprocess.harness import (
    LEASE,
    Generations,
    fenced,
    overlaps,
    replica_generations,
)

pytestmark = pytest.mark.multiprocess

ZONES = 60
FEW = 3.0  # seconds beyond the lease duration: acquire margin, settle, publish, acknowledge, fence, write


def test_kill_minus_nine_a_replica_then_the_coordinator(start_cluster: StartCluster) -> None:
    h = start_cluster(zones=ZONES, replicas=3)
    with Generations(h.cluster) as generations:
        base = h.wait_owned(within=30, what="three replicas")
        coordinator = h.coordinator()
        victim = max(i for i in h.live() if i != coordinator)
        kill_and_fail_over(h, victim, base, "replica", LEASE + FEW)

        # The killed replica comes back (same identity) and gets zones again.
        h.cluster.start_ordinal(h.ordinal(victim))
        h.cluster.wait_ready(ordinals=[h.ordinal(victim)])
        back = h.wait_owned(within=30, what=f"{victim} back")
        assert victim in back.owner_map().values()

        coordinator = h.coordinator()
        survivors = [i for i in h.live() if i != coordinator]
        killed_at = time.time()
        kill_and_fail_over(h, coordinator, back, "coordinator", LEASE + FEW)
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
