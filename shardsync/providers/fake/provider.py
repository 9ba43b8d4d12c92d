"""`FakeProvider`: the Provider protocol over a FakeStore in this process (`--fake-zone`, no provider URL)."""

from __future__ import annotations

from functools import partial

from shardsync.providers.base import FenceToken
from shardsync.providers.fake.limits import ANONYMOUS
from shardsync.providers.fake.store import FakeStore
from shardsync.providers.worker_threads import WorkerThreads
from shardsync.records.endpoint import Changes, Endpoint


class FakeProvider:
    """The Provider protocol over a FakeStore in this process, as client `identity`.

    Store calls run in worker threads, because the store's blocking calls wait there for latency and
    concurrency slots (the HTTP server uses the store's async calls instead); a cancelled call waits for
    its thread (at most queue_timeout + latency), so no write lands after the caller has stopped waiting.
    """

    name = "fake"

    def __init__(self, store: FakeStore, identity: str = ANONYMOUS, *, max_threads: int = 64) -> None:
        self.store = store
        self.identity = identity
        self._threads = WorkerThreads(max_threads)

    async def zones(self) -> list[str]:
        return await self._threads.run(partial(self.store.zones, self.identity))

    async def zones_and_versions(self) -> tuple[list[str], dict[str, str] | None]:
        zones, versions = await self._threads.run(partial(self.store.zones_and_versions, self.identity))
        return zones, versions

    async def records(self, zone: str) -> list[Endpoint]:
        return await self._threads.run(partial(self.store.records, zone, self.identity))

    async def records_if_changed(
        self, zone: str, version: str | None
    ) -> tuple[str | None, list[Endpoint] | None]:
        return await self._threads.run(
            partial(self.store.records_if_changed, zone, self.identity, seen=version)
        )

    async def apply(self, zone: str, changes: Changes, fence: FenceToken | None = None) -> None:
        await self._threads.run(partial(self.store.apply, zone, changes, fence, writer=self.identity))

    async def acquire_fence(self, zone: str, token: FenceToken) -> None:
        await self._threads.run(partial(self.store.acquire_fence, zone, token, writer=self.identity))

    async def close(self) -> None:
        return None
