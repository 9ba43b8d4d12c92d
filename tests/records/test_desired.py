"""The desired-state index: which zones an object change touches, and each zone's endpoints."""

from __future__ import annotations

from shardsync.records.desired import DesiredIndex
from shardsync.records.endpoint import Endpoint


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


# -- per-shard state (restricted) -----------------------------------------------------------------------


def test_restricted_index_holds_only_kept_zones_and_rebuilds_a_gained_one() -> None:
    idx = DesiredIndex(["a.com", "b.com"], restricted=True)
    asked: list[set[str]] = []
    idx.on_rebuild = asked.append
    idx.keep("a.com")
    # Touched zones are reported whether held or not (a zone not held has nothing to compare with).
    assert idx.set_object("service/ns/x", [a("x.a.com"), a("x.b.com")]) == {"a.com", "b.com"}
    assert idx.set_object("service/ns/y", [a("y.b.com")]) == {"b.com"}
    assert idx.desired("a.com") == [a("x.a.com")]
    assert idx.desired("b.com") == []
    assert len(idx) == 1
    assert sorted(idx.zones_with_endpoints()) == ["a.com", "b.com"]

    idx.keep("b.com")  # both objects are partial: translated again before b.com is planned
    assert asked == [{"service/ns/x", "service/ns/y"}]
    assert not idx.ready("b.com") and idx.ready("a.com")
    idx.set_object("service/ns/x", [a("x.a.com"), a("x.b.com")])
    assert not idx.ready("b.com")
    assert idx.set_object("service/ns/y", [a("y.b.com")]) == {"b.com"}
    assert idx.ready("b.com")
    assert sorted(e.dns_name for e in idx.desired("b.com")) == ["x.b.com", "y.b.com"]

    idx.drop("a.com")  # freed; x is partial again, y (all in b.com) stays whole
    assert idx.desired("a.com") == []
    idx.keep("a.com")
    assert asked[-1] == {"service/ns/x"}


def test_restricted_keeps_whole_objects_without_rebuilding_and_unplaced_endpoints_always() -> None:
    idx = DesiredIndex(["a.com"], restricted=True, pinned=lambda key: key.startswith("ptr/"))
    asked: list[set[str]] = []
    idx.on_rebuild = asked.append
    idx.set_object("ptr/192.0.2.1", [a("p.a.com")])
    idx.set_object("service/ns/x", [a("x.z.org")])  # in no known zone: held
    idx.keep("a.com")
    assert asked == [] and idx.ready("a.com")
    assert idx.desired("a.com") == [a("p.a.com")]
    assert list(idx.unplaced()) == ["service/ns/x"]


def test_restricted_zone_list_change_rebuilds_partial_objects() -> None:
    idx = DesiredIndex(["a.com", "b.com"], restricted=True)
    asked: list[set[str]] = []
    idx.on_rebuild = asked.append
    idx.keep("a.com")
    idx.set_object("service/ns/x", [a("x.b.com")])  # partial: nothing held
    idx.set_object("service/ns/w", [a("w.a.com")])  # whole
    idx.set_zones(["a.com", "b.com", "x.b.com"])
    assert asked == [{"service/ns/x"}]
    assert not idx.ready("a.com")  # x might now fall in a.com: wait for it
    idx.set_object("service/ns/x", [a("x.b.com")])
    assert idx.ready("a.com")
    assert idx.desired("a.com") == [a("w.a.com")]


def test_expected_zones_are_held_before_the_worker_runs_them_and_gaining_them_costs_no_rebuild() -> None:
    idx = DesiredIndex(["a.com", "b.com", "c.com"], restricted=True)
    asked: list[set[str]] = []
    freed: list[set[str]] = []
    idx.on_rebuild, idx.on_freed = asked.append, freed.append
    assert not idx.holds_nothing_of("service/ns/y")  # nothing known yet: keep everything
    idx.expect(["a.com"])
    idx.set_object("service/ns/x", [a("x.a.com")])
    idx.set_object("service/ns/y", [a("y.b.com")])
    assert idx.desired("a.com") == [a("x.a.com")]
    assert idx.holds_nothing_of("service/ns/y") and not idx.holds_nothing_of("service/ns/x")
    idx.keep("a.com")  # the worker gains an expected zone: its endpoints are there already
    assert asked == [] and idx.ready("a.com")
    idx.expect(["b.com"])  # a.com stays held (kept), b.com is rebuilt from the objects that touch it
    assert asked == [{"service/ns/y"}] and not idx.ready("b.com")
    idx.set_object("service/ns/y", [a("y.b.com")])
    assert idx.ready("b.com") and idx.desired("b.com") == [a("y.b.com")]
    idx.drop("b.com")  # not kept: still expected, still held
    assert idx.desired("b.com") == [a("y.b.com")]
    idx.drop("a.com")  # neither kept nor expected any more: freed
    assert idx.desired("a.com") == [] and freed == [{"service/ns/x"}]
    idx.expect(["c.com"])  # b.com leaves too
    assert idx.desired("b.com") == [] and freed[-1] == {"service/ns/y"}


def test_an_object_whose_names_reach_no_held_zone_is_left_untranslated_and_swept_for() -> None:
    idx = DesiredIndex(["a.com", "b.com", "sub.b.com", "c.com"], restricted=True)
    sweeps: list[dict[str, int]] = []
    idx.on_sweep = sweeps.append
    assert not idx.defer("service/ns/x", ["x.b.com"])  # nothing held or expected yet: translate it
    idx.expect(["a.com"])
    assert sweeps == []  # nothing left untranslated yet: nothing to sweep for
    assert not idx.defer("service/ns/y", ["y.a.com"])  # its zone is held
    assert not idx.defer("service/ns/n", ["y.nowhere.net"])  # would fall in no zone
    assert not idx.defer("service/ns/e", [])  # no names: only a translation says what it has
    assert idx.defer("service/ns/x", ["x.b.com"]) and idx.defer("service/ns/s", ["b.com"])
    assert idx.zones_with_endpoints() == []  # nothing is kept of them
    idx.keep("sub.b.com")  # may hold records of objects left untranslated: waits for a sweep
    [sweep] = sweeps
    assert set(sweep) == {"sub.b.com"} and not idx.ready("sub.b.com")
    idx.swept(sweep, ["service/ns/s"])  # s's names reach it (sub.b.com lies under b.com)
    assert not idx.ready("sub.b.com")
    idx.set_object("service/ns/s", [a("b.com")])  # translated: nothing in sub.b.com after all
    assert idx.ready("sub.b.com")

    idx.keep("c.com")  # nothing left untranslated reaches it: no sweep
    assert len(sweeps) == 1 and idx.ready("c.com")
    idx.drop("c.com")
    idx.keep("b.com")
    first = sweeps[-1]
    idx.drop("b.com")
    idx.keep("b.com")  # held again before the first sweep ended: only the newer one counts
    second = sweeps[-1]
    idx.swept(first, [])
    assert not idx.ready("b.com")
    idx.swept(second, ["service/ns/x"])
    idx.set_object("service/ns/x", [a("x.b.com")])
    assert not idx.ready("b.com")  # s, translated with nothing held there, is read again as well
    idx.set_object("service/ns/s", [a("b.com")])
    assert idx.ready("b.com") and sorted(e.dns_name for e in idx.desired("b.com")) == ["b.com", "x.b.com"]

    swept = len(sweeps)
    idx.set_zones(["a.com", "b.com", "sub.b.com", "c.com", "new.a.com"])
    assert len(sweeps) == swept  # every object left untranslated has been read back: nothing to sweep
    assert idx.defer("service/ns/c", ["c.c.com"])
    idx.set_zones(["a.com", "b.com", "sub.b.com", "c.com"])  # its names may fall in a held zone now
    assert set(sweeps[-1]) == {"a.com", "b.com", "sub.b.com"} and not idx.ready("a.com")


def test_an_object_indexed_already_is_left_untranslated_only_when_nothing_of_it_is_held() -> None:
    idx = DesiredIndex(["a.com", "b.com"], restricted=True)
    sweeps: list[dict[str, int]] = []
    idx.on_sweep = sweeps.append
    idx.expect(["a.com"])
    idx.set_object("service/ns/x", [a("x.a.com")])
    assert not idx.defer("service/ns/x", ["x.b.com"])  # only a translation takes x.a.com away
    assert idx.desired("a.com") == [a("x.a.com")]
    idx.set_object("service/ns/z", [a("z.b.com")])  # translated, all of it elsewhere
    assert not idx.defer("service/ns/z", ["z.a.com"])  # changed to reach a held zone: translate it
    assert idx.defer("service/ns/z", ["z.b.com"])  # changed (a peer wrote its status, say): not translated
    assert idx.zones_with_endpoints() == ["a.com"]  # nothing is kept of it any more
    assert not idx.holds_nothing_of("service/ns/z")  # not indexed: nothing to forget either
    idx.keep("b.com")  # a zone its names reach, held later, waits for a sweep that reads it back
    [sweep] = sweeps
    assert set(sweep) == {"b.com"} and not idx.ready("b.com")
    idx.swept(sweep, ["service/ns/z"])
    idx.set_object("service/ns/z", [a("z.b.com")])
    assert idx.ready("b.com") and idx.desired("b.com") == [a("z.b.com")]


def test_a_kinds_nameless_objects_are_left_out_when_they_publish_nothing() -> None:
    idx = DesiredIndex(["a.com", "b.com"], restricted=True)
    idx.expect(["a.com"])
    assert not idx.defer("service/ns/e", [])  # a kind's nameless object may still need translating
    assert idx.defer("pod/ns/e", [], unnamed=True)  # the pod kind's: it publishes nothing
    idx.set_object("pod/ns/f", [a("f.b.com")])  # translated when it had names elsewhere
    assert idx.defer("pod/ns/f", [], unnamed=True) and idx.zones_with_endpoints() == []
    idx.set_object("pod/ns/g", [a("g.a.com")])
    assert not idx.defer("pod/ns/g", [], unnamed=True)  # held here: only a translation takes it away
    assert not idx.defer("pod/ns/h", ["h.nowhere.net"], unnamed=True)  # in no zone: translated, reported
