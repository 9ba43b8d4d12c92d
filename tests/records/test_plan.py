"""The planner: external-dns's plan semantics, policies, ownership, conflicts and the CNAME rule."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardsync.records.domain_filter import DomainFilter
from shardsync.records.endpoint import CREATED_LABEL, OWNER_LABEL, RESOURCE_LABEL, Endpoint
from shardsync.records.plan import ConflictReason, PlanResult, Policy, SkipReason, plan

ME = "me"


def ep(
    name: str,
    rtype: str,
    *targets: str,
    ttl: int = 0,
    owner: str | None = None,
    resource: str | None = None,
    created: str | None = None,
    set_id: str = "",
    ps: tuple[tuple[str, str], ...] = (),
) -> Endpoint:
    labels: dict[str, str] = {}
    if owner is not None:
        labels[OWNER_LABEL] = owner
    if resource is not None:
        labels[RESOURCE_LABEL] = resource
    if created is not None:
        labels[CREATED_LABEL] = created
    return Endpoint.new(
        name, rtype, targets, ttl=ttl, set_identifier=set_id, labels=labels, provider_specific=ps
    )


def keys(endpoints: list[Endpoint]) -> list[tuple[str, str, str]]:
    return [e.key for e in endpoints]


@dataclass
class Case:
    desired: list[Endpoint]
    current: list[Endpoint]
    create: list[tuple[str, str, str]] = field(default_factory=list)
    update: list[tuple[str, str, str]] = field(default_factory=list)
    delete: list[tuple[str, str, str]] = field(default_factory=list)
    skipped: list[tuple[tuple[str, str, str], SkipReason]] = field(default_factory=list)
    policy: Policy = Policy.SYNC
    managed: tuple[str, ...] = ("A", "AAAA", "CNAME")
    exclude: tuple[str, ...] = ()


A = ("www.ex.com", "A", "")
AAAA = ("www.ex.com", "AAAA", "")
CNAME = ("www.ex.com", "CNAME", "")

CASES: dict[str, Case] = {
    "create new": Case([ep("www.ex.com", "A", "1.1.1.1")], [], create=[A]),
    "unchanged": Case([ep("www.ex.com", "A", "1.1.1.1")], [ep("www.ex.com", "A", "1.1.1.1", owner=ME)]),
    "target change": Case(
        [ep("www.ex.com", "A", "1.1.1.2")], [ep("www.ex.com", "A", "1.1.1.1", owner=ME)], update=[A]
    ),
    "target added": Case(
        [ep("www.ex.com", "A", "1.1.1.1", "1.1.1.2")],
        [ep("www.ex.com", "A", "1.1.1.1", owner=ME)],
        update=[A],
    ),
    "ttl not configured: no update": Case(
        [ep("www.ex.com", "A", "1.1.1.1", ttl=0)], [ep("www.ex.com", "A", "1.1.1.1", ttl=300, owner=ME)]
    ),
    "ttl configured and different": Case(
        [ep("www.ex.com", "A", "1.1.1.1", ttl=60)],
        [ep("www.ex.com", "A", "1.1.1.1", ttl=300, owner=ME)],
        update=[A],
    ),
    "ttl configured and equal": Case(
        [ep("www.ex.com", "A", "1.1.1.1", ttl=300)], [ep("www.ex.com", "A", "1.1.1.1", ttl=300, owner=ME)]
    ),
    "provider-specific change": Case(
        [ep("www.ex.com", "A", "1.1.1.1", ps=(("alias", "true"),))],
        [ep("www.ex.com", "A", "1.1.1.1", owner=ME, ps=(("alias", "false"),))],
        update=[A],
    ),
    "provider-specific in another order: no update": Case(
        [ep("www.ex.com", "A", "1.1.1.1", ps=(("a", "1"), ("b", "2")))],
        [ep("www.ex.com", "A", "1.1.1.1", owner=ME, ps=(("b", "2"), ("a", "1")))],
    ),
    "ipv6 spelled differently: no update": Case(
        [ep("www.ex.com", "AAAA", "2001:DB8:0:0::1")], [ep("www.ex.com", "AAAA", "2001:db8::1", owner=ME)]
    ),
    "cname target case: no update": Case(
        [Endpoint("www.ex.com", "CNAME", ("LB.Example.NET",))],
        [ep("www.ex.com", "CNAME", "lb.example.net", owner=ME)],
    ),
    "delete ours": Case([], [ep("www.ex.com", "A", "1.1.1.1", owner=ME)], delete=[A]),
    "foreign record not deleted, not reported": Case([], [ep("www.ex.com", "A", "1.1.1.1", owner="other")]),
    "unowned record not deleted": Case([], [ep("www.ex.com", "A", "1.1.1.1")]),
    "foreign record update skipped": Case(
        [ep("www.ex.com", "A", "1.1.1.2")],
        [ep("www.ex.com", "A", "1.1.1.1", owner="other")],
        skipped=[(A, SkipReason.NOT_OWNED)],
    ),
    "foreign record equal to desired: nothing": Case(
        [ep("www.ex.com", "A", "1.1.1.1")], [ep("www.ex.com", "A", "1.1.1.1", owner="other")]
    ),
    "create beside a foreign record skipped": Case(
        [ep("www.ex.com", "AAAA", "2001:db8::1")],
        [ep("www.ex.com", "A", "1.1.1.1", owner="other")],
        skipped=[(AAAA, SkipReason.FOREIGN_OWNER)],
    ),
    "create beside an unowned record skipped": Case(
        [ep("www.ex.com", "AAAA", "2001:db8::1")],
        [ep("www.ex.com", "A", "1.1.1.1")],
        skipped=[(AAAA, SkipReason.FOREIGN_OWNER)],
    ),
    "create beside our own record": Case(
        [ep("www.ex.com", "A", "1.1.1.1"), ep("www.ex.com", "AAAA", "2001:db8::1")],
        [ep("www.ex.com", "A", "1.1.1.1", owner=ME)],
        create=[AAAA],
    ),
    "foreign record under another set identifier does not block": Case(
        [ep("www.ex.com", "A", "1.1.1.1", set_id="eu")],
        [ep("www.ex.com", "A", "1.1.1.2", owner="other", set_id="us")],
        create=[("www.ex.com", "A", "eu")],
    ),
    "set identifiers are separate RRsets": Case(
        [ep("www.ex.com", "A", "1.1.1.1", set_id="eu"), ep("www.ex.com", "A", "1.1.1.9", set_id="us")],
        [
            ep("www.ex.com", "A", "1.1.1.1", owner=ME, set_id="eu"),
            ep("www.ex.com", "A", "1.1.1.1", owner=ME, set_id="us"),
            ep("www.ex.com", "A", "1.1.1.1", owner=ME, set_id="ap"),
        ],
        update=[("www.ex.com", "A", "us")],
        delete=[("www.ex.com", "A", "ap")],
    ),
    "unmanaged types ignored on both sides": Case(
        [ep("www.ex.com", "TXT", "hello"), ep("www.ex.com", "MX", "10 mx.ex.com")],
        [ep("www.ex.com", "TXT", "old", owner=ME), ep("mail.ex.com", "MX", "10 mx.ex.com", owner=ME)],
    ),
    "managed types can be widened": Case(
        [ep("www.ex.com", "TXT", "hello")],
        [ep("old.ex.com", "TXT", "bye", owner=ME)],
        create=[("www.ex.com", "TXT", "")],
        delete=[("old.ex.com", "TXT", "")],
        managed=("A", "TXT"),
    ),
    "excluded types ignored": Case(
        [ep("www.ex.com", "AAAA", "2001:db8::1")],
        [ep("old.ex.com", "AAAA", "2001:db8::2", owner=ME)],
        exclude=("AAAA",),
    ),
    "upsert-only keeps deletes back": Case(
        [ep("new.ex.com", "A", "1.1.1.1"), ep("www.ex.com", "A", "1.1.1.2")],
        [ep("www.ex.com", "A", "1.1.1.1", owner=ME), ep("old.ex.com", "A", "1.1.1.1", owner=ME)],
        create=[("new.ex.com", "A", "")],
        update=[A],
        policy=Policy.UPSERT_ONLY,
    ),
    "create-only keeps updates and deletes back": Case(
        [ep("new.ex.com", "A", "1.1.1.1"), ep("www.ex.com", "A", "1.1.1.2")],
        [ep("www.ex.com", "A", "1.1.1.1", owner=ME), ep("old.ex.com", "A", "1.1.1.1", owner=ME)],
        create=[("new.ex.com", "A", "")],
        policy=Policy.CREATE_ONLY,
    ),
    "A replaces our CNAME": Case(
        [ep("www.ex.com", "A", "1.1.1.1")],
        [ep("www.ex.com", "CNAME", "lb.ex.net", owner=ME)],
        create=[A],
        delete=[CNAME],
    ),
    "A beside a CNAME kept by upsert-only is skipped": Case(
        [ep("www.ex.com", "A", "1.1.1.1")],
        [ep("www.ex.com", "CNAME", "lb.ex.net", owner=ME)],
        skipped=[(A, SkipReason.CNAME_CONFLICT)],
        policy=Policy.UPSERT_ONLY,
    ),
    "CNAME beside an unmanaged record is skipped": Case(
        [ep("www.ex.com", "CNAME", "lb.ex.net")],
        [ep("www.ex.com", "TXT", "v=spf1 -all")],
        skipped=[(CNAME, SkipReason.CNAME_CONFLICT)],
    ),
    "A beside a CNAME under another set identifier is skipped": Case(
        [ep("www.ex.com", "A", "1.1.1.1", set_id="eu")],
        [ep("www.ex.com", "CNAME", "lb.ex.net", owner="other", set_id="us")],
        skipped=[(("www.ex.com", "A", "eu"), SkipReason.CNAME_CONFLICT)],
    ),
    "foreign CNAME in the row blocks as foreign": Case(
        [ep("www.ex.com", "A", "1.1.1.1")],
        [ep("www.ex.com", "CNAME", "lb.ex.net", owner="other")],
        skipped=[(A, SkipReason.FOREIGN_OWNER)],
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_plan_cases(name: str) -> None:
    case = CASES[name]
    result = plan(case.desired, case.current, case.policy, ME, case.managed, case.exclude)
    changes = result.changes
    assert keys(changes.create) == sorted(case.create)
    assert keys(changes.update_new) == sorted(case.update)
    assert keys(changes.update_old) == sorted(case.update)
    assert keys(changes.delete) == sorted(case.delete)
    assert [(s.endpoint.key, s.reason) for s in result.skipped] == case.skipped
    assert result.conflicts == []


def test_update_pairs_current_with_desired_and_inherits_owner() -> None:
    current = ep("www.ex.com", "A", "1.1.1.1", ttl=300, owner=ME, resource="service/ns/a")
    desired = ep("www.ex.com", "A", "1.1.1.2", resource="service/ns/a", created="2024-01-01T00:00:00Z")
    changes = plan([desired], [current], owner_id=ME).changes
    assert changes.update_old == [current]
    (new,) = changes.update_new
    assert new.targets == ("1.1.1.2",)
    assert new.labels[OWNER_LABEL] == ME
    assert new.labels[RESOURCE_LABEL] == "service/ns/a"


def test_policies_report_what_they_hold_back() -> None:
    desired = [ep("www.ex.com", "A", "1.1.1.2")]
    current = [ep("www.ex.com", "A", "1.1.1.1", owner=ME), ep("old.ex.com", "A", "1.1.1.1", owner=ME)]
    upsert = plan(desired, current, "upsert-only", ME)
    assert keys(upsert.suppressed.delete) == [("old.ex.com", "A", "")]
    assert upsert.suppressed.update_new == []
    create_only = plan(desired, current, Policy.CREATE_ONLY, ME)
    assert keys(create_only.suppressed.delete) == [("old.ex.com", "A", "")]
    assert keys(create_only.suppressed.update_new) == [A]
    assert plan(desired, current, "sync", ME).suppressed.is_empty()
    with pytest.raises(ValueError):
        plan(desired, current, "everything", ME)


# -- conflicts: two objects claim one RRset ------------------------------------------------------------


def claim(resource: str, created: str | None, target: str, rtype: str = "A") -> Endpoint:
    return ep("www.ex.com", rtype, target, resource=resource, created=created)


@pytest.mark.parametrize(
    ("claims", "holder", "winner"),
    [
        # different kinds of object do not merge: the smallest targets win (external-dns's ResolveCreate)
        (
            [
                claim("service/ns/old", "2024-01-01T00:00:00Z", "1.1.1.2"),
                claim("ingress/ns/new", "2024-03-01T00:00:00Z", "1.1.1.1"),
            ],
            None,
            "ingress/ns/new",
        ),
        # equal targets, no holder: the oldest object (timestamps compare as instants, not as text)
        (
            [
                claim("service/ns/a", "2024-01-01T10:00:00+02:00", "lb.ex.net", "CNAME"),
                claim("ingress/ns/b", "2024-01-01T09:00:00Z", "lb2.ex.net", "CNAME"),
                claim("ingress/ns/c", "2024-01-01T09:30:00Z", "lb.ex.net", "CNAME"),
            ],
            None,
            "service/ns/a",
        ),
        # the object already holding the record keeps it, whatever its targets and age (ResolveUpdate)
        (
            [
                claim("service/ns/a", "2024-01-01T00:00:00Z", "1.1.1.1"),
                claim("ingress/ns/b", "2024-02-01T00:00:00Z", "1.1.1.2"),
            ],
            "ingress/ns/b",
            "ingress/ns/b",
        ),
    ],
)
def test_conflict_winner(claims: list[Endpoint], holder: str | None, winner: str) -> None:
    # The full table against external-dns's tests is tests/parity/test_plan_parity.py.
    current = (
        []
        if holder is None
        else [ep("www.ex.com", claims[0].record_type, "9.9.9.9", owner=ME, resource=holder)]
    )
    for order in (claims, claims[::-1]):
        result = plan(order, current, owner_id=ME)
        (conflict,) = result.conflicts
        assert conflict.reason is ConflictReason.SAME_RECORD
        assert conflict.winner.labels[RESOURCE_LABEL] == winner
        planned = result.changes.create or result.changes.update_new
        assert [e.labels[RESOURCE_LABEL] for e in planned] == [winner]


def test_duplicate_from_one_object_is_not_a_conflict() -> None:
    twice = [claim("ingress/ns/a", "2024-01-01T00:00:00Z", "1.1.1.1")] * 2
    result = plan(twice, [], owner_id=ME)
    assert result.conflicts == []
    assert keys(result.changes.create) == [A]


def test_cname_loses_to_other_types() -> None:
    desired = [
        claim("ingress/ns/cname", "2020-01-01T00:00:00Z", "lb.ex.net", "CNAME"),
        claim("service/ns/a", "2024-01-01T00:00:00Z", "1.1.1.1", "A"),
        claim("service/ns/aaaa", "2024-01-01T00:00:00Z", "2001:db8::1", "AAAA"),
    ]
    current = [ep("www.ex.com", "CNAME", "lb.ex.net", owner=ME, resource="ingress/ns/cname")]
    result = plan(desired, current, owner_id=ME)
    assert keys(result.changes.create) == [A, AAAA]
    assert keys(result.changes.delete) == [CNAME]
    (conflict,) = result.conflicts
    assert conflict.reason is ConflictReason.RECORD_TYPE
    assert conflict.winner.record_type in ("A", "AAAA")
    assert conflict.loser_resources == ("ingress/ns/cname",)


def test_cname_alone_is_fine_and_cnames_elsewhere_untouched() -> None:
    desired = [
        ep("www.ex.com", "CNAME", "lb.ex.net"),
        ep("api.ex.com", "A", "1.1.1.1"),
    ]
    result = plan(desired, [], owner_id=ME)
    assert keys(result.changes.create) == [("api.ex.com", "A", ""), CNAME]
    assert result.conflicts == []


# -- properties ----------------------------------------------------------------------------------------

NAMES = ["a.ex.com", "b.ex.com", "c.ex.com", "d.ex.com"]
V4 = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
V6 = ["2001:db8::1", "2001:db8::2"]


@st.composite
def zone_side(draw: st.DrawFn, owners: tuple[str, ...] = (ME,)) -> list[Endpoint]:
    """RRsets over a few names; each name holds either a CNAME or addresses, never both."""
    out: list[Endpoint] = []
    for name in NAMES:
        kind = draw(st.sampled_from(["none", "cname", "addr"]))
        set_id = draw(st.sampled_from(["", "", "eu"]))
        owner = draw(st.sampled_from(owners))
        ttl = draw(st.sampled_from([0, 60, 300]))
        labels = {OWNER_LABEL: owner}
        if kind == "cname":
            target = draw(st.sampled_from(["x.ex.net", "y.ex.net"]))
            out.append(Endpoint.new(name, "CNAME", [target], ttl, set_id, labels))
        elif kind == "addr":
            if draw(st.booleans()):
                v4 = draw(st.lists(st.sampled_from(V4), min_size=1, max_size=3))
                out.append(Endpoint.new(name, "A", v4, ttl, set_id, labels))
            if draw(st.booleans()):
                v6 = draw(st.lists(st.sampled_from(V6), min_size=1, max_size=2))
                out.append(Endpoint.new(name, "AAAA", v6, ttl, set_id, labels))
    return out


def apply(current: list[Endpoint], result: PlanResult, owner: str) -> list[Endpoint]:
    """What a provider holds after the changes (with the owner label the registry would add)."""
    state = {e.key: e for e in current}
    changes = result.changes
    for e in changes.delete:
        assert state.pop(e.key) == e
    for old, new in zip(changes.update_old, changes.update_new, strict=True):
        assert state.pop(old.key) == old
        state[new.key] = new
    for e in changes.create:
        assert e.key not in state
        state[e.key] = e.with_labels(owner=owner)
    return list(state.values())


@settings(max_examples=300, deadline=None)
@given(desired=zone_side(), current=zone_side())
def test_sync_converges_in_one_step(desired: list[Endpoint], current: list[Endpoint]) -> None:
    desired = [e.without_labels() for e in desired]
    result = plan(desired, current, owner_id=ME)
    after = apply(current, result, ME)
    by_key = {e.key: e for e in after}
    assert set(by_key) == {e.key for e in desired}
    for want in desired:
        have = by_key[want.key]
        assert have.targets == want.targets
        if want.ttl:
            assert have.ttl == want.ttl
    again = plan(desired, after, owner_id=ME)
    assert again.changes.is_empty()
    assert again.skipped == []


@settings(max_examples=300, deadline=None)
@given(
    desired=zone_side(),
    current=zone_side(owners=(ME, "other", "")),
    policy=st.sampled_from(list(Policy)),
    seed=st.integers(0, 2**16),
)
def test_never_touches_foreign_records_and_order_does_not_matter(
    desired: list[Endpoint], current: list[Endpoint], policy: Policy, seed: int
) -> None:
    desired = [e.without_labels() for e in desired]
    result = plan(desired, current, policy, ME)
    changes = result.changes
    for e in [*changes.update_old, *changes.delete]:
        assert e.labels[OWNER_LABEL] == ME
    assert all(e.labels[OWNER_LABEL] == ME for e in changes.update_new)
    foreign_rows = {(e.dns_name, e.set_identifier) for e in current if e.labels[OWNER_LABEL] != ME}
    assert not [e for e in changes.create if (e.dns_name, e.set_identifier) in foreign_rows]
    if policy is not Policy.SYNC:
        assert changes.delete == []
    if policy is Policy.CREATE_ONLY:
        assert changes.update_new == []
    rng = random.Random(seed)
    shuffled_desired, shuffled_current = desired[:], current[:]
    rng.shuffle(shuffled_desired)
    rng.shuffle(shuffled_current)
    assert plan(shuffled_desired, shuffled_current, policy, ME) == result


@settings(max_examples=200, deadline=None)
@given(
    claims=st.lists(
        st.tuples(
            st.sampled_from(["ingress/ns/a", "ingress/ns/b", "service/ns/c"]),
            st.sampled_from([None, "bad", "2024-01-01T00:00:00Z", "2023-12-31T23:00:00-02:00"]),
            st.sampled_from(V4),
        ),
        min_size=2,
        max_size=6,
    ),
    holder=st.sampled_from([None, "ingress/ns/a", "service/ns/c"]),
    seed=st.integers(0, 2**16),
)
def test_conflict_resolution_is_order_free_merges_per_kind_and_keeps_the_holder(
    claims: list[tuple[str, str | None, str]], holder: str | None, seed: int
) -> None:
    desired = [claim(resource, created, target) for resource, created, target in claims]
    current = [] if holder is None else [ep("www.ex.com", "A", "9.9.9.9", owner=ME, resource=holder)]
    result = plan(desired, current, owner_id=ME)
    shuffled = desired[:]
    random.Random(seed).shuffle(shuffled)
    assert plan(shuffled, current, owner_id=ME) == result
    (winner,) = [*result.changes.create, *result.changes.update_new]
    kind = winner.labels[RESOURCE_LABEL].partition("/")[0]
    # the winner publishes every target its kind of object asked for (external-dns's MergeEndpoints)
    assert set(winner.targets) == {t for r, _, t in claims if r.startswith(kind + "/")}
    if holder is not None and any(r == holder for r, _, _ in claims):
        assert winner.labels[RESOURCE_LABEL] == holder
    for conflict in result.conflicts:
        assert conflict.winner not in conflict.losers
        assert all(not r.startswith(kind + "/") for r in conflict.loser_resources)


# external-dns v0.22 plan/plan_test.go TestDomainFiltersInitialState / TestDomainFiltersUpdate, and
# controller's filterRecordsForPlan: both sides of the plan are filtered by the domain filter.
def test_owned_records_outside_the_domain_filter_are_left_alone() -> None:
    inside = ep("a.keep.ex.com", "A", "10.0.0.1", owner=ME)
    outside = ep("b.old.ex.com", "A", "10.0.0.2", owner=ME)
    excluded = ep("c.private.keep.ex.com", "A", "10.0.0.3", owner=ME)
    domains = DomainFilter.parse(["keep.ex.com"], ["private.keep.ex.com"])
    result = plan([], [inside, outside, excluded], Policy.SYNC, ME, domains=domains)
    # Only the record the filter admits is ours to delete; without the filter all three would go.
    assert keys(result.changes.delete) == [inside.key]
    assert len(plan([], [inside, outside, excluded], Policy.SYNC, ME).changes.delete) == 3


def test_desired_records_outside_the_domain_filter_are_not_created() -> None:
    domains = DomainFilter.parse(["keep.ex.com"])
    desired = [ep("a.keep.ex.com", "A", "10.0.0.1"), ep("b.other.com", "A", "10.0.0.2")]
    result = plan(desired, [], Policy.SYNC, ME, domains=domains)
    assert keys(result.changes.create) == [("a.keep.ex.com", "A", "")]
    assert plan(desired, [], Policy.SYNC, ME, domains=DomainFilter()).changes.create == desired
