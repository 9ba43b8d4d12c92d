"""The object store: every object, one global resourceVersion, and the window of recent events watches
resume from. All writes take one lock; stored objects are immutable once stored, so readers serialise them
outside the lock.

Every write that changes something bumps the resourceVersion by exactly one and appends exactly one event,
so the kept events are contiguous and "can a watch resume from N" is a comparison with the oldest one.
"""

from __future__ import annotations

import builtins
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from shardsync.kube.selectors import Selector
from shardsync.local.apiserver import defaults, pages
from shardsync.local.apiserver import meta as m
from shardsync.local.apiserver.errors import (
    STALE,
    ApiError,
    GroupResource,
    already_exists,
    bad_request,
    conflict,
    forbidden,
    not_found,
)
from shardsync.local.apiserver.field_selectors import FieldSelector, field_values
from shardsync.local.apiserver.resources import CRD_KEY, NAMESPACE_KEY, Resource, ResourceTable

SERVICES_KEY = "/services"

EventType = Literal["ADDED", "MODIFIED", "DELETED"]
Obj = dict[str, Any]
Mutation = Callable[[Obj], Obj]
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_NS_GR = GroupResource("", "namespaces")


@dataclass(frozen=True)
class Event:
    rv: int
    type: EventType
    key: str
    namespace: str
    obj: Obj
    old: Obj | None = None


class Expired(Exception):
    """A watch asked for events older than the kept window (answered as 410 Expired)."""

    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")


def _key_of(obj: Obj) -> tuple[str, str]:
    meta = m.metadata(obj)
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class Store:
    def __init__(self, table: ResourceTable | None = None, window: int = 10_000) -> None:
        self.table = table or ResourceTable()
        self._lock = threading.RLock()
        self.changed = threading.Condition(self._lock)
        self._rv = 0
        self._objects: dict[str, dict[tuple[str, str], Obj]] = {}
        # Per resource, its keys in list order, made when first listed and dropped when a key comes or
        # goes: a paged list of 20,000 objects sorted them all for each of its 80 pages (and scanned them
        # from the first), which made 4 replicas listing at once time out each other's lease renewals.
        self._sorted: dict[str, list[tuple[str, str]]] = {}
        self._events: deque[Event] = deque(maxlen=window)
        self._allocated: tuple[set[str], set[int]] | None = None  # see _allocations
        ns = self.table.lookup("", "v1", "namespaces")
        assert ns is not None
        for name in INITIAL_NAMESPACES:
            self.create(ns, None, {"metadata": {"name": name}})

    # -- reads ---------------------------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        with self._lock:
            return self._rv

    def get(self, res: Resource, namespace: str | None, name: str) -> Obj:
        with self._lock:
            return self._get(res, namespace, name)

    def _get(self, res: Resource, namespace: str | None, name: str) -> Obj:
        obj = self._objects.get(res.key, {}).get((namespace or "", name))
        if obj is None:
            raise not_found(res.group_resource, name)
        return obj

    def list(
        self,
        res: Resource,
        namespace: str | None,
        labels: Selector | None = None,
        fields: FieldSelector | None = None,
        limit: int = 0,
        continue_token: str = "",
    ) -> pages.ListResult:
        """Objects sorted by (namespace, name) as etcd keys sort; `limit`/`continue` page through them."""
        start: tuple[str, str] | None = None
        with self._lock:
            rv = self._rv
            if continue_token:
                rv, start = pages.decode_continue(continue_token)
            objects = self._objects.get(res.key, {})
            keys = self._sorted.get(res.key)
            if keys is None:
                keys = self._sorted[res.key] = sorted(objects)
        # `keys` is never changed in place (a key added or removed replaces it), so it is read unlocked.
        filtered = bool((labels and not labels.empty()) or (fields and fields.requirements))
        return pages.page(
            keys, objects, rv, namespace, start, limit, lambda o: self.matches(o, labels, fields), filtered
        )

    @staticmethod
    def matches(obj: Obj, labels: Selector | None, fields: FieldSelector | None) -> bool:
        if labels is not None and not labels.matches(m.metadata(obj).get("labels") or {}):
            return False
        return fields is None or fields.matches(field_values(obj, fields.fields))

    # -- writes --------------------------------------------------------------------------------------------

    def create(self, res: Resource, namespace: str | None, body: Obj, dry_run: bool = False) -> Obj:
        with self._lock:
            new = m.prepare_create(res, body, namespace if res.namespaced else None)
            new = defaults.initial_status(res, new)
            new = defaults.on_write(res, new, None, self._allocations(res))
            name = m.metadata(new)["name"]
            if res.namespaced:
                self._check_namespace_open(str(namespace), name)
            if (namespace or "", name) in self._objects.get(res.key, {}):
                raise already_exists(res.group_resource, name)
            if res.key == CRD_KEY:
                self.table.check_crd(new)
            if dry_run:
                return new
            return self._commit(res, "ADDED", new, None)

    def update(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        body: Obj,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> Obj:
        return self.modify(res, namespace, name, lambda _current: body, subresource, dry_run)

    def modify(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        mutate: Mutation,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> Obj:
        """Read-modify-write under the lock. The candidate's resourceVersion, when set, is a precondition."""
        with self._lock:
            current = self._get(res, namespace, name)
            candidate = mutate(current)
            if not isinstance(candidate.get("metadata", {}), dict):
                raise bad_request("metadata must be an object")
            cmeta = m.metadata(candidate)
            cur_meta = m.metadata(current)
            if cmeta.get("name") and cmeta["name"] != name:
                raise bad_request(
                    f"the name of the object ({cmeta['name']}) does not match the name on the URL ({name})"
                )
            if res.namespaced and cmeta.get("namespace") and cmeta["namespace"] != namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            if cmeta.get("uid") and cmeta["uid"] != cur_meta.get("uid"):
                raise conflict(
                    res.group_resource,
                    name,
                    f"Precondition failed: UID in precondition: {cmeta['uid']}, "
                    f"UID in object meta: {cur_meta.get('uid')}",
                )
            wanted_rv = cmeta.get("resourceVersion")
            if wanted_rv and str(wanted_rv) != cur_meta.get("resourceVersion"):
                raise conflict(res.group_resource, name, STALE)
            new = m.prepare_update(res, current, candidate, subresource)
            new = defaults.on_write(res, new, current, self._allocations(res))
            if res.key == CRD_KEY:
                self.table.check_crd(new)
            new = m.with_resource_version(new, int(cur_meta.get("resourceVersion") or 0))
            if new == current:
                return current
            if dry_run:
                return new
            new_meta = m.metadata(new)
            if new_meta.get("deletionTimestamp") and not new_meta.get("finalizers"):
                # As the real registry (errEmptiedFinalizers → deleteWithoutFinalizers): the update is never
                # stored; the stored object is deleted, so the DELETED event is the object as lists last saw
                # it (a filtered watch decides on those labels, not the update's), and the caller gets the
                # update's object back.
                self._remove(res, current)
                return new
            return self._commit(res, "MODIFIED", new, current)

    def delete(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        preconditions: dict[str, Any] | None = None,
        dry_run: bool = False,
    ) -> tuple[Obj, bool]:
        """Deletes now, or marks for deletion when finalizers remain. Returns (object, deleted_now)."""
        with self._lock:
            current = self._get(res, namespace, name)
            cur_meta = m.metadata(current)
            pre = preconditions or {}
            if pre.get("uid") and pre["uid"] != cur_meta.get("uid"):
                raise conflict(
                    res.group_resource,
                    name,
                    f"Precondition failed: UID in precondition: {pre['uid']}, "
                    f"UID in object meta: {cur_meta.get('uid')}",
                )
            if pre.get("resourceVersion") and str(pre["resourceVersion"]) != cur_meta.get("resourceVersion"):
                raise conflict(
                    res.group_resource,
                    name,
                    "Precondition failed: ResourceVersion in precondition: "
                    f"{pre['resourceVersion']}, ResourceVersion in object meta: "
                    f"{cur_meta.get('resourceVersion')}",
                )
            if dry_run:
                return current, not cur_meta.get("finalizers")
            if res.key == NAMESPACE_KEY:
                return self._delete_namespace(res, current)
            return self._delete(res, current)

    def delete_collection(
        self,
        res: Resource,
        namespace: str | None,
        labels: Selector | None,
        fields: FieldSelector | None,
        dry_run: bool = False,
    ) -> builtins.list[Obj]:
        with self._lock:
            out = []
            for obj in self.list(res, namespace, labels, fields).items:
                ns, name = _key_of(obj)
                out.append(self.delete(res, ns or None, name, dry_run=dry_run)[0])
            return out

    # -- internals (lock held) -----------------------------------------------------------------------------

    def _allocations(self, res: Resource) -> tuple[set[str], set[int]]:
        """Cluster IPs and node ports taken, for a Service write (kept between creates: rescanning every
        Service per create made seeding tens of thousands of them quadratic)."""
        if res.key != SERVICES_KEY:
            return set(), set()
        if self._allocated is None:
            self._allocated = defaults.used_allocations(self._objects.get(SERVICES_KEY, {}).values())
        return self._allocated

    def _check_namespace_open(self, namespace: str, name: str) -> None:
        ns = self._objects.get(NAMESPACE_KEY, {}).get(("", namespace))
        if ns is None:
            raise not_found(_NS_GR, namespace)
        if m.metadata(ns).get("deletionTimestamp"):
            raise forbidden(
                _NS_GR,
                name,
                f"unable to create new content in namespace {namespace} because it is being terminated",
            )

    def _commit(self, res: Resource, kind: EventType, new: Obj, old: Obj | None) -> Obj:
        self._rv += 1
        new = m.with_resource_version(new, self._rv)
        ns, name = _key_of(new)
        objects = self._objects.setdefault(res.key, {})
        if (ns, name) not in objects:
            self._sorted.pop(res.key, None)
        objects[(ns, name)] = new
        self._events.append(Event(self._rv, kind, res.key, ns, new, old))
        if res.key == SERVICES_KEY and self._allocated is not None:
            if old is None:
                ips, ports = defaults.used_allocations((new,))
                self._allocated[0].update(ips)
                self._allocated[1].update(ports)
            else:
                self._allocated = None  # an update may free an allocation: counted afresh at the next write
        if res.key == CRD_KEY:
            self.table.register(new)
        self.changed.notify_all()
        return new

    def _delete(self, res: Resource, current: Obj) -> tuple[Obj, bool]:
        cur_meta = m.metadata(current)
        if cur_meta.get("finalizers"):
            if cur_meta.get("deletionTimestamp"):
                return current, False
            return self._commit(res, "MODIFIED", m.mark_deleting(res, current), current), False
        return self._remove(res, current), True

    def _remove(self, res: Resource, obj: Obj) -> Obj:
        ns, name = _key_of(obj)
        self._objects.get(res.key, {}).pop((ns, name), None)
        self._sorted.pop(res.key, None)
        if res.key == SERVICES_KEY:
            self._allocated = None
        self._rv += 1
        gone = m.with_resource_version(obj, self._rv)
        self._events.append(Event(self._rv, "DELETED", res.key, ns, gone, None))
        self.changed.notify_all()
        if res.key == CRD_KEY:
            self._drop_custom_resources(name)
        if ns:
            self._maybe_finish_namespace(ns)
        return gone

    def _drop_custom_resources(self, crd_name: str) -> None:
        for removed in self.table.unregister(crd_name)[:1]:
            for obj in list(self._objects.get(removed.key, {}).values()):
                self._remove(removed, obj)
            self._objects.pop(removed.key, None)
            self._sorted.pop(removed.key, None)

    def _delete_namespace(self, res: Resource, namespace: Obj) -> tuple[Obj, bool]:
        name = m.metadata(namespace)["name"]
        if not m.metadata(namespace).get("deletionTimestamp"):
            terminating = {**m.mark_deleting(res, namespace), "status": {"phase": "Terminating"}}
            namespace = self._commit(res, "MODIFIED", terminating, namespace)
        for key in list(self._objects):
            inner = self.table.by_key(key)
            if inner is None or not inner.namespaced:
                continue
            for (ns, _), obj in list(self._objects[key].items()):
                if ns == name:
                    self._delete(inner, obj)
        self._maybe_finish_namespace(name)
        if ("", name) not in self._objects.get(NAMESPACE_KEY, {}):
            return self._last_deleted(name), True
        return self._objects[NAMESPACE_KEY][("", name)], False

    def _last_deleted(self, name: str) -> Obj:
        for event in reversed(self._events):
            if event.key == NAMESPACE_KEY and _key_of(event.obj) == ("", name):
                return event.obj
        raise ApiError(500, "InternalError", f"namespace {name} vanished")

    def _maybe_finish_namespace(self, namespace: str) -> None:
        ns_obj = self._objects.get(NAMESPACE_KEY, {}).get(("", namespace))
        if ns_obj is None or not m.metadata(ns_obj).get("deletionTimestamp"):
            return
        if any(key[0] == namespace for objs in self._objects.values() for key in objs):
            return
        res = self.table.lookup("", "v1", "namespaces")
        assert res is not None
        self._remove(res, ns_obj)

    # -- watch support -------------------------------------------------------------------------------------

    def events_after(self, rv: int) -> tuple[builtins.list[Event], int]:
        """Events with resourceVersion > rv and the current resourceVersion; Expired if some were dropped."""
        with self._lock:
            if rv >= self._rv:
                return [], self._rv
            oldest = self._events[0].rv if self._events else self._rv + 1
            if rv < oldest - 1:
                raise Expired(rv, oldest - 1)
            start = rv - oldest + 1
            return [self._events[i] for i in range(start, len(self._events))], self._rv

    def snapshot_list(
        self, res: Resource, namespace: str | None, labels: Selector | None, fields: FieldSelector | None
    ) -> tuple[builtins.list[Obj], int]:
        with self._lock:
            result = self.list(res, namespace, labels, fields)
            return result.items, result.resource_version

    def wait(self, after_rv: int, timeout: float) -> None:
        """Blocks until a write past `after_rv`, a wake() or the timeout."""
        with self._lock:
            if self._rv <= after_rv:
                self.changed.wait(timeout)

    def wake(self) -> None:
        with self._lock:
            self.changed.notify_all()

    # -- snapshot ------------------------------------------------------------------------------------------

    def dump(self) -> dict[str, Any]:
        with self._lock:
            return {
                "resourceVersion": self._rv,
                "objects": {key: list(objs.values()) for key, objs in self._objects.items() if objs},
            }

    def load(self, data: dict[str, Any]) -> None:
        """Replaces the content. The event window starts empty: watches from before it get 410, as after a
        real API server restart."""
        with self._lock:
            objects: dict[str, list[Obj]] = data.get("objects") or {}
            for crd in objects.get(CRD_KEY, []):
                self.table.register(crd)
            self._objects = {}
            self._sorted = {}
            for key, items in objects.items():
                if key != CRD_KEY and self.table.by_key(key) is None:
                    continue
                self._objects[key] = {_key_of(obj): obj for obj in items}
            self._rv = int(data.get("resourceVersion") or 0)
            self._events.clear()
            self.changed.notify_all()
