"""Zone scheduling with a fake clock: intervals, events, reruns, failures and removal."""

from __future__ import annotations

from shardsync.reconcile.schedule import ZoneSchedule


def drain(s: ZoneSchedule, now: float) -> list[str]:
    out = []
    while (zone := s.pop_due(now)) is not None:
        out.append(zone)
    return out


def test_new_zones_are_due_at_once_then_every_interval() -> None:
    s = ZoneSchedule(interval=60)
    s.add("a.com", now=0)
    s.add("b.com", now=0)
    assert sorted(drain(s, 0)) == ["a.com", "b.com"]
    s.finished("a.com", now=1)
    s.finished("b.com", now=2)
    assert s.next_due() == 61
    assert drain(s, 60) == []
    assert drain(s, 61) == ["a.com"]
    assert drain(s, 62) == ["b.com"]


def test_event_brings_a_zone_forward_only() -> None:
    s = ZoneSchedule(interval=60, event_delay=0.5)
    s.add("a.com", now=0)
    drain(s, 0)
    s.finished("a.com", now=0)
    s.mark_dirty("a.com", now=10)
    assert s.next_due() == 10.5
    assert drain(s, 10.5) == ["a.com"]
    s.finished("a.com", now=11)
    assert s.next_due() == 71
    s.mark_dirty("other.com", now=11)  # not owned: ignored
    assert len(s) == 1


def test_burst_while_running_collapses_into_one_rerun() -> None:
    s = ZoneSchedule(interval=60, event_delay=0)
    s.add("a.com", now=0)
    assert drain(s, 0) == ["a.com"]
    for t in range(5):
        s.mark_dirty("a.com", now=t)
    assert drain(s, 5) == []  # never handed out twice at once
    s.finished("a.com", now=5)
    assert drain(s, 5) == ["a.com"]
    s.finished("a.com", now=6)
    assert drain(s, 6) == []
    assert s.next_due() == 66


def test_failure_retries_after_backoff_and_counts() -> None:
    s = ZoneSchedule(interval=60)
    s.add("a.com", now=0)
    drain(s, 0)
    s.finished("a.com", now=0, retry_in=2)
    assert s.failures("a.com") == 1
    assert s.next_due() == 2
    drain(s, 2)
    s.finished("a.com", now=2)
    assert s.failures("a.com") == 0


def test_removed_zone_is_never_handed_out() -> None:
    s = ZoneSchedule(interval=60)
    s.add("a.com", now=0)
    s.add("b.com", now=0)
    s.remove("a.com")
    assert drain(s, 0) == ["b.com"]
    s.finished("a.com", now=1)  # a late finish of a released zone is ignored
    assert "a.com" not in s
    assert s.next_due() is None


def test_a_requeued_zone_comes_after_every_zone_already_due() -> None:
    s = ZoneSchedule(interval=60)
    for zone in ("a.com", "b.com", "c.com"):
        s.add(zone, now=0)
    first = s.pop_due(1)
    assert first is not None
    s.requeue(first, now=1)  # its first step done: the rest waits for the others' first steps
    assert drain(s, 1) == [*sorted({"a.com", "b.com", "c.com"} - {first}), first]
    assert s.failures(first) == 0


def test_a_zone_added_ahead_comes_before_zones_already_due() -> None:
    s = ZoneSchedule(interval=60)
    s.add("steady.com", now=0)
    assert s.pop_due(0) == "steady.com"
    s.finished("steady.com", now=0)  # due again at 60
    s.add("gained.com", now=70, ahead=True)
    assert drain(s, 70) == ["gained.com", "steady.com"]


def test_a_parked_zone_is_never_due_until_marked_dirty() -> None:
    s = ZoneSchedule(interval=60, event_delay=0.5)
    s.add("a.com", now=0)
    s.add("b.com", now=0)
    assert sorted(drain(s, 0)) == ["a.com", "b.com"]
    s.park("a.com")
    s.finished("b.com", now=0)
    assert s.next_due() == 60  # b's interval; a waits for no interval at all
    assert drain(s, 10_000) == ["b.com"]
    s.mark_dirty("a.com", now=10_001)
    assert drain(s, 10_001.5) == ["a.com"]
    s.park("gone.com")  # not owned: ignored
    assert len(s) == 2
