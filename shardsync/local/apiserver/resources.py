"""The resource table: which kinds this server holds (built-ins and custom resources registered from CRDs),
with the per-kind facts the REST layer needs: scope, subresources, generation tracking, selectable fields.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from shardsync.local.apiserver.errors import ApiError, GroupResource, invalid
from shardsync.local.apiserver.tables import PrinterColumn

VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
BASE_FIELDS = frozenset({"metadata.name", "metadata.namespace"})


@dataclass(frozen=True)
class ScaleSpec:
    """Where a kind keeps the numbers the `scale` subresource exposes (JSON paths like `.spec.replicas`)."""

    spec_replicas: str = ".spec.replicas"
    status_replicas: str = ".status.replicas"
    label_selector: str | None = None
    # Built-ins keep a LabelSelector object at .spec.selector; CRDs name a string field.
    selector_is_object: bool = False


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    status: bool = False
    scale: ScaleSpec | None = None
    generation: bool = False
    custom: bool = False
    fields: frozenset[str] = BASE_FIELDS
    storage_version: str = ""
    printer_columns: tuple[PrinterColumn, ...] = ()  # a CRD version's additionalPrinterColumns

    @property
    def key(self) -> str:
        """The storage key: the same objects whichever served version a client asks for."""
        return f"{self.group}/{self.plural}"

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self) -> GroupResource:
        return GroupResource(self.group, self.plural)


def _builtin(
    group: str, version: str, plural: str, kind: str, namespaced: bool = True, **kw: Any
) -> Resource:
    return Resource(group, version, plural, kind, namespaced, singular=kind.lower(), **kw)


BUILTINS: tuple[Resource, ...] = (
    _builtin(
        "",
        "v1",
        "namespaces",
        "Namespace",
        False,
        short_names=("ns",),
        status=True,
        fields=BASE_FIELDS | {"status.phase"},
    ),
    _builtin("", "v1", "configmaps", "ConfigMap", short_names=("cm",)),
    _builtin("", "v1", "secrets", "Secret", fields=BASE_FIELDS | {"type"}),
    _builtin(
        "",
        "v1",
        "services",
        "Service",
        short_names=("svc",),
        status=True,
        categories=("all",),
        fields=BASE_FIELDS | {"spec.clusterIP", "spec.type"},
    ),
    _builtin(
        "",
        "v1",
        "pods",
        "Pod",
        short_names=("po",),
        status=True,
        categories=("all",),
        fields=BASE_FIELDS | {"spec.nodeName", "spec.serviceAccountName", "status.phase", "status.podIP"},
    ),
    _builtin(
        "",
        "v1",
        "nodes",
        "Node",
        False,
        short_names=("no",),
        status=True,
        fields=BASE_FIELDS | {"spec.unschedulable"},
    ),
    _builtin(
        "",
        "v1",
        "events",
        "Event",
        short_names=("ev",),
        fields=BASE_FIELDS
        | {
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "reason",
            "source",
            "type",
        },
    ),
    _builtin("", "v1", "serviceaccounts", "ServiceAccount", short_names=("sa",)),
    _builtin("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", generation=True),
    _builtin("coordination.k8s.io", "v1", "leases", "Lease"),
    _builtin(
        "networking.k8s.io", "v1", "ingresses", "Ingress", short_names=("ing",), status=True, generation=True
    ),
    _builtin(
        "apps",
        "v1",
        "statefulsets",
        "StatefulSet",
        short_names=("sts",),
        status=True,
        generation=True,
        categories=("all",),
        scale=ScaleSpec(label_selector=".spec.selector", selector_is_object=True),
    ),
    # What deploy/ installs besides the kinds above (tests/deploy apply it with kubectl).
    _builtin(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        short_names=("pdb",),
        status=True,
        generation=True,
    ),
    _builtin("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    _builtin("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    _builtin("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    _builtin("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    _builtin(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        short_names=("crd", "crds"),
        status=True,
        generation=True,
    ),
)

CRD_KEY = "apiextensions.k8s.io/customresourcedefinitions"
NAMESPACE_KEY = "/namespaces"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def crd_resources(crd: dict[str, Any]) -> list[Resource]:
    """The resources (one per served version) a CustomResourceDefinition declares; raises ApiError(422)."""
    meta, spec = crd.get("metadata") or {}, crd.get("spec") or {}
    name = meta.get("name", "")
    group = spec.get("group") or ""
    names = spec.get("names") or {}
    plural, kind = names.get("plural") or "", names.get("kind") or ""

    def bad(fld: str, detail: str) -> ApiError:
        return invalid("CustomResourceDefinition", "apiextensions.k8s.io", name, fld, detail)

    if not group or "." not in group:
        raise bad("spec.group", "Invalid value: should be a domain with at least one dot")
    if not plural or not _DNS_LABEL.match(plural):
        raise bad("spec.names.plural", "Invalid value: must be a lowercase DNS label")
    if not kind:
        raise bad("spec.names.kind", "Required value")
    if name != f"{plural}.{group}":
        raise bad("metadata.name", f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group')
    scope = spec.get("scope", "Namespaced")
    if scope not in ("Namespaced", "Cluster"):
        raise bad("spec.scope", 'Unsupported value: must be "Cluster" or "Namespaced"')
    versions = spec.get("versions") or []
    if not versions:
        raise bad("spec.versions", "Required value")
    storage = [v.get("name", "") for v in versions if v.get("storage")]
    if len(storage) != 1:
        raise bad("spec.versions", "Invalid value: must have exactly one version marked as storage version")
    out: list[Resource] = []
    for v in versions:
        if not v.get("served", True):
            continue
        sub = v.get("subresources") or {}
        scale_def = sub.get("scale")
        scale = None
        if isinstance(scale_def, dict):
            scale = ScaleSpec(
                scale_def.get("specReplicasPath", ".spec.replicas"),
                scale_def.get("statusReplicasPath", ".status.replicas"),
                scale_def.get("labelSelectorPath"),
            )
        out.append(
            Resource(
                group,
                v.get("name", ""),
                plural,
                kind,
                scope == "Namespaced",
                singular=names.get("singular") or kind.lower(),
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                status="status" in sub,
                scale=scale,
                generation=True,
                custom=True,
                storage_version=storage[0],
                printer_columns=tuple(
                    PrinterColumn.from_crd(c)
                    for c in v.get("additionalPrinterColumns") or ()
                    if isinstance(c, dict)
                ),
            )
        )
    return out


@dataclass
class ResourceTable:
    """Thread-safe lookup of (group, version, plural) and the CRD registrations that extend it."""

    _by_gvr: dict[tuple[str, str, str], Resource] = field(default_factory=dict)
    _crds: dict[str, list[Resource]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        for r in BUILTINS:
            self._by_gvr[(r.group, r.version, r.plural)] = r

    def lookup(self, group: str, version: str, plural: str) -> Resource | None:
        with self._lock:
            return self._by_gvr.get((group, version, plural))

    def by_key(self, key: str) -> Resource | None:
        with self._lock:
            return next((r for r in self._by_gvr.values() if r.key == key), None)

    def all(self) -> list[Resource]:
        with self._lock:
            return list(self._by_gvr.values())

    def check_crd(self, crd: dict[str, Any]) -> list[Resource]:
        """Validates a CRD against the table (no clash with another kind) without registering it."""
        resources = crd_resources(crd)
        name = (crd.get("metadata") or {}).get("name", "")
        with self._lock:
            owned = {(r.group, r.version, r.plural) for r in self._crds.get(name, [])}
            for r in resources:
                gvr = (r.group, r.version, r.plural)
                if gvr in self._by_gvr and gvr not in owned:
                    raise invalid(
                        "CustomResourceDefinition",
                        "apiextensions.k8s.io",
                        name,
                        "spec.names.plural",
                        f"Invalid value: {r.plural}.{r.group}/{r.version} is already served",
                    )
        return resources

    def register(self, crd: dict[str, Any]) -> None:
        resources = self.check_crd(crd)
        name = (crd.get("metadata") or {}).get("name", "")
        with self._lock:
            for old in self._crds.pop(name, []):
                self._by_gvr.pop((old.group, old.version, old.plural), None)
            for r in resources:
                self._by_gvr[(r.group, r.version, r.plural)] = r
            self._crds[name] = resources

    def unregister(self, crd_name: str) -> list[Resource]:
        with self._lock:
            removed = self._crds.pop(crd_name, [])
            for r in removed:
                self._by_gvr.pop((r.group, r.version, r.plural), None)
            return removed

    def groups(self) -> dict[str, list[str]]:
        """group -> served versions, in registration order (the first is the preferred version)."""
        out: dict[str, list[str]] = {}
        with self._lock:
            for g, v, _ in self._by_gvr:
                versions = out.setdefault(g, [])
                if v not in versions:
                    versions.append(v)
        return out

    def in_group_version(self, group: str, version: str) -> list[Resource]:
        with self._lock:
            return [r for (g, v, _), r in self._by_gvr.items() if g == group and v == version]


def namespaced_keys(resources: Iterable[Resource]) -> set[str]:
    return {r.key for r in resources if r.namespaced}
