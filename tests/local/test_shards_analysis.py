"""`shardsync shards` on pure data: the /shards contract, the view built from cluster objects, --explain and
--what-if-replicas, and the tables."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shardsync.sharding.assignment import Assignment, Member
from shardsync.sharding.balance import rebalance
from shardsync.sharding.membership import MemberLease
from shardsync.shards.analysis import (
    WhatIfError,
    explain_zone,
    ideal_fraction,
    statefulset_of,
    what_if_replicas,
)
from shardsync.shards.cluster import ClusterObjects, build_view
from shardsync.shards.table import render_explanation, render_view, render_what_if
from shardsync.shards.view import InvalidView, MemberRow, ShardsView, ZoneRow, parse_view

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
ZONES = [f"zone-{i:04d}.example" for i in range(2000)]


def assignment(n: int, generation: int = 3, **kwargs: Any) -> Assignment:
    return Assignment(generation, tuple(Member(f"shardsync-{i}") for i in range(n)), **kwargs)


def lease(identity: str, age: float = 1.0, **changes: Any) -> dict[str, Any]:
    from dataclasses import replace

    value = replace(MemberLease.new("shardsync", identity, NOW - timedelta(seconds=age)), **changes)
    return value.to_object()


# ---- the contract --------------------------------------------------------------------------------------


def sample_doc() -> dict[str, Any]:
    return {
        "generation": 7,
        "coordinator": "shardsync-0",
        "self": "shardsync-1",
        "members": [
            {
                "identity": "shardsync-0",
                "state": "ready",
                "weight": 1,
                "zones": 1,
                "observedGeneration": 7,
                "lastRenewSeen": "2026-03-01T12:00:00Z",
            },
            {
                "identity": "shardsync-1",
                "state": "draining",
                "weight": 2,
                "zones": 1,
                "observedGeneration": 6,
                "lastRenewSeen": None,
            },
        ],
        "zones": [
            {
                "zone": "a.example",
                "owner": "shardsync-0",
                "state": "active",
                "lastSync": "2026-03-01T11:59:58Z",
                "lastSyncSeconds": 0.25,
                "records": 12,
                "lastError": "",
            },
            {
                "zone": "b.example",
                "owner": "shardsync-1",
                "state": "pending",
                "lastSync": None,
                "lastSyncSeconds": None,
                "records": None,
                "lastError": "throttled",
            },
        ],
        "assignment": Assignment(
            7, (Member("shardsync-0"), Member("shardsync-1", 2)), slots=("shardsync-0", "shardsync-1") * 512
        ).to_document(),
    }


def test_contract_round_trip() -> None:
    doc = sample_doc()
    view = parse_view(doc)
    assert view.to_json() == doc
    assert view.owner_counts() == {"shardsync-0": 1, "shardsync-1": 1}
    assert view.state_counts() == {"active": 1, "pending": 1}


def test_unknown_fields_are_ignored() -> None:
    doc = sample_doc()
    doc["future"] = {"x": 1}
    doc["members"][0]["newField"] = True
    assert parse_view(doc).generation == 7


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.pop("generation"), "'generation' must be int"),
        (lambda d: d.update(generation=True), "'generation' must be int"),
        (lambda d: d.update(members={}), "'members' must be list"),
        (lambda d: d["members"].append("x"), "members[2] is not an object"),
        (lambda d: d["zones"][1].update(zone=None), "zones[1]: 'zone' must be str"),
        (lambda d: d["zones"][0].update(records="12"), "zones[0]: 'records' must be int or null"),
        (lambda d: d.update(assignment=[]), "'assignment' must be dict or null"),
    ],
)
def test_contract_violations_are_named(mutate: Any, message: str) -> None:
    doc = sample_doc()
    mutate(doc)
    with pytest.raises(InvalidView, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_view(doc)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
    )
)
def test_any_json_parses_or_raises_invalid_view(doc: object) -> None:
    with contextlib.suppress(InvalidView):
        parse_view(doc)


# ---- the view from cluster objects -----------------------------------------------------------------------


def test_cluster_view_owners_match_the_ring_and_states_follow_the_leases() -> None:
    a = assignment(3, pins={"zone-0001.example": "shardsync-2"})
    objects = ClusterObjects(
        assignment=a.to_configmap("shardsync"),
        leases=[
            lease("shardsync-0", observed_generation=3),
            lease("shardsync-1", age=60.0, observed_generation=3),  # not renewed for 60 s: expired
            lease("shardsync-2", observed_generation=2),  # has not acknowledged generation 3
            {"metadata": {"name": "shardsync-coordinator"}, "spec": {"holderIdentity": "shardsync-0"}},
        ],
        coordinator={
            "metadata": {"name": "shardsync-coordinator"},
            "spec": {"holderIdentity": "shardsync-0"},
        },
    )
    view = build_view(objects, "shardsync", NOW, ZONES[:300])
    assert view.assignment is not None and Assignment.from_document(view.assignment) == a
    assert view.generation == 3 and view.coordinator == "shardsync-0" and view.self_identity is None
    states = {m.identity: m.state for m in view.members}
    assert states == {"shardsync-0": "ready", "shardsync-1": "expired", "shardsync-2": "ready"}
    expected_state = {"shardsync-0": "active", "shardsync-1": "orphaned", "shardsync-2": "pending"}
    for row in view.zones:
        assert row.owner == a.owner_of(row.zone)
        assert row.owner is not None
        assert row.state == expected_state[row.owner]
    assert {r.zone: r.owner for r in view.zones}["zone-0001.example"] == "shardsync-2"
    counts = {m.identity: m.zones for m in view.members}
    assert counts == dict(view.owner_counts())
    assert sum(c or 0 for c in counts.values()) == 300
    assert view.notes == ()


def test_cluster_view_parks_a_restarting_members_zones_and_reports_missing_leases() -> None:
    a = assignment(3)
    objects = ClusterObjects(
        assignment=a.to_configmap("shardsync"),
        leases=[lease("shardsync-0", observed_generation=3), lease("shardsync-1", restarting=True, age=100)],
        coordinator=None,
    )
    view = build_view(objects, "shardsync", NOW, ZONES[:200])
    by_owner = {row.owner: row.state for row in view.zones}
    assert by_owner == {"shardsync-0": "active", "shardsync-1": "parked", "shardsync-2": "orphaned"}
    assert {m.identity: m.state for m in view.members}["shardsync-2"] == "expired"
    assert any("shardsync-2 is in the assignment but has no lease" in n for n in view.notes)


def test_cluster_view_without_zone_list_or_assignment_says_so() -> None:
    objects = ClusterObjects(assignment=None, leases=[lease("shardsync-0")], coordinator=None)
    view = build_view(objects, "shardsync", NOW, None)
    assert view.assignment is None and view.generation == 0 and not view.zones_known
    assert [m.zones for m in view.members] == [None]
    assert any("no assignment published yet" in n for n in view.notes)
    assert any("zone list unknown" in n for n in view.notes)
    text = render_view(view)
    assert "shardsync-0" in text and "note: zone list unknown" in text


# ---- --explain -----------------------------------------------------------------------------------------


def test_explain_names_ring_point_owner_weight_and_share() -> None:
    a = Assignment(5, (Member("shardsync-0", 1), Member("shardsync-1", 3)))
    doc = explain_zone(a, "Zone-0042.Example.")
    assert doc["zone"] == "zone-0042.example"
    assert doc["owner"] == a.owner_of("zone-0042.example") == doc["ringOwner"]
    assert doc["pinnedTo"] is None and doc["pinEffective"] is False
    # the ring point is the first member point clockwise: after the zone hash, unless the ring wraps (rare)
    after = [
        int(d["ringPoint"], 16) >= int(d["zonePoint"], 16) for d in map(lambda z: explain_zone(a, z), ZONES)
    ]
    assert sum(after) >= len(ZONES) - 20
    assert doc["weight"] == {"shardsync-0": 1, "shardsync-1": 3}[doc["owner"]]
    assert doc["points"] == 160 * doc["weight"]
    assert 0 < doc["share"] < 1 and doc["generation"] == 5


def test_explain_pins_in_effect_and_dangling() -> None:
    a = assignment(2, pins={"p.example": "shardsync-1", "q.example": "shardsync-9"})
    pinned = explain_zone(a, "p.example")
    assert (
        pinned["owner"] == "shardsync-1"
        and pinned["pinEffective"]
        and "pinned to shardsync-1" in pinned["reason"]
    )
    dangling = explain_zone(a, "q.example")
    assert dangling["pinnedTo"] == "shardsync-9" and not dangling["pinEffective"]
    assert dangling["owner"] == dangling["ringOwner"] and "not a member" in dangling["reason"]


# ---- --what-if-replicas ----------------------------------------------------------------------------------


def test_what_if_scale_up_moves_about_one_in_n_all_to_the_new_member() -> None:
    w = what_if_replicas(assignment(3), 4, ZONES)
    assert w.statefulset == "shardsync" and w.members_after[-1] == "shardsync-3"
    assert w.ideal == pytest.approx(0.25)
    assert abs(w.fraction - 0.25) < 0.1
    assert w.moved == sum(n for _, _, n in w.flows)
    assert {dst for _, dst, _ in w.flows} == {"shardsync-3"}
    assert w.between_survivors(["shardsync-0", "shardsync-1", "shardsync-2"]) == 0
    text = render_what_if(w, ["shardsync-0", "shardsync-1", "shardsync-2"])
    assert f"would move   {w.moved} zones" in text and "ideal 25.0%" in text


def test_what_if_scale_down_moves_only_the_leaving_members_zones() -> None:
    a = assignment(4)
    w = what_if_replicas(a, 2, ZONES)
    leaving = {"shardsync-2", "shardsync-3"}
    assert {src for src, _, _ in w.flows} == leaving
    assert w.moved == sum(1 for z in ZONES if a.owner_of(z) in leaving)
    assert w.ideal == pytest.approx(0.5)


def test_what_if_without_zones_is_an_estimate_and_same_size_moves_nothing() -> None:
    w = what_if_replicas(assignment(3), 5)
    assert w.estimated and w.zones == 10_000
    assert abs(w.fraction - 0.4) < 0.06
    same = what_if_replicas(assignment(3), 3, ZONES)
    assert same.moved == 0 and same.ideal == 0


def test_what_if_keeps_weights_and_needs_statefulset_names() -> None:
    heavy = Assignment(1, (Member("db-0", 3), Member("db-1", 1)))
    w = what_if_replicas(heavy, 3, ZONES)
    # the heavy member keeps weight 3 and the new one gets 1: shares go 3/4,1/4 -> 3/5,1/5,1/5
    assert w.ideal == pytest.approx(ideal_fraction({"db-0": 3, "db-1": 1}, {"db-0": 3, "db-1": 1, "db-2": 1}))
    assert w.ideal == pytest.approx(0.2)
    with pytest.raises(WhatIfError, match="not named"):
        statefulset_of(["alpha", "db-0"])
    with pytest.raises(WhatIfError, match="several"):
        statefulset_of(["a-0", "b-1"])
    other = Assignment(1, (Member("host-a"),))
    assert what_if_replicas(other, 2, ZONES, statefulset="web").members_after == ("web-0", "web-1")


@given(
    st.lists(st.integers(1, 5), min_size=1, max_size=6), st.lists(st.integers(1, 5), min_size=1, max_size=6)
)
def test_ideal_fraction_is_a_distance(before: list[int], after: list[int]) -> None:
    b = {f"m-{i}": w for i, w in enumerate(before)}
    a = {f"m-{i}": w for i, w in enumerate(after)}
    assert 0 <= ideal_fraction(b, a) <= 1
    assert ideal_fraction(b, a) == pytest.approx(ideal_fraction(a, b))
    assert ideal_fraction(b, b) == pytest.approx(0)


# ---- tables ----------------------------------------------------------------------------------------------


def big_view(n: int) -> ShardsView:
    members = tuple(MemberRow(f"shardsync-{i}", "ready", 1, None, 4, None) for i in range(3))
    zones = tuple(
        ZoneRow(
            f"z{i}.example",
            f"shardsync-{i % 3}" if i % 50 else None,
            "active" if i % 50 else "orphaned",
            last_error="boom" if i == 7 else "",
        )
        for i in range(n)
    )
    return ShardsView(4, "shardsync-0", "shardsync-0", members, zones)


def test_table_lists_few_zones_and_summarises_many() -> None:
    few = render_view(big_view(10))
    assert "z9.example" in few and "ORPHANED" not in few
    many = render_view(big_view(500))
    assert "z499.example" not in many
    assert "ORPHANED" in many and "500 zones summarised" in many
    total = next(line for line in many.splitlines() if line.startswith("total"))
    assert total.split()[:4] == ["total", "500", "490", "10"]
    assert "zones needing attention (first 10 of 11)" in many  # 10 orphaned + 1 error
    assert "z499.example" in render_view(big_view(500), all_zones=True)


def test_explain_and_what_if_under_a_slot_table() -> None:
    members = (Member("shardsync-0"), Member("shardsync-1"), Member("shardsync-2"))
    zones = [f"z{i}.example" for i in range(150)]
    table = rebalance([], {m.identity: 1 for m in members}, zones).owners
    assignment = Assignment(3, members, slots=table)
    doc = explain_zone(assignment, "z7.example")
    assert doc["slots"] == 1024 and doc["owner"] == table[doc["slot"]]
    assert "the coordinator gave that slot to" in render_explanation(doc)
    scaled = what_if_replicas(assignment, 4, zones)
    # a quarter of the zones (37 of 150: the odd zones stay), every one of them to the new replica,
    # evenly from the three
    assert scaled.moved == 37 and {dst for _, dst, _ in scaled.flows} == {"shardsync-3"}
    assert sorted(n for _, _, n in scaled.flows) == [12, 12, 13]
