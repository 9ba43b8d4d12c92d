"""Time sources for the sharding rules, and the Kubernetes wire format of lease timestamps.

Every timing rule of design §2 measures intervals on the observer's own monotonic clock (`monotonic()`,
seconds); wall time (`now()`, an aware UTC datetime) is only ever *written* (renewTime, createdAt) or shown
to people, never compared with a remote timestamp. The pure rules take `now: float` as an argument; the
I/O loops read it from a `Clock`, and tests drive a `FakeClock` by hand.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """A monotonic clock for intervals and a wall clock for timestamps that are written or shown."""

    def monotonic(self) -> float:
        """Seconds on a clock that never jumps; only differences mean anything."""
        ...

    def now(self) -> datetime:
        """The current wall time, timezone-aware in UTC."""
        ...


class SystemClock:
    """The process's real clocks: `time.monotonic()` (as anyio's asyncio backend uses) and UTC wall time."""

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now(UTC)


class FakeClock:
    """A clock that moves only when a test says so; the wall clock can also be jumped on its own.

    `jump_wall` changes wall time without touching monotonic time, which is how tests show that no rule
    depends on the wall clock (an NTP step, a skewed node).
    """

    def __init__(self, start: float = 1000.0, wall: datetime | None = None) -> None:
        self._mono = start
        self._wall = wall if wall is not None else datetime(2026, 1, 1, tzinfo=UTC)

    def monotonic(self) -> float:
        return self._mono

    def now(self) -> datetime:
        return self._wall

    def advance(self, seconds: float) -> None:
        """Move both clocks forward by `seconds` (never backwards: a monotonic clock cannot)."""
        if seconds < 0:
            raise ValueError("a monotonic clock does not go backwards")
        self._mono += seconds
        self._wall += timedelta(seconds=seconds)

    def jump_wall(self, seconds: float) -> None:
        """Step the wall clock only (either direction), as NTP or a mis-set node would."""
        self._wall += timedelta(seconds=seconds)


def wall_at(clock: Clock, monotonic_time: float) -> datetime:
    """The wall time at which `clock.monotonic()` read `monotonic_time` (for display, e.g. lastRenewSeen)."""
    return clock.now() - timedelta(seconds=clock.monotonic() - monotonic_time)


def microtime(moment: datetime) -> str:
    """Kubernetes MicroTime text (RFC 3339, microseconds, `Z`), as in a Lease's renewTime/acquireTime."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def rfc3339(moment: datetime) -> str:
    """RFC 3339 text in UTC with second precision and `Z`, as Kubernetes writes metav1.Time."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
