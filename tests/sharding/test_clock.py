"""The fake clock moves only when told; wall time is only formatted, and can jump on its own."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shardsync.sharding.clock import FakeClock, SystemClock, microtime, rfc3339, wall_at


def test_fake_clock_advances_both_clocks_together() -> None:
    clock = FakeClock(start=10.0, wall=datetime(2026, 1, 1, tzinfo=UTC))
    clock.advance(2.5)
    assert clock.monotonic() == 12.5
    assert clock.now() == datetime(2026, 1, 1, 0, 0, 2, 500000, tzinfo=UTC)
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_wall_jump_leaves_monotonic_time_alone() -> None:
    clock = FakeClock(start=10.0)
    before = clock.now()
    clock.jump_wall(-3600)
    assert clock.monotonic() == 10.0
    assert clock.now() == before - timedelta(hours=1)


def test_wall_at_maps_a_monotonic_instant_to_wall_time() -> None:
    clock = FakeClock(start=100.0)
    seen = clock.monotonic()
    clock.advance(7)
    assert clock.now() - wall_at(clock, seen) == timedelta(seconds=7)


def test_kubernetes_time_formats() -> None:
    moment = datetime(2026, 3, 4, 5, 6, 7, 89, tzinfo=UTC)
    assert microtime(moment) == "2026-03-04T05:06:07.000089Z"
    assert rfc3339(moment) == "2026-03-04T05:06:07Z"


def test_system_clock_is_aware_and_monotonic() -> None:
    clock = SystemClock()
    a = clock.monotonic()
    assert clock.monotonic() >= a
    assert clock.now().tzinfo is not None
