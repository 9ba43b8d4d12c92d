"""Which Kubernetes API verbs shardsync calls, read from its source, so RBAC can be checked against the code.

An AST walk over `shardsync/` (without `shardsync/local/`, the development tools that never run in the
cluster) finds every kubernetes client API class the code instantiates (`k8s.CoreV1Api(...)`) and every
reference to one of their methods (`kube.core.list_namespaced_service`, `core.read_namespaced_config_map`,
...), however it is called: through `Kube.call`, handed to an `Informer`, or kept in a tuple for later.
The client's own generated code says which HTTP method and path each method uses; the path gives the API
group, resource and subresource, the method and whether the path names one object give the RBAC verb.

A `list_*` method counts as list + watch (an informer lists, then watches from the list's version) unless
it is only ever the first argument of a one-shot `call(...)`/`fetch(...)`, which lists and nothing more.
Custom-object methods carry `{group}` and `{plural}` in their path: shardsync uses them for DNSEndpoints
only, so a module that references one must also reference the CRD constants (`CRD_GROUP`, `CRD_PLURAL`).
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client as k8s

from shardsync.sources.watcher import CRD_GROUP, CRD_PLURAL

PACKAGE = Path(__file__).resolve().parents[2] / "shardsync"
EXCLUDED = (PACKAGE / "local",)

# The client's generated code, in its two styles: `method='GET', resource_path='/api/...'` (client >= 31)
# and `'/api/...', 'GET',` (older releases).
_NEW_STYLE = re.compile(r"method='(?P<method>[A-Z]+)',\s*resource_path='(?P<path>[^']+)'")
_OLD_STYLE = re.compile(r"'(?P<path>/apis?/[^']*)',\s*'(?P<method>[A-Z]+)'")
_ONE_SHOT_CALLERS = frozenset({"call", "fetch"})


@dataclass(frozen=True, order=True, slots=True)
class Access:
    """One RBAC permission: API group, resource (with `/subresource`), verb."""

    group: str
    resource: str
    verb: str

    def __str__(self) -> str:
        return f"{self.group or 'core'}/{self.resource}:{self.verb}"


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a client method goes: HTTP method and the path's parts."""

    method: str
    group: str
    resource: str
    subresource: str
    named: bool  # the path ends in one object ({name}), not a collection


@dataclass(frozen=True, slots=True)
class Use:
    """One reference to a client method in the source."""

    module: Path
    line: int
    api: str  # the client class
    name: str  # the method
    one_shot: bool  # only the first argument of call(...)/fetch(...)


def source_files() -> Iterator[Path]:
    for path in sorted(PACKAGE.rglob("*.py")):
        if not any(path.is_relative_to(excluded) for excluded in EXCLUDED):
            yield path


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def api_classes() -> set[str]:
    """The kubernetes client API classes shardsync instantiates (`k8s.CoreV1Api(...)` and the like)."""
    found: set[str] = set()
    for path in source_files():
        for node in ast.walk(_parse(path)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                name = node.func.attr
                if name.endswith("Api") and name != "ApiClient" and hasattr(k8s, name):
                    found.add(name)
    return found


def endpoint(api: str, name: str) -> Endpoint:
    """The HTTP method and path of `k8s.<api>.<name>`, read from the client's generated code."""
    cls = getattr(k8s, api)
    generated = getattr(cls, f"_{name}_serialize", None) or getattr(cls, f"{name}_with_http_info")
    source = inspect.getsource(generated)
    match = _NEW_STYLE.search(source) or _OLD_STYLE.search(source)
    if match is None:
        raise LookupError(f"cannot find the HTTP path of {api}.{name} in the kubernetes client")
    return parse_path(match["method"], match["path"])


def parse_path(method: str, path: str) -> Endpoint:
    """`GET /apis/apps/v1/namespaces/{namespace}/statefulsets/{name}` → get of apps statefulsets."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, rest = "", parts[2:]
    elif parts[0] == "apis" and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        raise ValueError(f"not a resource path: {path}")
    if rest[:2] == ["namespaces", "{namespace}"] and len(rest) >= 3:
        rest = rest[2:]  # namespaces/{namespace}/<resource>...
    if rest[:1] == ["watch"]:
        raise ValueError(f"deprecated watch path: {path}")
    resource, named, subresource = rest[0], len(rest) >= 2, rest[2] if len(rest) >= 3 else ""
    return Endpoint(method, group, resource, subresource, named)


def _method_index(classes: set[str]) -> dict[str, str]:
    """Method name → the one API class (among `classes`) that has it; names in several are refused."""
    owners: dict[str, set[str]] = {}
    for api in classes:
        cls = getattr(k8s, api)
        for name, _ in inspect.getmembers(cls, inspect.isfunction):
            # Endpoints only: each has a `<name>_with_http_info` twin.
            if not name.startswith("_") and hasattr(cls, f"{name}_with_http_info"):
                owners.setdefault(name, set()).add(api)
    return {name: next(iter(apis)) for name, apis in owners.items() if len(apis) == 1} | {
        name: "" for name, apis in owners.items() if len(apis) > 1
    }


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _is_one_shot(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """`call(<node>, ...)` or `call(wrapper(<node>), ...)`, with `call` a name or attribute `call`/`fetch`."""
    current = node
    parent = parents.get(current)
    if isinstance(parent, ast.Call) and current in parent.args and _callee(parent) not in _ONE_SHOT_CALLERS:
        current, parent = parent, parents.get(parent)  # a wrapper such as _counted(fn)
    return (
        isinstance(parent, ast.Call)
        and bool(parent.args)
        and parent.args[0] is current
        and _callee(parent) in _ONE_SHOT_CALLERS
    )


def _callee(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def uses() -> list[Use]:
    """Every reference to a method of the API classes shardsync instantiates."""
    index = _method_index(api_classes())
    found: list[Use] = []
    for path in source_files():
        tree = _parse(path)
        parents = _parents(tree)
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or node.attr not in index:
                continue
            api = index[node.attr]
            if not api:
                raise LookupError(f"{path}:{node.lineno}: {node.attr} exists in several API classes")
            if api == "CustomObjectsApi" and not {"CRD_GROUP", "CRD_PLURAL"} <= names:
                raise LookupError(f"{path}:{node.lineno}: a custom-object call not about DNSEndpoints")
            found.append(Use(path, node.lineno, api, node.attr, _is_one_shot(node, parents)))
    return found


def _verbs(ep: Endpoint, watched: bool) -> list[str]:
    if ep.method == "GET":
        return ["get"] if ep.named else (["list", "watch"] if watched else ["list"])
    if ep.method == "DELETE":
        return ["delete"] if ep.named else ["deletecollection"]
    return [{"POST": "create", "PUT": "update", "PATCH": "patch"}[ep.method]]


def required_access() -> set[Access]:
    """Every (group, resource, verb) the code can call."""
    watched: dict[tuple[str, str], bool] = {}
    for use in uses():
        key = (use.api, use.name)
        watched[key] = watched.get(key, False) or not use.one_shot
    access: set[Access] = set()
    for (api, name), is_watched in watched.items():
        ep = endpoint(api, name)
        group, resource = ep.group, ep.resource
        if group == "{group}":
            group, resource = CRD_GROUP, CRD_PLURAL
        if ep.subresource:
            resource = f"{resource}/{ep.subresource}"
        access.update(Access(group, resource, verb) for verb in _verbs(ep, is_watched))
    return access
