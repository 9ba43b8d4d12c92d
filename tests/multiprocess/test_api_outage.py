"""Real replica processes losing the API server (rule 5, self-fencing), checked against the provider's audit.

The writes that would betray a replica are provoked on purpose: zones are changed behind the replicas' back
in the provider (drift), and with a 1 s interval every owner would repair its zones within a second if it
still wrote. The API paused past the lease: after the self-fence deadline no replica writes anything, and
all repair the drift once it is back, with no zone moved. One replica cut off while the others run: it stops
writing before any of its zones is taken over, and gets zones again once it is back. The API server stopped
for 30 s and started again: a change made a second later lands as fast as in the steady state.
"""

from __future__ import annotations

import time

import pytest

from bench import observe
from bench.chaos.executor import user_agent_of
from shardsync.local import seed
from tests.multiprocess.conftest import StartCluster
from tests.multiprocess.harness import (
    FENCE_AFTER,
    LEASE,
    Drifter,
    Harness,
    fenced,
    first_writes,
    handoff_gaps,
    overlaps,
    replica_entries,
    wait_for,
    writes_ok,
)

pytestmark = pytest.mark.multiprocess

ZONES = 40
INTERVAL = 1.0
# A write checked against the fence just before its deadline still needs its trip to the provider, which
# stamps the audit entry on arrival.
TRANSIT = 0.5


def test_api_paused_past_the_lease_every_replica_stops_writing_and_resumes_after(
    start_cluster: StartCluster,
) -> None:
    h = start_cluster(zones=ZONES, replicas=3, interval=INTERVAL)
    base = h.wait_owned(within=30, what="three replicas")
    h.wait_records(within=10)
    owners = base.owner_map()

    paused_at = time.time()
    h.faults.pause()
    try:
        with Drifter(h, h.zones, period=0.05) as drifter:
            # Past every replica's self-fence deadline, with every zone's periodic reconcile due meanwhile.
            time.sleep(LEASE + 2 * INTERVAL)
    finally:
        h.faults.resume()
    resumed_at = time.time()

    deadline = paused_at + FENCE_AFTER  # at the latest: each replica's last renewal was sent before
    during = [e for e in replica_entries(h.cluster.audit()) if paused_at <= e.start_wall <= resumed_at]
    late = [e for e in during if e.start_wall > deadline + TRANSIT]
    assert not late, late[:3]
    repaired = h.wait_records(within=10)
    settled = h.wait_owned(within=15, after=resumed_at, what="after the pause")
    audit = h.cluster.audit()
    early = [e for e in during if e.op == "apply" and e.outcome == "ok"]
    repairs = [e for e in writes_ok(audit) if e.op == "apply" and e.start_wall > resumed_at]
    left = drifter.since(deadline + TRANSIT)  # drift nobody could repair until the API was back
    last = max((e.end_wall for e in during), default=paused_at) - paused_at
    print(
        f"\nAPI paused {resumed_at - paused_at:.2f}s (lease {LEASE:g}s, self-fence {FENCE_AFTER:.1f}s after "
        f"the last renewal): {len(during)} writes in the pause, the last ending {last:.2f}s in, none "
        f"after; {len(drifter.drifted)} drifts, {len(left)} zones drifted after the deadline repaired "
        f"{repaired:.2f}s after the resume; generation {observe.generation(base)} -> "
        f"{observe.generation(settled)}; overlaps {len(overlaps(audit))}, fenced writes {len(fenced(audit))}"
    )
    assert early, "no write at all while the owners could still write: the drift provoked nothing"
    assert left and left <= {e.zone for e in repairs}
    assert all(e.writer == owners[e.zone] for e in [*early, *repairs]), "a zone written by a non-owner"
    # Nobody was judged gone for a silence nobody could help: no new generation, no zone moved.
    assert observe.generation(settled) == observe.generation(base)
    assert settled.owner_map() == owners
    assert not overlaps(audit)
    assert not fenced(audit)


def test_a_replica_cut_off_from_the_api_stops_writing_before_its_zones_are_taken_over(
    start_cluster: StartCluster,
) -> None:
    h = start_cluster(zones=ZONES, replicas=3, interval=INTERVAL)
    base = h.wait_owned(within=30, what="three replicas")
    h.wait_records(within=10)
    coordinator = h.coordinator()
    victim = max(i for i in h.live() if i != coordinator)
    others = [i for i in h.live() if i != victim]
    its = {z for z, owner in base.owner_map().items() if owner == victim}
    assert its

    cut_at = time.time()
    h.faults.refuse(user_agent=user_agent_of(victim), mode="hang")  # its requests get no answer at all
    try:
        taken: dict[str, float] = {}

        def taken_over() -> bool:
            firsts = first_writes(h.cluster.audit(), its, cut_at, excluded={victim})
            taken.update({z: e.start_wall - cut_at for z, e in firsts.items()})
            return set(taken) == its

        # Its zones keep drifting: it repairs them while it may still write, the new owners after.
        with Drifter(h, sorted(its), period=0.1):
            wait_for(taken_over, 3 * LEASE + 5, f"the others take {victim}'s zones over", poll=0.1)
        h.wait_records(within=5, zones=its)
        audit = h.cluster.audit()
        gaps = handoff_gaps(audit, its, victim, after=cut_at)
        after_cut = [e for e in writes_ok(audit) if e.writer == victim and e.start_wall >= cut_at]
        stopped = max((e.end_wall for e in after_cut), default=cut_at) - cut_at
        print(
            f"\ncut off {victim} ({len(its)} zones): {len(after_cut)} writes after the cut, the last ending "
            f"{stopped:.2f}s in (self-fence after {FENCE_AFTER:.1f}s); its zones taken over "
            f"{min(taken.values()):.2f}..{max(taken.values()):.2f}s after the cut; gap between its last "
            f"write and the new owner's first {min(gaps.values()):.3f}..{max(gaps.values()):.3f}s"
        )
        assert set(gaps) == its
        assert all(gap > 0 for gap in gaps.values()), gaps  # it stopped before each zone was taken over
        assert stopped <= FENCE_AFTER + TRANSIT
        assert not overlaps(audit)
    finally:
        h.faults.allow(user_agent=user_agent_of(victim))
    allowed_at = time.time()

    back = h.wait_owned(within=20, after=allowed_at, what=f"{victim} back")
    assert victim in back.owner_map().values()
    h.wait_records(within=10)
    audit = h.cluster.audit()
    print(
        f"{victim} back on the API: owns {sum(1 for o in back.owner_map().values() if o == victim)} zones "
        f"{back.t - allowed_at:.2f}s later (others: {', '.join(others)}); overlaps {len(overlaps(audit))}, "
        f"fenced writes {len(fenced(audit))}"
    )
    assert not overlaps(audit)
    assert not fenced(audit)


OUTAGE = 30.0  # seconds the API server is away
CHANGE_AFTER = 1.0  # the change is made this long after it is back
LANDS_WITHIN = 2.0


def time_to_land(h: Harness, changes: dict[int, str], within: float) -> float:
    """Point each Service `web-<index>` at its new address and wait until every zone's record says so;
    the seconds until the last one did."""
    started = time.monotonic()
    for index, address in changes.items():
        h.set_service_address(index, address)

    def landed() -> bool:
        return all(
            any(
                ep.targets == (address,)
                for ep in h.cluster.admin.records(h.zones[index])
                if ep.dns_name == f"web.{h.zones[index]}"
            )
            for index, address in changes.items()
        )

    wait_for(landed, within, f"the changes {changes}", poll=0.02)
    return time.monotonic() - started


def test_a_change_right_after_an_api_server_restart_lands_as_fast_as_before(
    start_cluster: StartCluster,
) -> None:
    """A real restart: every connection dropped, no answer at all for 30 s (each loop backs off, to 5-10 s
    by then; the replicas self-fence), then the objects back under the same port with an empty watch window
    (410 on every resumed watch: relists). A change made a second later, in a zone of each replica, is in
    DNS within 2 s: the end of the outage cut every watch's and list's backoff short."""
    h = start_cluster(zones=12, replicas=3, interval=10.0, keep_api_state=True)
    h.wait_records(within=10)
    owners = h.latest().owner_map()
    one_each = {
        h.zones.index(next(z for z in h.zones if owners[z] == r)): r for r in sorted(set(owners.values()))
    }
    assert len(one_each) == 3, owners
    before = time_to_land(h, {i: seed.address(90_000 + i) for i in one_each}, within=5)

    h.cluster.stop_apiserver()
    time.sleep(OUTAGE)
    h.cluster.start_apiserver()
    back = time.monotonic()
    time.sleep(CHANGE_AFTER)
    after = time_to_land(h, {i: seed.address(91_000 + i) for i in one_each}, within=LANDS_WITHIN + 5)
    reachable = [
        line for r in h.cluster.live() for line in r.child.output().splitlines() if "reachable again" in line
    ]
    made = time.monotonic() - back - after
    print(
        f"\na change in a zone of each replica landed within {before:.2f}s in the steady state; after the "
        f"API server was away {OUTAGE:g}s and back {made:.2f}s, within {after:.2f}s"
    )
    assert len(reachable) == len(h.cluster.live()), reachable  # every replica saw the outage end
    assert after <= LANDS_WITHIN
    h.wait_records(within=10)  # and every zone is as its objects say
