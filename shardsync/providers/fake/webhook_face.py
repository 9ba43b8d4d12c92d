"""The fake provider's webhook face: the store as the Provider that shardsync's webhook server
(providers/webhook/server.py) serves, one per caller. The server speaks the protocol and the fence
extension; this is only the store's side of it, so the face is what any webhook server built on a shardsync
provider is, with the fake's gate, faults, profile and audit behind it.

Each call is one store call on the server's event loop (the `*_async` calls: waiting for a slot and the
latency take no thread), gated, faulted and audited as the caller named in `X-Shardsync-Client` (the
anonymous client without one), as the native API's calls are. A listing of every zone (`GET /records`) is
one store call, not one per zone. `fences_writes` is the face's switch (`shardsync fake-provider
--webhook-fence`): on, the server offers the fence extension and a fenced write is the store's fenced
apply; off, the face is a server that never heard of the extension.
"""

from __future__ import annotations

from shardsync.providers.base import FenceToken
from shardsync.providers.fake.limits import ANONYMOUS
from shardsync.providers.fake.store import FakeStore
from shardsync.records.endpoint import Changes, Endpoint


class StoreFace:
    """The Provider protocol over `store` as client `caller`, fencing its writes only when `fenced`."""

    name = "fake"

    def __init__(self, store: FakeStore, caller: str = "", fenced: bool = False) -> None:
        self.store = store
        self.caller = caller or ANONYMOUS
        self.fenced = fenced

    async def zones(self) -> list[str]:
        return await self.store.zones_async(self.caller)

    async def all_records(self) -> list[Endpoint]:
        return await self.store.all_records_async(self.caller)

    async def records(self, zone: str) -> list[Endpoint]:
        _, records, after = await self.store.listing_async(zone, self.caller)
        out = list(records or ())
        while after is not None:
            _, page, after = await self.store.listing_async(zone, self.caller, after=after)
            out.extend(page or ())
        return out

    async def apply(self, zone: str, changes: Changes, fence: FenceToken | None = None) -> None:
        await self.store.apply_async(zone, changes, fence, writer=self.caller)

    async def acquire_fence(self, zone: str, token: FenceToken) -> None:
        await self.store.acquire_fence_async(zone, token, writer=self.caller)

    async def fences_writes(self) -> bool:
        return self.fenced

    async def close(self) -> None:
        return None
