"""Following the assignment ConfigMap `<instance>-assignment`: the newest good generation this replica has
read, from a watch or from a fresh read.

A ConfigMap that cannot be parsed is logged and counted, and the last good view kept (rule 5: never act on
a view you cannot read); so is one whose generation is not newer than the view (a stale read, or a second
writer, which resourceVersion preconditions rule out). A deleted ConfigMap changes nothing here either: the
next coordinator recreates it with a higher generation.
"""

from __future__ import annotations

from typing import Any

import anyio
from prometheus_client import Counter

from shardsync.kube.informer import Informer
from shardsync.kube.objects import CONFIGMAPS, resource_version
from shardsync.logs import get_logger
from shardsync.pacing.notify import Notifier
from shardsync.sharding.assignment import Assignment, CorruptAssignment, configmap_name, is_successor
from shardsync.sharding.site import Site

log = get_logger(__name__)

CORRUPT = Counter(
    "shardsync_corrupt_assignments_total", "Assignment ConfigMaps that could not be read (last good one kept)"
)


class AssignmentWatch:
    """`current` is the newest good assignment seen; `resource_version` that of the last ConfigMap seen, good
    or not; `changed` is notified on every ConfigMap seen."""

    def __init__(self, site: Site) -> None:
        self.kube = site.kube
        self.namespace = site.namespace
        self.name = configmap_name(site.instance)
        self.timings = site.timings
        self.current: Assignment | None = None
        self.resource_version: str | None = None
        self.changed = Notifier()
        self._bad: tuple[str, str] | None = None  # (resourceVersion, reason) of the last corrupt one logged
        self._informer = Informer(
            site.kube,
            CONFIGMAPS,
            namespace=site.namespace,
            field_selector=f"metadata.name={self.name}",
            on_change=self._on_change,
            name="assignment",
        )

    @property
    def synced(self) -> anyio.Event:
        return self._informer.synced

    async def run(self) -> None:
        await self._informer.run()

    async def refresh(self) -> Assignment | None:
        """Read the ConfigMap now (KubeError when the API cannot be read) and return the newest good view."""
        body = await self.kube.get(
            CONFIGMAPS, self.name, namespace=self.namespace, request_timeout=self.timings.request_timeout
        )
        if body is not None:
            self.offer(body)
        return self.current

    def _on_change(self, key: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if new is None:
            log.warning("assignment ConfigMap deleted; keeping the last good view", configmap=self.name)
            return
        self.offer(new)

    def offer(self, obj: dict[str, Any]) -> bool:
        """Take the ConfigMap `obj` as the view if it is good and newer; True when the view moved."""
        rv = resource_version(obj)
        self.resource_version = rv or None
        try:
            return self._offer(obj, rv)
        finally:
            self.changed.notify()

    def _offer(self, obj: dict[str, Any], rv: str) -> bool:
        data = obj.get("data")
        try:
            incoming = Assignment.from_configmap_data(data if isinstance(data, dict) else None)
        except CorruptAssignment as exc:
            if self._bad != (rv, str(exc)):
                self._bad = (rv, str(exc))
                CORRUPT.inc()
                log.error(
                    "corrupt assignment ignored; keeping the last good view",
                    configmap=self.name,
                    resource_version=rv,
                    error=str(exc),
                    generation=self.current.generation if self.current else "",
                )
            return False
        if not is_successor(self.current, incoming):
            if self.current is not None and incoming.generation == self.current.generation:
                if incoming.layout != self.current.layout:
                    log.error(
                        "assignment with the same generation but other content ignored",
                        generation=incoming.generation,
                    )
            else:
                log.warning(
                    "older assignment ignored",
                    generation=incoming.generation,
                    current=self.current.generation if self.current else "",
                )
            return False
        self.current = incoming
        log.info(
            "assignment seen",
            generation=incoming.generation,
            members=len(incoming.members),
            coordinator=incoming.coordinator,
        )
        return True
