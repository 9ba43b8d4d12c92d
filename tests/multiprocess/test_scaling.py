"""Scaling real replica processes as a StatefulSet is scaled: spec.replicas first, then the pod.

3 → 4: the new replica takes slots from the busiest replicas (sharding/slots.py): the zones that move are
within 10 % of the ideal 1/4, all of them go to the new replica and none between the old ones, and the
published assignment names every zone's owner. 4 → 3 by SIGTERM: the leaving replica drains, its zones go
to the remaining replicas and no other zone moves, and no zone runs nowhere for more than ~1 s, as
sampled from every replica's /shards and as read from the provider's audit while changes to those zones
keep flowing.
"""

from __future__ import annotations

import time

import pytest

from bench import observe
from tests.multiprocess.conftest import StartCluster
from tests.multiprocess.harness import (
    SAMPLE_PERIOD,
    Churn,
    fenced,
    handoff_gaps,
    identity,
    overlaps,
)

pytestmark = pytest.mark.multiprocess

ZONES = 200
IDEAL = 1 / 4
BAND = 0.10  # relative to the ideal
# The longest a zone may run nowhere during a planned move: the release, the acknowledgement reaching the
# new owner through its lease watch, and its fence write. Sampling adds up to two sample periods.
UNOWNED_LIMIT = 1.0
CHURNED = 12  # zones of the leaving replica whose Services keep changing while it drains


def test_scale_three_to_four_and_back_moves_only_what_must_move(start_cluster: StartCluster) -> None:
    h = start_cluster(zones=ZONES, replicas=3)
    old = [identity(i) for i in range(3)]
    new = identity(3)

    before = h.wait_owned(within=30, what="three replicas")
    published = h.cluster.assignment()
    assert published is not None
    assert before.owner_map() == {z: published.owner_of(z) for z in h.zones}
    generation = observe.generation(before)

    # ---- 3 → 4 ----
    up_at = time.time()
    h.cluster.scale(4)
    h.cluster.wait_ready(ordinals=[3])
    after = h.wait_owned(
        within=30, expected=[*old, new], after=up_at, min_generation=generation + 1, what="scale up"
    )
    moved = observe.moved(before.owner_map(), after.owner_map())
    published = h.cluster.assignment()
    assert published is not None
    assert after.owner_map() == {z: published.owner_of(z) for z in h.zones}
    fraction = len(moved) / ZONES
    up_spans = observe.unowned_spans([s for s in h.sampler.since(up_at) if s.t <= after.t], h.zones)
    up_longest, up_zone = observe.longest_unowned(up_spans)
    print(
        f"\nscale 3 -> 4: moved {len(moved)}/{ZONES} = {fraction:.3f} (ideal {IDEAL:.3f}), "
        f"all to {new}: {all(after.owner_map()[z] == new for z in moved)}; "
        f"settled {after.t - up_at:.2f}s after the scale; longest unowned {up_longest:.2f}s ({up_zone})"
    )
    assert all(after.owner_map()[z] == new for z in moved)  # none between the old replicas
    assert abs(fraction - IDEAL) <= BAND * IDEAL
    assert observe.generation(after) == generation + 1
    assert up_longest <= UNOWNED_LIMIT + 2 * SAMPLE_PERIOD, (up_zone, up_spans[up_zone or ""])

    # ---- 4 → 3: spec.replicas first, then SIGTERM to the highest ordinal, which drains ----
    leaving = h.replica(new)
    churned = sorted(h.zones.index(z) for z in moved)[:CHURNED]
    with Churn(h, churned, period=0.02) as churn:
        time.sleep(1.0)  # the leaving replica keeps writing these zones up to its release
        down_at = time.time()
        h.cluster.scale(3, wait=False)
        final = h.wait_owned(
            within=30, expected=old, after=down_at, min_generation=generation + 2, what="scale down"
        )
        time.sleep(1.0)  # and their new owners write them after
    exited = leaving.child.proc.wait(timeout=4 * 3.0)
    assert exited == 0, leaving.child.tail(30)
    stayed = {z: o for z, o in after.owner_map().items() if o != new}
    assert {z: final.owner_map()[z] for z in stayed} == stayed  # only the leaver's zones moved
    assert set(final.owner_map().values()) == set(old)
    down_spans = observe.unowned_spans([s for s in h.sampler.since(down_at) if s.t <= final.t], h.zones)
    down_longest, down_zone = observe.longest_unowned(down_spans)
    audit = h.cluster.audit()
    gaps = handoff_gaps(audit, [h.zones[i] for i in churned], new, after=down_at)
    assert len(gaps) == len(churned), gaps
    widest = max(gaps.values())
    print(
        f"scale 4 -> 3 (SIGTERM): {len(moved)} zones to the remaining replicas {final.t - down_at:.2f}s "
        f"after the scale; longest unowned {down_longest:.2f}s sampled ({down_zone}), audit gap between "
        f"the leaving replica's last write and the new owner's first {min(gaps.values()):.3f}.."
        f"{widest:.3f}s over {len(gaps)} churned zones ({churn.made} changes); exit {exited}; "
        f"overlaps {len(overlaps(audit))}, fenced writes {len(fenced(audit))}"
    )
    assert down_longest <= UNOWNED_LIMIT + 2 * SAMPLE_PERIOD, (down_zone, down_spans[down_zone or ""])
    assert all(gap > 0 for gap in gaps.values()), gaps
    assert widest <= UNOWNED_LIMIT, gaps
    assert not overlaps(audit)
    assert not fenced(audit)
    h.wait_records(within=15)
