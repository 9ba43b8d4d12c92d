"""Slim copies of source objects, made as they arrive: an informer's cache keeps only what translation reads.

A kind declares one `Projection` per resource it watches (`SourceKind.projections`); a resource without
one is cached whole, so a new kind works unchanged and only gets slimmer once it says what it reads. Every
projection keeps `metadata.name`, `namespace` and `resourceVersion` (the informer keys and compares on
them). What each keeps is what the translators in this package read, and nothing else:

- Pods (headless and NodePort Services): labels (selectors), external-dns's annotations (`target`),
  `deletionTimestamp`, `spec.hostname` / `nodeName`, `status.phase` / `hostIP` / `conditions` (readiness);
  for the pod kind also (`pod_source`) `uid`, `creationTimestamp`, `spec.hostNetwork`, `status.podIP`.
- Nodes: `spec.unschedulable`, `status.addresses`; for the node kind also (`node_source`) labels,
  external-dns's annotations, `uid`, `creationTimestamp`.
- EndpointSlices: the `kubernetes.io/service-name` label, `addressType`, per endpoint its addresses, ready
  condition and targetRef.
- A kind's own objects: everything but the bookkeeping nobody reads (`managedFields`, kubectl's
  last-applied annotation) — a `--fqdn-template` may read any other field. Without `--fqdn-template`, a
  kind may keep less (`SourceKind.untemplated`): a Service its metadata so slimmed, the `spec` fields the
  service kind reads and `status.loadBalancer` (not `clusterIPs`, `ipFamilies`, `sessionAffinity`...).

A 10,000-Pod cluster's Pods shrink from ~4-8 KiB of parsed JSON each to ~1.4 KiB parsed, and to ~340 bytes
where the informer keeps them as JSON (shardsync.kube.packed). In the caches kept parsed, what many objects
repeat is kept once: strings (namespaces, node names, creation seconds) interned, and equal small values (a
Service's ports, a ReplicaSet's Pod labels) shared through a bounded table (`_shared`).

When two kinds keep different parts of one resource, their one informer keeps the projection covering both
(`covering`: `pod_source` covers `pod`, `node_source` covers `node`, `without_bookkeeping` any), else the
objects whole; with `--annotation-filter` a kind's own objects keep every annotation (`with_annotations`).

A projection may also say which fields it reads as a TypedDict (`PodFields`, `ServiceFields`): its
informer then decodes list pages and watch lines to those fields alone (shardsync.kube.slim_json), so the rest
of a Pod (containers, volumes, statuses) or a Service (managedFields) is never built. It must name
every field its projection reads, and what the informer's `admit` reads: tests/kube/test_slim_json.py checks
both on generated objects.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Mapping
from typing import Any

from shardsync.kube import slim_json
from shardsync.sources.annotations import PREFIXES

Obj = dict[str, Any]
Projection = Callable[[Obj], Obj]

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_IDENTITY_FIELDS = ("name", "namespace", "resourceVersion")


def _interned(value: Any) -> Any:
    """One copy of a string many objects repeat (a namespace, a node name): the JSON decoder makes one per
    object."""
    return sys.intern(value) if type(value) is str else value


# Shared values, by a hashable key made of their own items (no new strings); emptied when full, so it
# stays small whatever the cluster holds and loses only the sharing of values seen before.
_SHARED: dict[Any, Any] = {}
_SHARED_MAX = 4096


def _key(value: Any) -> Any:
    """A hashable key equal for equal JSON values of the shapes shared here; TypeError otherwise."""
    if type(value) is dict:
        if all(type(v) is str for v in value.values()):  # labels: one flat tuple, the fewest objects
            return (dict, *(x for item in value.items() for x in item))
        return tuple((k, _key(v)) for k, v in value.items())
    if type(value) is list:
        return (list, *map(_key, value))
    hash(value)
    return (type(value), value)


def _shared(value: Any) -> Any:
    """One copy of a value many objects repeat whole (a Service's ports, a ReplicaSet's Pod labels): an equal
    value seen lately comes back instead. Only for values nobody changes in place (cached objects are
    replaced whole, never edited)."""
    try:
        key = _key(value)
    except TypeError:
        return value
    found = _SHARED.get(key)
    if found is None:
        if len(_SHARED) >= _SHARED_MAX:
            _SHARED.clear()
        found = _SHARED[key] = value
    return found


def _meta(obj: Mapping[str, Any], *extra: str) -> dict[str, Any]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return {}
    out = {k: meta[k] for k in (*_IDENTITY_FIELDS, *extra) if k in meta}
    if "namespace" in out:
        out["namespace"] = _interned(out["namespace"])
    return out


def _pick(value: Any, *keys: str) -> dict[str, Any]:
    return {k: value[k] for k in keys if k in value} if isinstance(value, dict) else {}


# The few values most slim copies repeat, shared (cached values are never changed in place: an event
# replaces the whole object): a pod's Ready condition and a slice endpoint's ready condition.
_READY_CONDITIONS = {v: [{"type": "Ready", "status": v}] for v in ("True", "False", "Unknown")}
_SLICE_READY = {v: {"ready": v} for v in (True, False)}


def _shared_ready(ready: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if len(ready) == 1 and len(ready[0]) == 2:
        return _READY_CONDITIONS.get(ready[0].get("status"), ready)  # type: ignore[arg-type]
    return ready


def _with_parts(out: Obj, **parts: dict[str, Any]) -> Obj:
    """`out` with each of `parts` that holds anything (a slim copy leaves an empty spec or status out)."""
    out.update((key, part) for key, part in parts.items() if part)
    return out


def _ours(annotations: Any) -> dict[str, Any]:
    if not isinstance(annotations, dict):
        return {}
    return {k: v for k, v in annotations.items() if k.startswith(PREFIXES)}


def _pod(obj: Obj, published: bool) -> Obj:
    """What `pod` keeps, and with `published` what the pod kind reads besides (`pod_source`)."""
    meta = _meta(obj, "labels", "deletionTimestamp", *(("uid", "creationTimestamp") if published else ()))
    if "labels" in meta:
        meta["labels"] = _shared(meta["labels"])  # a ReplicaSet's Pods carry the same labels
    annotations = _ours((obj.get("metadata") or {}).get("annotations"))
    if annotations:
        meta["annotations"] = annotations
    out: Obj = {"metadata": meta}
    spec = _pick(obj.get("spec"), "hostname", "nodeName", *(("hostNetwork",) if published else ()))
    if "nodeName" in spec:
        spec["nodeName"] = _interned(spec["nodeName"])
    status = _pick(obj.get("status"), "phase", "hostIP", *(("podIP",) if published else ()))
    conditions = (obj.get("status") or {}).get("conditions") if isinstance(obj.get("status"), dict) else None
    if isinstance(conditions, list):
        ready = [
            _pick(c, "type", "status") for c in conditions if isinstance(c, dict) and c.get("type") == "Ready"
        ]
        if ready:
            status["conditions"] = _shared_ready(ready)
    for key in ("phase", "hostIP"):
        if key in status:
            status[key] = _interned(status[key])
    return _with_parts(out, spec=spec, status=status)


def pod(obj: Obj) -> Obj:
    """A Pod as the service kind reads it (the Pods of headless and NodePort Services)."""
    return _pod(obj, published=False)


def pod_source(obj: Obj) -> Obj:
    """A Pod as the pod kind reads it too (sources.pod): `pod` plus its uid and creation time (Events, the
    created label), spec.hostNetwork and status.podIP. When both kinds run, their one informer keeps this
    (`covering`)."""
    return _pod(obj, published=True)


# What `pod` and `pod_source` read of a Pod, and what the Pod admissions read (the service kind's: namespace,
# labels; the pod kind's: annotations, name, hostNetwork): the fields a Pod is decoded to
# (shardsync.kube.slim_json). A field is kept whatever JSON it holds; a null object or list is kept as null,
# as `pod` sees it decoded whole.
_POD_META = (*_IDENTITY_FIELDS, "labels", "annotations", "deletionTimestamp", "uid", "creationTimestamp")
_PodConditions: Any = list[slim_json.fields_of("_PodCondition", ("type", "status"))]  # type: ignore[misc]
PodFields = slim_json.fields_of(
    "PodFields",
    (),
    metadata=slim_json.fields_of("_PodMetadata", _POD_META) | None,
    spec=slim_json.fields_of("_PodSpec", ("hostname", "nodeName", "hostNetwork")) | None,
    status=slim_json.fields_of("_PodStatus", ("phase", "hostIP", "podIP"), conditions=_PodConditions | None)
    | None,
)
slim_json.register(pod, PodFields)
slim_json.register(pod_source, PodFields)


def _node(obj: Obj, published: bool) -> Obj:
    meta = _meta(obj, *(("labels", "uid", "creationTimestamp") if published else ()))
    annotations = _ours((obj.get("metadata") or {}).get("annotations")) if published else None
    if annotations:
        meta["annotations"] = annotations
    out: Obj = {"metadata": meta}
    spec = _pick(obj.get("spec"), "unschedulable")
    status = _pick(obj.get("status"), "addresses")
    return _with_parts(out, spec=spec, status=status)


def node(obj: Obj) -> Obj:
    """A Node as the service and pod kinds read it: its addresses and spec.unschedulable."""
    return _node(obj, published=False)


def node_source(obj: Obj) -> Obj:
    """A Node as the node kind reads it too (sources.node): `node` plus its labels, external-dns's
    annotations, uid and creation time."""
    return _node(obj, published=True)


def _slice_endpoint(ep: Any) -> Any:
    if not isinstance(ep, dict):
        return ep
    out = _pick(ep, "addresses", "targetRef")
    ready = _pick(ep.get("conditions"), "ready")
    if ready:
        value = ready["ready"]
        out["conditions"] = _SLICE_READY[value] if value is True or value is False else ready
    if isinstance(out.get("targetRef"), dict):
        ref = _pick(out["targetRef"], "kind", "name", "namespace", "apiVersion")
        for key in ("kind", "namespace"):
            if key in ref:
                ref[key] = _interned(ref[key])
        out["targetRef"] = ref
    return out


def endpoint_slice(obj: Obj) -> Obj:
    meta = _meta(obj, "labels")
    out: Obj = {"metadata": meta}
    if "addressType" in obj:
        out["addressType"] = obj["addressType"]
    endpoints = obj.get("endpoints")
    if isinstance(endpoints, list):
        out["endpoints"] = [_slice_endpoint(ep) for ep in endpoints]
    return out


def without_bookkeeping(obj: Obj) -> Obj:
    """The object less `managedFields` and kubectl's last-applied annotation (for a kind's own objects)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return obj
    # Strings most objects repeat: a namespace, a creation second (objects are made in bursts), the type.
    for key in ("namespace", "creationTimestamp"):
        if key in meta:
            meta[key] = _interned(meta[key])
    for key in ("apiVersion", "kind"):
        if key in obj:
            obj[key] = _interned(obj[key])
    annotations = meta.get("annotations")
    if "managedFields" not in meta and not (isinstance(annotations, dict) and LAST_APPLIED in annotations):
        return obj
    slim = {k: v for k, v in meta.items() if k != "managedFields"}
    if isinstance(annotations, dict) and LAST_APPLIED in annotations:
        slim["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
    return {**obj, "metadata": slim}


# What the service kind reads of a Service's spec (sources.service, service_nodeport, service_inputs).
_SERVICE_SPEC = (
    "type",
    "clusterIP",
    "externalIPs",
    "externalName",
    "externalTrafficPolicy",
    "selector",
    "ports",
    "publishNotReadyAddresses",
)


def service(obj: Obj) -> Obj:
    """A Service as the service kind reads it when no `--fqdn-template` may read the rest."""
    slim = without_bookkeeping(obj)
    out: Obj = {k: slim[k] for k in ("apiVersion", "metadata") if k in slim}
    spec = _pick(obj.get("spec"), *_SERVICE_SPEC)
    if "ports" in spec:
        spec["ports"] = _shared(spec["ports"])  # most Services expose the same few ports
    return _with_parts(out, spec=spec, status=_pick(obj.get("status"), "loadBalancer"))


# What `service` reads of a Service, and what the service kind's placement reads (its annotations): the
# fields a Service is decoded to (shardsync.kube.slim_json). Its metadata is kept whole but for the
# bookkeeping, so the TypedDict names every ObjectMeta field the Kubernetes API defines but `managedFields`.
_OBJECT_META = (
    *_IDENTITY_FIELDS,
    "generateName",
    "selfLink",
    "uid",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
)
ServiceFields = slim_json.fields_of(
    "ServiceFields",
    ("apiVersion",),
    metadata=slim_json.fields_of("_ServiceMetadata", _OBJECT_META) | None,
    spec=slim_json.fields_of("_ServiceSpec", _SERVICE_SPEC) | None,
    status=slim_json.fields_of("_ServiceStatus", ("loadBalancer",)) | None,
)
slim_json.register(service, ServiceFields)


# --- one informer for several kinds, and --annotation-filter ---------------------------------------------

# Projections keeping every field others keep, with the same values: `covering` picks them.
_COVERS: dict[Projection, frozenset[Projection]] = {
    pod_source: frozenset({pod}),
    node_source: frozenset({node}),
}
_ALL_ANNOTATIONS = frozenset({without_bookkeeping, service})  # keep every annotation but kubectl's already


def _covers(wide: Projection, narrow: Projection) -> bool:
    return wide is without_bookkeeping or narrow in _COVERS.get(wide, ())


def covering(a: Projection | None, b: Projection | None) -> Projection | None:
    """What one informer keeps for two kinds that keep `a` and `b` of its objects: the one keeping all the
    other keeps, else the objects whole (None). The service and pod kinds share the Pods' informer this way
    (`pod_source` covers `pod`)."""
    if a is None or b is None:
        return None
    if a is b or _covers(a, b):
        return a
    return b if _covers(b, a) else None


@functools.cache
def with_annotations(projection: Projection) -> Projection:
    """`projection` keeping every annotation of the object but kubectl's last-applied one: what
    `--annotation-filter` may read of a kind's own objects (`pod` keeps external-dns's alone)."""
    if projection in _ALL_ANNOTATIONS:
        return projection

    def project(obj: Obj) -> Obj:
        out = projection(obj)
        meta = obj.get("metadata")
        annotations = meta.get("annotations") if isinstance(meta, dict) else None
        if isinstance(annotations, dict) and isinstance(out.get("metadata"), dict):
            kept = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
            if kept:
                out["metadata"]["annotations"] = kept
        return out

    _COVERS[project] = frozenset({projection, *_COVERS.get(projection, ())})
    slim_json.alias(project, projection)  # it reads the fields `projection` reads
    return project
