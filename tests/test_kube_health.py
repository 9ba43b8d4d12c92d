"""shardsync.kube_health: an API outage's one warning rhythm, its end, its /readyz reason."""

from __future__ import annotations

import itertools

from shardsync.kube_health import MAX_STEP, ApiHealth


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
