"""The fake provider's gate: a cloud DNS API's latency and per-client limits, in front of every provider call.

Every provider call (zones, records, apply, acquire_fence) passes the gate before it touches any data, as a
cloud DNS API does:
1. injected throttling (`Faults.throttle_next`, `Faults.throttle_ratio`, see faults.py) answers "throttled";
2. a per-client token bucket (`Limits.rate` calls/s, `Limits.burst`) answers "throttled" when empty;
3. at most `Limits.concurrency` calls per client are in flight; later ones wait up to
   `Limits.queue_timeout`, then are throttled. This keeps the fake latency-bound per client, so N replicas
   get N times the throughput of one, as they would from a real provider;
4. the call sleeps `Limits.latency`, then runs (the store: atomically under its lock).
Clients are told apart by an identity string (the replica's identity).

A slot's latency runs on the slot's own schedule, not on when this process got round to freeing it: a call
that waited for a slot starts its latency when that slot's previous call was due to end (or when it arrived,
if later), so the time this single process spends serving the other clients' calls, and the event loop's
lateness under load, is not added to every call. A remote API's latency does not grow because other clients
call it; without this, each of 4 replicas sharing one fake held every slot ~5 % longer than a lone replica
did, and the scaling bench measured the fake's event loop rather than the replicas.

`Gate.call` admits a call of a thread (it blocks: the in-process FakeProvider's worker threads);
`Gate.call_async` admits one on an event loop (the HTTP server: no thread per call). Both share one state, so
a slot freed by either kind of call wakes a waiter of either kind.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import math
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from shardsync.providers.base import ThrottledError

ANONYMOUS = "anonymous"  # the client of a call that does not name itself


class FakeThrottledError(ThrottledError):
    """Throttled, with the number of seconds after which a retry may succeed (sent as Retry-After)."""

    retry_after: float

    def __init__(self, message: str, retry_after: float = 1.0) -> None:
        super().__init__(message, retry_after)


@dataclass(frozen=True, slots=True)
class Limits:
    """How the fake behaves like a remote API: latency and per-client limits. None means no limit."""

    latency: float = 0.0
    rate: float | None = None  # calls per second per client (token bucket)
    burst: int | None = None  # bucket size; default: one second's worth of calls
    concurrency: int | None = None  # calls per client in flight at once
    queue_timeout: float = 2.0  # how long a call waits for a concurrency slot before it is throttled

    def __post_init__(self) -> None:
        if self.latency < 0 or self.queue_timeout < 0:
            raise ValueError("latency and queue_timeout must be >= 0")
        if self.rate is not None and self.rate <= 0:
            raise ValueError("rate must be > 0 (None for no limit)")
        if self.burst is not None and self.burst < 1:
            raise ValueError("burst must be >= 1")
        if self.concurrency is not None and self.concurrency < 1:
            raise ValueError("concurrency must be >= 1 (None for no limit)")

    @property
    def bucket_size(self) -> float:
        if self.burst is not None:
            return float(self.burst)
        return float(max(1, math.ceil(self.rate or 1)))

    def to_json(self) -> dict[str, Any]:
        return {
            "latency": self.latency,
            "rateLimit": self.rate,
            "burst": self.burst,
            "concurrency": self.concurrency,
            "queueTimeout": self.queue_timeout,
        }

    def merged(self, data: Mapping[str, Any]) -> Limits:
        """These limits with the fields present in `data` (JSON names) replaced; raises ValueError."""
        names = {
            "latency": "latency",
            "rateLimit": "rate",
            "burst": "burst",
            "concurrency": "concurrency",
            "queueTimeout": "queue_timeout",
        }
        unknown = set(data) - set(names)
        if unknown:
            raise ValueError(f"unknown limits: {sorted(unknown)}")
        fields: dict[str, Any] = {}
        for key, attr in names.items():
            if key in data:
                value = data[key]
                if value is not None and (not isinstance(value, int | float) or isinstance(value, bool)):
                    raise ValueError(f"{key} must be a number or null")
                if attr in ("latency", "queue_timeout") and value is None:
                    value = 0.0
                if attr in ("burst", "concurrency") and value is not None:
                    value = int(value)
                fields[attr] = value
        return replace(self, **fields)


def _never_throttled() -> str | None:
    return None


@dataclass(slots=True)
class _Client:
    """Per-client gate state: calls in flight, the client's own waiters, and the token bucket."""

    slot_freed: threading.Condition  # on the gate's lock: a call ending wakes one waiter of its own client
    # The client's calls on an event loop waiting for a slot, oldest first.
    waiters: deque[asyncio.Future[None]] = field(default_factory=deque)
    in_flight: int = 0
    # When each free slot's last call was due to end (the clock's time; a heap): a call taking a slot
    # starts its latency there, or when it arrived if later (the module docstring).
    free_at: list[float] = field(default_factory=list)
    tokens: float = 0.0
    refilled: float = 0.0
    primed: bool = False


class Gate:
    """Admits calls per client in the order of the module docstring. Thread-safe.

    `injected` is step 1: it returns why a call is throttled on purpose, or None.
    """

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        injected: Callable[[], str | None] = _never_throttled,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        sleep_async: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._limits = limits or Limits()
        self._sleep_async = sleep_async
        self._injected = injected
        self._clock = clock
        self._wall_clock = wall_clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._clients: dict[str, _Client] = {}

    @property
    def limits(self) -> Limits:
        return self._limits

    def set_limits(self, limits: Limits) -> None:
        with self._lock:
            self._limits = limits
            for state in self._clients.values():
                state.primed = False  # refill buckets to the new size
                state.slot_freed.notify_all()  # waiters re-check against a raised concurrency limit
                while state.waiters:
                    _wake(state.waiters.popleft())

    @contextmanager
    def call(self, client: str) -> Iterator[tuple[float, float]]:
        """Admit one call of `client` (FakeThrottledError when refused); yields its start (monotonic, wall),
        taken when it got its slot, before the latency."""
        limits = self._limits
        arrived = self._clock()
        with self._lock:
            self._admit(client, limits)
            state = self._client(client)
            if limits.concurrency is not None and not state.slot_freed.wait_for(
                lambda: self._has_slot(state), timeout=limits.queue_timeout
            ):
                raise self._queue_full(client, state, limits)
            state.in_flight += 1
            begin = self._begin(state, arrived, limits)
        try:
            started = (self._clock(), self._wall_clock())
            if limits.latency > 0:
                self._sleep(max(0.0, limits.latency - (started[0] - begin)))
            yield started
        finally:
            self._release(state, begin + limits.latency)

    @asynccontextmanager
    async def call_async(self, client: str) -> AsyncIterator[tuple[float, float]]:
        """`call` for a caller on an event loop: waits for a slot and sleeps the latency without a thread."""
        limits = self._limits
        arrived = self._clock()
        with self._lock:
            self._admit(client, limits)
            state = self._client(client)
            admitted = self._has_slot(state)
            if admitted:
                state.in_flight += 1
                begin = self._begin(state, arrived, limits)
        if not admitted:
            begin = await self._wait_async(client, state, limits, arrived)
        try:
            started = (self._clock(), self._wall_clock())
            if limits.latency > 0:
                await self._sleep_async(max(0.0, limits.latency - (started[0] - begin)))
            yield started
        finally:
            self._release(state, begin + limits.latency)

    async def _wait_async(self, client: str, state: _Client, limits: Limits, arrived: float) -> float:
        """Wait (up to the queue timeout) for a slot of `client` and take it, returning when its latency
        begins (`_begin`); FakeThrottledError if none."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limits.queue_timeout
        while True:
            waiter: asyncio.Future[None] = loop.create_future()
            with self._lock:
                if self._has_slot(state):
                    state.in_flight += 1
                    return self._begin(state, arrived, limits)
                state.waiters.append(waiter)
            try:
                await asyncio.wait_for(waiter, max(0.0, deadline - loop.time()))
            except BaseException as exc:
                with self._lock:
                    if waiter in state.waiters:
                        state.waiters.remove(waiter)
                    elif self._has_slot(state):
                        self._wake_one(state)  # pass on the wake-up this waiter took and will not use
                if isinstance(exc, TimeoutError):
                    raise self._queue_full(client, state, limits) from None
                raise

    def _has_slot(self, state: _Client) -> bool:
        limit = self._limits.concurrency
        return limit is None or state.in_flight < limit

    def _queue_full(self, client: str, state: _Client, limits: Limits) -> FakeThrottledError:
        return FakeThrottledError(
            f"client {client}: {state.in_flight} calls in flight (limit {limits.concurrency})",
            retry_after=max(limits.latency, 0.1),
        )

    def _begin(self, state: _Client, arrived: float, limits: Limits) -> float:
        """When the latency of a call that arrived at `arrived` and just took a slot begins: when the slot's
        previous call was due to end, or at its arrival if later. With the gate lock held."""
        free = heapq.heappop(state.free_at) if state.free_at and limits.concurrency is not None else arrived
        return max(arrived, free)

    def _release(self, state: _Client, due: float) -> None:
        with self._lock:
            state.in_flight -= 1
            if self._limits.concurrency is not None:
                heapq.heappush(state.free_at, due)
                del state.free_at[self._limits.concurrency :]  # concurrency lowered meanwhile
            self._wake_one(state)

    def _wake_one(self, state: _Client) -> None:
        # Called with the gate lock held. One slot freed: wake one waiter of this client (FIFO), not every
        # waiter of every client, which cost the server a wake-up per waiting call on every call's end. A
        # waiter of each kind is woken; the one that finds the slot taken waits again.
        state.slot_freed.notify()
        if state.waiters:
            _wake(state.waiters.popleft())

    def _client(self, client: str) -> _Client:
        # Called with the gate lock held.
        state = self._clients.get(client)
        if state is None:
            state = self._clients[client] = _Client(threading.Condition(self._lock))
        return state

    def _admit(self, client: str, limits: Limits) -> None:
        # Called with the gate lock held.
        reason = self._injected()
        if reason is not None:
            raise FakeThrottledError(reason)
        if limits.rate is None:
            return
        state = self._client(client)
        now = self._clock()
        size = limits.bucket_size
        if state.primed:
            state.tokens = min(size, state.tokens + (now - state.refilled) * limits.rate)
        else:
            state.tokens, state.primed = size, True
        state.refilled = now
        if state.tokens < 1.0:
            raise FakeThrottledError(
                f"client {client}: over the rate limit of {limits.rate:g} calls/s",
                retry_after=(1.0 - state.tokens) / limits.rate,
            )
        state.tokens -= 1.0


def _wake(waiter: asyncio.Future[None]) -> None:
    """Resolve `waiter` from any thread (a thread's call may free a slot an event loop's call waits for)."""

    def resolve() -> None:
        if not waiter.done():
            waiter.set_result(None)

    loop = waiter.get_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        resolve()
    else:
        with contextlib.suppress(RuntimeError):  # that loop has closed: nobody waits any more
            loop.call_soon_threadsafe(resolve)
