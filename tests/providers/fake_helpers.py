"""Test helpers for the fake provider tests."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from shardsync.providers.fake.store import FakeStore
from shardsync.records.endpoint import Changes


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
    is set. `sleep_async` is the same for the HTTP server's calls, which share one event loop.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.inside = 0
        self.most = 0
        self.hold = 0
        self.entered = threading.Event()
        self.release = threading.Event()
        self.meet: threading.Barrier | None = None
        self.met = False

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

    async def sleep_async(self, seconds: float) -> None:
        with self.lock:
            self.inside += 1
            self.most = max(self.most, self.inside)
            held = self.hold > 0
            self.hold -= held
            if self.meet is not None and self.inside >= self.meet.parties:
                self.met = True
        self.entered.set()
        try:
            # The calls share one event loop: poll, never block it.
            deadline = time.monotonic() + 5
            while self.meet is not None and not self.met:
                if time.monotonic() > deadline:
                    raise threading.BrokenBarrierError
                await asyncio.sleep(0.001)
            await asyncio.sleep(seconds)
            while held and not self.release.is_set():
                if time.monotonic() > deadline:
                    raise TimeoutError("held call never released")
                await asyncio.sleep(0.001)
        finally:
            with self.lock:
                self.inside -= 1


@contextmanager
def change_in_flight(store: FakeStore, latency: Latency, zone: str, changes: Changes) -> Iterator[None]:
    """`store.apply(zone, changes)` on a thread of its own, held in flight (inside the store's latency,
    `latency`) until the block ends; then it completes and is joined."""
    latency.release.clear()
    latency.entered.clear()
    latency.hold = 1
    thread = threading.Thread(target=store.apply, args=(zone, changes), kwargs={"writer": "w"})
    thread.start()
    try:
        if not latency.entered.wait(5):
            raise TimeoutError("the held change never started")
        yield
    finally:
        latency.release.set()
        thread.join(5)
