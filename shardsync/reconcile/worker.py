"""Per-zone reconcile loops: one zone at a time from source to provider, many zones at once.

Follow one zone through `_reconcile`:

    provider.records(zone) → registry.read → plan(desired, current) → registry.with_ownership
        → provider.apply(zone, changes, fence)

`Worker` owns the zones the ownership layer gives it (`own` / `release`: it implements
shardsync.ownership.port's `ZoneWorker`), runs up to `concurrency`
reconciles at once from a `ZoneSchedule`, and reconciles a zone again at its interval, soon after a source
change touching it, or after a backoff when it failed. A failing zone never blocks the others; a rejected
record is reported (Event + metric) while the rest of its zone applies; throttling is a soft error.

Release is safe by construction: a zone's reconcile runs in its own cancel scope, `release` cancels it and
waits, and the provider write itself is shielded, so an UPDATE already sent finishes before the zone counts
as released (design rule 3: an in-flight apply finishes or is cancelled, never half-abandoned).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

import anyio
from prometheus_client import Counter, Gauge, Histogram

from shardsync.kube.events import EventRecorder
from shardsync.logs import get_logger
from shardsync.ownership.port import ZoneStatus
from shardsync.pacing.backoff import Backoff
from shardsync.pacing.log_digest import LogDigest, window_for
from shardsync.pacing.notify import Notifier
from shardsync.providers.base import (
    BatchRejectedError,
    FencedError,
    FenceToken,
    Provider,
    ProviderError,
    RecordsRejectedError,
    Rejected,
    ThrottledError,
    adjuster_of,
    read_if_changed,
)
from shardsync.reconcile.batches import halves
from shardsync.reconcile.change_log import ZoneChangeLog
from shardsync.reconcile.schedule import ZoneSchedule
from shardsync.reconcile.zone_reports import ZoneReports
from shardsync.records.desired import DesiredIndex
from shardsync.records.domain_filter import DomainFilter
from shardsync.records.endpoint import Changes, Endpoint, fingerprint
from shardsync.records.plan import Policy, plan
from shardsync.records.registry import Registry, ZoneView

log = get_logger(__name__)

DEFAULT_INTERVAL = 60.0  # --interval
DEFAULT_CONCURRENCY = 8  # --concurrency
REBUILD_WAIT = 0.05  # seconds before a zone whose desired endpoints are being rebuilt is looked at again
NOT_WRITING_RETRY = 1.0  # self-fenced: a local check, no growing backoff, so writes resume with the lease

# external-dns's metric names where they mean the same thing, so existing dashboards keep working.
LAST_SYNC = Gauge(
    "external_dns_controller_last_sync_timestamp_seconds", "Time of the last successful reconcile of any zone"
)
REGISTRY_ENDPOINTS = Gauge("external_dns_registry_endpoints_total", "Records in the owned zones")
SOURCE_ENDPOINTS = Gauge("external_dns_source_endpoints_total", "Desired endpoints in the owned zones")
REGISTRY_ERRORS = Counter("external_dns_registry_errors_total", "Failed provider reads or writes")
ZONE_LAST_SYNC = Gauge("shardsync_zone_last_sync_timestamp_seconds", "Last successful reconcile", ["zone"])
ZONE_SYNC_SECONDS = Gauge("shardsync_zone_sync_duration_seconds", "Duration of the last reconcile", ["zone"])
SYNC_SECONDS = Histogram(
    "shardsync_reconcile_duration_seconds",
    "Duration of one zone reconcile",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
RECONCILES = Counter("shardsync_reconciles_total", "Zone reconciles, by result", ["result"])
RECONCILED_OK = RECONCILES.labels("ok")
PROVIDER_ERRORS = Counter("shardsync_provider_errors_total", "Provider call failures, by kind", ["kind"])
FENCED = Counter("shardsync_fenced_writes_total", "Writes the provider refused because of the zone fence")
OWNED = Gauge("shardsync_owned_zones", "Zones this replica reconciles")


@dataclass(slots=True)
class _Steady:
    """A zone's last plan that had nothing to do: what it was planned from (the desired endpoints' version,
    the records' fingerprint) and the provider's version of those records (None: it names none)."""

    desired: tuple[int, int]
    records: int
    provider_version: str | None


class _InFlight:
    __slots__ = ("done", "scope")

    def __init__(self, scope: anyio.CancelScope) -> None:
        self.scope = scope
        self.done = anyio.Event()


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    interval: float = DEFAULT_INTERVAL
    event_delay: float = 0.05
    concurrency: int = DEFAULT_CONCURRENCY
    policy: str = Policy.SYNC.value
    dry_run: bool = False
    max_backoff: float = 60.0
    # --domain-filter / --exclude-domains: names outside are left out of the plan on both sides.
    domains: DomainFilter = field(default_factory=DomainFilter)


def _always() -> bool:
    return True


def _ignore_fenced(zone: str, token: FenceToken | None) -> None:
    return None


@dataclass(eq=False)
class Worker:
    """Reconciles the zones it owns; see the module docstring."""

    provider: Provider
    registry: Registry
    desired: DesiredIndex
    options: WorkerOptions
    events: EventRecorder | None = None
    may_write: Callable[[], bool] = _always  # the ownership's write gate, asked before every write
    on_fenced: Callable[[str, FenceToken | None], None] = _ignore_fenced  # a write refused by the fence
    clock: Callable[[], float] = time.monotonic
    guard: Callable[[str, Changes, list[Endpoint]], Changes] | None = None  # shardsync.reconcile.delete_guard
    # Set once the desired state is whole (SourceWatcher.complete); until then an owned zone is fenced but
    # not planned: external-dns plans nothing before its informers have synced. None: whole from the start.
    inputs: anyio.Event | None = None
    statuses: dict[str, ZoneStatus] = field(default_factory=dict, init=False)
    _policy: Policy = field(init=False)
    _schedule: ZoneSchedule = field(init=False)
    _inflight: dict[str, _InFlight] = field(default_factory=dict, init=False)
    _backoff: dict[str, Backoff] = field(default_factory=dict, init=False)
    _wake: Notifier = field(default_factory=Notifier, init=False)
    # zone → its last plan that had nothing to do: the steady state
    _unchanged: dict[str, _Steady] = field(default_factory=dict, init=False)
    _reports: ZoneReports = field(init=False)
    # zone → its children of ZONE_LAST_SYNC and ZONE_SYNC_SECONDS, looked up once per ownership
    _gauges: dict[str, tuple[Gauge, Gauge]] = field(default_factory=dict, init=False)
    # The zone versions of the provider's last zone listing (base.ListsVersions) and when it was read.
    _listed: dict[str, str] = field(default_factory=dict, init=False)
    _listed_at: float = field(default=-math.inf, init=False)
    # Failures many zones share (a provider down, self-fenced) as one line per interval (LogDigest).
    digest: LogDigest = field(init=False)

    def __post_init__(self) -> None:
        self._policy = Policy(self.options.policy)
        self.digest = LogDigest(window=window_for(self.options.interval), clock=self.clock)
        self._reports = ZoneReports(self.events)
        self._schedule = ZoneSchedule(interval=self.options.interval, event_delay=self.options.event_delay)

    # -- the ZoneWorker port (shardsync.ownership.port) ------------------------------------------

    def own(self, zone: str, fence: FenceToken | None = None) -> None:
        """Start reconciling `zone`; with `fence`, the first write acquires the zone's fence first."""
        status = self.statuses.get(zone)
        if status is None:
            self.desired.keep(zone)
            self.statuses[zone] = ZoneStatus(fence=fence)
            self._schedule.add(zone, self.clock(), ahead=fence is not None)
            OWNED.set(len(self.statuses))
            self._wake.notify()
        elif status.fence != fence:
            status.fence, status.fence_held = fence, False

    async def release(self, zone: str) -> None:
        """Stop reconciling `zone`; returns once no write to it is in flight."""
        self._schedule.remove(zone)
        if self.statuses.pop(zone, None) is not None:
            OWNED.set(len(self.statuses))
            self._gauges.pop(zone, None)
            for gauge in (ZONE_LAST_SYNC, ZONE_SYNC_SECONDS):
                with contextlib.suppress(KeyError):  # never synced: no series to drop
                    gauge.remove(zone)
        self._backoff.pop(zone, None)
        self._unchanged.pop(zone, None)
        inflight = self._inflight.get(zone)
        if inflight is not None:
            inflight.scope.cancel()
            await inflight.done.wait()
        if zone not in self.statuses:  # not owned again meanwhile
            self.desired.drop(zone)

    def owned(self) -> list[str]:
        return list(self.statuses)

    def status(self, zone: str) -> ZoneStatus | None:
        return self.statuses.get(zone)

    def zones_listed(self, versions: dict[str, str] | None) -> None:
        """The provider's zone listing, just read, named these zone versions (None: it names none)."""
        self._listed, self._listed_at = versions or {}, self.clock()

    def _listed_version(self, zone: str) -> str | None:
        # Zone discovery lists every interval (the call itself may wait an interval behind the zones' own
        # calls when the provider is the bottleneck); a listing older than three (discovery failing)
        # verifies nothing: the zone is asked.
        if self.clock() - self._listed_at > 3 * self.options.interval:
            return None
        return self._listed.get(zone)

    def mark_dirty(self, zones: Iterable[str]) -> None:
        """Source changes touched these zones: reconcile the owned ones soon."""
        now = self.clock()
        for zone in zones:
            self._schedule.mark_dirty(zone, now)
        self._wake.notify()

    # -- the loop ----------------------------------------------------------------------------------

    async def run(self) -> None:
        """Run `concurrency` reconcile loops until cancelled."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.digest.run)
            for _ in range(self.options.concurrency):
                tg.start_soon(self._runner)
            if self.inputs is not None and not self.inputs.is_set():
                await self.inputs.wait()
                self.mark_dirty(list(self.statuses))  # the zones parked meanwhile (`_run_zone`)

    async def _runner(self) -> None:
        while True:
            ticket = self._wake.ticket()
            zone = self._schedule.pop_due(self.clock())
            if zone is None:
                due = self._schedule.next_due()
                await self._wake.wait(ticket, math.inf if due is None else due - self.clock())
                continue
            await self._run_zone(zone)

    async def _run_zone(self, zone: str) -> None:
        retry_in, fenced_only = None, False
        status = self.statuses.get(zone)
        if status is not None and not self._needs_fence(status) and not self._inputs_whole():
            self._schedule.park(zone)
            return
        with anyio.CancelScope() as scope:
            inflight = self._inflight[zone] = _InFlight(scope)
            try:
                if status is not None and self._needs_fence(status):
                    # Fence first: a replica gaining many zones takes every fence before reading any
                    # zone, so a failed peer's zones are all ours at the provider within a few calls.
                    retry_in = await self._guarded(zone, status, self._acquire_fence)
                    fenced_only = retry_in is None
                else:
                    retry_in = await self._reconcile_guarded(zone)
            finally:
                del self._inflight[zone]
                inflight.done.set()
        if fenced_only:
            self._schedule.requeue(zone, self.clock())
        else:
            self._schedule.finished(zone, self.clock(), retry_in)
        self._wake.notify()

    async def _reconcile_guarded(self, zone: str) -> float | None:
        """Reconcile; on failure, log, count, and say when to retry (None: success)."""
        status = self.statuses.get(zone)
        if status is None:
            return None
        if not self.desired.ready(zone):
            return REBUILD_WAIT  # its desired endpoints are being rebuilt (DesiredIndex): plan it once whole
        started = self.clock()
        retry_in = await self._guarded(zone, status, self._reconcile)
        if retry_in is not None:
            return retry_in
        elapsed = self.clock() - started
        self._backoff.pop(zone, None)
        RECONCILED_OK.inc()
        SYNC_SECONDS.observe(elapsed)
        now_wall = time.time()
        status.last_sync, status.last_sync_seconds, status.last_error = now_wall, elapsed, ""
        status.syncs += 1
        LAST_SYNC.set(now_wall)
        last_sync, sync_seconds = self._zone_gauges(zone)
        last_sync.set(now_wall)
        sync_seconds.set(elapsed)
        return None

    def _zone_gauges(self, zone: str) -> tuple[Gauge, Gauge]:
        gauges = self._gauges.get(zone)
        if gauges is None:
            gauges = self._gauges[zone] = (ZONE_LAST_SYNC.labels(zone), ZONE_SYNC_SECONDS.labels(zone))
        return gauges

    async def _guarded(
        self, zone: str, status: ZoneStatus, step: Callable[[str, ZoneStatus], Awaitable[None]]
    ) -> float | None:
        """Run one step on `zone`; on failure, log, count, and say when to retry (None: success)."""
        try:
            if not self.may_write():
                raise _NotWriting("this replica may not write now (lease not renewed)")
            await step(zone, status)
        except FencedError as exc:
            FENCED.inc()
            RECONCILES.labels("fenced").inc()
            status.last_error = f"fenced: {exc}"
            self.digest.error(
                log,
                "write refused by the zone fence, dropping the zone",
                zone=zone,
                fence=status.fence.to_text() if status.fence else "",
                error=str(exc),
            )
            self.on_fenced(zone, status.fence)
            return self.options.max_backoff
        except (ProviderError, _NotWriting) as exc:
            kind = _error_kind(exc)
            PROVIDER_ERRORS.labels(kind).inc()
            REGISTRY_ERRORS.inc()
            RECONCILES.labels(kind).inc()
            status.last_error = f"{kind}: {exc}"
            backoff = self._backoff.setdefault(zone, Backoff(initial=0.5, maximum=self.options.max_backoff))
            delay = NOT_WRITING_RETRY if isinstance(exc, _NotWriting) else backoff.next()
            if isinstance(exc, ThrottledError) and exc.retry_after is not None:  # never sooner than asked
                delay = max(delay, min(exc.retry_after, self.options.max_backoff))
            self.digest.warning(
                log,
                "zone reconcile failed",
                zone=zone,
                kind=kind,
                error=str(exc),
                retry_in=f"{delay:.2f}s",
                failures=self._schedule.failures(zone) + 1,
            )
            return delay
        return None

    def _inputs_whole(self) -> bool:
        return self.inputs is None or self.inputs.is_set()

    def _needs_fence(self, status: ZoneStatus) -> bool:
        # A dry run writes nothing, the fence record included.
        return status.fence is not None and not status.fence_held and not self.options.dry_run

    async def _acquire_fence(self, zone: str, status: ZoneStatus) -> None:
        if status.fence is not None and self._needs_fence(status):
            await self.provider.acquire_fence(zone, status.fence)
            status.fence_held = True
            log.info("fence acquired", zone=zone, generation=status.fence.generation)

    async def _reconcile(self, zone: str, status: ZoneStatus) -> None:
        """One zone, source to provider."""
        await self._acquire_fence(zone, status)  # normally taken already, as the zone's first step
        registry = self.registry  # the owner id and managed types are the registry's (one home)
        steady = self._unchanged.get(zone)
        wanted = self.desired.version(zone)
        seen = steady.provider_version if steady is not None and steady.desired == wanted else None
        if seen is not None and self._listed_version(zone) == seen:
            return  # the zone listing of this interval names the version of a plan that had nothing to do
        version, records = await read_if_changed(self.provider, zone, seen)
        if records is None:  # the provider's zone is still as at a plan that had nothing to do
            if self.desired.version(zone) == wanted:
                return
            version, records = None, await self.provider.records(zone)  # desired changed meanwhile
        inputs = (self.desired.version(zone), fingerprint(records))
        if steady is not None and (steady.desired, steady.records) == inputs:
            steady.provider_version = version
            return  # the records read and the desired endpoints are as at a plan that had nothing to do
        self._unchanged.pop(zone, None)
        view = registry.read(records)
        desired = self.desired.desired(zone)
        adjuster = adjuster_of(self.provider)
        if adjuster is not None:  # records listed in the provider's own form
            desired = adjuster.adjust_desired(desired)
        result = plan(
            desired,
            view.current,
            self._policy,
            registry.owner_id,
            registry.managed_types,
            domains=self.options.domains,
        )
        status.records, status.desired = len(view.current), len(desired)
        self._reports.conflicts(zone, result.conflicts)
        self._reports.skipped(zone, result.skipped, status.skipped_seen)
        changes = result.changes if self.guard is None else self.guard(zone, result.changes, view.current)
        applied = ZoneChangeLog(log, zone, dry_run=self.options.dry_run)
        await self._apply(zone, status, changes, view, applied)
        if result.changes.is_empty() and not result.conflicts:
            self._unchanged[zone] = _Steady(*inputs, version)
        applied.close(generation=status.fence.generation if status.fence else "")

    async def _apply(
        self, zone: str, status: ZoneStatus, planned: Changes, view: ZoneView, applied: ZoneChangeLog
    ) -> None:
        """Write `planned` with its ownership records; `applied` logs and counts what was (dry run: would be).

        A provider that refuses a whole batch for one bad record (BatchRejectedError) gets the plan split
        in halves until the bad record stands alone, so every other record still lands. The split is done
        on the plan, before ownership records are added, so a record and its TXT record never part.
        """
        owned = self.registry.with_ownership(planned, view)
        self._reports.skipped(zone, owned.skipped, status.skipped_seen)
        changes = owned.changes
        if changes.is_empty() or self.options.dry_run:
            applied.add(changes)
            return
        if not self.may_write():
            # The lease may have lapsed while the zone was read and planned: check again right before writing.
            raise _NotWriting("this replica may not write now (lease not renewed)")
        rejected: list[Rejected] = []
        try:
            # Shielded: once sent, a write completes before a release can count the zone as let go.
            with anyio.CancelScope(shield=True):
                await self.provider.apply(zone, changes, status.fence)
        except RecordsRejectedError as exc:
            rejected = exc.rejected
            self._reports.rejected(zone, rejected)
        except BatchRejectedError as exc:
            if len(planned) <= 1:
                refused = planned.create + planned.update_new + planned.delete
                self._reports.rejected(zone, [Rejected(ep, str(exc)) for ep in refused])
                return
            for half in halves(planned):
                await self._apply(zone, status, half, view, applied)
            return
        applied.add(changes, {r.endpoint.key for r in rejected})

    def totals(self) -> tuple[int, int]:
        """(records, desired endpoints) over the owned zones, for the external-dns gauges."""
        records = sum(s.records for s in self.statuses.values())
        desired = sum(s.desired for s in self.statuses.values())
        REGISTRY_ENDPOINTS.set(records)
        SOURCE_ENDPOINTS.set(desired)
        return records, desired


class _NotWriting(Exception):
    """Self-fenced: the replica's member lease is not fresh, so it writes nothing."""


def _error_kind(exc: BaseException) -> str:
    if isinstance(exc, ThrottledError):
        return "throttled"
    if isinstance(exc, _NotWriting):
        return "self-fenced"
    return type(exc).__name__.removesuffix("Error").lower() or "error"
