"""Scaling real replica processes as a StatefulSet is scaled: spec.replicas first, then the pod.

3 → 4: the zones that move are exactly those the ring moves for these identities (deterministic: 46 of
200 for shardsync-0..3, a fraction of 0.23), which is within 10 % of the ideal 1/4, all of them to the new
replica and none between the old ones. 4 → 3 by SIGTERM: the leaving replica drains, its zones go back to
where they were, and no zone runs nowhere for more than ~1 s, as sampled from every replica's /shards and
as read from the provider's audit while changes to those zones keep flowing.
"""

from __future__ import annotations

import time

import pytest

from bench import observe
from shardsync.sharding.ring import Ring
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
    ring3, ring4 = Ring(dict.fromkeys(old, 1)), Ring(dict.fromkeys([*old, new], 1))
    expected = {m.zone for m in ring3.moved(ring4, h.zones)}
    assert all(ring4.owner_of(z) == new for z in expected)
    expected_fraction = len(expected) / ZONES
    assert abs(expected_fraction - IDEAL) <= BAND * IDEAL, "these identities' ring is off the band"

    before = h.wait_owned(within=30, what="three replicas")
    assert before.owner_map() == {z: ring3.owner_of(z) for z in h.zones}
    generation = observe.generation(before)

    # ---- 3 → 4 ----
    up_at = time.time()
    h.cluster.scale(4)
    h.cluster.wait_ready(ordinals=[3])
    after = h.wait_owned(
        within=30, expected=[*old, new], after=up_at, min_generation=generation + 1, what="scale up"
    )
    moved = observe.moved(before.owner_map(), after.owner_map())
    fraction = len(moved) / ZONES
    up_spans = observe.unowned_spans([s for s in h.sampler.since(up_at) if s.t <= after.t], h.zones)
    up_longest, up_zone = observe.longest_unowned(up_spans)
    print(
        f"\nscale 3 -> 4: moved {len(moved)}/{ZONES} = {fraction:.3f} (ideal {IDEAL:.3f}, ring expects "
        f"{expected_fraction:.3f}), all to {new}: {all(after.owner_map()[z] == new for z in moved)}; "
        f"settled {after.t - up_at:.2f}s after the scale; longest unowned {up_longest:.2f}s ({up_zone})"
    )
    assert moved == expected
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
    assert final.owner_map() == before.owner_map()  # back where they were: nothing else moved
    down_spans = observe.unowned_spans([s for s in h.sampler.since(down_at) if s.t <= final.t], h.zones)
    down_longest, down_zone = observe.longest_unowned(down_spans)
    audit = h.cluster.audit()
    gaps = handoff_gaps(audit, [h.zones[i] for i in churned], new, after=down_at)
    assert len(gaps) == len(churned), gaps
    widest = max(gaps.values())
    print(
        f"scale 4 -> 3 (SIGTERM): {len(moved)} zones back to their old owners {final.t - down_at:.2f}s "
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
