"""When each owned zone reconciles next: its interval, soon after a source change, later after a failure.

Pure bookkeeping over a heap, driven by the caller's clock, so every timing rule is tested without
sleeping. A zone is never handed out twice at once: marking a running zone dirty queues one rerun for
when it finishes, which is how a burst of events on one zone collapses into at most one extra reconcile.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

_AHEAD = 1e9  # seconds: earlier than any zone can be due


@dataclass(slots=True)
class _ZoneTimes:
    due: float
    running: bool = False
    rerun: bool = False
    failures: int = 0


@dataclass(slots=True)
class ZoneSchedule:
    """Due times of owned zones: `interval` after a successful reconcile, `event_delay` after a change."""

    interval: float
    event_delay: float = 0.0
    _zones: dict[str, _ZoneTimes] = field(default_factory=dict)
    _heap: list[tuple[float, str]] = field(default_factory=list)

    def _push(self, zone: str, due: float) -> None:
        self._zones[zone].due = due
        heapq.heappush(self._heap, (due, zone))

    def add(self, zone: str, now: float, ahead: bool = False) -> None:
        """Own `zone` from now on; it is due at once (`ahead`: before every zone already due, as a zone
        taken over from a failed peer is ownerless until its fence is ours)."""
        if zone not in self._zones:
            due = now - _AHEAD if ahead else now
            self._zones[zone] = _ZoneTimes(due=due)
            heapq.heappush(self._heap, (due, zone))

    def remove(self, zone: str) -> None:
        # Heap entries of a removed zone are skipped lazily when popped.
        self._zones.pop(zone, None)

    def __contains__(self, zone: str) -> bool:
        return zone in self._zones

    def __len__(self) -> int:
        return len(self._zones)

    def zones(self) -> list[str]:
        return list(self._zones)

    def mark_dirty(self, zone: str, now: float) -> None:
        """A source change touched `zone`: reconcile it after `event_delay`, or after its current run."""
        times = self._zones.get(zone)
        if times is None:
            return
        if times.running:
            times.rerun = True
        elif times.due > now + self.event_delay:
            self._push(zone, now + self.event_delay)

    def next_due(self) -> float | None:
        """When the earliest zone is due (None when nothing is waiting)."""
        while self._heap:
            due, zone = self._heap[0]
            times = self._zones.get(zone)
            if times is None or times.running or times.due != due:
                heapq.heappop(self._heap)  # stale entry
                continue
            return due
        return None

    def pop_due(self, now: float) -> str | None:
        """The next zone due at `now`, marked running; None when none is due."""
        due = self.next_due()
        if due is None or due > now:
            return None
        _, zone = heapq.heappop(self._heap)
        self._zones[zone].running = True
        return zone

    def finished(self, zone: str, now: float, retry_in: float | None = None) -> None:
        """A reconcile of `zone` ended: success (`retry_in` None) or failure retried after `retry_in`."""
        times = self._zones.get(zone)
        if times is None:
            return
        times.running = False
        if retry_in is None:
            times.failures = 0
            due = now + (self.event_delay if times.rerun else self.interval)
        else:
            times.failures += 1
            due = now + (min(retry_in, self.event_delay) if times.rerun else retry_in)
        times.rerun = False
        self._push(zone, due)

    def requeue(self, zone: str, now: float) -> None:
        """A first step of `zone`'s run is done (its fence): the rest is due now, after every zone already
        due, so the first steps of many zones gained at once all come before any of their full runs."""
        times = self._zones.get(zone)
        if times is None:
            return
        times.running = times.rerun = False
        self._push(zone, now)

    def park(self, zone: str) -> None:
        """A first step of `zone`'s run is done and the rest must wait for the caller (the desired state is
        not whole yet): not due until `mark_dirty`."""
        times = self._zones.get(zone)
        if times is None:
            return
        times.running = times.rerun = False
        times.due = math.inf

    def failures(self, zone: str) -> int:
        times = self._zones.get(zone)
        return times.failures if times else 0
