"""What an ownership layer needs from the replica it runs in (shardsync.replica.Replica provides it): the
worker to give zones to, the zones the provider serves, and an event replaced on each change of them."""

from __future__ import annotations

from typing import Protocol

import anyio

from shardsync.worker import Worker


class Host(Protocol):
    @property
    def worker(self) -> Worker: ...

    @property
    def zones(self) -> set[str]: ...

    @property
    def zones_changed(self) -> anyio.Event: ...
