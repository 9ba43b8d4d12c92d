"""Keeps the desired endpoints in step with the cluster: list+watch what the chosen source kinds read,
re-translate only what an event affects, and tell the caller which zones that changed.

The watcher knows no kind: each is a line of the source table (`sources.table`; what a line says:
`sources.kind`). One Informer per resource a chosen kind watches (one for all the kinds that read it);
namespaced list calls when --namespace is set (except for a related resource the kind reads everywhere,
`SourceKind.all_namespaces`). An event on a kind's own object marks that object pending;
an event on a related object marks the objects the kind's translator says it feeds (`Translator.related`:
the Services a Node, EndpointSlice or Pod feeds). One task translates the pending objects through their
kind's translator, applies `--default-targets` (sources.options), the object, domain and record-type
filters, stores the result in the DesiredIndex under `<kind>/<namespace>/<name>` and calls
`on_dirty(zones)` with the zones whose desired endpoints changed. When PTR is a managed type, the PTR
records that A and AAAA records ask for (`--create-ptr`, sources.ptr) are kept under `ptr/<address>`.

Nothing of a kind is translated before every informer it reads has listed once, so the first translation
sees full caches and each object is translated once however large the initial list. A kind whose resources
are not served yet (its CRD not installed: `SourceKind.crd`) waits for them, watching each CRD by name
(sources.served: its version, else the first of its `older_versions` the CRD serves, is what the informer
reads), saying once what to install (`waiting` gives the `/readyz` detail), and holds up only itself;
`synced` is set once every kind has listed and been translated, `complete` once every kind has or waits
for a CRD not installed (so has no objects yet): the replica is ready then. The worker plans nothing
before `complete` (external-dns plans nothing before its informers synced): a zone planned from half its
sources would, under --policy=sync, delete the records of objects not yet listed.

A problem found in an object (an endpoint dropped, an annotation ignored) is logged and counted when it
first appears (not again while it persists), and posted as a Warning Event. Writing to source objects
(those Events, and what a kind writes itself: the crd kind's DNSEndpoint statuses, sources.status) is left
to one replica, so N replicas do not post N copies: the one holding a zone the object's names reach, else
the one for which `write_status()` is true (sources.problems). The watcher follows `write_status()` itself
(looking every `writer_poll` seconds, from the start): when this replica takes office (elected coordinator
at start-up, or after a failover) it posts the Events of the writer's problems it found while not the
writer and still present (an object invalid since before any coordinator existed), and asks each kind to
catch up on its own writes (`Translator.catch_up`: the crd kind sweeps for lagging statuses at once, not at
its next periodic sweep).

A sharded replica lists an evictable kind's own objects knowing the zones it is about to run, and leaves
out untranslated the objects whose names (`SourceKind.names`) reach none of them (sources.shard_cache):
each replica translates about its share of the objects, not all of them.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio
import anyio.lowlevel
from prometheus_client import Counter

from shardsync.kube.client import Kube, KubeError
from shardsync.kube.events import EventRecorder
from shardsync.kube.informer import Informer
from shardsync.kube.objects import Obj, ObjectRef, Resource
from shardsync.logs import get_logger
from shardsync.pacing.notify import Notifier
from shardsync.records.desired import DesiredIndex
from shardsync.records.domain_filter import DomainFilter
from shardsync.records.endpoint import Endpoint
from shardsync.sources.filters import ObjectFilter, RecordTypeFilter, filter_endpoints
from shardsync.sources.gate import ObjectGate
from shardsync.sources.kind import Names, SourceContext, SourceKind, Translator, chosen
from shardsync.sources.namespace_policy import NamespacePolicy
from shardsync.sources.options import SourceOptions, with_default_targets
from shardsync.sources.problems import ProblemReports
from shardsync.sources.projections import Projection, covering
from shardsync.sources.ptr import PtrIndex
from shardsync.sources.ptr import desired_key as ptr_key
from shardsync.sources.result import INVALID_REASON as INVALID_REASON  # its old home: tests import it here
from shardsync.sources.result import NOT_YET, Problem
from shardsync.sources.served import crd_name, run_when_served
from shardsync.sources.shard_cache import ShardCaches, kept_while_read
from shardsync.sources.table import SOURCES

log = get_logger(__name__)

# external-dns's name: requests for source objects that failed (there: a failed Endpoints() call).
SOURCE_ERRORS = Counter(
    "external_dns_source_errors_total", "Failed list or watch requests for source objects"
)


TURN = 0.005  # seconds of translating before the event loop gets a turn (its other tasks wait meanwhile)


@dataclass(frozen=True, slots=True)
class WatchOptions:
    """What the watcher reads and keeps; shardsync.replica.wiring builds it from `shardsync run`'s flags."""

    sources: tuple[str, ...] = ("service",)  # names of the source table
    namespace: str = ""  # "" reads every namespace
    objects: ObjectFilter = field(default_factory=ObjectFilter)
    domains: DomainFilter = field(default_factory=DomainFilter)
    record_types: RecordTypeFilter = field(default_factory=RecordTypeFilter)
    source_options: Mapping[str, Any] = field(default_factory=dict)  # a kind's options (else its defaults)
    common: SourceOptions = field(default_factory=SourceOptions)  # the flags every kind shares
    watch_timeout: int = 60  # seconds one watch request lasts before it is renewed
    status_resync: float = 30.0  # how often DNSEndpoints with a lagging status are looked for
    max_backoff: float = 30.0  # longest wait between two retries of a failed status write
    writer_poll: float = 0.25  # how often write_status() is looked at, to catch up when it turns true
    # Sharded: how long the objects of evictable kinds wait for `SourceWatcher.shard_hint` before being
    # listed anyway (0: they do not wait); see `_stream`.
    shard_hint_wait: float = 0.0


@dataclass(slots=True)
class _Source:
    """One chosen kind in this watcher."""

    kind: SourceKind[Any]
    translator: Translator
    pending: dict[str, None] = field(default_factory=dict)  # cache keys to translate (ordered)
    ready: bool = False  # every informer it reads has listed
    keeps_read: bool = False  # some related resource is kept only while read (`Translator.admits`)
    names: Names | None = None  # its names function (`SourceKind.names_for` its options)


def _count_error(exc: KubeError) -> None:
    SOURCE_ERRORS.inc()


def _always() -> bool:
    return True


class SourceWatcher:
    """Watches the chosen sources and keeps `desired` equal to their translation; see the module doc."""

    def __init__(
        self,
        kube: Kube,
        options: WatchOptions,
        desired: DesiredIndex,
        on_dirty: Callable[[set[str]], None],
        events: EventRecorder | None = None,
        write_status: Callable[[], bool] = _always,
        table: Mapping[str, SourceKind[Any]] = SOURCES,
        policy: NamespacePolicy | None = None,
    ) -> None:
        unknown = sorted(set(options.sources) - set(table))
        if unknown:
            raise ValueError(f"unknown source {', '.join(unknown)} (choose from {', '.join(table)})")
        self.kube = kube
        self.options = options
        self.desired = desired
        self._on_dirty = on_dirty
        self._events = events
        self._write_status = write_status
        self.synced = anyio.Event()
        self.complete = anyio.Event()  # see the module docstring
        # Resources found not served (their CRD not installed) → what their kinds wait for (`waiting`).
        self._missing: dict[Resource, str] = {}
        # Set once the desired index knows the zones this replica is about to run (DesiredIndex.expect).
        self.shard_hint = anyio.Event()
        self._sources: dict[str, _Source] = {}
        self._informers: dict[Resource, Informer] = {}
        self._list_slots = anyio.CapacityLimiter(1)  # one list page read at a time (Informer.list_slots)
        self._readers: dict[Resource, list[_Source]] = {}  # resource → the kinds that read it
        self._wake = Notifier()
        self.problems = ProblemReports(events, write_status)
        self._started = time.monotonic()
        # external-dns installs its PTR wrapper only when PTR is a managed record type (sources.ptr).
        ptr = options.record_types.match("PTR")
        self._ptr = PtrIndex(options.common.create_ptr) if ptr else None
        # Limits and the namespace policy apply to every kind alike (sources.gate).
        self._gate = ObjectGate(options.common.limits, policy)
        if policy is not None:
            policy.on_change = self._namespace_changed
        for kind in chosen([table[name] for name in dict.fromkeys(options.sources)]):
            self._add(kind)
        # A sharded replica keeps of a related resource read only by key, and by one kind, only what that
        # kind's translator reads (the Pods of its own Services), listing it after the kind's own objects.
        readers = {r: [s.kind for s in sources] for r, sources in self._readers.items()}
        read_only = kept_while_read(readers) if options.shard_hint_wait > 0 and self._ptr is None else {}
        self._read_only: dict[Resource, _Source] = {r: self._sources[n] for r, n in read_only.items()}
        for source in self._read_only.values():
            source.keeps_read = True
        # Per-shard state (sources.shard_cache): what a sharded replica keeps only for the zones it runs.
        self._shard = ShardCaches(
            kube,
            desired,
            {n: (s.kind, self._informers[s.kind.resource]) for n, s in self._sources.items()},
            self._queue,
            lambda name, key: self._sources[name].translator.forget(key),
            report=self._on_change,
            names={n: s.names for n, s in self._sources.items()},
        )

    def _add(self, kind: SourceKind[Any]) -> None:
        context = SourceContext(
            options=self.options.source_options.get(kind.name, kind.default_options()),
            cache=self._cache,
            kube=self.kube,
            may_write=self._write_status,
            status_resync=self.options.status_resync,
            max_backoff=self.options.max_backoff,
            common=self.options.common,
            holds=lambda obj: self._shard.holds_reach(kind, obj, self.options.common),
            read_back=lambda resource, namespace, selector, then: self._shard.read_back(
                self._informers[resource], namespace, selector, then
            ),
            retranslate=partial(self._queue, kind.name),
        )
        source = _Source(kind, kind.start(context), names=kind.names_for(context.options))
        self._sources[kind.name] = source
        for resource in kind.watches:
            self._readers.setdefault(resource, []).append(source)
            if resource not in self._informers:
                self._informers[resource] = Informer(
                    self.kube,
                    resource,
                    namespace=kind.namespace_of(resource, self.options.namespace),
                    on_change=partial(self._on_change, resource),
                    on_error=_count_error,
                    watch_timeout=self.options.watch_timeout,
                    project=self._projection(kind, resource),
                    packed=kind.packs(resource),
                    list_slots=self._list_slots,
                )
            else:
                informer = self._informers[resource]
                # Kinds that keep different parts of one resource: what keeps both parts, else it whole.
                informer.project = covering(informer.project, self._projection(kind, resource))
                if not kind.packs(resource):
                    informer.unpack()  # this kind reads it whole

    def _projection(self, kind: SourceKind[Any], resource: Resource) -> Projection | None:
        filtered = not self.options.objects.annotations.empty()  # --annotation-filter reads any annotation
        return kind.projection(resource, self.options.common.template is not None, filtered)

    def _cache(self, resource: Resource) -> Mapping[str, Obj]:
        return self._informers[resource].cache

    @property
    def informers(self) -> dict[str, Informer]:
        """The informers by resource (`services`, `endpointslices.discovery.k8s.io`, ...), for inspection."""
        return {i.name: i for i in self._informers.values()}

    def unsynced(self) -> list[str]:
        """Resources not listed yet, for a readiness message (empty once every informer has listed), but
        those whose CRD is not installed (`waiting`)."""
        return [
            i.name for r, i in self._informers.items() if not i.synced.is_set() and r not in self._missing
        ]

    # -- events (on the event loop, from the informers) ---------------------------------------------------

    def _on_change(self, resource: Resource, key: str, old: Obj | None, new: Obj | None) -> None:
        for source in self._readers[resource]:
            if resource == source.kind.resource:
                if source.keeps_read:
                    source.translator.listed(key, new)
                if old is None or new is None or not source.translator.unchanged(key, old, new):
                    source.pending[key] = None
            else:
                source.pending.update(dict.fromkeys(source.translator.related(resource, key, old, new)))
        self._wake.notify()

    def _queue(self, name: str, keys: Iterable[str]) -> None:
        self._sources[name].pending.update(dict.fromkeys(keys))
        self._wake.notify()

    def _namespace_changed(self, namespace: str) -> None:
        for source in self._sources.values():
            cache = self._cache(source.kind.resource)
            source.pending.update(dict.fromkeys(k for k in cache if k.startswith(namespace + "/")))
        self._wake.notify()

    # -- running --------------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Watch and translate until cancelled."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._translate_loop)
            tg.start_soon(self._shard.run)
            tg.start_soon(self.problems.follow_writer, self.options.writer_poll, self.request_status_sweep)
            if self._gate.policy is not None:
                tg.start_soon(self._gate.policy.run)
            for resource, informer in self._informers.items():
                waiting = [s.kind for s in self._readers[resource] if s.kind.crd is not None]
                owners = [s for s in self._readers[resource] if s.kind.resource == resource]
                if resource in self._read_only:
                    tg.start_soon(self._stream_read, informer, self._read_only[resource], owners)
                elif self.options.shard_hint_wait > 0 and owners and all(s.kind.evictable for s in owners):
                    tg.start_soon(self._stream, informer, owners, waiting)
                elif waiting:
                    tg.start_soon(self._when_served, informer, waiting)
                else:
                    tg.start_soon(informer.run)
            for source in self._sources.values():
                tg.start_soon(self._await_listed, source)
                tg.start_soon(source.translator.run)

    async def _await_listed(self, source: _Source) -> None:
        for resource in source.kind.watches:
            await self._informers[resource].synced.wait()
        if self._gate.policy is not None:
            await self._gate.policy.synced.wait()
        source.ready = True
        self._wake.notify()

    async def _stream(
        self, informer: Informer, owners: list[_Source], waiting: list[SourceKind[Any]]
    ) -> None:
        """A sharded replica lists an evictable kind's own objects once it knows the zones it is about to
        run (`shard_hint`, bounded by `shard_hint_wait`) and every other resource the kind reads has listed,
        translating each page before the next is read: an object held nowhere is forgotten at once
        (sources.shard_cache), so the replica never holds the objects of the other replicas' zones."""
        for source in owners:
            for resource in source.kind.related:
                if resource not in self._read_only:  # those are listed after (`_stream_read`)
                    await self._informers[resource].synced.wait()
        if self._gate.policy is not None:
            await self._gate.policy.synced.wait()
        with anyio.move_on_after(self.options.shard_hint_wait):
            await self.shard_hint.wait()
        for source in owners:
            source.ready = not source.keeps_read  # else once its inputs are listed too (_await_listed)
        informer.on_page = self.flush
        if self._ptr is None and len(self._readers[informer.resource]) == 1:  # PTR, other readers: all
            informer.admit = self._shard.admitter(owners[0].kind.name, self.options.common)
        if waiting:  # a CRD's objects: once it is served
            await self._when_served(informer, waiting)
        else:
            await informer.run()

    async def _stream_read(self, informer: Informer, source: _Source, owners: list[_Source]) -> None:
        """A related resource kept only while read: listed once the kind's own objects are (each already
        registered what it reads, `Translator.listed`), keeping what `Translator.admits` (and, when an
        evictable kind owns it, what that kind's `admitter` admits, once its other inputs have listed)."""
        for resource in (source.kind.resource, *(r for owner in owners for r in owner.kind.related)):
            await self._informers[resource].synced.wait()
        own = self._shard.admitter(owners[0].kind.name, self.options.common) if owners else None
        self._shard.keep_read(informer, partial(source.translator.admits, informer.resource), own)
        await informer.run()

    async def _translate_loop(self) -> None:
        while True:
            ticket = self._wake.ticket()  # before looking at what is pending: no mark is missed
            await self.flush()
            await self._wake.wait(ticket)

    async def flush(self) -> None:
        """Translate every pending object of the listed kinds, then report the zones touched."""
        touched: set[str] = set()
        turn_ends = time.monotonic() + TURN
        for source in self._sources.values():
            if not source.ready or not source.pending:
                continue
            batch, source.pending = source.pending, {}
            for key in batch:
                touched |= self._translate(source, key)
                if time.monotonic() >= turn_ends:
                    # A large (re)list must not hold the event loop: the worker fences gained zones and
                    # reconciles the zones already translated meanwhile.
                    if touched:
                        self._on_dirty(touched)
                        touched = set()
                    await anyio.lowlevel.checkpoint()
                    turn_ends = time.monotonic() + TURN
        if touched:
            self._on_dirty(touched)
        if self.synced.is_set():
            return
        done = {
            n: s.ready and not s.pending and all(self._informers[r].synced.is_set() for r in s.kind.watches)
            for n, s in self._sources.items()
        }
        if not self.complete.is_set() and all(
            done[n] or self._missing.keys() & set(s.kind.watches) for n, s in self._sources.items()
        ):
            self.complete.set()
        if all(done.values()):
            self.synced.set()
            log.info(
                "sources synced",
                sources=",".join(self._sources),
                objects=sum(len(self._cache(s.kind.resource)) for s in self._sources.values()),
                endpoints=len(self.desired),
                seconds=f"{time.monotonic() - self._started:.3f}",
            )

    # -- one object ------------------------------------------------------------------------------------------

    def _translate(self, source: _Source, key: str) -> set[str]:
        """Translate one object (gone or filtered out: no endpoints); returns the zones that changed."""
        kind = source.kind
        obj = self._cache(kind.resource).get(key)
        if obj is None and self._shard.forgotten(kind.name, key):
            return set()  # evicted (per-shard state): its next change or deletion arrives by the watch
        if obj is not None and not self.options.objects.matches(obj):
            obj = None
        ref: ObjectRef | None = None
        problems: list[Problem] = []
        if obj is not None:
            ref = ObjectRef.of(obj, kind.resource, kind.resource_kind)
            obj, problems = self._gate.before(obj, ref)
        result = source.translator.translate(key, obj)
        if result is NOT_YET:
            return set()  # its inputs are being read back; it is queued again then
        desired_key = sys.intern(f"{kind.name}/{key}")  # mostly the endpoints' resource label: one copy
        found: list[Endpoint] = []
        if result is not None:
            found = with_default_targets(result.endpoints, self.options.common)
            problems += result.problems
        found, refused = self._gate.after(desired_key, ref, found)
        addresses: set[str] = set()
        if self._ptr is not None:
            found, addresses = self._ptr.update(desired_key, found)
        endpoints = filter_endpoints(found, self.options.domains, self.options.record_types)
        problems += refused
        held = None
        if problems and obj is not None:
            held = self._shard.holds_reach(kind, obj, self.options.common)
        self.problems.report(kind.name, desired_key, problems, held)
        changed = self.desired.set_object(desired_key, endpoints)
        for address in addresses:
            assert self._ptr is not None
            ptrs = filter_endpoints(
                self._ptr.endpoints(address), self.options.domains, self.options.record_types
            )
            changed |= self.desired.set_object(ptr_key(address), ptrs)
        self._shard.translated(kind.name, key)  # forgotten when its records all fall in zones not held
        return changed

    async def _when_served(self, informer: Informer, kinds: list[SourceKind[Any]]) -> None:
        resource, names = informer.resource, ",".join(kind.name for kind in kinds)

        def missing() -> None:
            self._missing[resource] = f"{crd_name(resource)} not installed: the {names} source waits for it"
            self._wake.notify()

        found = partial(self._missing.pop, resource, None)
        await run_when_served(self.kube, informer, kinds, SOURCE_ERRORS.inc, missing, found)

    def waiting(self) -> list[str]:
        """What the kinds whose CRD is not installed wait for, one phrase each (`/readyz` detail)."""
        return sorted(set(self._missing.values()))

    def request_status_sweep(self) -> None:
        """This replica has become the writer: post the Events of the problems found while it was not and
        still present, and have every kind catch up on its writes (DNSEndpoint statuses) now."""
        self.problems.taking_office()
        for source in self._sources.values():
            source.translator.catch_up()
