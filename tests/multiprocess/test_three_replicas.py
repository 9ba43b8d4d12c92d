"""Three real replica processes: every zone has exactly one active owner, the one the published
assignment's slot table names; every replica's /shards tells the same story under the same generation; the
provider holds the records the objects ask for, written (and fenced) by each zone's owner alone."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest

from tests.multiprocess.conftest import StartCluster
from tests.multiprocess.harness import TIMINGS, fenced, identity, overlaps, writes_ok

pytestmark = pytest.mark.multiprocess

ZONES = 60


def test_three_replicas_own_every_zone_once_and_agree_on_the_generation(start_cluster: StartCluster) -> None:
    h = start_cluster(zones=ZONES, replicas=3)
    sample = h.wait_owned(within=30, what="three replicas")
    assignment = h.cluster.assignment()
    assert assignment is not None
    members = {identity(i) for i in range(3)}
    assert assignment.identities == members

    # Every zone runs at exactly the replica the published assignment names (sharding/slots.py).
    owners = sample.owner_map()
    assert owners == {z: assignment.owner_of(z) for z in h.zones}
    assert all(len(ids) == 1 for ids in sample.holders().values())
    load = Counter(owners.values())
    assert set(load) == members

    # The provider: the desired records (so every owner has synced its zones once).
    took = h.wait_records(within=10)

    # /shards: each replica, in the contract's shape, on the published generation, with one coordinator.
    # A replica that does not lead lists the member Leases to answer, at most once per renew interval, so
    # its rows may be one interval behind the last acknowledgements: read until they caught up (bounded).
    def caught_up(doc: dict[str, Any] | None) -> bool:
        rows = (doc or {}).get("members") or []
        return all(m.get("observedGeneration") == assignment.generation for m in rows)

    docs: dict[str, dict[str, Any] | None] = {}
    for replica in h.cluster.live():
        deadline = time.monotonic() + 5 * TIMINGS.renew_interval
        docs[replica.identity] = h.cluster.shards(replica)
        while not caught_up(docs[replica.identity]) and time.monotonic() < deadline:
            time.sleep(0.1)
            docs[replica.identity] = h.cluster.shards(replica)
    coordinators = set()
    for ident, doc in docs.items():
        assert doc is not None, ident
        assert set(doc) == {"generation", "coordinator", "self", "members", "zones", "assignment"}
        assert doc["assignment"] == assignment.to_document(), (
            ident
        )  # the published one, as the ConfigMap has it
        assert doc["self"] == ident
        assert doc["generation"] == assignment.generation, (ident, doc["generation"])
        coordinators.add(doc["coordinator"])
        rows = {m["identity"]: m for m in doc["members"]}
        assert set(rows) == members
        for member, row in rows.items():
            assert row["state"] == "ready", (ident, row)
            assert row["observedGeneration"] == assignment.generation, (ident, row)
            assert row["zones"] == load[member], (ident, row)
        zones = {row["zone"]: row for row in doc["zones"]}
        assert set(zones) == set(h.zones)
        for zone, row in zones.items():
            assert row["owner"] == owners[zone], (ident, row)
            if row["owner"] == ident:
                assert row["state"] == "active" and row["lastSync"] is not None, (ident, row)
    assert len(coordinators) == 1 and coordinators <= members, coordinators

    # Each zone fenced and written by its owner; another replica wrote it only under an earlier generation.
    # (A replica that starts late on a loaded machine may find a first generation that gave its zones to
    # another replica: those writes are legitimate as long as no two overlap, asserted below.)
    assert not h.fence_problems(owners)
    audit = h.cluster.audit()
    writers: dict[str, set[str]] = {}
    for entry in writes_ok(audit):
        writers.setdefault(entry.zone, set()).add(entry.writer)
        if entry.writer != owners[entry.zone]:
            assert entry.generation is not None and entry.generation < assignment.generation, entry
    assert all(owners[z] in writers.get(z, ()) for z in h.zones)
    print(
        f"\nthree replicas: generation {assignment.generation}, load {dict(sorted(load.items()))}, "
        f"records as desired {took:.2f}s after settling; overlaps {len(overlaps(audit))}, "
        f"fenced writes {len(fenced(audit))}"
    )
    assert not overlaps(audit)
    assert not [e for e in fenced(audit) if e.generation == assignment.generation]
