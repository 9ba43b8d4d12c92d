"""A provider's blocking client calls in worker threads, a bounded number at once.

The providers whose client blocks (aws: boto3, google: google-cloud-dns, rfc2136: dnspython, fake: the
store's blocking calls) run each call in a worker thread (`anyio.to_thread.run_sync`), never on the event
loop. `WorkerThreads` is that one way, with a CapacityLimiter of the provider's own, so that one provider's
calls cannot take every thread of anyio's default pool. The limiter is made at the first call, inside the
event loop that will use it (providers are built before it runs).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.to_thread

T = TypeVar("T")


class WorkerThreads:
    """Runs blocking calls in worker threads, at most `limit` at once."""

    __slots__ = ("_limiter", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._limiter: anyio.CapacityLimiter | None = None

    async def run(self, fn: Callable[[], T], *, abandon_on_cancel: bool = False) -> T:
        """`fn()` in a worker thread. Cancelled, it waits for the thread to finish (a write's outcome is
        settled before the caller moves on), unless `abandon_on_cancel` (a read: its answer may go)."""
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.limit)
        return await anyio.to_thread.run_sync(fn, abandon_on_cancel=abandon_on_cancel, limiter=self._limiter)
