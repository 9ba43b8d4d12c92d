"""Fuzzing the parsers of the coordination objects: member and coordinator Leases and the assignment
ConfigMap. Whatever a Lease holds, parsing gives a lease (odd fields as problems or client-go's defaults) or
MalformedLease, and the liveness and election rules read it without an exception. Whatever sequence of
assignment ConfigMaps arrives (garbage JSON, wrong types, generations going backwards, unknown members, 10 MB
values), the watch keeps the newest good generation in force and never moves backwards; a corrupt one
changes nothing (the coordinator rewriting it is tests/sharding/test_coordinator_loop.py's)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shardsync.sharding import election
from shardsync.sharding.assignment import CONFIGMAP_KEY, Assignment, Member
from shardsync.sharding.assignment_watch import AssignmentWatch
from shardsync.sharding.election import CoordinatorLease, coordinator_lease_name
from shardsync.sharding.membership import (
    ANNOTATION_DRAINING,
    ANNOTATION_OBSERVED_GENERATION,
    ANNOTATION_RESTARTING,
    ANNOTATION_WEIGHT,
    LABEL_INSTANCE,
    LivenessTracker,
    MalformedLease,
    MemberLease,
    member_lease_name,
)
from shardsync.sharding.ring import RingParams
from shardsync.sharding.site import Site
from shardsync.sharding.timings import Timings
from tests.fuzz.support import count, fuzzing, huge, junk, maybe, text
from tests.sources.fake_kube import FakeKube

pytestmark = pytest.mark.fuzz

INSTANCE = "shardsync"
WALL = datetime(2026, 1, 1, tzinfo=UTC)
stamp = st.one_of(
    st.datetimes().map(lambda d: d.isoformat() + "Z"),
    st.sampled_from(["2026-01-01T00:00:00.000000Z", "2026-01-01T00:00:00+00:00", "", "now", "9999-99-99"]),
    text,
)
identity = st.one_of(st.sampled_from(["shardsync-0", "shardsync-1", "ghost"]), st.text(max_size=20))
spec = st.fixed_dictionaries(
    {},
    optional={
        "holderIdentity": maybe(identity),
        "leaseDurationSeconds": maybe(st.integers()),
        "renewTime": maybe(stamp),
        "acquireTime": maybe(stamp),
        "leaseTransitions": maybe(st.integers()),
    },
)
lease_annotations = st.dictionaries(
    st.sampled_from(
        [ANNOTATION_WEIGHT, ANNOTATION_DRAINING, ANNOTATION_RESTARTING, ANNOTATION_OBSERVED_GENERATION, "x"]
    ),
    maybe(
        st.one_of(
            st.sampled_from(["1", "0", "true", "false", "-1", "1e9", "99999999999999999999"]), text, huge
        )
    ),
)


def lease(names: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    metadata = st.fixed_dictionaries(
        {"name": names},
        optional={
            "labels": maybe(st.dictionaries(st.sampled_from([LABEL_INSTANCE, "y"]), maybe(identity))),
            "annotations": maybe(lease_annotations),
            "resourceVersion": maybe(st.text(max_size=5)),
        },
    )
    return st.fixed_dictionaries({"metadata": maybe(metadata), "spec": maybe(spec)})


member_names = st.one_of(
    st.sampled_from(["shardsync-0", "shardsync-1", "x"]).map(lambda i: member_lease_name(INSTANCE, i)),
    st.text(max_size=20).map(lambda t: f"{INSTANCE}-member-{t}"),
    junk,
)
coordinator_names = st.one_of(st.just(coordinator_lease_name(INSTANCE)), junk)


@fuzzing("leases")
@given(objs=st.lists(lease(member_names), min_size=1, max_size=4), now=st.floats(0, 1e6))
def test_member_leases_parse_or_are_refused_and_liveness_reads_them(objs: list[Any], now: float) -> None:
    count("member and coordinator leases")
    tracker = LivenessTracker()
    leases = []
    for obj in objs:
        try:
            leases.append(MemberLease.from_object(obj, INSTANCE))
        except MalformedLease:
            continue
    tracker.resync(leases, now)
    for status in tracker.statuses(now + 1).values():
        assert status.identity and status.lease_duration > 0
    for parsed in leases:
        parsed.to_object()


@fuzzing("leases")
@given(obj=lease(coordinator_names), now=st.floats(0, 1e6))
def test_coordinator_leases_parse_or_are_refused_and_the_election_decides(obj: Any, now: float) -> None:
    count("member and coordinator leases")
    try:
        parsed = CoordinatorLease.from_object(obj, INSTANCE)
    except MalformedLease:
        parsed = None
    race = election.Election(INSTANCE, "shardsync-0", lease_duration=15, renew_deadline=10.0)
    race.observe(parsed, now)
    race.decide(now + 1, WALL)
    race.is_leader(now + 1)


members = st.lists(
    st.builds(
        Member, st.sampled_from(["shardsync-0", "shardsync-1", "shardsync-2", "unknown-7"]), st.integers(1, 5)
    ),
    max_size=4,
    unique_by=lambda m: m.identity,
)


def good(generation: int, listed: list[Member], pins: dict[str, str], slotted: bool = False) -> str:
    slots: tuple[str, ...] = ()
    overrides: dict[str, str] = {}
    if slotted and listed:  # version 3: a slot table and an override
        slots = tuple(listed[i % len(listed)].identity for i in range(1024))
        overrides = {"c.ex.com": listed[-1].identity}
    a = Assignment(generation, tuple(listed), RingParams(), pins, slots=slots, overrides=overrides)
    return orjson.dumps(a.to_document()).decode()


good_text = st.builds(
    good,
    st.integers(1, 50),
    members,
    st.dictionaries(
        st.sampled_from(["a.ex.com", "b.ex.com"]), st.sampled_from(["shardsync-0", "nobody"]), max_size=2
    ),
    st.booleans(),
)


def mutate(document: str, key: str, value: Any) -> str:
    doc = orjson.loads(document)
    doc[key] = value
    return json.dumps(doc, default=str)  # json, not orjson: it writes integers beyond 64 bits too


bad_text = st.one_of(
    st.builds(
        mutate,
        good_text,
        st.sampled_from(
            [
                "version",
                "generation",
                "ring",
                "members",
                "pins",
                "createdAt",
                "coordinator",
                "slots",
                "overrides",
            ]
        ),
        junk,
    ),
    text,
    huge,
    junk.map(lambda v: json.dumps(v, default=str)),
)
data = st.one_of(
    st.fixed_dictionaries({CONFIGMAP_KEY: st.one_of(good_text, bad_text)}),
    st.fixed_dictionaries({CONFIGMAP_KEY: junk}),
    junk,
)


@fuzzing("assignment")
@given(datas=st.lists(data, min_size=1, max_size=6))
def test_the_assignment_watch_keeps_the_newest_good_generation(datas: list[Any]) -> None:
    count("assignment configmaps")
    site = Site(FakeKube(), "ns", INSTANCE, "shardsync-0", Timings.derive(15, 5))
    watch = AssignmentWatch(site)
    best: int | None = None
    for i, item in enumerate(datas):
        watch.offer({"metadata": {"name": "shardsync-assignment", "resourceVersion": str(i)}, "data": item})
        current = watch.current
        if current is not None:
            assert best is None or current.generation >= best
            best = current.generation
            current.owner_of("a.ex.com")
            current.owner_of("c.ex.com")
            current.explain("c.ex.com")
            current.pin_problems()
