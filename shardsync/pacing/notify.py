"""A wake-up signal many writers can raise and one loop waits on, without losing a raise that happens while
the loop is busy (the loop takes a `ticket()` before it looks at the state, then waits on that ticket).
A notifier can also pass each raise on to others (`forward_to`), so one loop can wait on several sources."""

from __future__ import annotations

import math

import anyio


class Notifier:
    def __init__(self) -> None:
        self._event = anyio.Event()
        self._forward: list[Notifier] = []

    def notify(self) -> None:
        """Wake every waiter holding a ticket taken before now."""
        self._event.set()
        self._event = anyio.Event()
        for other in self._forward:
            other.notify()

    def forward_to(self, other: Notifier) -> None:
        """Raise `other` too whenever this one is raised."""
        self._forward.append(other)

    def ticket(self) -> anyio.Event:
        """The event the next `notify()` sets; take it before reading the state you will wait on."""
        return self._event

    async def wait(self, ticket: anyio.Event | None = None, within: float = math.inf) -> bool:
        """Wait for a notify after `ticket` was taken (now, if None), at most `within` seconds; True when
        notified."""
        event = ticket if ticket is not None else self._event
        with anyio.move_on_after(max(0.0, within)):
            await event.wait()
            return True
        return False
