"""Kubernetes objects as plain dicts: the `Resource` naming a kind of object, its metadata, safe field access.

Pure: no client here. Objects are the API server's JSON; readers tolerate any shape, since a source object
may hold anything a user wrote (`get` answers None where a field is missing or not a mapping).
`shardsync.kube.client` sends requests for these resources; each source kind names its own resources, the ones
the coordination protocol and the Events use are here. `ObjectRef` names one object: what an Event is about,
what a source's result or problem is about.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Resource:
    """One kind of API object, as a path needs it: `group` is "" for the core group."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    # Versions to fall back on, newest first, when the API does not serve `version` (a CRD still at an
    # older version: the source watcher takes the first its CRD serves, sources.served).
    older_versions: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        """The `apiVersion` of its objects: `v1`, `apps/v1`, ..."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str = "", name: str = "", subresource: str = "") -> str:
        """The REST path: a collection (in `namespace`, or across all namespaces when it is ""), or one
        object, or its subresource."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
            if subresource:
                base += f"/{subresource}"
        return base

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


# The objects the coordination protocol and the Events use; each source kind names its own resources.
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
EVENTS = Resource("", "v1", "events", "Event")
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
STATEFULSETS = Resource("apps", "v1", "statefulsets", "StatefulSet")
CUSTOM_RESOURCE_DEFINITIONS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", namespaced=False
)


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """One object by name: enough to post a Kubernetes Event on it and to write external-dns's `resource`
    label of the endpoints it gives (`resource_kind`: service, ingress, crd)."""

    kind: str  # the API kind: Service, Ingress, DNSEndpoint
    namespace: str
    name: str
    uid: str = ""
    api_version: str = "v1"
    resource_kind: str = ""

    @classmethod
    def of(cls, obj: Any, resource: Resource, resource_kind: str) -> ObjectRef:
        """The reference to `obj`, an object of `resource` (its own apiVersion wins when it has one)."""
        return cls(
            kind=resource.kind,
            namespace=get_str(obj, "metadata", "namespace"),
            name=get_str(obj, "metadata", "name"),
            uid=get_str(obj, "metadata", "uid"),
            api_version=get_str(obj, "apiVersion") or resource.api_version,
            resource_kind=resource_kind,
        )

    @property
    def resource(self) -> str:
        """external-dns's `resource` label value: `<resource kind>/<namespace>/<name>`, `<resource
        kind>/<name>` for a cluster-scoped object (`node/<name>`). Interned: the labels of an object's
        endpoints and its key in the desired index (the same text) share one copy."""
        if not self.namespace:
            return sys.intern(f"{self.resource_kind}/{self.name}")
        return sys.intern(f"{self.resource_kind}/{self.namespace}/{self.name}")


def resource_version(obj: Obj) -> str:
    """`metadata.resourceVersion` of an object or a list ("" when absent)."""
    meta = obj.get("metadata")
    return str(meta.get("resourceVersion") or "") if isinstance(meta, dict) else ""


def same_but_version(old: Obj, new: Obj, *ignored: str) -> bool:
    """Whether two versions of an object are equal but for `metadata.resourceVersion` and the top-level
    fields `ignored` (say `status`)."""
    keys = old.keys() - set(ignored)
    if keys != new.keys() - set(ignored):
        return False
    for key in keys:
        before, after = old[key], new[key]
        if key == "metadata" and isinstance(before, dict) and isinstance(after, dict):
            if {**before, "resourceVersion": None} != {**after, "resourceVersion": None}:
                return False
        elif before != after:
            return False
    return True


def object_key(obj: Obj) -> str:
    """`namespace/name`, or `name` for cluster-scoped objects (client-go's MetaNamespaceKeyFunc)."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


def get(obj: Any, *path: str) -> Any:
    """obj[path[0]][path[1]]...; None when any step is missing or not a mapping."""
    cur = obj
    for key in path:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(key)
    return cur


def get_str(obj: Any, *path: str) -> str:
    value = get(obj, *path)
    return value if isinstance(value, str) else ""


def get_list(obj: Any, *path: str) -> list[Any]:
    value = get(obj, *path)
    return value if isinstance(value, list) else []


def get_str_map(obj: Any, *path: str) -> dict[str, str]:
    """A string-to-string map such as labels or annotations; other entries are dropped."""
    value = get(obj, *path)
    if not isinstance(value, Mapping):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


def get_str_list(obj: Any, *path: str) -> list[str]:
    return [v for v in get_list(obj, *path) if isinstance(v, str)]
