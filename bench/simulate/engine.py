"""The discrete-event core and the ownership ledger.

`Engine` keeps a queue of timed callbacks and moves a `FakeClock` forward as it runs them (first in, first
out among equal times, so a run depends on the seed only). Each callback receives its scheduled time as
`now`: the protocol functions are given that exact value, and the clock is used for the wall time written
into Leases and assignments.

`Ledger` records which replica runs each zone: a replica's acquisitions and releases, and a crashed
replica's zones, which nobody runs from the crash on. A zone run by two replicas at once would be an
overlap (the safety invariant says never; the simulation counts them).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable

from shardsync.sharding.clock import FakeClock

Action = Callable[[float], None]


class Engine:
    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.now = clock.monotonic()
        self.processed = 0
        self._queue: list[tuple[float, int, Action]] = []
        self._seq = 0

    def at(self, t: float, action: Action) -> None:
        """Run `action(t)` at `t` (never in the past: `now` at the earliest)."""
        heapq.heappush(self._queue, (max(t, self.now), self._seq, action))
        self._seq += 1

    def _move(self, t: float) -> None:
        if t > self.now:
            self.clock.advance(max(0.0, t - self.clock.monotonic()))
            self.now = t

    def run_until(self, end: float) -> None:
        """Run every callback due at or before `end`, then stand at `end`."""
        queue = self._queue
        while queue and queue[0][0] <= end:
            t, _, action = heapq.heappop(queue)
            self._move(t)
            action(t)
            self.processed += 1
        self._move(end)


class Ledger:
    """Who runs each zone. `full` while every zone runs at exactly one replica; `became_full_at` is when
    that last became true. `acquired_at` (from `measure`) is each zone's last acquisition."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.runner: dict[str, str] = {}
        self.released_at: dict[str, float] = {}
        self.acquired_at: dict[str, float] = {}
        self.overlaps = 0
        self.longest_unowned = 0.0
        self.full = False
        self.became_full_at: float | None = None
        self._measuring = False

    def measure(self) -> None:
        """From now on, keep acquisition times and the longest unowned gap (the event's figures)."""
        self._measuring = True
        self.longest_unowned = 0.0
        self.acquired_at.clear()

    def run(self, zones: Iterable[str], identity: str, now: float) -> None:
        runner, released = self.runner, self.released_at
        for zone in zones:
            other = runner.get(zone)
            if other is not None and other != identity:
                self.overlaps += 1
            runner[zone] = identity
            since = released.pop(zone, None)
            if self._measuring:
                self.acquired_at[zone] = now
                if since is not None and now - since > self.longest_unowned:
                    self.longest_unowned = now - since
        if not self.full and len(runner) == self.total:
            self.full = True
            self.became_full_at = now

    def stop(self, zones: Iterable[str], identity: str, now: float) -> None:
        runner = self.runner
        for zone in zones:
            if runner.get(zone) == identity:
                del runner[zone]
                self.released_at[zone] = now
        if len(runner) < self.total:
            self.full = False
