"""Which Kubernetes API verbs shardsync calls, read from its source, so RBAC can be checked against the code.

Every API call goes through `shardsync.kube` and names its object kind with a `Resource` value. An AST walk
over `shardsync/` (without `shardsync/local/`, the development tools that never run in the cluster) finds:
- every verb call `<kube>.<verb>(RESOURCE, ...)` (get, list, watch, create, replace, patch, delete), the
  resource resolved to the module-level `Resource` it names, and a `subresource="..."` keyword (a patch of
  the status, say) to the RBAC resource `<plural>/<subresource>`;
- every informer, `Informer(kube, RESOURCE, ...)` (or a subclass calling `super().__init__(kube, RESOURCE,
  ...)`), which lists and then watches.
A call on something named like a Kubernetes client (`kube`, `self.kube`, ...) whose resource cannot be
resolved to a constant is an error: the scan would otherwise miss it. Resources that arrive as values (the
source kinds' watches, in the generic watcher) are read from the table they come from (`table_access`:
`shardsync.sources.table`).
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shardsync.kube.objects import Resource

PACKAGE = Path(__file__).resolve().parents[2] / "shardsync"
EXCLUDED = (PACKAGE / "local",)
# The plumbing that carries its caller's resource (counted at the caller), and the generic source watcher,
# whose informers (and the probes for a kind's CRD, a list; the lists reading forgotten objects again,
# sources.refetch) take the resources of the source table (counted by `table_access`).
PLUMBING = (PACKAGE / "kube" / "client.py", PACKAGE / "kube" / "informer.py")
TABLE_DRIVEN = tuple(PACKAGE / "sources" / name for name in ("watcher.py", "served.py", "refetch.py"))
TABLE_VERBS = frozenset({"informer", "list"})

# The kube verb → the RBAC verbs it needs.
VERBS: dict[str, tuple[str, ...]] = {
    "get": ("get",),
    "list": ("list",),
    "watch": ("watch",),
    "create": ("create",),
    "replace": ("update",),
    "patch": ("patch",),
    "delete": ("delete",),
}
INFORMERS = frozenset({"Informer"})  # and its subclasses, found by their bases
_KUBE_NAMES = frozenset({"kube", "_kube"})


@dataclass(frozen=True, order=True, slots=True)
class Access:
    """One RBAC permission: API group, resource (with `/subresource`), verb."""

    group: str
    resource: str
    verb: str

    def __str__(self) -> str:
        return f"{self.group or 'core'}/{self.resource}:{self.verb}"


@dataclass(frozen=True, slots=True)
class Use:
    """One API call found in the source."""

    module: Path
    line: int
    resource: Resource
    verb: str  # a key of VERBS, or "informer"
    subresource: str = ""


def source_files() -> Iterator[Path]:
    for path in sorted(PACKAGE.rglob("*.py")):
        if (
            path.name != "__main__.py"
            and path not in PLUMBING
            and not any(path.is_relative_to(e) for e in EXCLUDED)
        ):
            yield path


def module_globals(path: Path) -> dict[str, Any]:
    """The globals of the module at `path`, imported: where its resource constants resolve."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return vars(importlib.import_module(".".join(parts[:-1] if parts[-1] == "__init__" else parts)))


def _resolve(node: ast.AST, namespace: dict[str, Any]) -> Any:
    """The value a Name or a dotted Attribute names in the module's globals (None when it cannot be told)."""
    if isinstance(node, ast.Name):
        return namespace.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, namespace)
        return getattr(base, node.attr, None) if base is not None else None
    return None


def _names_kube(node: ast.AST) -> bool:
    """`kube`, `self.kube`, `loop.kube`, `self._kube`: a receiver that is a Kubernetes client."""
    if isinstance(node, ast.Name):
        return node.id in _KUBE_NAMES
    return isinstance(node, ast.Attribute) and node.attr in _KUBE_NAMES


def _callee(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _informer_resource(call: ast.Call, in_informer_subclass: bool) -> ast.AST | None:
    """The resource argument of an informer construction, or None when `call` is not one."""
    name = _callee(call)
    is_super_init = (
        name == "__init__"
        and isinstance(call.func, ast.Attribute)
        and isinstance(call.func.value, ast.Call)
        and _callee(call.func.value) == "super"
        and in_informer_subclass
    )
    if name not in INFORMERS and not is_super_init:
        return None
    if len(call.args) >= 2:
        return call.args[1]
    return next((k.value for k in call.keywords if k.arg == "resource"), None)


def _subresource(call: ast.Call, path: Path) -> str:
    """The `subresource=` keyword of a verb call, a string literal ("" without one)."""
    node = next((k.value for k in call.keywords if k.arg == "subresource"), None)
    if node is None:
        return ""
    if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
        raise LookupError(
            f"{path}:{call.lineno}: a subresource that is not a string literal ({ast.unparse(node)})"
        )
    return node.value


def uses() -> list[Use]:
    """Every API call in shardsync's source (see the module docstring)."""
    found: list[Use] = []
    for path in source_files():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        namespace = module_globals(path)
        informer_classes = {
            cls.name
            for cls in ast.walk(tree)
            if isinstance(cls, ast.ClassDef)
            and any(isinstance(b, ast.Name) and b.id in INFORMERS for b in cls.bases)
        }
        for cls in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)] + [tree]:
            in_subclass = isinstance(cls, ast.ClassDef) and cls.name in informer_classes
            for node in ast.walk(cls):
                if not isinstance(node, ast.Call):
                    continue
                target = _informer_resource(node, in_subclass)
                verb = "informer"
                if target is None:
                    verb = _callee(node)
                    receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
                    if verb not in VERBS or receiver is None or not _names_kube(receiver) or not node.args:
                        continue
                    target = node.args[0]
                resource = _resolve(target, namespace)
                subresource = _subresource(node, path)
                if verb in TABLE_VERBS and path in TABLE_DRIVEN and not isinstance(resource, Resource):
                    continue  # a resource of the source table: counted by `table_access`
                if not isinstance(resource, Resource):
                    raise LookupError(
                        f"{path}:{node.lineno}: {verb} of a resource that is not a module constant "
                        f"({ast.unparse(target)}); name a Resource constant or take it from the source table"
                    )
                found.append(Use(path, node.lineno, resource, verb, subresource))
    return sorted(set(found), key=lambda u: (str(u.module), u.line, u.verb))


def table_access() -> set[Access]:
    """The resources that reach informers as values: each source kind's watches (list + watch each)."""
    from shardsync.sources.table import SOURCES

    return {a for kind in SOURCES.values() for r in kind.watches for a in _access(r, "informer")}


def _access(resource: Resource, verb: str, subresource: str = "") -> set[Access]:
    if verb == "informer":
        return {Access(resource.group, resource.plural, v) for v in ("list", "watch")}
    plural = f"{resource.plural}/{subresource}" if subresource else resource.plural
    return {Access(resource.group, plural, v) for v in VERBS[verb]}


def required_access() -> set[Access]:
    """Every (group, resource, verb) the code can call."""
    access = table_access()
    for use in uses():
        access |= _access(use.resource, use.verb, use.subresource)
    return access
