"""kill -9 of a replica and the survivors' takeover of its zones, measured from the provider's audit: shared
by the failover tests of every provider kind (test_failover.py: the fake's native API; test_webhook.py: its
webhook face, fenced or lease-timed)."""

from __future__ import annotations

import time

from bench import observe
from tests.multiprocess.harness import Harness, first_writes, wait_for


def kill_and_fail_over(
    h: Harness, victim: str, base: observe.Sample, what: str, limit: float
) -> tuple[float, float]:
    """kill -9 `victim`, change the Services of its zones at once, and wait for the survivors to take its
    zones (their first write to each: its fence, or with a lease-timed provider its first apply) and write
    those changes, each within `limit` seconds of the kill (the changes a little later); returns (seconds
    until all taken, seconds until all written)."""
    its = {z for z, owner in base.owner_map().items() if owner == victim}
    assert its, f"{victim} runs no zone"
    survivors = [i for i in h.live() if i != victim]
    killed_at = time.time()
    h.cluster.kill(h.ordinal(victim))
    for n, zone in enumerate(sorted(its)):
        h.set_service_address(h.zones.index(zone), f"198.19.{n // 250}.{n % 250 + 1}")
    taken: dict[str, float] = {}

    def all_taken() -> bool:
        firsts = first_writes(h.cluster.audit(), its, killed_at, excluded={victim})
        taken.update({z: e.end_wall - killed_at for z, e in firsts.items()})
        return set(taken) == its

    wait_for(all_taken, limit + 2, f"{what}: survivors write {victim}'s zones", poll=0.1)
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
    rewritten = max(taken.values())
    print(
        f"\n{what}: kill -9 {victim} ({len(its)} zones): written by survivors after {min(taken.values()):.2f}"
        f"..{rewritten:.2f}s, changes written after {written:.2f}s, full ownership after "
        f"{full.t - killed_at:.2f}s, longest unowned {longest:.2f}s (bound {limit:g}s)"
    )
    assert rewritten <= limit, taken
    assert written <= limit + 1.0  # the last record poll adds a little
    return rewritten, written
