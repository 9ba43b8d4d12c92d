"""A token bucket: `qps` tokens a second, at most `burst` saved up; the one rate limiter of shardsync.

It is client-go's default rate limiter (flowcontrol's token bucket over x/time/rate): a caller takes a token,
or is told how long to wait for the next one (`reserve`: waiters queue in order, since each takes its token
at once and waits out the debt; `try_take`: nothing is taken until a token is there, for callers whose
rate changes while they wait). Used by the Kubernetes client (shardsync.kube.limits: `--kube-api-qps`) and by
the shared provider budget (shardsync.providers.budget: `--provider-rate-limit`), which also changes the
rate while running and pauses the bucket when the provider said "slow down".
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

_EPSILON = 1e-9


class Throttled(Exception):
    """No token within the caller's own deadline."""


class TokenBucket:
    """`qps` tokens a second, at most `burst` saved up; thread-safe (calls run in worker threads).

    `tokens` is how full it starts (default: full, as client-go's).
    """

    def __init__(
        self,
        qps: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        *,
        tokens: float | None = None,
        what: str = "client rate limit (--kube-api-qps)",
    ) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("a token bucket needs qps > 0 and burst >= 1")
        self.qps, self.burst = float(qps), burst
        self._clock, self._sleep = clock, sleep
        self._what = what
        self._lock = threading.Lock()
        self._tokens = float(burst) if tokens is None else min(float(burst), tokens)
        self._last = clock()

    def _refill(self, now: float) -> None:
        # Called with the lock held.
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
        self._last = now

    def reserve(self, max_wait: float | None = None) -> float:
        """Take a token; the seconds to wait before using it. Throttled (nothing taken) when that wait
        would exceed `max_wait`."""
        with self._lock:
            now = self._clock()
            tokens = min(self.burst, self._tokens + (now - self._last) * self.qps) - 1
            wait = 0.0 if tokens >= 0 else -tokens / self.qps
            if max_wait is not None and wait > max_wait:
                raise Throttled(f"{self._what}: no token within {max_wait:g}s")
            self._tokens, self._last = tokens, now
            return wait

    def try_take(self) -> float:
        """Take a token if one is there (0.0); otherwise take nothing and say how long until one will be at
        the current rate. For callers whose rate may change while they wait: they ask again after a nap,
        instead of sleeping a wait computed at the old rate."""
        with self._lock:
            self._refill(self._clock())
            if self._tokens >= 1.0 - _EPSILON:  # a refill computed in floating point may fall just short
                self._tokens -= 1.0
                return 0.0
            return (1.0 - self._tokens) / self.qps

    def wait(self, max_wait: float | None = None) -> None:
        delay = self.reserve(max_wait)
        if delay > 0:
            self._sleep(delay)

    def set_rate(self, qps: float, burst: int) -> None:
        """Change the rate and size from now on; tokens saved so far are kept (up to the new size), and
        a debt (waiters already queued) stays owed."""
        if qps <= 0 or burst < 1:
            raise ValueError("a token bucket needs qps > 0 and burst >= 1")
        with self._lock:
            self._refill(self._clock())
            self.qps, self.burst = float(qps), burst
            self._tokens = min(float(burst), self._tokens)

    def pause(self, seconds: float) -> None:
        """Hand out no token for the next `seconds` (beyond the waits already queued): the bucket is
        emptied and owes `seconds` worth of tokens."""
        with self._lock:
            self._refill(self._clock())
            self._tokens = min(self._tokens, 0.0) - max(seconds, 0.0) * self.qps
