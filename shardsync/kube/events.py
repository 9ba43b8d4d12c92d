"""Kubernetes Events about source objects (an invalid endpoint, a lost name conflict), sent off the hot path.

Callers `record(...)` synchronously; a background task writes the Events. Repeats of the same
(object, reason, message) within the aggregation window become one Event with a higher `count` instead of
a new object each time (client-go's EventCorrelator, reduced), and a full queue drops events with a metric
rather than slowing a reconcile down.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from prometheus_client import Counter

from shardsync.kube.client import Kube, KubeError
from shardsync.kube.objects import EVENTS as EVENT_OBJECTS
from shardsync.kube.objects import ObjectRef
from shardsync.logs import get_logger

log = get_logger(__name__)

EVENTS = Counter("shardsync_events_total", "Kubernetes Events recorded, by reason", ["reason"])
EVENTS_DROPPED = Counter("shardsync_events_dropped_total", "Events dropped: queue full or API error")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    """Queues Events and writes them from `run()`; `aggregate_window` seconds fold repeats into one."""

    def __init__(self, kube: Kube | None, identity: str, aggregate_window: float = 600.0) -> None:
        self._kube = kube
        self._identity = identity
        self._window = aggregate_window
        self._send: MemoryObjectSendStream[tuple[ObjectRef, str, str, str]]
        self._receive: MemoryObjectReceiveStream[tuple[ObjectRef, str, str, str]]
        self._send, self._receive = anyio.create_memory_object_stream(1000)
        # (ref, reason, message) -> (event name, count, first seen on our monotonic clock)
        self._seen: dict[tuple[ObjectRef, str, str], tuple[str, int, float]] = {}

    def record(self, ref: ObjectRef, reason: str, message: str, etype: str = "Warning") -> None:
        EVENTS.labels(reason).inc()
        try:
            self._send.send_nowait((ref, reason, message, etype))
        except anyio.WouldBlock:
            EVENTS_DROPPED.inc()

    async def run(self) -> None:
        async with self._receive:
            async for ref, reason, message, etype in self._receive:
                if self._kube is None:
                    continue
                try:
                    await self._write(ref, reason, message, etype)
                except KubeError as exc:
                    EVENTS_DROPPED.inc()
                    log.warning(
                        "event not written",
                        object=f"{ref.namespace}/{ref.name}",
                        reason=reason,
                        status=exc.status,
                    )

    async def _write(self, ref: ObjectRef, reason: str, message: str, etype: str) -> None:
        assert self._kube is not None
        # An Event about a cluster-scoped object (a Node) lives in `default`, as client-go's recorder puts it.
        namespace = ref.namespace or "default"
        key = (ref, reason, message)
        seen = self._seen.get(key)
        now = time.monotonic()
        stamp = _now()
        if seen is not None and now - seen[2] < self._window:
            name, count, first = seen
            self._seen[key] = (name, count + 1, first)
            try:
                await self._kube.patch(
                    EVENT_OBJECTS,
                    name,
                    {"count": count + 1, "lastTimestamp": stamp},
                    namespace=namespace,
                    patch_type="strategic",
                )
                return
            except KubeError as exc:
                if not exc.not_found:
                    raise
        name = f"{ref.name}.{uuid.uuid4().hex[:16]}"
        self._seen[key] = (name, 1, now)
        if len(self._seen) > 10_000:  # bound memory: forget the oldest half
            for old in sorted(self._seen, key=lambda k: self._seen[k][2])[:5_000]:
                del self._seen[old]
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {
                "kind": ref.kind,
                "namespace": ref.namespace,
                "name": ref.name,
                "uid": ref.uid,
                "apiVersion": ref.api_version,
            },
            "reason": reason,
            "message": message[:1024],
            "type": etype,
            "count": 1,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "source": {"component": "shardsync", "host": self._identity},
            "reportingComponent": "shardsync",
            "reportingInstance": self._identity,
        }
        await self._kube.create(EVENT_OBJECTS, body, namespace=namespace)

    def close(self) -> None:
        self._send.close()
