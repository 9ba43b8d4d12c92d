"""PATCH bodies applied to an object: JSON merge patch (RFC 7386), JSON patch (RFC 6902, via `jsonpatch`) and
an approximation of strategic merge patch good for the kinds this server holds.

The strategic approximation is merge patch plus what kubectl's client-side apply relies on: lists of maps
merged by their merge key (containers by name, service ports by port, ...), `$patch: delete|replace`,
`$deleteFromPrimitiveList/<f>`, `$retainKeys`, and `$setElementOrder/<f>` (used to order the result).
"""

from __future__ import annotations

import copy
from typing import Any, Literal

import jsonpatch
import jsonpointer

PatchType = Literal["json", "merge", "strategic"]

CONTENT_TYPES: dict[str, PatchType] = {
    "application/json-patch+json": "json",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
}

# Field name -> candidate merge keys for lists of maps, from the Kubernetes types' patchMergeKey tags.
MERGE_KEYS: dict[str, tuple[str, ...]] = {
    "containers": ("name",),
    "initContainers": ("name",),
    "ephemeralContainers": ("name",),
    "volumes": ("name",),
    "volumeMounts": ("mountPath",),
    "volumeDevices": ("devicePath",),
    "env": ("name",),
    "ports": ("containerPort", "port"),
    "imagePullSecrets": ("name",),
    "hostAliases": ("ip",),
    "ownerReferences": ("uid",),
    "conditions": ("type",),
    "addresses": ("type",),
    "taints": ("key",),
    "topologySpreadConstraints": ("topologyKey",),
}
# Lists of scalars that strategic merge treats as sets rather than replacing.
MERGED_PRIMITIVE_LISTS = frozenset({"finalizers"})


class PatchError(ValueError):
    """The patch cannot be applied; `code` is 400 for a malformed patch and 422 for one that fails."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, `null` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 through the `jsonpatch` library; errors carry the status code the real server answers."""
    if not isinstance(operations, list):
        raise PatchError("json patch must be a list of operations", 400)
    try:
        patch = jsonpatch.JsonPatch(operations)
    except (jsonpatch.InvalidJsonPatch, TypeError) as exc:
        raise PatchError(str(exc), 400) from exc
    try:
        return patch.apply(target, in_place=False)
    except (
        jsonpatch.JsonPatchException,
        jsonpointer.JsonPointerException,
        KeyError,
        IndexError,
        TypeError,
    ) as exc:
        raise PatchError(str(exc), 422) from exc


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    orders: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/"):
            orders[key.split("/", 1)[1]] = value if isinstance(value, list) else []
        elif key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            drop = value if isinstance(value, list) else []
            if isinstance(result.get(field), list):
                result[field] = [v for v in result[field] if v not in drop]
        elif key.startswith("$"):
            continue
        elif value is None:
            result.pop(key, None)
        elif isinstance(value, list):
            result[key] = _merge_list(key, result.get(key), value)
        elif isinstance(value, dict):
            merged = strategic_merge_patch(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = value
    for field, order in orders.items():
        if isinstance(result.get(field), list):
            result[field] = _apply_order(field, result[field], order)
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_key(field: str, items: list[Any]) -> str | None:
    for candidate in MERGE_KEYS.get(field, ()):
        if any(isinstance(i, dict) and candidate in i for i in items):
            return candidate
    return None


def _merge_list(field: str, current: Any, patch: list[Any]) -> list[Any]:
    current_list = current if isinstance(current, list) else []
    if field in MERGED_PRIMITIVE_LISTS:
        return current_list + [v for v in patch if v not in current_list]
    key = _merge_key(field, patch)
    if key is None:
        return [v for v in copy.deepcopy(patch) if not (isinstance(v, dict) and v.get("$patch") == "delete")]
    result = list(current_list)
    for item in patch:
        if not isinstance(item, dict):
            continue
        index = next(
            (i for i, c in enumerate(result) if isinstance(c, dict) and c.get(key) == item.get(key)), None
        )
        if item.get("$patch") == "delete":
            if index is not None:
                del result[index]
        elif index is None:
            result.append(strategic_merge_patch({}, item))
        else:
            result[index] = strategic_merge_patch(result[index], item)
    return result


def _apply_order(field: str, items: list[Any], order: list[Any]) -> list[Any]:
    key = _merge_key(field, order)
    if key is None:
        return items
    rank = {o.get(key): i for i, o in enumerate(order) if isinstance(o, dict)}
    return sorted(items, key=lambda i: rank.get(i.get(key), len(rank)) if isinstance(i, dict) else len(rank))


def apply_patch(kind: PatchType, target: dict[str, Any], body: Any) -> dict[str, Any]:
    """Applies a decoded patch body to `target` (never modified) and returns the new object."""
    if kind == "json":
        result = json_patch(target, body)
    elif not isinstance(body, dict):
        raise PatchError("merge patch body must be a JSON object", 400)
    elif kind == "merge":
        result = merge_patch(target, body)
    else:
        result = strategic_merge_patch(target, body)
    if not isinstance(result, dict):
        raise PatchError("the patched object is not a JSON object", 422)
    return result
