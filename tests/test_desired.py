"""The desired-state index: which zones an object change touches, and each zone's endpoints."""

from __future__ import annotations

from shardsync.desired import DesiredIndex
from shardsync.endpoint import Endpoint


def a(name: str, ip: str = "192.0.2.1") -> Endpoint:
    return Endpoint.new(name, "A", [ip])


def test_set_object_reports_touched_zones_only() -> None:
    idx = DesiredIndex(["a.com", "b.com", "c.com"])
    assert idx.set_object("service/ns/x", [a("www.a.com"), a("www.b.com")]) == {"a.com", "b.com"}
    assert idx.desired("a.com") == [a("www.a.com")]
    # same endpoints again: nothing touched
    assert idx.set_object("service/ns/x", [a("www.a.com"), a("www.b.com")]) == set()
    # one target changes in b.com only
    assert idx.set_object("service/ns/x", [a("www.a.com"), a("www.b.com", "192.0.2.9")]) == {"b.com"}
    # moving a name from b.com to c.com touches both
    assert idx.set_object("service/ns/x", [a("www.a.com"), a("www.c.com")]) == {"b.com", "c.com"}
    assert idx.desired("b.com") == []
    # deletion
    assert idx.set_object("service/ns/x", []) == {"a.com", "c.com"}
    assert len(idx) == 0


def test_several_objects_share_a_zone() -> None:
    idx = DesiredIndex(["a.com"])
    idx.set_object("service/ns/x", [a("x.a.com")])
    idx.set_object("ingress/ns/y", [a("y.a.com")])
    assert sorted(e.dns_name for e in idx.desired("a.com")) == ["x.a.com", "y.a.com"]
    idx.set_object("service/ns/x", [])
    assert [e.dns_name for e in idx.desired("a.com")] == ["y.a.com"]


def test_unplaced_endpoints_are_kept_aside_and_placed_when_zone_appears() -> None:
    idx = DesiredIndex(["a.com"])
    idx.set_object("service/ns/x", [a("www.a.com"), a("www.z.org")])
    assert list(idx.unplaced()) == ["service/ns/x"]
    assert idx.set_zones(["a.com", "z.org"]) == {"z.org"}
    assert idx.desired("z.org") == [a("www.z.org")]
    assert idx.unplaced() == {}


def test_most_specific_zone_wins() -> None:
    idx = DesiredIndex(["a.com", "sub.a.com"])
    idx.set_object("k", [a("x.sub.a.com"), a("x.a.com")])
    assert idx.desired("sub.a.com") == [a("x.sub.a.com")]
    assert idx.desired("a.com") == [a("x.a.com")]
