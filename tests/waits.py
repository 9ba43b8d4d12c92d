"""Bounded waiting for a condition, for tests that watch asynchronous work settle."""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio


async def eventually(cond: Callable[[], bool], within: float = 5.0, poll: float = 0.01) -> None:
    """Return once `cond()` holds; fail the test after `within` seconds."""
    with anyio.fail_after(within):
        while not cond():  # noqa: ASYNC110 - polling state owned by other tasks and threads
            await anyio.sleep(poll)


def eventually_sync(cond: Callable[[], bool], within: float = 10.0, poll: float = 0.05) -> None:
    """The same, blocking, for tests that drive other processes."""
    deadline = time.monotonic() + within
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"condition not met within {within}s")
        time.sleep(poll)
