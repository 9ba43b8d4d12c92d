"""Watch streams: the events one watch request sees, from a resourceVersion or from a synthetic list of
ADDED events, filtered by namespace and selectors (an object moving out of a selector is seen as DELETED),
with BOOKMARKs, timeoutSeconds, and 410 Expired as an ERROR event when the window no longer reaches back."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from shardsync.kube.selectors import Selector
from shardsync.local.apiserver.errors import expired
from shardsync.local.apiserver.field_selectors import FieldSelector
from shardsync.local.apiserver.meta import in_version, with_resource_version
from shardsync.local.apiserver.resources import Resource
from shardsync.local.apiserver.store import Event, Expired, Store

INITIAL_EVENTS_END = "k8s.io/initial-events-end"


@dataclass(frozen=True)
class WatchSpec:
    resource: Resource
    namespace: str | None
    labels: Selector = field(default_factory=Selector)
    fields: FieldSelector = field(default_factory=FieldSelector)
    # None: start with synthetic ADDED events for what exists now ("" or "0" in the request).
    since: int | None = None
    timeout: float | None = None
    bookmarks: bool = False
    initial_events_end: bool = False


def bookmark(resource: Resource, rv: int, initial_end: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"resourceVersion": str(rv)}
    if initial_end:
        meta["annotations"] = {INITIAL_EVENTS_END: "true"}
    return {
        "type": "BOOKMARK",
        "object": {"kind": resource.kind, "apiVersion": resource.group_version, "metadata": meta},
    }


def translate(event: Event, spec: WatchSpec) -> dict[str, Any] | None:
    """What one stored event looks like to this watch, or None when the watch does not see it."""
    if event.key != spec.resource.key or (spec.namespace is not None and event.namespace != spec.namespace):
        return None
    now_in = Store.matches(event.obj, spec.labels, spec.fields)
    if event.type == "MODIFIED" and event.old is not None:
        was_in = Store.matches(event.old, spec.labels, spec.fields)
        if now_in and was_in:
            kind, obj = "MODIFIED", event.obj
        elif now_in:
            kind, obj = "ADDED", event.obj
        elif was_in:
            kind, obj = "DELETED", with_resource_version(event.old, event.rv)
        else:
            return None
    elif now_in:
        kind, obj = event.type, event.obj
    else:
        return None
    return {"type": kind, "object": in_version(obj, spec.resource)}


def stream(
    store: Store,
    spec: WatchSpec,
    stopping: Callable[[], bool],
    bookmark_interval: float = 60.0,
    tick: float = 0.25,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[dict[str, Any] | None]:
    """Yields watch events; yields None on idle ticks so the caller can check for faults and shutdown."""
    started = clock()
    deadline = started + spec.timeout if spec.timeout else None
    if spec.since is None:
        items, pos = store.snapshot_list(spec.resource, spec.namespace, spec.labels, spec.fields)
        for obj in items:
            yield {"type": "ADDED", "object": in_version(obj, spec.resource)}
        if spec.initial_events_end:
            yield bookmark(spec.resource, pos, initial_end=True)
    else:
        pos = spec.since
    next_bookmark = started + bookmark_interval
    while not stopping():
        try:
            events, current = store.events_after(pos)
        except Expired as exc:
            yield {"type": "ERROR", "object": expired(str(exc)).status()}
            return
        for event in events:
            out = translate(event, spec)
            if out is not None:
                yield out
        pos = max(pos, current)
        now = clock()
        if deadline is not None and now >= deadline:
            return
        if spec.bookmarks and now >= next_bookmark:
            yield bookmark(spec.resource, pos)
            next_bookmark = now + bookmark_interval
        wait = tick
        if deadline is not None:
            wait = min(wait, deadline - now)
        if spec.bookmarks:
            wait = min(wait, max(0.0, next_bookmark - now))
        if not events:
            yield None
        store.wait(pos, max(wait, 0.001))
