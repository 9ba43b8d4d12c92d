"""List + watch one kind of Kubernetes object into a local cache (client-go's informer, reduced).

A source or the sharding code reads `cache` and is told of each change through `on_change(key, old, new)`
(`old` None on add, `new` None on delete), called on the event loop. The informer lists once, then watches
from the list's resourceVersion; a watch the server ends is resumed from the last version seen (BOOKMARKs
keep it fresh); a 410 Expired relists and reports the difference as changes; any other error backs off
with jitter and retries, keeping the last good cache meanwhile. While the API server is unreachable the
informers share one warning rhythm (shardsync.kube.health) instead of each warning at its own, and once it
answers again every informer retries at once, its backoff reset (`ApiHealth.pause`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import anyio
from prometheus_client import Counter

from shardsync.kube.client import Kube, KubeError
from shardsync.kube.objects import Resource, object_key, resource_version
from shardsync.kube.packed import PackedCache
from shardsync.kube.slim_json import decoder_for
from shardsync.logs import get_logger
from shardsync.pacing.backoff import Backoff

log = get_logger(__name__)

ChangeHandler = Callable[[str, dict[str, Any] | None, dict[str, Any] | None], None]

WATCH_ERRORS = Counter(
    "shardsync_kube_watch_errors_total", "List or watch failures, by resource", ["resource"]
)
RELISTS = Counter("shardsync_kube_relists_total", "Full relists after an expired watch", ["resource"])


@dataclass(eq=False)
class Informer:
    """Keeps `cache` equal to the API's view of one list call (its filters included)."""

    kube: Kube
    resource: Resource
    _: KW_ONLY
    namespace: str = ""
    label_selector: str = ""
    field_selector: str = ""
    on_change: ChangeHandler | None = None
    on_error: Callable[[KubeError], None] | None = None
    watch_timeout: int = 60
    name: str = ""  # in logs and metric labels; the resource's plural when ""
    # What of each object is kept (and handed to on_change), applied as it arrives; None keeps it whole.
    # One registered with shardsync.kube.slim_json is given objects decoded to the fields it reads alone.
    project: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # Objects per list request (0: one request), as client-go's pager. Each page costs a token of
    # --kube-api-qps, and no zone is written before every kind has listed: at the default 5/s, a replica
    # over 35,000 objects wrote its first zone after ~19 s in pages of 500, ~35 s in pages of 250 (bench
    # memory_at_scale, full profile). A page of 500 Pods as an API server returns them decodes whole to
    # ~5 MiB, on top of the caches at the peak (one page at a time: list_slots).
    page_size: int = 500
    # Awaited after each page of a list has been put in the cache and reported (see relist).
    on_page: Callable[[], Awaitable[None]] | None = None
    # Keep each cached object as compact JSON, decoded when read (kube/packed.py): for caches read by key.
    packed: bool = False
    # Shared by informers whose list pages should not be read (and decoded, whole) at the same time: a page
    # of 500 Pods as an API server sends them is ~5 MiB parsed, and every informer of a replica lists at
    # start-up together.
    list_slots: anyio.CapacityLimiter | None = None
    # Asked of an object as listed or watched (before `project`) when its key is not cached: False
    # leaves it out, unreported and untracked (not even as forgotten: a sweep puts such objects back,
    # `put_back`). A sharded replica leaves out the objects of other replicas' zones this way
    # (sources.shard_cache).
    admit: Callable[[str, dict[str, Any]], bool] | None = None
    left_out: bool = field(default=False, init=False)  # `admit` has said False at least once
    cache: MutableMapping[str, dict[str, Any]] = field(init=False, repr=False)
    resource_version: str = field(default="", init=False)
    forgotten: set[str] = field(default_factory=set, init=False, repr=False)  # see forget()
    # While a sweep reads the resource again (`sweeping`), the keys the watch changed meanwhile: what the
    # sweep read of them may be older than what the watch delivered, so `put_back` and `restore` refuse them.
    _sweeps: int = field(default=0, init=False, repr=False)
    _touched: set[str] = field(default_factory=set, init=False, repr=False)
    synced: anyio.Event = field(default_factory=anyio.Event, init=False, repr=False)

    def __post_init__(self) -> None:
        self.name = self.name or str(
            self.resource
        )  # plural.group, as kubectl names it: two groups share "gateways"
        self.cache = PackedCache() if self.packed else {}

    def unpack(self) -> None:
        """Keep objects parsed from now on (before the first list: a cache read whole wants them so)."""
        if self.packed:
            self.packed = False
            self.cache = dict(self.cache.items())

    def _emit(self, key: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if self.on_change is not None:
            self.on_change(key, old, new)

    async def relist(self) -> None:
        """Bring the cache up to a fresh list, reporting what differs. Listed in pages of `page_size`
        (client-go's pager), each projected and put in the cache (its changes reported) before the next is
        read, then `on_page` is awaited: the full objects of a large list are never held at once, and a
        caller that drops what it does not need (`forget`) after each page never holds all of it either.
        Objects gone from the list are reported at the end."""
        project, admit = self.project, self.admit
        slim = decoder_for(project)  # objects decoded to what `project` reads, when it says what that is
        cache = self.cache
        seen: set[str] = set()
        token = ""
        while True:
            async with self.list_slots or contextlib.nullcontext():
                body = await self.kube.list(
                    self.resource,
                    namespace=self.namespace,
                    label_selector=self.label_selector,
                    field_selector=self.field_selector,
                    limit=self.page_size or None,
                    continue_token=token,
                    decode=None if slim is None else slim.page,
                )
            meta = body.get("metadata") or {}
            token = str(meta.get("continue") or "") if self.page_size else ""
            version = resource_version(body)
            items = body.get("items") or []
            del body  # this page's full objects go as they are projected
            changed: list[tuple[str, dict[str, Any] | None, dict[str, Any]]] = []
            for item in items:
                key = object_key(item)
                seen.add(key)
                if self._sweeps:
                    self._touched.add(key)
                before = cache.get(key)
                if before is not None and resource_version(before) == resource_version(item):
                    continue
                if before is None and admit is not None and not admit(key, item):
                    self.left_out = True
                    continue
                obj = item if project is None else project(item)
                cache[key] = obj
                self.forgotten.discard(key)
                changed.append((key, before, obj))
            del items
            for key, before, obj in changed:
                self._emit(key, before, obj)
            del changed
            if self.on_page is not None:
                await self.on_page()
            if not token:
                break
        for key in [k for k in cache if k not in seen]:
            self._emit(key, cache.pop(key), None)
        for key in [k for k in self.forgotten if k not in seen]:
            self.forgotten.discard(key)
            self._emit(key, None, None)
        self.resource_version = version
        self.synced.set()

    def forget(self, key: str) -> None:
        """Drop `key`'s object from the cache while keeping track of it: its next change or deletion is
        still reported (a deletion as `on_change(key, None, None)`), and `restore` puts it back."""
        if key in self.cache:
            del self.cache[key]
            self.forgotten.add(key)

    @contextlib.contextmanager
    def sweeping(self) -> Iterator[None]:
        """Around a read of the resource whose objects are then `restore`d (see `_touched`)."""
        self._sweeps += 1
        try:
            yield
        finally:
            self._sweeps -= 1
            if not self._sweeps:
                self._touched.clear()

    def put_back(self, key: str, obj: dict[str, Any], *, report: bool = False) -> bool:
        """Cache an object a sweep read (see `admit`), reported as added when `report`; False when it is
        cached already or the watch changed it while the sweep read (`sweeping`): the watch's is newer,
        or it is gone."""
        if key in self.cache or key in self._touched:
            return False
        self.forgotten.discard(key)
        kept = self.cache[key] = obj if self.project is None else self.project(obj)
        if report:
            self._emit(key, None, kept)
        return True

    def drop(self, key: str) -> None:
        """Stop keeping `key`'s object, reported as deleted, as if `admit` had left it out: its changes
        are asked of `admit` again, and a sweep may put it back."""
        before = self.cache.pop(key, None)
        if before is not None:
            self.left_out = True
            self._emit(key, before, None)

    def restore(self, key: str, obj: dict[str, Any] | None) -> bool:
        """Put a forgotten object back (as read with a GET; None: it is gone); False when the watch
        delivered it meanwhile (the cache holds the newer one, or it was left out)."""
        if key not in self.forgotten or key in self._touched:
            return False
        self.forgotten.discard(key)
        if obj is not None:
            self.cache[key] = obj if self.project is None else self.project(obj)
        return True

    def _handle(self, etype: str, obj: dict[str, Any]) -> None:
        rv = resource_version(obj)
        if rv:
            self.resource_version = rv
        if etype == "BOOKMARK":
            return
        key = object_key(obj)
        if self._sweeps:
            self._touched.add(key)
        if etype == "DELETED":
            before = self.cache.pop(key, None)
            if before is not None or key in self.forgotten:
                self.forgotten.discard(key)
                self._emit(key, before, None)
        else:
            before = self.cache.get(key)
            if before is None and self.admit is not None and not self.admit(key, obj):
                self.left_out = True
                return
            self.forgotten.discard(key)
            if self.project is not None:
                obj = self.project(obj)
            self.cache[key] = obj
            self._emit(key, before, obj)

    async def run(self) -> None:
        """List, then watch forever; cancel the calling task to stop."""
        backoff = Backoff(initial=0.2, maximum=10.0)
        health = self.kube.health
        need_list = True
        while True:
            recoveries = health.recoveries  # before the call: an outage ending from now on cuts the wait
            try:
                if need_list:
                    await self.relist()
                    need_list = False
                started = time.monotonic()
                slim = decoder_for(self.project)
                await self.kube.watch(
                    self.resource,
                    namespace=self.namespace,
                    resource_version=self.resource_version,
                    handle=self._handle,
                    label_selector=self.label_selector,
                    field_selector=self.field_selector,
                    timeout_seconds=self.watch_timeout,
                    decode=None if slim is None else slim.event,
                )
                if time.monotonic() - started < 1.0:
                    # A watch the server ends at once (shutting down, overloaded) must not become a hot loop.
                    await anyio.sleep(backoff.next())
                else:
                    backoff.reset()
            except KubeError as exc:
                if exc.expired:
                    RELISTS.labels(self.name).inc()
                    log.info("watch expired, relisting", resource=self.name)
                    need_list = True
                    continue
                WATCH_ERRORS.labels(self.name).inc()
                if self.on_error is not None:
                    self.on_error(exc)
                delay = backoff.next()
                # During an API outage every informer fails in step: one warning per step of the outage.
                emit = log.debug if health.quiet(exc.status) else log.warning
                emit(
                    "list/watch failed",
                    resource=self.name,
                    status=exc.status,
                    reason=exc.reason,
                    retry_in=f"{delay:.2f}s",
                )
                # After an error the watch may have missed events for longer than the server keeps them.
                need_list = need_list or exc.status in (0, 500, 503)
                if await health.pause(delay, recoveries):
                    backoff.reset()  # the API server is back: retry now, and from the first step
