"""shardsync.kube.health: an API outage's one warning rhythm, its end (every backoff cut short), its /readyz
reason."""

from __future__ import annotations

import itertools
import time

import anyio
import anyio.to_thread
import pytest

from shardsync.kube.health import MAX_STEP, ApiHealth


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def is_down(health: ApiHealth) -> bool:  # a call, so mypy does not keep an earlier assert's narrowing
    return health.down


def warnings_during(seconds: float, callers: int = 8, period: float = 0.1) -> list[float]:
    """When a warning is let through, with `callers` loops each failing every `period` seconds."""
    clock = Clock()
    health = ApiHealth(clock)
    start, allowed = clock.now, []
    while clock.now - start < seconds:
        for _ in range(callers):
            health.failed(0, "refused")
            if not health.quiet(0):
                allowed.append(clock.now - start)
        clock.now += period
    return allowed


def test_an_outage_warns_once_per_step_of_a_shared_backoff() -> None:
    first_minute = warnings_during(60)
    assert len(first_minute) <= 7, first_minute
    assert first_minute[0] == 0.0  # the first failure warns at once
    gaps = [b - a for a, b in itertools.pairwise(first_minute)]
    assert gaps == sorted(gaps)  # each step at least as long as the one before
    # Then at most one a minute, however many loops fail however often.
    ten_minutes = warnings_during(600, period=0.5)
    later = [t for t in ten_minutes if t >= 60]
    assert len(later) <= 540 / MAX_STEP + 1


def test_other_failures_always_warn_and_success_ends_the_outage() -> None:
    clock = Clock()
    health = ApiHealth(clock)
    assert not health.quiet(403) and not health.quiet(403)  # not an outage: the caller warns each time
    health.failed(403, "forbidden")
    assert not is_down(health) and health.reason() == ""
    health.failed(0, "NewConnectionError: refused")
    assert not health.quiet(0) and health.quiet(0)
    clock.now += 12
    assert is_down(health)
    assert health.reason() == "API server unreachable for 12s: NewConnectionError: refused"
    health.succeeded()
    assert not is_down(health) and health.reason() == ""
    health.failed(503, "Service Unavailable")  # a new outage starts the rhythm over
    assert not health.quiet(503)


@pytest.mark.anyio
async def test_the_end_of_an_outage_cuts_every_backoff_short() -> None:
    """A loop waiting out its backoff retries as soon as an outage of at least the first step ends, from
    whichever thread the success came: the informers' watches kept up to 8 s of backoff after a 30 s
    outage, and the first change after it waited for them."""
    health = ApiHealth(first_step=0.05)
    since = health.recoveries
    health.failed(0, "refused")
    woken: list[float] = []

    async def waiter() -> None:
        started = time.monotonic()
        assert await health.pause(30.0, since)
        woken.append(time.monotonic() - started)

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(waiter)
        await anyio.sleep(0.1)  # the outage has lasted past the first step
        await anyio.to_thread.run_sync(health.succeeded)  # as a call's worker thread reports it
    assert len(woken) == 3 and max(woken) < 1.0
    # An outage that ended between the failed call and the wait: no wait at all.
    assert await health.pause(30.0, since)
    # No outage ending: the whole backoff.
    started = time.monotonic()
    assert not await health.pause(0.1, health.recoveries)
    assert time.monotonic() - started >= 0.09


@pytest.mark.anyio
async def test_a_blip_shorter_than_the_first_step_wakes_nobody() -> None:
    """One call failing alone while the others succeed ends an 'outage' at once, again and again: it must
    not retry without backoff (a short blip leaves short backoffs anyway)."""
    clock = Clock()
    health = ApiHealth(clock)
    since = health.recoveries
    health.failed(0, "refused")
    clock.now += 0.5
    health.succeeded()
    assert health.recoveries == since
    with anyio.fail_after(1):
        assert not await health.pause(0.05, since)
