"""Writing `status.observedGeneration` of source objects (the DNSEndpoints of the crd kind): which objects
are due a write, and the loop that writes them.

The kind's translator tells a `StatusWriter` which generation of each object it translated; the loop then
writes status.observedGeneration = that generation for every object whose status lags behind it (through
the status subresource, by the kind's `write` function). A newer generation not translated yet is left for
its own translation. One replica writes each object's status, so N replicas do not write N times: the one
holding a zone the object's names reach (`SourceContext.holds`; on a sharded replica the others may never
translate it), else the one for which `may_write()` is true (the coordinator), which the watcher asks to
`sweep()` as it takes office (the periodic sweep every `status_resync` seconds is the fallback). A failed
write stays due and is retried with backoff, at once when the API server answers again after an outage.

Writes start as objects are translated, not after every kind has listed: they take their tokens from a
bucket of their own (`--kube-api-status-qps`, shardsync.kube.limits), not from the lists'. Kubernetes has
no batch write, so what is batched is the waiting: up to `WRITES_AT_ONCE` writes are in flight together,
so the rate is the bucket's (or the API server's), not one round trip after another.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
from prometheus_client import Counter

from shardsync.kube.client import KubeError
from shardsync.kube.health import is_outage
from shardsync.kube.objects import Obj, Resource, get
from shardsync.logs import get_logger
from shardsync.pacing.backoff import Backoff
from shardsync.pacing.notify import Notifier
from shardsync.sources.kind import SourceContext

log = get_logger(__name__)

STATUS_WRITES = Counter(
    "shardsync_source_status_writes_total",
    "DNSEndpoint status.observedGeneration writes, by result",
    ["result"],
)

# Writes status.observedGeneration = generation for the object at a cache key; KubeError when it fails.
WriteStatus = Callable[[str, int], Awaitable[None]]

WRITES_AT_ONCE = 4  # status writes in flight together (each holds a client thread while it waits)


def observed_generation_to_write(obj: Mapping[str, Any]) -> int | None:
    """metadata.generation when status.observedGeneration lags behind it, else None."""
    generation = get(obj, "metadata", "generation")
    if not isinstance(generation, int) or isinstance(generation, bool):
        return None
    return None if get(obj, "status", "observedGeneration") == generation else generation


class StatusWriter:
    """The observedGeneration writes of one kind's objects in one watcher (see the module docstring)."""

    def __init__(self, context: SourceContext[Any], resource: Resource, write: WriteStatus) -> None:
        self._cache = context.cache
        self._may_write = context.may_write
        self._holds = context.holds
        self._resync = context.status_resync
        self._health = context.kube.health
        self._max_backoff = context.max_backoff
        self._resource = resource
        self._write = write
        self._translated: dict[str, int] = {}  # cache key → the generation translated (ours to write)
        self._held: set[str] = set()  # keys written whoever is the writer: this replica holds their zone
        self._due: dict[str, None] = {}  # cache keys whose status may lag (ordered)
        self._wake = Notifier()
        self._sweep_requested = False

    def translated(self, key: str, obj: Obj | None) -> None:
        """The object at `key` was translated (None: it is gone or filtered out)."""
        held = None if obj is None else self._holds(obj)
        if obj is None or held is False:  # gone, or the replica holding its zone writes it
            self._translated.pop(key, None)
            self._due.pop(key, None)
            self._held.discard(key)
            return
        if held:
            self._held.add(key)
        else:
            self._held.discard(key)
        generation = get(obj, "metadata", "generation")
        if isinstance(generation, int):
            self._translated[key] = generation
        if observed_generation_to_write(obj) is not None:
            self._due[key] = None
            self._wake.notify()

    def status_changed(self, key: str, obj: Obj) -> None:
        """Only the status of the object at `key` changed since its translation: due again if it is ours
        and now lags (someone reset it)."""
        if key in self._translated and observed_generation_to_write(obj) is not None:
            self._due[key] = None
            self._wake.notify()

    def sweep(self) -> None:
        """Look for lagging statuses now (say, once this replica has become the writer)."""
        self._sweep_requested = True
        self._wake.notify()

    async def run(self) -> None:
        backoff = Backoff(initial=0.2, maximum=self._max_backoff)
        ticket = self._wake.ticket()
        retry = False
        while True:
            resync = not retry and not await self._wake.wait(ticket, within=self._resync)
            ticket = self._wake.ticket()  # before reading the state: a notify from now on is kept
            recoveries = self._health.recoveries
            retry = False
            writer = self._may_write()
            if resync or self._sweep_requested:
                self._sweep_requested = not writer  # the writer's part waits for this replica to write
                self._due.update(dict.fromkeys(self._translated if writer else self._held))
            if not writer:
                # The writer's objects are not ours; whoever becomes the writer sweeps (or is asked to).
                self._due = {key: None for key in self._due if key in self._held}
                if not self._due:
                    continue
            if await self._write_due():
                backoff.reset()
            else:
                if await self._health.pause(backoff.next(), recoveries):
                    backoff.reset()
                retry = True

    async def _write_due(self) -> bool:
        """Write status.observedGeneration for every due object, `WRITES_AT_ONCE` at a time; False if a
        write failed (it stays due)."""
        failed: list[KubeError] = []
        slots = anyio.Semaphore(WRITES_AT_ONCE)
        async with anyio.create_task_group() as tg:
            for key in list(self._due):
                if any(is_outage(exc.status) for exc in failed):
                    break  # the API server does not answer: the rest waits for the retry
                obj = self._cache(self._resource).get(key)
                due = None if obj is None else observed_generation_to_write(obj)
                if obj is None or due is None or due != self._translated.get(key):
                    # Gone, already written, or a newer generation not translated yet (queued then).
                    self._due.pop(key, None)
                    continue
                await slots.acquire()
                tg.start_soon(self._write_one, key, due, slots, failed)
        return not failed

    async def _write_one(self, key: str, due: int, slots: anyio.Semaphore, failed: list[KubeError]) -> None:
        try:
            await self._write(key, due)
        except KubeError as exc:
            if exc.not_found:
                self._due.pop(key, None)
                return
            failed.append(exc)
            STATUS_WRITES.labels("error").inc()
            emit = log.debug if self._health.quiet(exc.status) else log.warning
            emit(
                f"writing {self._resource.kind.lower()} status failed",
                object=key,
                status=exc.status,
                reason=exc.reason,
            )
            return
        finally:
            slots.release()
        self._due.pop(key, None)
        STATUS_WRITES.labels("written").inc()
