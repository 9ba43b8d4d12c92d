"""The ports between a replica and its ownership layer (the layer that decides which zones it reconciles).

- `ZoneWorker`: all an ownership mode may do with the worker: own a zone (with the fence its writes carry),
  release it (returns once no write to it is in flight: rule 3), list what it owns, ask for a zone to be
  reconciled soon, read a zone's status. shardsync.reconcile.worker.Worker implements it; no ownership module
  imports the worker itself.
- `Host`: what an ownership mode needs from the replica it runs in: that worker, the zones the provider
  serves (as filtered by --domain-filter), and a signal notified whenever they change.
- `Ownership`: what the replica drives: run and stop, the write gate the worker checks before every write,
  readiness, whether this replica writes the cluster-wide side effects, the worker's fence-refusal
  callback, and the /shards document.

`ZoneStatus` is the worker's per-zone bookkeeping that /shards shows.
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from dataclasses import dataclass, field
from typing import Any, Protocol

from shardsync.pacing.notify import Notifier
from shardsync.providers.base import FenceToken


@dataclass(slots=True)
class ZoneStatus:
    """What /shards shows about a zone this replica owns (kept by the worker)."""

    fence: FenceToken | None = None
    fence_held: bool = False
    last_sync: float = 0.0  # wall-clock time of the last successful reconcile (0: never)
    last_sync_seconds: float = 0.0
    records: int = 0
    desired: int = 0
    last_error: str = ""
    syncs: int = 0
    skipped_seen: set[tuple[tuple[str, str, str], str]] = field(default_factory=set)


class ZoneWorker(Protocol):
    def own(self, zone: str, fence: FenceToken | None = None) -> None:
        """Start reconciling `zone`; with `fence`, its first write acquires the zone's fence first. Owning
        a zone already owned only changes its fence."""
        ...

    async def release(self, zone: str) -> None:
        """Stop reconciling `zone`; returns once no write to it is in flight."""
        ...

    def owned(self) -> list[str]: ...

    def mark_dirty(self, zones: Iterable[str]) -> None:
        """Reconcile these zones soon (those owned)."""
        ...

    def status(self, zone: str) -> ZoneStatus | None:
        """The status of an owned zone; None when it is not owned."""
        ...


class Host(Protocol):
    @property
    def worker(self) -> ZoneWorker: ...

    @property
    def zones(self) -> Set[str]: ...

    @property
    def zones_changed(self) -> Notifier: ...


class Ownership(Protocol):
    """Decides which known zones the worker owns, and when this replica may write at all."""

    async def run(self, host: Host) -> None: ...

    def may_write(self) -> bool: ...

    def ready(self) -> tuple[bool, str]: ...

    def is_coordinator(self) -> bool:
        """Whether this replica writes the cluster-wide side effects (DNSEndpoint status, Events)."""
        ...

    def on_fenced(self, zone: str, token: FenceToken | None) -> None:
        """A write to `zone` was refused by its fence: stop owning it until the assignment says otherwise."""
        ...

    async def snapshot(self, host: Host) -> dict[str, Any]:
        """The /shards document (shards_view's contract); it may read the API (a sharded replica that does
        not follow every member Lease lists them)."""
        ...

    async def stop(self, host: Host) -> None:
        """The graceful stop: release every zone (and whatever the mode holds besides)."""
        ...
