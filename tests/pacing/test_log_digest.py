"""The failure digest: a failure shared by many zones is one line per window with the count and an example;
the first of a new kind is logged at once; every failure is still logged at debug."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from shardsync.logs import get_logger
from shardsync.pacing.log_digest import MAX_GROUPS, LogDigest, shape, window_for
from tests.waits import eventually

log = get_logger("shardsync.test_digest")
other = get_logger("shardsync.test_digest_other")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def lines(caplog: pytest.LogCaptureFixture, level: int = logging.WARNING) -> list[dict[str, Any]]:
    """The captured records at `level` and above: event, level and fields."""
    return [
        {"event": r.getMessage(), "level": r.levelname.lower(), **getattr(r, "kv", {})}
        for r in caplog.records
        if r.levelno >= level
    ]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def captured(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger="shardsync")
    return caplog


def unreachable(zone: str, port: int = 5353) -> str:
    return f"axfr of zone {zone} at 127.0.0.1:{port}: ConnectionRefusedError: [Errno 111] Connection refused"


def test_a_failure_of_fifty_zones_is_one_line_at_once_and_one_per_window(
    clock: FakeClock, captured: pytest.LogCaptureFixture
) -> None:
    digest = LogDigest(window=10.0, clock=clock)
    zones = [f"z{i}.example.org" for i in range(50)]
    for zone in zones:
        digest.warning(log, "zone reconcile failed", zone=zone, kind="unreachable", error=unreachable(zone))
    first = lines(captured)
    assert first == [
        {
            "event": "zone reconcile failed",
            "level": "warning",
            "zone": "z0.example.org",
            "kind": "unreachable",
            "error": unreachable("z0.example.org"),
        }
    ]
    # every failure is there at debug, the per-zone detail
    assert [r["zone"] for r in lines(captured, logging.DEBUG)] == zones

    clock.now += 10.0
    digest.flush()
    summary = lines(captured)[1:]
    assert summary == [
        {
            "event": "zone reconcile failed",
            "level": "warning",
            "kind": "unreachable",
            "zones": 50,
            "count": 50,
            "window": "10s",
            "zone": "z49.example.org",
            "error": unreachable("z49.example.org"),
        }
    ]


def test_twenty_seconds_of_backoff_retries_stay_within_a_few_lines(
    clock: FakeClock, captured: pytest.LogCaptureFixture
) -> None:
    # 50 zones retrying every 0.5, 1, 2, 4, 8 s: about 300 failures in 20 s, as the issue measured.
    digest = LogDigest(window=window_for(5.0), clock=clock)
    due = {f"z{i}.example.org": (i, 10) for i in range(50)}  # (next failure, delay), in 1/20 s ticks
    start, failures = clock.now, 0
    for tick in range(400):  # 20 s
        clock.now = start + tick / 20
        if clock.now >= digest._flush_at:  # what `run` does at the end of each window
            digest.flush()
        for zone, (at, delay) in due.items():
            if tick >= at:
                digest.warning(
                    log, "zone reconcile failed", zone=zone, kind="unreachable", error=unreachable(zone)
                )
                failures += 1
                due[zone] = (at + delay, delay * 2)
    clock.now = start + 20.0
    digest.flush()
    assert failures > 250
    warnings = lines(captured)
    assert len(warnings) == 3, warnings  # at once, then one per 10 s window
    assert [w.get("zones") for w in warnings] == [None, 50, 50]


def test_a_new_kind_or_cause_is_logged_at_once(clock: FakeClock, captured: pytest.LogCaptureFixture) -> None:
    digest = LogDigest(window=60.0, clock=clock)
    digest.warning(log, "zone reconcile failed", zone="a.org", kind="unreachable", error=unreachable("a.org"))
    digest.warning(log, "zone reconcile failed", zone="b.org", kind="throttled", error="rate exceeded")
    digest.warning(
        log, "zone reconcile failed", zone="c.org", kind="unreachable", error="no answer within 5s"
    )
    digest.warning(
        other, "zone reconcile failed", zone="d.org", kind="unreachable", error=unreachable("d.org")
    )
    digest.error(log, "zone reconcile failed", zone="e.org", kind="unreachable", error=unreachable("e.org"))
    digest.warning(log, "listing zones failed", error=unreachable("a.org"))
    assert [(w["level"], w.get("zone")) for w in lines(captured)] == [
        ("warning", "a.org"),
        ("warning", "b.org"),
        ("warning", "c.org"),
        ("warning", "d.org"),  # another logger
        ("error", "e.org"),  # another level
        ("warning", None),  # another event
    ]
    # nothing was held back: no summary is due
    digest.flush()
    assert len(lines(captured)) == 6


def test_a_group_quiet_for_a_window_is_news_again(
    clock: FakeClock, captured: pytest.LogCaptureFixture
) -> None:
    digest = LogDigest(window=10.0, clock=clock)

    def fail(zone: str) -> None:
        digest.warning(log, "zone reconcile failed", zone=zone, kind="unreachable", error=unreachable(zone))

    fail("a.org")
    clock.now += 10.0
    fail("b.org")  # the window ended: flushed first (nothing held back), the group still live
    assert len(lines(captured)) == 1
    clock.now += 10.0
    digest.flush()  # b.org was held back: one summary
    assert lines(captured)[-1]["zones"] == 1
    clock.now += 10.0
    digest.flush()  # a whole window without a failure: the group is forgotten
    fail("c.org")
    assert [w["zone"] for w in lines(captured)] == ["a.org", "b.org", "c.org"]


def test_subjectless_failures_are_counted(clock: FakeClock, captured: pytest.LogCaptureFixture) -> None:
    digest = LogDigest(window=60.0, clock=clock)
    for _ in range(5):
        digest.warning(log, "self-fenced: member lease not renewed in time, writes stopped", generation=3)
    clock.now += 60.0
    digest.flush()
    assert lines(captured) == [
        {
            "event": "self-fenced: member lease not renewed in time, writes stopped",
            "level": "warning",
            "generation": 3,
        },
        {
            "event": "self-fenced: member lease not renewed in time, writes stopped",
            "level": "warning",
            "count": 5,
            "window": "60s",
        },
    ]


def test_shape_masks_the_subject_ids_and_numbers() -> None:
    assert shape(unreachable("a.org", 53), "a.org") == shape(unreachable("b.org", 5353), "b.org")
    assert shape("request 3f2a9c1e-77b0-4d1e-9a8b-0c1d2e3f4a5b failed", "") == shape(
        "request 00000000-aaaa-bbbb-cccc-ddddeeeeffff failed", ""
    )
    assert shape("no answer within 5s", "a.org") != shape(unreachable("a.org"), "a.org")
    assert len(shape("x" * 5000)) <= 300


def test_groups_are_bounded(clock: FakeClock, captured: pytest.LogCaptureFixture) -> None:
    digest = LogDigest(window=60.0, clock=clock)
    for i in range(3 * MAX_GROUPS):
        digest.warning(
            log, "zone reconcile failed", zone="a.org", kind="error", error=f"cause {'x' * (i + 1)}"
        )
    # one line per distinct cause up to the bound, then one for everything past it
    assert len(lines(captured)) == MAX_GROUPS + 1
    assert len(digest._groups) == MAX_GROUPS + 1


def test_window_follows_the_interval_within_bounds() -> None:
    assert window_for(1.0) == 10.0
    assert window_for(30.0) == 30.0
    assert window_for(600.0) == 60.0
    with pytest.raises(ValueError):
        LogDigest(window=0)


def fail_twice(digest: LogDigest) -> None:
    for zone in ("a.org", "b.org"):
        digest.warning(log, "zone reconcile failed", zone=zone, kind="unreachable", error=unreachable(zone))


@pytest.mark.anyio
@pytest.mark.parametrize("window", [0.05, 3600.0])
async def test_run_flushes_when_the_window_ends_and_when_stopped(
    window: float, captured: pytest.LogCaptureFixture
) -> None:
    digest = LogDigest(window=window)
    async with anyio.create_task_group() as tg:
        tg.start_soon(digest.run)
        fail_twice(digest)
        if window < 1:
            await eventually(lambda: len(lines(captured)) == 2)  # the window ended
        else:
            await anyio.lowlevel.checkpoint()
            assert len(lines(captured)) == 1
        tg.cancel_scope.cancel()  # a stop (or the end of a --once run) says what was held back
    assert len(lines(captured)) == 2
    assert lines(captured)[1]["zones"] == 2 and lines(captured)[1]["count"] == 2
