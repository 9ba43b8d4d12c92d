"""List + watch one kind of Kubernetes object into a local cache (client-go's informer, reduced).

A source or the sharding code reads `cache` and is told of each change through `on_change(key, old, new)`
(`old` None on add, `new` None on delete), called on the event loop. The informer lists once, then watches
from the list's resourceVersion; a watch the server ends is resumed from the last version seen (BOOKMARKs
keep it fresh); a 410 Expired relists and reports the difference as changes; any other error backs off
with jitter and retries, keeping the last good cache meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio
from prometheus_client import Counter

from shardsync.backoff import Backoff
from shardsync.kube import Kube, KubeError
from shardsync.logs import get_logger

log = get_logger(__name__)

ChangeHandler = Callable[[str, dict[str, Any] | None, dict[str, Any] | None], None]

WATCH_ERRORS = Counter(
    "shardsync_kube_watch_errors_total", "List or watch failures, by resource", ["resource"]
)
RELISTS = Counter("shardsync_kube_relists_total", "Full relists after an expired watch", ["resource"])


def object_key(obj: dict[str, Any]) -> str:
    """`namespace/name`, or `name` for cluster-scoped objects (client-go's MetaNamespaceKeyFunc)."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


class Informer:
    """Keeps `cache` equal to the API's view of one list call (its filters included)."""

    def __init__(
        self,
        kube: Kube,
        resource: str,
        list_fn: Callable[..., Any],
        *args: Any,
        on_change: ChangeHandler | None = None,
        watch_timeout: int = 60,
        **list_kwargs: Any,
    ) -> None:
        self.kube = kube
        self.resource = resource
        self._list_fn = list_fn
        self._args = args
        self._kwargs = list_kwargs
        self._on_change = on_change
        self._watch_timeout = watch_timeout
        self.cache: dict[str, dict[str, Any]] = {}
        self.resource_version = ""
        self.synced = anyio.Event()

    def _emit(self, key: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if self._on_change is not None:
            self._on_change(key, old, new)

    async def relist(self) -> None:
        """Replace the cache with a fresh list, reporting what differs from the old one."""
        body = await self.kube.call(self._list_fn, *self._args, **self._kwargs)
        fresh: dict[str, dict[str, Any]] = {}
        for item in body.get("items") or []:
            fresh[object_key(item)] = item
        old, self.cache = self.cache, fresh
        for key, obj in fresh.items():
            before = old.get(key)
            if before is None or _rv(before) != _rv(obj):
                self._emit(key, before, obj)
        for key, before in old.items():
            if key not in fresh:
                self._emit(key, before, None)
        self.resource_version = str((body.get("metadata") or {}).get("resourceVersion") or "")
        self.synced.set()

    def _handle(self, etype: str, obj: dict[str, Any]) -> None:
        rv = _rv(obj)
        if rv:
            self.resource_version = rv
        if etype == "BOOKMARK":
            return
        key = object_key(obj)
        before = self.cache.get(key)
        if etype == "DELETED":
            if self.cache.pop(key, None) is not None:
                self._emit(key, before, None)
        else:
            self.cache[key] = obj
            self._emit(key, before, obj)

    async def run(self) -> None:
        """List, then watch forever; cancel the calling task to stop."""
        backoff = Backoff(initial=0.2, maximum=10.0)
        need_list = True
        while True:
            try:
                if need_list:
                    await self.relist()
                    need_list = False
                started = time.monotonic()
                await self.kube.watch(
                    self._list_fn,
                    *self._args,
                    resource_version=self.resource_version,
                    handle=self._handle,
                    timeout_seconds=self._watch_timeout,
                    **self._kwargs,
                )
                if time.monotonic() - started < 1.0:
                    # A watch the server ends at once (shutting down, overloaded) must not become a hot loop.
                    await anyio.sleep(backoff.next())
                else:
                    backoff.reset()
            except KubeError as exc:
                if exc.expired:
                    RELISTS.labels(self.resource).inc()
                    log.info("watch expired, relisting", resource=self.resource)
                    need_list = True
                    continue
                WATCH_ERRORS.labels(self.resource).inc()
                delay = backoff.next()
                log.warning(
                    "list/watch failed",
                    resource=self.resource,
                    status=exc.status,
                    reason=exc.reason,
                    retry_in=f"{delay:.2f}s",
                )
                # After an error the watch may have missed events for longer than the server keeps them.
                need_list = need_list or exc.status in (0, 500, 503)
                await anyio.sleep(delay)


def _rv(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")
