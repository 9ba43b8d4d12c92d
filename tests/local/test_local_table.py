"""The live table's judgement of what replicas report: the coordinator is whoever says it is (not a stale
view of another replica, nor a replica that released the lease), RECORDS as counted at the provider, and
the event lines for "all zones synced" and for the zones each new generation moved."""

from __future__ import annotations

from typing import Any

from shardsync.local.table import (
    Milestones,
    ReplicaSnapshot,
    coordinator_of,
    moves_line,
    progress,
    records_by_zone,
    render,
)
from shardsync.ownership import shards_view


def doc(
    me: str, generation: int, owners: dict[str, str], coordinator: str, synced: bool = True
) -> dict[str, Any]:
    rows = [
        {
            "zone": zone,
            "owner": owner,
            "state": "active",
            "lastSync": "2026-03-01T12:00:00Z" if synced and owner == me else None,
            "records": 4 if owner == me else None,
            "lastError": "",
        }
        for zone, owner in owners.items()
    ]
    return {"generation": generation, "coordinator": coordinator, "self": me, "members": [], "zones": rows}


def snap(me: str, shards: dict[str, Any] | None, process: str = "running") -> ReplicaSnapshot:
    return ReplicaSnapshot(me, 1, 1, process, shards)


def test_the_coordinator_is_who_says_so_not_a_stale_view() -> None:
    owners = {"a": "r0", "b": "r1"}
    # r0 stopped and released the lease: it no longer claims it; r1 still has the old observation.
    replicas = [
        snap("r0", doc("r0", 1, owners, ""), "stopping 1s"),
        snap("r1", doc("r1", 1, owners, "r0")),
        snap("r2", doc("r2", 1, owners, "r0")),
    ]
    assert coordinator_of(replicas) == "-"
    # r2 has taken over and says so; r1's view still names r0.
    replicas[2] = snap("r2", doc("r2", 1, owners, "r2"))
    assert coordinator_of(replicas) == "r2"
    # The named coordinator is running but did not answer this time: the others' view stands.
    assert coordinator_of([snap("r0", None), snap("r1", doc("r1", 1, owners, "r0"))]) == "r0"
    # Exited: not shown as coordinator.
    assert coordinator_of([snap("r0", None, "exited 0"), snap("r1", doc("r1", 1, owners, "r0"))]) == "-"


def test_a_replica_that_no_longer_leads_does_not_name_itself() -> None:
    assert shards_view.coordinator("r0", "r0", leading=False) == ""
    assert shards_view.coordinator("r0", "r0", leading=True) == "r0"
    assert shards_view.coordinator("r1", "r0", leading=False) == "r1"


def test_records_are_counted_at_the_provider_when_known() -> None:
    counts = records_by_zone(
        ["x.a.com", "a.com", "y.x.b.a.com", "q.b.a.com", "other.org"], ["a.com", "b.a.com"]
    )
    assert counts == {"a.com": 2, "b.a.com": 2}
    owners = {"a.com": "r0", "b.a.com": "r1"}
    replicas = [snap("r0", doc("r0", 1, owners, "r0")), snap("r1", doc("r1", 1, owners, "r0"))]
    assert progress(replicas, 2, 0).records == 8  # as the owners read them before writing
    assert progress(replicas, 2, 0, counts).records == 4
    text = render(
        replicas, desired=2, zone_total=2, written=0, elapsed=1, run_dir="/r", provider_records=counts
    )
    row = next(line for line in text.splitlines() if line.startswith("r0"))
    assert row.split()[-3] == "2"  # RECORDS, then ERRORS and ROLE


def test_moves_line() -> None:
    assert (
        moves_line(1, {}, {"a": "r0", "b": "r1", "c": "r0"}) == "generation 1: 3 zones assigned (r0 2, r1 1)"
    )
    line = moves_line(2, {"a": "r0", "b": "r1", "c": "r0"}, {"a": "r2", "b": "r2", "c": "r0"})
    assert line == "generation 2: 2 of 3 zones moved (r0→r2 1, r1→r2 1)"


def test_milestones_say_when_all_zones_are_synced_and_what_moved() -> None:
    m = Milestones(100.0)
    g1 = {"a": "r0", "b": "r1"}
    assert m.update([snap("r0", None), snap("r1", None)], 2, 101.0) == []
    unsynced = [snap("r0", doc("r0", 1, g1, "r0", synced=False)), snap("r1", doc("r1", 1, g1, "r0"))]
    assert m.update(unsynced, 2, 102.0) == ["generation 1: 2 zones assigned (r0 1, r1 1)"]
    synced = [snap("r0", doc("r0", 1, g1, "r0")), snap("r1", doc("r1", 1, g1, "r0"))]
    assert m.update(synced, 2, 104.5) == ["all 2 zones synced in 4.5s"]
    assert m.update(synced, 2, 105.0) == []
    m.scaled(110.0, 1)
    # r2 starts; until the new generation is out and every replica answers on it, nothing is claimed.
    assert m.update([*synced, snap("r2", None)], 2, 111.0) == []
    g2 = {"a": "r0", "b": "r2"}
    mixed = [snap("r0", doc("r0", 2, g2, "r0")), snap("r1", doc("r1", 1, g1, "r0")), snap("r2", None)]
    assert m.update(mixed, 2, 112.0) == ["generation 2: 1 of 2 zones moved (r1→r2 1)"]
    done = [snap(r, doc(r, 2, g2, "r0")) for r in ("r0", "r1", "r2")]
    assert m.update(done, 2, 113.0) == ["all 2 zones synced in 3.0s after the scale"]
