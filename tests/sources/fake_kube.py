"""A Kube that serves lists from memory and hands each watch's callback to the test: the watcher's informers
run unchanged, and a test delivers events one at a time, deterministically, with no server or thread."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import anyio

from shardsync.kube import Kube, KubeError
from shardsync.objects import Obj, Resource, object_key


class FakeKube(Kube):
    """Objects by resource; `emit` delivers a watch event to the informer watching that resource."""

    def __init__(self) -> None:  # no client: every verb the watcher uses is answered here
        self.objects: dict[Resource, dict[str, Obj]] = {}
        self.missing: set[Resource] = set()  # listing these answers 404, as a resource nobody serves
        self.held: dict[Resource, anyio.Event] = {}  # listing these answers once the event is set
        self.lists: Counter[Resource] = Counter()
        self.status_patches: list[tuple[str, str, Any]] = []
        self._handles: dict[Resource, Callable[[str, Obj], None]] = {}
        self._version = 1

    def put(self, resource: Resource, obj: Obj) -> None:
        """Store `obj` before the watcher lists (no event)."""
        self._version += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self._version)
        self.objects.setdefault(resource, {})[object_key(obj)] = obj

    def emit(self, resource: Resource, etype: str, obj: Obj) -> None:
        """Store (or delete) `obj` and deliver the event to the informer's watch."""
        self._version += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self._version)
        if etype == "DELETED":
            self.objects.get(resource, {}).pop(object_key(obj), None)
        else:
            self.objects.setdefault(resource, {})[object_key(obj)] = obj
        self._handles[resource](etype, obj)

    def watching(self, resource: Resource) -> bool:
        return resource in self._handles

    async def list(self, resource: Resource, **query: Any) -> Obj:
        self.lists[resource] += 1
        if resource in self.held:
            await self.held[resource].wait()
        if resource in self.missing:
            raise KubeError(404, "NotFound")
        items = list(self.objects.get(resource, {}).values())
        return {"metadata": {"resourceVersion": str(self._version)}, "items": items}

    async def watch(self, resource: Resource, **query: Any) -> None:
        self._handles[resource] = query["handle"]
        await anyio.sleep_forever()

    async def patch(self, resource: Resource, name: str, body: Any, **query: Any) -> Obj:
        assert query.get("subresource") == "status", "the watcher only patches the status subresource"
        self.status_patches.append((query.get("namespace", ""), name, body))
        return {}
