"""`shardsync run`: one replica, wired from Settings — sources, desired index, worker, ownership, status.

The replica's parts run as one anyio task group; SIGTERM or SIGINT cancels it after the ownership layer
has had its graceful stop (release zones, give up leases). Which zones this replica reconciles is the
ownership layer's decision (shardsync.ownership: `SoleOwner` with `--once`, `ActivePassiveOwnership` with
`--sharding=off`, `ShardedOwnership` otherwise); the replica is its `Host` (the worker port, the zones the
provider serves, and a signal when they change).

Only this module and the command line (shardsync.replica.command, which builds the replica once it knows the
provider's fencing and so the timings) read `Settings`: every part below gets its own small option value
(the registry, `WorkerOptions`, the sharding `Site` with its `Timings`), each built here, once.
"""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

import anyio
from anyio.from_thread import BlockingPortal

from shardsync.kube.client import Kube
from shardsync.kube.events import EventRecorder
from shardsync.logs import get_logger
from shardsync.ownership.active_passive import ActivePassiveOwnership
from shardsync.ownership.port import Ownership
from shardsync.ownership.sharded import ShardedOwnership
from shardsync.ownership.sole import SoleOwner
from shardsync.pacing.backoff import Backoff
from shardsync.pacing.notify import Notifier
from shardsync.providers.base import Provider, ProviderError, list_zones
from shardsync.providers.budget import Budget, BudgetedProvider, share
from shardsync.providers.cache import CachedProvider
from shardsync.reconcile.delete_guard import DeleteGuard
from shardsync.reconcile.worker import Worker, WorkerOptions
from shardsync.records.desired import DesiredIndex
from shardsync.records.domain_filter import DomainFilter
from shardsync.records.noop_registry import NoopRegistry
from shardsync.records.registry import Registry, TxtRegistry
from shardsync.replica import config
from shardsync.replica.server import StatusServer
from shardsync.sharding.site import Site
from shardsync.sharding.timings import Timings
from shardsync.sources.filters import ObjectFilter, RecordTypeFilter
from shardsync.sources.namespace_policy import NamespacePolicy
from shardsync.sources.table import SHARED_FLAGS, SOURCES
from shardsync.sources.watcher import SourceWatcher, WatchOptions

log = get_logger(__name__)

# How long the graceful stop may go on once the API server is known unreachable (see `_graceful_stop`).
STOP_WHEN_UNREACHABLE = 0.5
# How often the replica's share of the provider budget is computed again from the assignment and the zones.
BUDGET_SHARE_PERIOD = 1.0


class Replica:
    """The parts of one replica and the loops that tie them together; shardsync.ownership.port's `Host`."""

    def __init__(
        self,
        settings: config.Settings,
        kube: Kube,
        provider: Provider,
        ownership: Ownership,
        timings: Timings,
        budget: Budget | None = None,
    ) -> None:
        self.settings = settings
        self.kube = kube
        self.provider = provider
        self.ownership = ownership
        self.timings = timings
        self.budget = budget
        self.zones: set[str] = set()
        self.zones_changed = Notifier()
        self.zones_known = anyio.Event()
        self.stop_done = threading.Event()  # the graceful stop is over: only the teardown is left
        # Sharded replicas hold desired endpoints only for the zones they run (DesiredIndex, per-shard state).
        self.desired = DesiredIndex(restricted=settings.sharding and not settings.once)
        self.events = EventRecorder(kube, settings.identity)
        self.domain_filter = DomainFilter.parse(
            settings.domain_filter,
            settings.exclude_domains,
            settings.regex_domain_filter,
            settings.regex_domain_exclusion,
        )
        work = WorkerOptions(
            interval=settings.interval,
            event_delay=0.0 if settings.events else settings.interval,
            concurrency=settings.concurrency,
            policy=settings.policy,
            dry_run=settings.dry_run,
            domains=self.domain_filter,
        )
        common = settings.options(SHARED_FLAGS)
        policy = NamespacePolicy.configured(kube, common.namespace_domains_annotation)
        registry = registry_for(settings)
        self.worker = Worker(
            provider,
            registry,
            self.desired,
            work,
            events=self.events,
            may_write=ownership.may_write,
            on_fenced=ownership.on_fenced,
            guard=DeleteGuard.of(policy, common.namespace_domains_max_delete, registry.owner_id, self.events),
        )
        kinds = [SOURCES[name] for name in settings.sources]
        watch = WatchOptions(
            sources=settings.sources,
            namespace=settings.namespace,
            objects=ObjectFilter.parse(settings.namespace, settings.label_filter, settings.annotation_filter),
            domains=self.domain_filter,
            record_types=RecordTypeFilter.parse(settings.managed_record_types, settings.exclude_record_types),
            source_options={k.name: settings.options(k.flags) for k in kinds if k.flags is not None},
            common=common,
            # Sharded: the objects of evictable kinds are listed once the first assignment says which
            # zones this replica is about to run (`follow_shard_hint`), or after a lease duration anyway.
            shard_hint_wait=timings.lease_duration if self.desired.restricted else 0.0,
        )
        self.sources = SourceWatcher(
            kube,
            watch,
            self.desired,
            on_dirty=self.worker.mark_dirty,
            events=self.events,
            write_status=ownership.is_coordinator,
            policy=policy,
        )
        self.worker.inputs = self.sources.complete

    # -- zones the provider serves ---------------------------------------------------------------

    async def discover_zones(self) -> None:
        """Follow the provider's zone list (filtered by --domain-filter), every interval."""
        backoff = Backoff(initial=0.5, maximum=30.0)
        last: list[str] | None = None
        while True:
            try:
                listed, versions = await list_zones(self.provider)
            except ProviderError as exc:
                delay = backoff.next()
                self.worker.digest.warning(
                    log, "listing zones failed", error=str(exc), retry_in=f"{delay:.2f}s"
                )
                await anyio.sleep(delay)
                continue
            backoff.reset()
            self.worker.zones_listed(versions)
            # The list itself rarely changes (its versions do, at every write): filtered only when it did.
            found = self.zones if listed == last else {z for z in listed if self._zone_selected(z)}
            last = list(listed)  # a copy: a provider may hand out the list it keeps
            if found is not self.zones and found != self.zones:
                log.info(
                    "zones changed",
                    zones=len(found),
                    added=len(found - self.zones),
                    removed=len(self.zones - found),
                )
                self.zones = found
                self.worker.mark_dirty(self.desired.set_zones(found))
                self.zones_changed.notify()
            self.zones_known.set()
            await anyio.sleep(self.settings.interval)

    def _zone_selected(self, zone: str) -> bool:
        return self.domain_filter.match(zone) or self.domain_filter.match_parent(zone)

    async def follow_shard_hint(self, ownership: ShardedOwnership) -> None:
        """Tell the desired index which zones the newest assignment gives this replica (`expect`), once
        the zones are known and the assignment names this replica: the sources then keep only what those
        zones need from the first list on (sources.watcher's `_stream`)."""
        wake = Notifier()
        ownership.watch.changed.forward_to(wake)
        self.zones_changed.forward_to(wake)
        await self.zones_known.wait()
        while True:
            ticket = wake.ticket()
            view = ownership.watch.current
            if view is not None and self.settings.identity in view.identities:
                self.desired.expect(view.zones_of(self.settings.identity, self.zones))
                self.sources.shard_hint.set()
            await wake.wait(ticket)

    # -- the provider budget ---------------------------------------------------------------------

    def budget_share(self) -> float:
        """This replica's share of --provider-rate-limit (shardsync.providers.budget): by the zones the
        assignment gives it; before any assignment, one member's weight over the zones; the whole of it
        with --sharding=off or --once (one replica writes; the standbys only list zones)."""
        if not isinstance(self.ownership, ShardedOwnership):
            return 1.0
        view = self.ownership.view
        if view is None:
            return 1.0 / (len(self.zones) + 1)
        return share(self.settings.identity, self.zones, view.owner_of, len(view.members))

    async def follow_budget_share(self, budget: Budget) -> None:
        while True:
            budget.set_share(self.budget_share())
            await anyio.sleep(BUDGET_SHARE_PERIOD)

    # -- status ------------------------------------------------------------------------------------

    def ready(self) -> tuple[bool, str]:
        """Every source kind that can run has listed (one waiting for its CRD holds nothing up: the server
        adds `SourceWatcher.waiting` to the answer), the zones are listed, the ownership layer is ready."""
        outage = self.kube.health.reason()
        if outage:
            return False, outage
        if not self.sources.complete.is_set():
            return False, f"source caches not synced: {', '.join(self.sources.unsynced()) or 'translating'}"
        if not self.zones_known.is_set():
            return False, "zones not listed yet"
        return self.ownership.ready()

    async def shards(self) -> dict[str, Any]:
        self.worker.totals()
        return await self.ownership.snapshot(self)

    # -- the whole replica ----------------------------------------------------------------------

    async def run(self, server: StatusServer) -> int:
        s = self.settings
        log.info(
            "replica starting",
            provider=s.provider,
            sources=",".join(s.sources),
            policy=s.policy,
            owner_id=s.txt_owner_id,
            sharding=s.sharding,
            once=s.once,
            dry_run=s.dry_run,
        )
        async with BlockingPortal() as portal, anyio.create_task_group() as tg:
            server.start(portal)
            try:
                tg.start_soon(self.events.run)
                tg.start_soon(self.sources.run)
                tg.start_soon(self.discover_zones)
                tg.start_soon(self.worker.run)
                if self.budget is not None:
                    tg.start_soon(self.follow_budget_share, self.budget)
                if s.once:
                    return await self._once(tg)
                tg.start_soon(self.ownership.run, self)
                if isinstance(self.ownership, ShardedOwnership) and self.desired.restricted:
                    tg.start_soon(self.follow_shard_hint, self.ownership)
                with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                    async for signum in signals:
                        log.info("stopping", signal=signal.Signals(signum).name)
                        break
                await self._graceful_stop()
                self.stop_done.set()
                tg.cancel_scope.cancel()
            finally:
                server.stop()
                await self.provider.close()
        log.info("replica stopped")
        return 0

    async def _graceful_stop(self) -> None:
        """The ownership layer's stop (drain or hand over, release the leases), bounded: by twice the lease
        overall, and to STOP_WHEN_UNREACHABLE once the API server is found unreachable, since no step of
        it can succeed then (the leases expire by themselves)."""
        health = self.kube.health
        with anyio.move_on_after(max(5.0, self.timings.lease_duration * 2)) as scope:
            async with anyio.create_task_group() as tg:

                async def cut_when_unreachable() -> None:
                    while not health.down:  # noqa: ASYNC110 - set from worker threads, no anyio.Event
                        await anyio.sleep(0.1)
                    await anyio.sleep(STOP_WHEN_UNREACHABLE)
                    log.warning("API server unreachable: stopping without the graceful steps")
                    scope.cancel()

                tg.start_soon(cut_when_unreachable)
                await self.ownership.stop(self)
                tg.cancel_scope.cancel()
        if scope.cancelled_caught and not health.down:
            log.error("graceful stop timed out")

    async def _once(self, tg: anyio.abc.TaskGroup) -> int:
        """Reconcile every zone once (after the caches sync), then stop: external-dns's --once. A kind
        whose CRD is not installed (logged once) has no objects: the run does not wait for it forever."""
        await self.sources.complete.wait()
        await self.zones_known.wait()
        for zone in self.zones:
            self.worker.own(zone)
        started = time.monotonic()
        while True:
            pending = [z for z, st in self.worker.statuses.items() if st.syncs == 0 and not st.last_error]
            if not pending:
                break
            await anyio.sleep(0.05)
        failed = sorted(z for z, st in self.worker.statuses.items() if st.syncs == 0)
        log.info(
            "once: done",
            zones=len(self.worker.statuses),
            failed=len(failed),
            seconds=f"{time.monotonic() - started:.2f}",
        )
        tg.cancel_scope.cancel()
        return 1 if failed else 0


def registry_for(settings: config.Settings) -> Registry:
    """`--registry`: external-dns's TXT registry, or its noop registry (no ownership records)."""
    if settings.registry == "noop":
        return NoopRegistry(managed_types(settings))
    return TxtRegistry(
        owner_id=settings.txt_owner_id,
        prefix=settings.txt_prefix,
        suffix=settings.txt_suffix,
        wildcard_replacement=settings.txt_wildcard_replacement,
        managed_types=managed_types(settings),
        old_owner_id=settings.migrate_from_txt_owner,
    )


def managed_types(settings: config.Settings) -> tuple[str, ...]:
    """--managed-record-types minus --exclude-record-types (external-dns's plan.IsManagedRecord)."""
    return tuple(t for t in settings.managed_record_types if t not in settings.exclude_record_types)


def provider_for(settings: config.Settings, provider: Provider) -> tuple[Provider, Budget | None]:
    """The provider as the worker calls it: every call counted and paced by this replica's share of
    --provider-rate-limit, and with --provider-cache-time each zone's records cached between listings."""
    budget = (
        Budget(settings.provider_rate_limit, settings.provider_burst)
        if settings.provider_rate_limit > 0
        else None
    )
    paced: Provider = BudgetedProvider(provider, budget)
    if settings.provider_cache_time > 0:
        paced = CachedProvider(paced, settings.provider_cache_time)
    return paced, budget


def ownership_for(settings: config.Settings, kube: Kube, timings: Timings) -> Ownership:
    """`--once`: every zone, unfenced; `--sharding=off`: active/passive; otherwise sharded."""
    if settings.once:
        return SoleOwner(settings.identity, settings.weight)
    site = Site(
        kube,
        namespace=settings.lease_namespace,
        instance=settings.instance,
        identity=settings.identity,
        timings=timings,
        weight=settings.weight,
    )
    return ShardedOwnership(site) if settings.sharding else ActivePassiveOwnership(site)
