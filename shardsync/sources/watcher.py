"""Keeps the desired endpoints in step with the cluster: list+watch the source objects, re-translate only what
an event affects, and tell the caller which zones that changed.

One Informer per resource: Services, EndpointSlices, Pods and Nodes for the service source, Ingresses for
the ingress source, DNSEndpoints for the crd source; namespaced list calls when
--namespace is set. An event marks source objects pending: the object itself, or the Services a Node,
EndpointSlice or Pod feeds (`ServiceInputs`). One task re-translates the pending objects, applies the
object, domain and record-type filters, stores the result in the DesiredIndex under
`<kind>/<namespace>/<name>` (the endpoints' `resource` label) and calls `on_dirty(zones)` with the zones
whose desired endpoints changed.

Nothing of a source is translated before every informer it reads has listed once, so the first translation
sees full caches and each object is translated once however large the initial list. A source whose
informers have not listed (the DNSEndpoint CRD not installed) holds up only itself; `synced` is set once
every source has listed and been translated.

A problem found in an object (an endpoint dropped, an annotation ignored) is logged and counted when it
first appears (not again while it persists), and posted as a Warning Event. Writing to source objects
(those Events and a DNSEndpoint's status.observedGeneration, through the status subresource) is left to the
replica for which `write_status()` is true, so N replicas do not post N copies; a problem first seen while
this replica was not the writer is not posted later. A new writer calls `request_status_sweep()` (or waits
for the periodic sweep) to catch up on statuses.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
from prometheus_client import Counter, Gauge

from shardsync.backoff import Backoff
from shardsync.config import Settings
from shardsync.desired import DesiredIndex
from shardsync.domain_filter import DomainFilter
from shardsync.endpoint import Endpoint
from shardsync.events import EventRecorder
from shardsync.informer import Informer
from shardsync.kube import Kube, KubeError
from shardsync.logs import get_logger
from shardsync.manifests import CRD_FILE, CRD_NAME
from shardsync.objects import Resource, get
from shardsync.sources.crd import DNS_ENDPOINTS, dnsendpoint_endpoints, observed_generation_to_write
from shardsync.sources.filters import ObjectFilter, RecordTypeFilter, filter_endpoints
from shardsync.sources.ingress import INGRESSES, ingress_endpoints
from shardsync.sources.options import SourceOptions
from shardsync.sources.result import Problem, SourceResult
from shardsync.sources.service import (
    ENDPOINT_SLICES,
    NODES,
    PODS,
    SERVICES,
    service_dependencies,
    service_endpoints,
)
from shardsync.sources.service_inputs import ServiceInputs

log = get_logger(__name__)

SERVICE, INGRESS, CRD = "service", "ingress", "crd"
SOURCES = (SERVICE, INGRESS, CRD)
# What each source lists and watches (its own objects first).
SOURCE_RESOURCES: dict[str, tuple[Resource, ...]] = {
    SERVICE: (SERVICES, ENDPOINT_SLICES, PODS, NODES),
    INGRESS: (INGRESSES,),
    CRD: (DNS_ENDPOINTS,),
}

# The Event reason of a problem found in a source object.
INVALID_REASON = "InvalidEndpoint"

# external-dns's name: requests for source objects that failed (there: a failed Endpoints() call).
SOURCE_ERRORS = Counter(
    "external_dns_source_errors_total", "Failed list or watch requests for source objects"
)
INVALID_ENDPOINTS = Counter(
    "shardsync_source_invalid_endpoints_total",
    "Problems found in source objects (an endpoint dropped, an annotation ignored), by source kind",
    ["kind"],
)
CRD_MISSING = Gauge(
    "shardsync_source_crd_missing", "1 while the DNSEndpoint CRD is not installed and the crd source waits"
)
STATUS_WRITES = Counter(
    "shardsync_source_status_writes_total",
    "DNSEndpoint status.observedGeneration writes, by result",
    ["result"],
)

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class WatchOptions:
    """What the watcher reads and keeps; `from_settings` maps the flags of `shardsync run`."""

    sources: tuple[str, ...] = (SERVICE,)
    namespace: str = ""  # "" reads every namespace
    objects: ObjectFilter = field(default_factory=ObjectFilter)
    domains: DomainFilter = field(default_factory=DomainFilter)
    record_types: RecordTypeFilter = field(default_factory=RecordTypeFilter)
    translation: SourceOptions = field(default_factory=SourceOptions)
    watch_timeout: int = 60  # seconds one watch request lasts before it is renewed
    status_resync: float = 30.0  # how often DNSEndpoints with a lagging status are looked for
    max_backoff: float = 30.0  # longest wait between probes for the CRD and between status write retries

    def __post_init__(self) -> None:
        unknown = sorted(set(self.sources) - set(SOURCES))
        if unknown:
            raise ValueError(f"unknown source {', '.join(unknown)} (choose from {', '.join(SOURCES)})")

    @classmethod
    def from_settings(cls, s: Settings) -> WatchOptions:
        """Raises ValueError (SelectorError, re.error) on a bad filter: a configuration error."""
        return cls(
            sources=tuple(dict.fromkeys(s.sources)),
            namespace=s.namespace,
            objects=ObjectFilter.parse(s.namespace, s.label_filter, s.annotation_filter),
            domains=DomainFilter.parse(s.domain_filter, s.exclude_domains),
            record_types=RecordTypeFilter.parse(s.managed_record_types),
            translation=SourceOptions(
                publish_internal=s.publish_internal_services,
                ingress_class_names=frozenset(s.ingress_class),
            ),
        )


def _count_error(exc: KubeError) -> None:
    SOURCE_ERRORS.inc()


def _always() -> bool:
    return True


class SourceWatcher:
    """Watches the configured sources and keeps `desired` equal to their translation; see the module doc."""

    def __init__(
        self,
        kube: Kube,
        settings: Settings | WatchOptions,
        desired: DesiredIndex,
        on_dirty: Callable[[set[str]], None],
        events: EventRecorder | None = None,
        write_status: Callable[[], bool] = _always,
    ) -> None:
        self.kube = kube
        self.options = (
            settings if isinstance(settings, WatchOptions) else WatchOptions.from_settings(settings)
        )
        self.desired = desired
        self._on_dirty = on_dirty
        self._events = events
        self._write_status = write_status
        self.synced = anyio.Event()
        self._inputs = ServiceInputs()
        self._feeds: dict[str, list[Informer]] = {}  # source → every informer it reads
        self._primary: dict[str, Informer] = {}  # source → the informer of its own objects
        self._pending: dict[str, dict[str, None]] = {}  # source → cache keys to re-translate (ordered)
        self._ready: set[str] = set()
        self._wake = anyio.Event()
        self._problems: dict[str, frozenset[Problem]] = {}  # desired key → problems last reported
        self._translated_generation: dict[str, int] = {}  # DNSEndpoint cache key → generation translated
        self._status_due: dict[str, None] = {}
        self._status_wake = anyio.Event()
        self._sweep_requested = False
        self._started = time.monotonic()
        self._nodes: Informer | None = None
        self._build()

    # -- informers ------------------------------------------------------------------------------------------

    def _informer(
        self,
        source: str,
        resource: Resource,
        on_change: Callable[[str, Obj | None, Obj | None], None],
    ) -> Informer:
        informer = Informer(
            self.kube,
            resource,
            namespace=self.options.namespace if resource.namespaced else "",
            on_change=on_change,
            on_error=_count_error,
            watch_timeout=self.options.watch_timeout,
        )
        self._feeds.setdefault(source, []).append(informer)
        self._primary.setdefault(source, informer)
        return informer

    def _build(self) -> None:
        handlers: dict[Resource, Callable[[str, Obj | None, Obj | None], None]] = {
            SERVICES: self._on_service,
            ENDPOINT_SLICES: self._on_endpoint_slice,
            PODS: self._on_pod,
            NODES: self._on_node,
            INGRESSES: self._on_ingress,
            DNS_ENDPOINTS: self._on_dnsendpoint,
        }
        for source in self.options.sources:
            self._pending[source] = {}
            for resource in SOURCE_RESOURCES[source]:
                informer = self._informer(source, resource, handlers[resource])
                if resource is NODES:
                    self._nodes = informer

    @property
    def informers(self) -> dict[str, Informer]:
        """The informers by resource (`services`, `pods`, ...): their caches, for inspection."""
        return {i.name: i for feed in self._feeds.values() for i in feed}

    def unsynced(self) -> list[str]:
        """Resources not listed yet, for a readiness message (empty once every informer has listed)."""
        return [i.name for feed in self._feeds.values() for i in feed if not i.synced.is_set()]

    # -- events (on the event loop, from the informers) ---------------------------------------------------

    def _mark(self, source: str, key: str) -> None:
        self._pending[source][key] = None
        self._wake.set()

    def _on_service(self, key: str, old: Obj | None, new: Obj | None) -> None:
        self._mark(SERVICE, key)

    def _on_ingress(self, key: str, old: Obj | None, new: Obj | None) -> None:
        self._mark(INGRESS, key)

    def _on_dnsendpoint(self, key: str, old: Obj | None, new: Obj | None) -> None:
        self._mark(CRD, key)

    def _on_endpoint_slice(self, key: str, old: Obj | None, new: Obj | None) -> None:
        for svc in self._inputs.set_slice(key, old, new):
            self._mark(SERVICE, svc)

    def _on_pod(self, key: str, old: Obj | None, new: Obj | None) -> None:
        for svc in self._inputs.set_pod(key, old, new):
            self._mark(SERVICE, svc)

    def _on_node(self, key: str, old: Obj | None, new: Obj | None) -> None:
        for svc in self._inputs.set_node(key, old, new):
            self._mark(SERVICE, svc)

    # -- running --------------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Watch and translate until cancelled."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._translate_loop)
            for source, feed in self._feeds.items():
                tg.start_soon(self._await_listed, source, feed)
                for informer in feed:
                    if source == CRD:
                        tg.start_soon(self._run_dnsendpoints, informer)
                    else:
                        tg.start_soon(informer.run)
            if CRD in self._feeds:
                tg.start_soon(self._status_loop)

    async def _await_listed(self, source: str, feed: list[Informer]) -> None:
        for informer in feed:
            await informer.synced.wait()
        self._ready.add(source)
        self._wake.set()

    async def _run_dnsendpoints(self, informer: Informer) -> None:
        """Wait for the DNSEndpoint CRD (probing with backoff, one error logged), then run the informer."""
        backoff = Backoff(initial=0.5, maximum=self.options.max_backoff)
        missing = False
        while True:
            try:
                await self.kube.list(DNS_ENDPOINTS, namespace=self.options.namespace, limit=1)
                break
            except KubeError as exc:
                SOURCE_ERRORS.inc()
                if exc.not_found and not missing:
                    missing = True
                    CRD_MISSING.set(1)
                    log.error(
                        "DNSEndpoint CRD not installed; the crd source waits for it, the others run",
                        crd=CRD_NAME,
                        manifest=f"shardsync/manifests/{CRD_FILE}",
                    )
                elif not exc.not_found:
                    log.warning("listing dnsendpoints failed", status=exc.status, reason=exc.reason)
                await anyio.sleep(backoff.next())
        if missing:
            CRD_MISSING.set(0)
            log.info("DNSEndpoint CRD found; crd source starting", crd=CRD_NAME)
        await informer.run()

    async def _translate_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            await self.flush()

    async def flush(self) -> None:
        """Re-translate every pending object of the listed sources, then report the zones touched."""
        touched: set[str] = set()
        done = 0
        for source in self.options.sources:
            if source not in self._ready or not self._pending[source]:
                continue
            batch, self._pending[source] = self._pending[source], {}
            for key in batch:
                touched |= self._translate(source, key)
                done += 1
                if done % 256 == 0:  # a large (re)list must not hold the event loop for long
                    await anyio.lowlevel.checkpoint()
        if touched:
            self._on_dirty(touched)
        if (
            not self.synced.is_set()
            and len(self._ready) == len(self._pending)
            and not any(self._pending.values())
        ):
            self.synced.set()
            log.info(
                "sources synced",
                sources=",".join(self.options.sources),
                objects=sum(len(self._primary[s].cache) for s in self.options.sources),
                endpoints=len(self.desired),
                seconds=f"{time.monotonic() - self._started:.3f}",
            )

    # -- one object ------------------------------------------------------------------------------------------

    def _translate(self, source: str, key: str) -> set[str]:
        """Translate one object (gone or filtered out: no endpoints); returns the zones that changed."""
        obj = self._primary[source].cache.get(key)
        result: SourceResult | None = None
        if obj is not None and not self.options.objects.matches(obj):
            obj = None
        if source == SERVICE:
            result = self._translate_service(key, obj)
        elif obj is not None and source == INGRESS:
            result = ingress_endpoints(obj, self.options.translation)
        elif source == CRD:
            result = self._translate_dnsendpoint(key, obj)
        desired_key = f"{source}/{key}"
        endpoints: list[Endpoint] = []
        if result is not None:
            endpoints = filter_endpoints(result.endpoints, self.options.domains, self.options.record_types)
        self._report(source, desired_key, result.problems if result is not None else [])
        return self.desired.set_object(desired_key, endpoints)

    def _translate_service(self, key: str, svc: Obj | None) -> SourceResult | None:
        if svc is None:
            self._inputs.unregister(key)
            return None
        opts = self.options.translation
        self._inputs.register(key, svc, service_dependencies(svc, opts))
        return service_endpoints(
            svc,
            nodes=self._nodes.cache if self._nodes is not None else {},
            slices=self._inputs.slices_for(key),
            pods=self._inputs.pods_for(key),
            opts=opts,
        )

    def _translate_dnsendpoint(self, key: str, obj: Obj | None) -> SourceResult | None:
        if obj is None:
            self._translated_generation.pop(key, None)
            self._status_due.pop(key, None)
            return None
        generation = get(obj, "metadata", "generation")
        if isinstance(generation, int):
            self._translated_generation[key] = generation
        if observed_generation_to_write(obj) is not None:
            self._status_due[key] = None
            self._status_wake.set()
        return dnsendpoint_endpoints(obj)

    def _report(self, source: str, desired_key: str, problems: Iterable[Problem]) -> None:
        """Log, count and post (as Warning Events) the problems that were not there last time."""
        fresh = frozenset(problems)
        before = self._problems.pop(desired_key, frozenset())
        if fresh:
            self._problems[desired_key] = fresh
        new = [p for p in dict.fromkeys(problems) if p not in before]
        if not new:
            return
        post = self._events is not None and self._write_status()
        for p in new:
            INVALID_ENDPOINTS.labels(source).inc()
            log.warning("invalid source object", object=p.ref.resource, field=p.field, problem=p.message)
            if post and self._events is not None:
                self._events.record(p.ref, INVALID_REASON, f"{p.field}: {p.message}")

    # -- DNSEndpoint status ---------------------------------------------------------------------------------

    def request_status_sweep(self) -> None:
        """Look for lagging DNSEndpoint statuses now (say, once this replica has become the writer)."""
        self._sweep_requested = True
        self._status_wake.set()

    async def _status_loop(self) -> None:
        backoff = Backoff(initial=0.2, maximum=self.options.max_backoff)
        while True:
            with anyio.move_on_after(self.options.status_resync) as timer:
                await self._status_wake.wait()
            self._status_wake = anyio.Event()
            if not self._write_status():
                # Not ours to write; whoever becomes the writer sweeps (or is asked to).
                self._status_due.clear()
                continue
            if timer.cancelled_caught or self._sweep_requested:
                self._sweep_requested = False
                self._status_due.update(dict.fromkeys(self._translated_generation))
            if await self._write_due():
                backoff.reset()
            else:
                await anyio.sleep(backoff.next())
                self._status_wake.set()

    async def _write_due(self) -> bool:
        """Write status.observedGeneration for every due DNSEndpoint; False if a write failed (kept due)."""
        informer = self._primary[CRD]
        ok = True
        for key in list(self._status_due):
            obj = informer.cache.get(key)
            due = None if obj is None else observed_generation_to_write(obj)
            if obj is None or due is None or due != self._translated_generation.get(key):
                # Gone, already written, or a newer generation not translated yet (it will be queued then).
                self._status_due.pop(key, None)
                continue
            namespace, _, name = key.partition("/")
            try:
                await self.kube.patch_status(
                    DNS_ENDPOINTS, name, {"status": {"observedGeneration": due}}, namespace=namespace
                )
            except KubeError as exc:
                if exc.not_found:
                    self._status_due.pop(key, None)
                    continue
                ok = False
                STATUS_WRITES.labels("error").inc()
                log.warning(
                    "writing dnsendpoint status failed", object=key, status=exc.status, reason=exc.reason
                )
                continue
            self._status_due.pop(key, None)
            STATUS_WRITES.labels("written").inc()
        return ok
