"""One worker reconcile of one zone through a provider that talks to a contract fake (the cloud providers'
wire tests): the provider is made on the event loop that runs it (its SDK's connections belong to that
loop), the worker owns the zone with `token` and runs until the zone has synced or failed once."""

from __future__ import annotations

from collections.abc import Callable

import anyio

from shardsync.providers.base import FenceToken, Provider
from shardsync.reconcile.worker import Worker, WorkerOptions
from shardsync.records.desired import DesiredIndex
from shardsync.records.registry import TxtRegistry
from tests.waits import eventually


def reconcile_once(
    make: Callable[[], Provider], desired: DesiredIndex, zone: str, token: FenceToken | None, owner: str
) -> Worker:
    """The worker after one reconcile of `zone`; the test fails when it did not sync."""

    async def main() -> Worker:
        provider = make()
        worker = Worker(
            provider, TxtRegistry(owner_id=owner), desired, WorkerOptions(interval=60, event_delay=0)
        )
        await provider.zones()
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            worker.own(zone, token)
            status = worker.statuses
            await eventually(lambda: status[zone].syncs >= 1 or bool(status[zone].last_error), within=20)
            tg.cancel_scope.cancel()
        await provider.close()
        return worker

    worker = anyio.run(main)
    assert worker.statuses[zone].last_error == ""
    return worker
