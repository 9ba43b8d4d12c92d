"""Object metadata rules of the real API server, as pure functions on plain dicts: names and generateName,
uid and timestamps on create, the fields an update may not change, `/status` isolation and generation.

Stored objects are never mutated: each function returns new top-level and metadata dicts and may share
untouched subtrees with its inputs.
"""

from __future__ import annotations

import re
import secrets
import time
import uuid
from typing import Any

from shardsync.local.apiserver.errors import bad_request, invalid
from shardsync.local.apiserver.resources import Resource

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_GEN_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_TOP_LEVEL_META = ("kind", "apiVersion", "metadata")
# Carried over from the stored object whatever an update says.
_IMMUTABLE_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds")


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def generated_name(prefix: str) -> str:
    return prefix[:58] + "".join(secrets.choice(_GEN_ALPHABET) for _ in range(5))


def metadata(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def validate_name(resource: Resource, name: str, namespace: str | None = None) -> None:
    if resource.kind == "Namespace" or resource.kind == "Service":
        pattern, limit, what = (_LABEL_1035 if resource.kind == "Service" else _LABEL), 63, "a DNS label"
    else:
        pattern, limit, what = _SUBDOMAIN, 253, "a lowercase RFC 1123 subdomain"
    if len(name) > limit or not pattern.match(name):
        raise invalid(
            resource.kind,
            resource.group if resource.custom else "",
            name,
            "metadata.name",
            f'Invalid value: "{name}": must be {what}',
        )


def check_type(resource: Resource, obj: dict[str, Any]) -> None:
    """A body whose kind or apiVersion names another type is refused (400), as the decoder does."""
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    if api_version and api_version != resource.group_version:
        raise bad_request(
            f"the API version in the data ({api_version}) does not match the expected API "
            f"version ({resource.group_version})"
        )
    if kind and kind != resource.kind:
        raise bad_request(f"the kind in the data ({kind}) does not match the expected kind ({resource.kind})")


def spec_part(resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
    """What `metadata.generation` tracks: everything but metadata (and status when it is a subresource)."""
    return {
        k: v for k, v in obj.items() if k not in _TOP_LEVEL_META and not (resource.status and k == "status")
    }


def prepare_create(
    resource: Resource,
    obj: dict[str, Any],
    namespace: str | None,
    *,
    timestamp: str | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    """The object as first stored (without resourceVersion): name, namespace, uid, timestamps, generation."""
    check_type(resource, obj)
    new = dict(obj)
    meta = dict(metadata(obj))
    name = meta.get("name") or ""
    if not name and meta.get("generateName"):
        name = generated_name(str(meta["generateName"]))
    if not name:
        raise invalid(
            resource.kind,
            resource.group if resource.custom else "",
            "",
            "metadata.name",
            "Required value: name or generateName is required",
            "FieldValueRequired",
        )
    validate_name(resource, name)
    meta["name"] = name
    if resource.namespaced:
        if meta.get("namespace") and meta["namespace"] != namespace:
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        meta["namespace"] = namespace
    else:
        meta.pop("namespace", None)
    for dropped in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink", "resourceVersion"):
        meta.pop(dropped, None)
    meta["uid"] = uid or str(uuid.uuid4())
    meta["creationTimestamp"] = timestamp or now()
    if resource.generation:
        meta["generation"] = 1
    else:
        meta.pop("generation", None)
    new["metadata"] = meta
    new["kind"] = resource.kind
    new["apiVersion"] = resource.group_version
    if resource.status and resource.custom:
        new.pop("status", None)
    return new


def prepare_update(
    resource: Resource, old: dict[str, Any], new: dict[str, Any], subresource: str | None = None
) -> dict[str, Any]:
    """The object as an update would store it: immutable fields kept, status isolated, generation bumped.

    The resourceVersion precondition is the caller's job; the result keeps `new`'s resourceVersion.
    """
    old_meta = metadata(old)
    if subresource == "status":
        result = {k: v for k, v in old.items() if k != "status"}
        if "status" in new:
            result["status"] = new["status"]
        meta = dict(old_meta)
        meta["resourceVersion"] = metadata(new).get("resourceVersion", "")
        result["metadata"] = meta
        return result
    check_type(resource, new)
    result = dict(new)
    meta = dict(metadata(new))
    for key in ("name", "namespace", *_IMMUTABLE_META):
        if key in old_meta:
            meta[key] = old_meta[key]
        else:
            meta.pop(key, None)
    if resource.status:
        if "status" in old:
            result["status"] = old["status"]
        else:
            result.pop("status", None)
    if old_meta.get("deletionTimestamp"):
        added = set(meta.get("finalizers") or []) - set(old_meta.get("finalizers") or [])
        if added:
            raise invalid(
                resource.kind,
                resource.group if resource.custom else "",
                str(old_meta.get("name", "")),
                "metadata.finalizers",
                "Forbidden: no new finalizers can be added if the object is being deleted",
                "FieldValueForbidden",
            )
    if resource.generation:
        generation = int(old_meta.get("generation") or 1)
        if spec_part(resource, result) != spec_part(resource, old):
            generation += 1
        meta["generation"] = generation
    else:
        meta.pop("generation", None)
    result["metadata"] = meta
    result["kind"] = resource.kind
    result["apiVersion"] = new.get("apiVersion") or old.get("apiVersion") or resource.group_version
    return result


def mark_deleting(resource: Resource, obj: dict[str, Any], timestamp: str | None = None) -> dict[str, Any]:
    """The object once a delete found finalizers on it: deletionTimestamp set, generation bumped."""
    meta = dict(metadata(obj))
    meta["deletionTimestamp"] = timestamp or now()
    meta["deletionGracePeriodSeconds"] = 0
    if resource.generation:
        meta["generation"] = int(meta.get("generation") or 1) + 1
    return {**obj, "metadata": meta}


def with_resource_version(obj: dict[str, Any], rv: int) -> dict[str, Any]:
    return {**obj, "metadata": {**metadata(obj), "resourceVersion": str(rv)}}


def in_version(obj: dict[str, Any], resource: Resource) -> dict[str, Any]:
    """The object as served at the requested version (custom resources are not converted, only relabelled)."""
    if obj.get("apiVersion") == resource.group_version:
        return obj
    return {**obj, "apiVersion": resource.group_version}
