"""The `scale` subresource: an object's replica count seen as an autoscaling/v1 Scale, and a Scale written
back as a change of the object's spec replicas (what `kubectl scale` does)."""

from __future__ import annotations

from typing import Any

from shardsync.kube.selectors import format_label_selector
from shardsync.local.apiserver.errors import bad_request
from shardsync.local.apiserver.meta import metadata
from shardsync.local.apiserver.resources import ScaleSpec


def _path(path: str) -> list[str]:
    return [p for p in path.strip().lstrip(".").split(".") if p]


def _read(obj: dict[str, Any], path: str) -> Any:
    cur: Any = obj
    for part in _path(path):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return cur


def _write(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    parts = _path(path)
    if not parts:
        raise bad_request(f"invalid replicas path {path!r}")
    head, rest = parts[0], ".".join(parts[1:])
    current = obj.get(head)
    inner: dict[str, Any] = current if isinstance(current, dict) else {}
    return {**obj, head: _write(inner, rest, value) if rest else value}


def to_scale(obj: dict[str, Any], spec: ScaleSpec) -> dict[str, Any]:
    meta = metadata(obj)
    selector: Any = _read(obj, spec.label_selector) if spec.label_selector else None
    if spec.selector_is_object:
        selector = format_label_selector(selector if isinstance(selector, dict) else None)
    status: dict[str, Any] = {"replicas": int(_read(obj, spec.status_replicas) or 0)}
    if selector:
        status["selector"] = str(selector)
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": int(_read(obj, spec.spec_replicas) or 0)},
        "status": status,
    }


def from_scale(obj: dict[str, Any], scale: dict[str, Any], spec: ScaleSpec) -> dict[str, Any]:
    """The object with the Scale's replicas written in; the Scale's resourceVersion becomes the candidate's,
    so a stale Scale conflicts like a stale object would."""
    replicas = (scale.get("spec") or {}).get("replicas")
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise bad_request(f"spec.replicas must be a non-negative integer, got {replicas!r}")
    out = _write(obj, spec.spec_replicas, replicas)
    rv = metadata(scale).get("resourceVersion")
    return {**out, "metadata": {**metadata(out), "resourceVersion": rv or ""}}
