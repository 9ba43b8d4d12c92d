"""Test helpers for the fake provider tests."""

from __future__ import annotations

import threading
import time


class FakeClock:
    """A monotonic clock that moves only when told to, or by what is slept on it (`sleep`)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class Latency:
    """A stand-in for the fake store's latency sleep, so concurrency is checked without racing the clock.

    It counts the calls inside it at once (`most`), can make calls meet (`meet`: a barrier that breaks
    unless all its parties are in flight together) and can hold the first `hold` calls until `release`
    is set.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.inside = 0
        self.most = 0
        self.hold = 0
        self.entered = threading.Event()
        self.release = threading.Event()
        self.meet: threading.Barrier | None = None

    def __call__(self, seconds: float) -> None:
        with self.lock:
            self.inside += 1
            self.most = max(self.most, self.inside)
            held = self.hold > 0
            self.hold -= held
        self.entered.set()
        try:
            if self.meet is not None:
                self.meet.wait(timeout=5)
            time.sleep(seconds)
            if held and not self.release.wait(timeout=5):
                raise TimeoutError("held call never released")
        finally:
            with self.lock:
                self.inside -= 1
