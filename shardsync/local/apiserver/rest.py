"""The REST verbs: one request (method, path, query, headers, body) turned into a store operation and the
reply the real API server would give, or into a WatchSpec for the HTTP layer to stream. No sockets here."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from shardsync.kube.selectors import Selector, SelectorError, parse_selector
from shardsync.local.apiserver import discovery, routing, tables
from shardsync.local.apiserver import meta as m
from shardsync.local.apiserver import scale as scale_mod
from shardsync.local.apiserver.errors import (
    ApiError,
    bad_request,
    method_not_allowed,
    not_acceptable,
    path_not_found,
    unsupported_media_type,
)
from shardsync.local.apiserver.field_selectors import FieldSelector, parse_field_selector
from shardsync.local.apiserver.patch import CONTENT_TYPES, PatchError, apply_patch
from shardsync.local.apiserver.resources import Resource
from shardsync.local.apiserver.store import Obj, Store
from shardsync.local.apiserver.watch import WatchSpec

JSON = "application/json"
_BODY_TYPES = [JSON, "application/yaml"]
_TRUE = ("true", "1")


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: Mapping[str, str]
    header: Callable[[str], str | None]
    body: bytes = b""


@dataclass(frozen=True)
class Reply:
    code: int
    body: Any
    content_type: str = JSON


def _media(value: str) -> tuple[str, dict[str, str]]:
    kind, _, rest = value.partition(";")
    params = {}
    for p in rest.split(";"):
        k, _, v = p.partition("=")
        if k.strip():
            params[k.strip().lower()] = v.strip()
    return kind.strip().lower(), params


def accepts_json(accept: str | None) -> bool:
    """True when plain JSON is among the acceptable answers (a Table-only Accept is not)."""
    if not accept:
        return True
    for entry in accept.split(","):
        kind, params = _media(entry)
        if kind in (JSON, "*/*", "application/*") and "as" not in params:
            return True
    return False


def decode_body(body: bytes, content_type: str | None) -> Any:
    kind, _ = _media(content_type or JSON)
    if kind in ("application/yaml", "text/yaml"):
        import yaml  # the kubernetes client depends on PyYAML; imported only for YAML bodies

        try:
            return yaml.safe_load(body)
        except yaml.YAMLError as exc:
            raise bad_request(f"error decoding YAML: {exc}") from exc
    if kind != JSON:
        raise unsupported_media_type(kind, _BODY_TYPES)
    try:
        return orjson.loads(body) if body else None
    except orjson.JSONDecodeError as exc:
        raise bad_request(f"error decoding JSON: {exc}") from exc


def _object_body(req: Request) -> Obj:
    body = decode_body(req.body, req.header("Content-Type"))
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    return body


def _dry_run(req: Request, extra: Any = None) -> bool:
    values = [req.query.get("dryRun", "")] + (list(extra) if isinstance(extra, list) else [])
    for value in values:
        if value and value != "All":
            raise bad_request(f'Invalid dryRun value "{value}": valid values are "All"')
    return any(values)


def _int(req: Request, name: str) -> int | None:
    raw = req.query.get(name)
    if raw in (None, ""):
        return None
    try:
        return int(raw)
    except ValueError as exc:
        raise bad_request(f"invalid {name}: {raw!r}") from exc


def _selectors(req: Request, res: Resource, name: str | None = None) -> tuple[Selector, FieldSelector]:
    try:
        labels = parse_selector(req.query.get("labelSelector", ""))
        fields = parse_field_selector(req.query.get("fieldSelector", ""), res.fields)
    except SelectorError as exc:
        raise bad_request(str(exc)) from exc
    if name is not None:
        fields = FieldSelector(
            (*fields.requirements, *parse_field_selector(f"metadata.name={name}", res.fields).requirements)
        )
    return labels, fields


class RestApi:
    def __init__(self, store: Store) -> None:
        self.store = store

    def handle(self, req: Request) -> Reply | WatchSpec:
        route = routing.parse(req.path)
        if route is None:
            raise path_not_found()
        accept = req.header("Accept")
        if req.method in ("GET", "HEAD") and not (accepts_json(accept) or tables.wants_table(accept)):
            raise not_acceptable([JSON])
        if isinstance(route, routing.DiscoveryRoute):
            return self._discovery(route)
        res = self.store.table.lookup(route.group, route.version, route.plural)
        if res is None:
            raise path_not_found()
        if (route.namespace is not None and not res.namespaced) or (
            res.namespaced and route.namespace is None and route.name is not None
        ):
            raise path_not_found()
        sub = route.subresource
        if sub is not None and not ((sub == "status" and res.status) or (sub == "scale" and res.scale)):
            raise path_not_found()
        if route.name is None:
            return self._collection(req, res, route)
        return self._item(req, res, route, route.name)

    # -- discovery -----------------------------------------------------------------------------------------

    def _discovery(self, route: routing.DiscoveryRoute) -> Reply:
        table = self.store.table
        doc: Any = None
        if route.kind == "version":
            doc = discovery.KUBERNETES_VERSION
        elif route.kind == "health":
            return Reply(200, b"ok", "text/plain; charset=utf-8")
        elif route.kind == "api":
            doc = discovery.api_versions()
        elif route.kind == "apis":
            doc = discovery.api_group_list(table)
        elif route.kind == "group":
            doc = discovery.api_group(table, route.group)
        elif route.kind == "resources":
            doc = discovery.api_resource_list(table, route.group, route.version)
        if doc is None:
            raise path_not_found()
        return Reply(200, doc)

    # -- collections ---------------------------------------------------------------------------------------

    def _collection(self, req: Request, res: Resource, route: routing.ResourceRoute) -> Reply | WatchSpec:
        ns = route.namespace if res.namespaced else None
        if req.method == "GET":
            if route.watch_prefix or req.query.get("watch", "").lower() in _TRUE:
                return self._watch(req, res, ns, None)
            return self._list(req, res, ns)
        if route.namespace is None and res.namespaced:
            raise method_not_allowed(req.method)
        if req.method == "POST":
            body = _object_body(req)
            return Reply(201, m.in_version(self.store.create(res, ns, body, _dry_run(req)), res))
        if req.method == "DELETE":
            labels, fields = _selectors(req, res)
            self.store.delete_collection(res, ns, labels, fields, _dry_run(req))
            return Reply(200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"})
        raise method_not_allowed(req.method)

    def _list(self, req: Request, res: Resource, ns: str | None) -> Reply:
        labels, fields = _selectors(req, res)
        result = self.store.list(
            res, ns, labels, fields, _int(req, "limit") or 0, req.query.get("continue", "")
        )
        list_meta: dict[str, Any] = {"resourceVersion": str(result.resource_version)}
        if result.continue_token:
            list_meta["continue"] = result.continue_token
        if result.remaining is not None:
            list_meta["remainingItemCount"] = result.remaining
        if tables.wants_table(req.header("Accept")):
            items = [m.in_version(o, res) for o in result.items]
            return Reply(200, tables.table(res.printer_columns, items, list_meta))
        return Reply(
            200,
            {
                "kind": f"{res.kind}List",
                "apiVersion": res.group_version,
                "metadata": list_meta,
                "items": [m.in_version(o, res) for o in result.items],
            },
        )

    def _watch(self, req: Request, res: Resource, ns: str | None, name: str | None) -> WatchSpec:
        labels, fields = _selectors(req, res, name)
        raw_rv = req.query.get("resourceVersion", "")
        send_initial = req.query.get("sendInitialEvents", "").lower() in _TRUE
        since: int | None = None
        if raw_rv not in ("", "0") and not send_initial:
            try:
                since = int(raw_rv)
            except ValueError as exc:
                raise bad_request(f"invalid resource version: {raw_rv!r}") from exc
        timeout = _int(req, "timeoutSeconds")
        return WatchSpec(
            res,
            ns,
            labels,
            fields,
            since,
            float(timeout) if timeout else None,
            req.query.get("allowWatchBookmarks", "").lower() in _TRUE,
            send_initial,
        )

    # -- single objects ------------------------------------------------------------------------------------

    def _item(
        self, req: Request, res: Resource, route: routing.ResourceRoute, name: str
    ) -> Reply | WatchSpec:
        ns = route.namespace if res.namespaced else None
        sub = route.subresource
        store = self.store
        if req.method == "GET":
            if route.watch_prefix or req.query.get("watch", "").lower() in _TRUE:
                return self._watch(req, res, ns, name)
            obj = store.get(res, ns, name)
            if sub is None and tables.wants_table(req.header("Accept")):
                meta = {"resourceVersion": m.metadata(obj).get("resourceVersion", "")}
                return Reply(200, tables.table(res.printer_columns, [m.in_version(obj, res)], meta))
            return Reply(200, self._view(res, sub, obj))
        if req.method == "PUT":
            body = _object_body(req)
            if sub == "scale":
                assert res.scale is not None
                spec = res.scale
                obj = store.modify(
                    res, ns, name, lambda cur: scale_mod.from_scale(cur, body, spec), dry_run=_dry_run(req)
                )
            else:
                obj = store.update(res, ns, name, body, sub, _dry_run(req))
            return Reply(200, self._view(res, sub, obj))
        if req.method == "PATCH":
            return Reply(200, self._view(res, sub, self._patch(req, res, ns, name, sub)))
        if req.method == "DELETE":
            if sub is not None:
                raise method_not_allowed(req.method)
            options = decode_body(req.body, req.header("Content-Type")) if req.body else None
            options = options if isinstance(options, dict) else {}
            obj, deleted = store.delete(
                res, ns, name, options.get("preconditions"), _dry_run(req, options.get("dryRun"))
            )
            if deleted and not self._returns_deleted_object(res):
                details = {
                    "name": name,
                    "group": res.group,
                    "kind": res.plural,
                    "uid": m.metadata(obj).get("uid", ""),
                }
                return Reply(
                    200,
                    {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "metadata": {},
                        "status": "Success",
                        "details": details,
                    },
                )
            return Reply(200, m.in_version(obj, res))
        raise method_not_allowed(req.method)

    @staticmethod
    def _returns_deleted_object(res: Resource) -> bool:
        return res.custom or res.kind in ("Pod", "Service", "Namespace", "CustomResourceDefinition")

    @staticmethod
    def _view(res: Resource, sub: str | None, obj: Obj) -> Obj:
        if sub == "scale":
            assert res.scale is not None
            return scale_mod.to_scale(obj, res.scale)
        return m.in_version(obj, res)

    def _patch(self, req: Request, res: Resource, ns: str | None, name: str, sub: str | None) -> Obj:
        kind_header, _ = _media(req.header("Content-Type") or "")
        kind = CONTENT_TYPES.get(kind_header)
        accepted = ["application/json-patch+json", "application/merge-patch+json"]
        if not res.custom:
            accepted.append("application/strategic-merge-patch+json")
        if kind is None or (kind == "strategic" and res.custom):
            raise unsupported_media_type(kind_header, accepted)
        try:
            body = orjson.loads(req.body)
        except orjson.JSONDecodeError as exc:
            raise bad_request(f"error decoding patch: {exc}") from exc

        def mutate(current: Obj) -> Obj:
            try:
                if sub == "scale":
                    assert res.scale is not None
                    patched = apply_patch(kind, scale_mod.to_scale(current, res.scale), body)
                    return scale_mod.from_scale(current, patched, res.scale)
                return apply_patch(kind, current, body)
            except PatchError as exc:
                if exc.code == 400:
                    raise bad_request(str(exc)) from exc
                raise ApiError(422, "Invalid", str(exc)) from exc

        return self.store.modify(res, ns, name, mutate, None if sub == "scale" else sub, _dry_run(req))
