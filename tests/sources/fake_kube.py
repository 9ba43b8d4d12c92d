"""A Kube that serves lists from memory and hands each watch's callback to the test: the watcher's informers
run unchanged, and a test delivers events one at a time, deterministically, with no server or thread.

The CustomResourceDefinitions a waiting kind follows by name (sources.served) are made up: every CRD is
installed and Established but those of the resources in `missing`; `serve` installs one (an ADDED event on
the CRD's watch, as a real API server's would be)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import anyio

from shardsync.kube.client import Kube, KubeError
from shardsync.kube.objects import CUSTOM_RESOURCE_DEFINITIONS, Obj, Resource, object_key
from shardsync.sources.served import crd_name
from shardsync.sources.table import SOURCES


def crd_of(resource: Resource) -> Obj:
    """An Established CRD serving `resource` at its version and its older ones."""
    versions = (resource.version, *resource.older_versions)
    return {
        "metadata": {"name": crd_name(resource)},
        "spec": {"versions": [{"name": v, "served": True} for v in versions]},
        "status": {"conditions": [{"type": "Established", "status": "True"}]},
    }


class FakeKube(Kube):
    """Objects by resource; `emit` delivers a watch event to the informer watching that resource."""

    def __init__(self) -> None:  # no client: every verb the watcher uses is answered here
        self.objects: dict[Resource, dict[str, Obj]] = {}
        self.missing: set[Resource] = set()  # listing these answers 404, as a resource nobody serves
        self.held: dict[Resource, anyio.Event] = {}  # listing these answers once the event is set
        self.lists: Counter[Resource] = Counter()
        self.status_patches: list[tuple[str, str, Any]] = []
        self._handles: dict[Resource, Callable[[str, Obj], None]] = {}
        self._crd_handles: dict[str, Callable[[str, Obj], None]] = {}  # CRD name → its watch
        self.crd_selectors: list[str] = []  # the field selectors CRDs were listed and watched with
        self.crds_denied = False  # CRDs answer 403, as without their RBAC rule
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

    def serve(self, resource: Resource) -> None:
        """Install the CRD of a resource in `missing`: it is listed from now on."""
        self.missing.discard(resource)
        crd = crd_of(resource)
        self._version += 1
        crd["metadata"]["resourceVersion"] = str(self._version)
        handle = self._crd_handles.get(crd_name(resource))
        if handle is not None:
            handle("ADDED", crd)

    def _crds(self, selector: str) -> list[Obj]:
        """The CRD a list by name finds: one for any resource the test or the source table names, unless
        that resource is `missing`."""
        name = selector.removeprefix("metadata.name=")
        known = {*self.objects, *self.held, *(r for kind in SOURCES.values() for r in kind.watches)}
        found = [r for r in known - self.missing if crd_name(r) == name]
        return [crd_of(found[0])] if found and name not in {crd_name(r) for r in self.missing} else []

    async def list(self, resource: Resource, **query: Any) -> Obj:
        self.lists[resource] += 1
        if resource == CUSTOM_RESOURCE_DEFINITIONS:
            self.crd_selectors.append(query.get("field_selector", ""))
            if self.crds_denied:
                raise KubeError(403, "Forbidden")
            items = self._crds(query.get("field_selector", ""))
            return {"metadata": {"resourceVersion": str(self._version)}, "items": items}
        if resource in self.held:
            await self.held[resource].wait()
        if resource in self.missing:
            raise KubeError(404, "NotFound")
        items = list(self.objects.get(resource, {}).values())
        return {"metadata": {"resourceVersion": str(self._version)}, "items": items}

    async def watch(self, resource: Resource, **query: Any) -> None:
        if resource == CUSTOM_RESOURCE_DEFINITIONS:
            self.crd_selectors.append(query["field_selector"])
            self._crd_handles[query["field_selector"].removeprefix("metadata.name=")] = query["handle"]
        else:
            self._handles[resource] = query["handle"]
        await anyio.sleep_forever()

    async def patch(self, resource: Resource, name: str, body: Any, **query: Any) -> Obj:
        assert query.get("subresource") == "status", "the watcher only patches the status subresource"
        self.status_patches.append((query.get("namespace", ""), name, body))
        return {}
