"""Planner parity with external-dns v0.22.0 (kubernetes-sigs/external-dns, tag v0.22.0).

external-dns resolves several objects claiming one RRset in two steps: each source merges its objects'
endpoints (endpoint/utils.go MergeEndpoints: same name, type, set identifier and TTL; CNAMEs only when
equal), then the plan picks one of what is left (plan/conflict.go PerResource). shardsync's sources work
per object, so both steps happen in the planner; these tables pin them against external-dns's tests.
"""

from __future__ import annotations

import pytest

from shardsync.records.endpoint import RESOURCE_LABEL, Endpoint
from shardsync.records.plan import ConflictReason, plan

ME = "me"
NAME = "foo.ex.com"


def claim(resource: str, rtype: str, *targets: str, ttl: int = 0) -> Endpoint:
    return Endpoint.new(NAME, rtype, targets, ttl=ttl, labels={RESOURCE_LABEL: resource})


def held(resource: str, rtype: str, *targets: str) -> Endpoint:
    return Endpoint.new(NAME, rtype, targets, labels={RESOURCE_LABEL: resource, "owner": ME})


# PerResource, in the plan. external-dns's rows use ingresses only; since its ingress source would have
# merged those before the plan, the rows here use objects of different kinds (service/ingress/crd), which
# reach the plan unmerged, as in external-dns.
RESOLVER_ROWS = [
    # (external-dns test, candidates, current, winning resource, published targets)
    # plan/conflict_test.go TestStrictResolver "should pick min one" (A)
    (
        "StrictResolver create min A",
        [
            claim("service/default/bar-192", "A", "192.168.0.1"),
            claim("ingress/default/bar-127", "A", "127.0.0.1"),
        ],
        None,
        "ingress/default/bar-127",
        ("127.0.0.1",),
    ),
    # plan/conflict_test.go TestStrictResolver "should pick min one" (CNAME v2 vs v1)
    (
        "StrictResolver create min CNAME",
        [
            claim("ingress/default/foo-v2", "CNAME", "v2.ex.net"),
            claim("service/default/foo-v1", "CNAME", "v1.ex.net"),
        ],
        None,
        "service/default/foo-v1",
        ("v1.ex.net",),
    ),
    # endpoint/endpoint.go Targets.IsLess: fewer targets first, an address before a name
    (
        "Targets.IsLess fewer targets",
        [claim("service/ns/a", "A", "1.1.1.1", "1.1.1.2"), claim("ingress/ns/b", "A", "9.9.9.9")],
        None,
        "ingress/ns/b",
        ("9.9.9.9",),
    ),
    (
        "Targets.IsLess addresses by value, not text",
        [claim("service/ns/a", "A", "10.0.0.1"), claim("ingress/ns/b", "A", "9.0.0.1")],
        None,
        "ingress/ns/b",
        ("9.0.0.1",),
    ),
    # plan/conflict_test.go TestStrictResolver "should pick existing resource"
    (
        "StrictResolver keep existing resource",
        [
            claim("service/default/bar-192", "A", "192.168.0.1"),
            claim("ingress/default/bar-127", "A", "127.0.0.1"),
        ],
        held("service/default/bar-192", "A", "192.168.0.1"),
        "service/default/bar-192",
        ("192.168.0.1",),
    ),
    # plan/conflict_test.go TestStrictResolver "should pick new if resource was deleted"
    (
        "StrictResolver holder gone",
        [
            claim("service/default/foo-v2", "CNAME", "v2.ex.net"),
            claim("crd/default/foo-v3", "CNAME", "v3.ex.net"),
        ],
        held("ingress/default/foo-v1", "CNAME", "v1.ex.net"),
        "service/default/foo-v2",
        ("v2.ex.net",),
    ),
    # plan/conflict_test.go TestStrictResolver "legacy record's resource value will not match"
    (
        "StrictResolver legacy holder without resource",
        [
            claim("service/default/bar-192", "A", "192.168.0.1"),
            claim("ingress/default/bar-127", "A", "127.0.0.1"),
        ],
        Endpoint.new(NAME, "A", ["192.168.0.1"], labels={"owner": ME}),
        "ingress/default/bar-127",
        ("127.0.0.1",),
    ),
]


@pytest.mark.parametrize(("test", "candidates", "current", "winner", "targets"), RESOLVER_ROWS)
def test_per_resource_resolver(
    test: str, candidates: list[Endpoint], current: Endpoint | None, winner: str, targets: tuple[str, ...]
) -> None:
    for order in (candidates, candidates[::-1]):
        result = plan(order, [current] if current else [], owner_id=ME)
        changed = result.changes.create or result.changes.update_new
        published = changed[0] if changed else current
        assert published is not None, test
        assert published.labels.get(RESOURCE_LABEL) == winner, test
        assert published.targets == targets, test
        assert [c.reason for c in result.conflicts] == [ConflictReason.SAME_RECORD], test


# MergeEndpoints, which external-dns runs inside each source: objects of one kind publish the union.
MERGE_ROWS = [
    # (external-dns test, candidates, published targets, conflict reported)
    # endpoint/utils_test.go TestMergeEndpoints "same key merged with sorted targets"
    (
        "MergeEndpoints same key",
        [claim("ingress/a/x", "A", "5.5.5.5"), claim("ingress/b/y", "A", "1.1.1.1")],
        ("1.1.1.1", "5.5.5.5"),
        False,
    ),
    # endpoint/utils_test.go TestMergeEndpoints "duplicate targets across merged endpoints deduplicated"
    (
        "MergeEndpoints dedup across",
        [claim("service/a/x", "A", "1.1.1.1", "2.2.2.2"), claim("service/b/y", "A", "2.2.2.2", "3.3.3.3")],
        ("1.1.1.1", "2.2.2.2", "3.3.3.3"),
        False,
    ),
    # endpoint/utils_test.go TestMergeEndpoints "identical CNAME endpoints deduplicated"
    (
        "MergeEndpoints identical CNAME",
        [claim("ingress/a/x", "CNAME", "lb.ex.net"), claim("ingress/b/y", "CNAME", "lb.ex.net")],
        ("lb.ex.net",),
        False,
    ),
    # endpoint/utils_test.go TestMergeEndpoints "CNAME endpoints not merged" (then PerResource: min)
    (
        "MergeEndpoints CNAME not merged",
        [claim("ingress/a/x", "CNAME", "b.ex.net"), claim("ingress/b/y", "CNAME", "a.ex.net")],
        ("a.ex.net",),
        True,
    ),
    # endpoint/utils_test.go TestMergeEndpoints "same key with different TTL not merged" (then PerResource)
    (
        "MergeEndpoints different TTL",
        [claim("ingress/a/x", "A", "1.1.1.1", ttl=60), claim("ingress/b/y", "A", "2.2.2.2", ttl=300)],
        ("1.1.1.1",),
        True,
    ),
    # tests/integration/scenarios/tests.yaml known-limitation-cross-source-dedup-not-applied: a Service and
    # two Ingresses; the Ingresses merge, the Service stays apart and PerResource picks the smaller targets
    (
        "scenario cross-source not merged",
        [
            claim("service/default/test-service", "A", "1.2.3.4"),
            claim("ingress/default/test-ingress", "A", "203.0.113.10"),
            claim("ingress/kube-system/same-host", "A", "1.2.3.4"),
        ],
        ("1.2.3.4",),
        True,
    ),
    # tests/integration/scenarios/tests.yaml service-and-ingress-same-hostname-and-ip-dedup: equal content
    # from two kinds is published once, with nothing to report
    (
        "scenario same-ip dedup",
        [claim("service/default/s", "A", "1.2.3.4"), claim("ingress/default/i", "A", "1.2.3.4")],
        ("1.2.3.4",),
        False,
    ),
]


@pytest.mark.parametrize(("test", "candidates", "targets", "conflict"), MERGE_ROWS)
def test_merge_per_kind(
    test: str, candidates: list[Endpoint], targets: tuple[str, ...], conflict: bool
) -> None:
    for order in (candidates, candidates[::-1]):
        result = plan(order, [], owner_id=ME)
        (created,) = result.changes.create
        assert created.targets == targets, test
        assert bool(result.conflicts) is conflict, test


def test_merged_record_keeps_its_holder_as_resource() -> None:
    # Which object's labels a merged endpoint carries is list order in external-dns (the first one); here
    # it is the object that already holds the record, so its TXT record's resource does not flap.
    candidates = [claim("ingress/a/x", "A", "1.1.1.1"), claim("ingress/b/y", "A", "2.2.2.2")]
    result = plan(candidates, [held("ingress/b/y", "A", "2.2.2.2")], owner_id=ME)
    (new,) = result.changes.update_new
    assert new.targets == ("1.1.1.1", "2.2.2.2")
    assert new.labels[RESOURCE_LABEL] == "ingress/b/y"
