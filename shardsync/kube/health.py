"""Whether the Kubernetes API server answers, as every call finds out: the one view of an API outage.

Each request through shardsync.kube.client reports its outcome here (`succeeded`, `failed`). A failure that
means "the API server is not there" (unreachable, timed out, a 502/503/504 from the way to it) starts an
outage; the next success ends it, logged once with how long it lasted. Every loop talking to the API keeps its
own backoff, and during an outage they would each warn at their own rhythm (an informer per resource, the
member lease, the coordinator election): `quiet(exc)` lets them share one rhythm instead — it is False for
the one warning of each step of a shared backoff (1 s, 2 s, 4 s … capped at a minute), True for the rest,
which go to the debug level. An outage is also a metric and the `/readyz` reason (`reason()`).

Its end is also when every loop retries: a loop that failed waits out its backoff through `pause(delay,
since)`, which returns early, True, once an outage of at least `FIRST_STEP` ends (or has ended since the
loop read `recoveries`, before the call that failed); the loop then resets its backoff. Without it, a
watch that backed off to 8 s during a 30 s outage would wait those 8 s after the API server is back.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import anyio
import anyio.from_thread
import anyio.lowlevel
from prometheus_client import Counter, Gauge

from shardsync.logs import get_logger

log = get_logger(__name__)

REACHABLE = Gauge("shardsync_kube_api_reachable", "1 while the API server answers, 0 during an outage")
UNREACHABLE_CALLS = Counter(
    "shardsync_kube_api_unreachable_total", "API calls that failed because the API server did not answer"
)

OUTAGE_STATUSES = frozenset({0, 502, 503, 504})

# The warning rhythm during an outage: the first at once, then after 1, 2, 4 … seconds, at most a minute.
FIRST_STEP = 1.0
MAX_STEP = 60.0


@dataclass(frozen=True, eq=False, slots=True)
class _Sleeper:
    """A loop waiting out its backoff (`ApiHealth.pause`), woken on its own event loop."""

    event: anyio.Event
    token: anyio.lowlevel.EventLoopToken
    thread: int  # the event loop's thread

    def wake(self) -> None:
        if threading.get_ident() == self.thread:
            self.event.set()
            return
        with contextlib.suppress(Exception):  # that event loop has ended: nobody is left to wake
            anyio.from_thread.run_sync(self.event.set, token=self.token)


def is_outage(status: int) -> bool:
    """A KubeError status meaning the API server did not answer (0: unreachable or timed out)."""
    return status in OUTAGE_STATUSES


class ApiHealth:
    """An API outage's start, reason and warning rhythm; thread-safe (calls report from worker threads)."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        first_step: float = FIRST_STEP,
        max_step: float = MAX_STEP,
    ) -> None:
        self._clock = clock
        self._first_step = first_step
        self._max_step = max_step
        self._lock = threading.Lock()
        self.down_since: float | None = None
        self.last_error = ""
        self.failures = 0
        self._next_warning = 0.0
        self._step = 0.0
        self.recoveries = 0  # outages of at least `first_step` that ended (see `pause`)
        self._sleepers: set[_Sleeper] = set()

    @property
    def down(self) -> bool:
        return self.down_since is not None

    def succeeded(self) -> None:
        if not self.down:  # the common case, without the lock
            return
        with self._lock:
            if self.down_since is None:
                return
            lasted, failures = self._clock() - self.down_since, self.failures
            self.down_since, self.failures, self._step, self._next_warning = None, 0, 0.0, 0.0
            # A blip shorter than the first step leaves short backoffs behind: nothing to cut short (and a
            # call failing alone, while the others succeed, must not retry without any backoff).
            sleepers: set[_Sleeper] = set()
            if lasted >= self._first_step:
                self.recoveries += 1
                sleepers, self._sleepers = self._sleepers, set()
        REACHABLE.set(1)
        log.info("API server reachable again", after=f"{lasted:.1f}s", failed_calls=failures)
        for sleeper in sleepers:
            sleeper.wake()

    def failed(self, status: int, error: str) -> None:
        if not is_outage(status):
            return
        UNREACHABLE_CALLS.inc()
        with self._lock:
            if self.down_since is None:
                self.down_since = self._clock()
                REACHABLE.set(0)
            self.failures += 1
            self.last_error = error

    def quiet(self, status: int) -> bool:
        """Whether a failure with this status should be logged at debug level only: it is part of an outage
        whose warning for the current step was already written. False (warn) for anything else."""
        if not is_outage(status):
            return False
        with self._lock:
            now = self._clock()
            if now < self._next_warning:
                return True
            self._step = min(self._max_step, self._step * 2) if self._step else self._first_step
            self._next_warning = now + self._step
            return False

    async def pause(self, seconds: float, since: int) -> bool:
        """Wait `seconds` before a retry, or less: True as soon as an outage ends that had not ended when
        `recoveries` read `since` (read it before the call that failed), and the caller retries now."""
        sleeper = _Sleeper(anyio.Event(), anyio.lowlevel.current_token(), threading.get_ident())
        with self._lock:
            if self.recoveries != since:
                return True
            self._sleepers.add(sleeper)
        try:
            with anyio.move_on_after(seconds):
                await sleeper.event.wait()
                return True
            return False
        finally:
            with self._lock:
                self._sleepers.discard(sleeper)

    def reason(self) -> str:
        """The `/readyz` reason during an outage, "" otherwise."""
        since = self.down_since
        if since is None:
            return ""
        return f"API server unreachable for {self._clock() - since:.0f}s: {self.last_error}"


REACHABLE.set(1)
