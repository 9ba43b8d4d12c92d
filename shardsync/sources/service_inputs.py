"""The objects a Service's endpoints are computed from, indexed both ways (pure, no I/O).

A Service's endpoints may read Nodes, its EndpointSlices and the Pods its selector matches
(`service_dependencies`, which answers a `ServiceDependencies`). The service kind's translator registers
each Service with what it reads; then an event on a Node, EndpointSlice or Pod names the Services to
re-translate without scanning every Service, and a translation gets only its own slices and candidate pods
without scanning every Pod. A full (re)list therefore costs O(objects), never O(services * pods).

Keys are the informer cache keys: `namespace/name` for Services, EndpointSlices and Pods, `name` for Nodes.
The index keeps keys only and reads the objects from the watcher's caches (`pods`, `slices`: functions
giving them), so a Pod is held once, in its informer's packed cache; without them (standalone, in tests)
it keeps the objects it was given in a store of its own.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from shardsync.kube.objects import get, get_list, get_str, get_str_map

Obj = Mapping[str, Any]
# (namespace, label key, label value); ("ns", "", "") stands for "every pod of the namespace".
LabelSlot = tuple[str, str, str]

_EMPTY: dict[str, Obj] = {}

# A set of keys in an index, kept as the bare key while it has one member and as a tuple while it has a
# few: most label slots, selector slots and Services' slices hold one or two keys, and an empty set costs
# 216 bytes against a tuple's 56. Read through `_members`, never with `in` on the value itself.
Keys = str | tuple[str, ...] | set[str]
_SMALL = 4  # members kept in a tuple before a set

SERVICE_NAME_LABEL = "kubernetes.io/service-name"  # EndpointSlice → its Service (discovery.k8s.io/v1)


@dataclass(frozen=True, slots=True)
class ServiceDependencies:
    """Which other objects can change a Service's endpoints (all False: only the Service itself)."""

    nodes: bool = False  # any Node (NodePort; headless with endpoints-type NodeExternalIP)
    endpoint_slices: bool = False  # EndpointSlices labelled kubernetes.io/service-name=<name>, same namespace
    pods: bool = False  # Pods of the namespace that spec.selector matches


def slice_service(endpoint_slice: Obj) -> tuple[str, str] | None:
    """(namespace, service name) an EndpointSlice belongs to, or None."""
    name = get_str_map(endpoint_slice, "metadata", "labels").get(SERVICE_NAME_LABEL)
    if not name:
        return None
    return get_str(endpoint_slice, "metadata", "namespace"), name


@dataclass(frozen=True, slots=True)
class _Registration:
    namespace: str
    deps: ServiceDependencies
    selector: tuple[tuple[str, str], ...]  # spec.selector, sorted

    def matches(self, labels: Mapping[str, str]) -> bool:
        """What spec.selector's equality selector says of `labels` (no Selector kept per Service)."""
        return all(labels.get(k) == v for k, v in self.selector)


def _split(key: str) -> tuple[str, str]:
    namespace, _, name = key.rpartition("/")
    return namespace, name


def node_inputs(node: Obj | None) -> tuple[list[Any], Any] | None:
    """What a translation reads of a Node: its addresses and whether it is unschedulable (the service and
    pod kinds: a Node change that keeps these, a heartbeat, re-translates nothing)."""
    return (
        None if node is None else (get_list(node, "status", "addresses"), get(node, "spec", "unschedulable"))
    )


class ServiceInputs:
    """Services' registered dependencies plus the Pods and EndpointSlices they may read, by index."""

    def __init__(
        self,
        *,
        pods: Callable[[], Mapping[str, Obj]] | None = None,
        slices: Callable[[], Mapping[str, Obj]] | None = None,
    ) -> None:
        self._services: dict[str, _Registration] = {}
        self._node_dependents: set[str] = set()
        # A Service that reads pods is filed under one (namespace, key, value) pair of its selector: any pod
        # it selects carries that pair, so a pod event only looks at the Services filed under its labels.
        self._pod_dependents: dict[LabelSlot, Keys] = {}
        self._slices: dict[tuple[str, str], Keys] = {}  # (namespace, Service name) → its slices
        self._pods: defaultdict[str, set[str]] = defaultdict(set)
        self._pods_by_label: dict[LabelSlot, Keys] = {}
        # Where the objects are read: the watcher's caches, or a store of our own (standalone).
        self._own_pods: dict[str, Obj] = {}
        self._own_slices: dict[str, Obj] = {}
        self._pod_cache = pods or (lambda: self._own_pods)
        self._slice_cache = slices or (lambda: self._own_slices)
        self._own = pods is None, slices is None

    # -- Services ---------------------------------------------------------------------------------------

    def register(self, key: str, svc: Obj, deps: ServiceDependencies) -> bool:
        """Record what Service `key` reads (replacing what it read before); True when it now reads Pods
        or EndpointSlices it did not read before (a new selector, say)."""
        namespace, _ = _split(key)
        labels = get_str_map(svc, "spec", "selector")
        reg = _Registration(sys.intern(namespace), deps, tuple(sorted(labels.items())))
        before = self._services.get(key)
        if before == reg:
            return False
        self.unregister(key)
        self._services[key] = reg
        if deps.nodes:
            self._node_dependents.add(key)
        if deps.pods:
            _add(self._pod_dependents, self._slot(reg), key)
        if before is None:
            return deps.pods or deps.endpoint_slices
        return (deps.pods and (not before.deps.pods or before.selector != reg.selector)) or (
            deps.endpoint_slices and not before.deps.endpoint_slices
        )

    def unregister(self, key: str) -> None:
        reg = self._services.pop(key, None)
        if reg is None:
            return
        self._node_dependents.discard(key)
        _discard(self._pod_dependents, self._slot(reg), key)

    @staticmethod
    def _slot(reg: _Registration) -> LabelSlot:
        if not reg.selector:
            return (reg.namespace, "", "")
        label, value = reg.selector[0]
        return (reg.namespace, label, value)

    def __contains__(self, key: str) -> bool:
        return key in self._services

    def __len__(self) -> int:
        return len(self._services)

    def label_selector(self, key: str) -> str:
        """Service `key`'s pod selector as a list call's labelSelector ("" selects every pod)."""
        reg = self._services.get(key)
        return "" if reg is None else ",".join(f"{k}={v}" for k, v in reg.selector)

    # -- which Pods and EndpointSlices are read at all (a sharded replica keeps only those) ------------------

    def reads_pod(self, key: str, pod: Obj) -> bool:
        """Whether a registered Service reads the Pod at `key` (its selector matches the labels)."""
        return bool(self._selecting(_split(key)[0], get_str_map(pod, "metadata", "labels")))

    def reads_slice(self, endpoint_slice: Obj) -> bool:
        """Whether the EndpointSlice belongs to a registered Service that reads its slices."""
        owner = slice_service(endpoint_slice)
        reg = None if owner is None else self._services.get(f"{owner[0]}/{owner[1]}")
        return reg is not None and reg.deps.endpoint_slices

    # -- what a translation reads -------------------------------------------------------------------------

    def slices_for(self, key: str) -> list[Obj]:
        """The EndpointSlices labelled as belonging to Service `key`."""
        keys = _members(self._slices.get(_split(key)))
        if not keys:
            return []
        cache = self._slice_cache()
        return [obj for k in sorted(keys) if (obj := cache.get(k)) is not None]

    def pods_for(self, key: str) -> Mapping[str, Obj]:
        """The pods of the Service's namespace carrying every label of its selector (all of them when the
        selector is empty), as `service_endpoints` wants them: pod key → Pod. Unregistered, or reading no
        pods (its dependencies say so): none, and nothing is read from the cache."""
        reg = self._services.get(key)
        if reg is None or not reg.deps.pods:
            return _EMPTY
        keys: Collection[str] = self._pods.get(reg.namespace, ())
        if reg.selector:
            sets = [_members(self._pods_by_label.get((reg.namespace, k, v))) for k, v in reg.selector]
            smallest = min(sets, key=len)
            keys = {pod for pod in smallest if all(pod in s for s in sets)}
        cache = self._pod_cache()
        return {pod: obj for pod in sorted(keys) if (obj := cache.get(pod)) is not None}

    # -- events on the inputs; each returns the Services to re-translate -------------------------------------

    def set_node(self, name: str, old: Obj | None, new: Obj | None) -> set[str]:
        """A Node changed. Only its existence, addresses and spec.unschedulable are read, so heartbeats touch
        nothing."""
        if old is not None and new is not None and node_inputs(old) == node_inputs(new):
            return set()
        return set(self._node_dependents)

    def set_slice(self, key: str, old: Obj | None, new: Obj | None) -> set[str]:
        """An EndpointSlice changed; the Services it belonged to before and after are affected."""
        if self._own[1]:
            _keep(self._own_slices, key, new)
        affected: set[str] = set()
        for obj, present in ((old, False), (new, True)):
            if obj is None:
                continue
            owner = slice_service(obj)
            if owner is None:
                continue
            if present:
                _add(self._slices, owner, key)
            else:
                _discard(self._slices, owner, key)
            svc_key = f"{owner[0]}/{owner[1]}"
            reg = self._services.get(svc_key)
            if reg is not None and reg.deps.endpoint_slices:
                affected.add(svc_key)
        return affected

    def set_pod(self, key: str, old: Obj | None, new: Obj | None) -> set[str]:
        """A Pod changed; the Services whose selector matched it before or matches it now are affected."""
        namespace = sys.intern(_split(key)[0])
        if self._own[0]:
            _keep(self._own_pods, key, new)
        affected: set[str] = set()
        if old is not None:
            labels = get_str_map(old, "metadata", "labels")
            for label, value in labels.items():
                _discard(self._pods_by_label, (namespace, label, value), key)
            pods = self._pods.get(namespace)
            if pods is not None:
                pods.discard(key)
                if not pods:
                    del self._pods[namespace]
            affected |= self._selecting(namespace, labels)
        if new is not None:
            labels = get_str_map(new, "metadata", "labels")
            for label, value in labels.items():
                _add(self._pods_by_label, (namespace, label, value), key)
            self._pods[namespace].add(key)
            affected |= self._selecting(namespace, labels)
        return affected

    def _selecting(self, namespace: str, labels: Mapping[str, str]) -> set[str]:
        found: set[str] = set()
        slots = [(namespace, "", ""), *((namespace, k, v) for k, v in labels.items())]
        for slot in slots:
            for svc_key in _members(self._pod_dependents.get(slot)):
                if self._services[svc_key].matches(labels):
                    found.add(svc_key)
        return found


def _keep(store: dict[str, Obj], key: str, obj: Obj | None) -> None:
    if obj is None:
        store.pop(key, None)
    else:
        store[key] = obj


def _members(keys: Keys | None) -> Collection[str]:
    if keys is None:
        return ()
    return (keys,) if type(keys) is str else keys


def _add(index: dict[Any, Keys], slot: Any, key: str) -> None:
    keys = index.get(slot)
    if keys is None:
        index[slot] = key
    elif type(keys) is str:
        if keys != key:
            index[slot] = (keys, key)
    elif type(keys) is tuple:
        if key not in keys:
            index[slot] = (*keys, key) if len(keys) < _SMALL else {*keys, key}
    else:
        assert isinstance(keys, set)
        keys.add(key)


def _discard(index: dict[Any, Keys], slot: Any, key: str) -> None:
    keys = index.get(slot)
    rest: Collection[str]
    if keys is None or keys == key:
        index.pop(slot, None)
        return
    if type(keys) is str:
        return
    if isinstance(keys, set):
        keys.discard(key)
        if len(keys) > _SMALL:
            return
        rest = keys
    else:
        rest = tuple(k for k in keys if k != key)
    index[slot] = next(iter(rest)) if len(rest) == 1 else tuple(rest)
