"""Render a kustomization as `kubectl kustomize` does, for the features deploy/ uses, in plain Python.

The tests must not depend on kubectl being installed, so this renders `deploy/` itself: `resources` (files
and kustomization directories), `components` (kind Component), `patches` (strategic merge, or JSON 6902
when the patch is a list; from `path` or inline `patch`, with an optional `target`), `namespace` and
`images`. Any other field is refused, so a kustomization never silently renders differently here than with
kustomize; tests/deploy/test_apply.py compares the two where kubectl is present.

Strategic merge and JSON patch are the embedded API server's own implementations. Three kustomize
behaviours are reproduced on purpose: `namespace:` renames a Namespace object; a RoleBinding or
ClusterRoleBinding ServiceAccount subject gets the namespace when it has none or when a `namespace:`
transformer gave it the one it has; the output is in kustomize's default ("legacy") kind order, so CRDs
and RBAC come before what uses them.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from shardsync.local.apiserver.patch import json_patch, strategic_merge_patch

Obj = dict[str, Any]

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
SUPPORTED_FIELDS = frozenset(
    {"apiVersion", "kind", "resources", "components", "patches", "namespace", "images"}
)
# Kinds without a namespace (the ones deploy/ could hold; kustomize's list is longer).
CLUSTER_SCOPED = frozenset(
    {
        "Namespace",
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "PersistentVolume",
        "PriorityClass",
        "StorageClass",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "APIService",
    }
)
# kustomize's legacy order: these kinds first, in this order; then the rest by kind; webhooks last.
_FIRST = (
    "Namespace",
    "ResourceQuota",
    "StorageClass",
    "CustomResourceDefinition",
    "ServiceAccount",
    "PodSecurityPolicy",
    "Role",
    "ClusterRole",
    "RoleBinding",
    "ClusterRoleBinding",
    "ConfigMap",
    "Secret",
    "Endpoints",
    "Service",
    "LimitRange",
    "PriorityClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "Deployment",
    "StatefulSet",
    "CronJob",
    "PodDisruptionBudget",
)
_LAST = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
_BY_NAMESPACE_TRANSFORMER = "$namespaceFromTransformer"  # in-band marker on subjects, removed at the end


class KustomizeError(ValueError):
    """The kustomization uses something this renderer does not do, or is wrong."""


def render(path: Path) -> list[Obj]:
    """The objects `kubectl kustomize path` prints, in the same order."""
    objects = _build(path.resolve(), [], expect="Kustomization")
    for obj in objects:
        for subject in obj.get("subjects") or []:
            subject.pop(_BY_NAMESPACE_TRANSFORMER, None)
    return sorted(objects, key=_order)


def render_yaml(path: Path) -> str:
    return yaml.safe_dump_all(render(path), sort_keys=False)


def _order(obj: Obj) -> tuple[int, str, str, str]:
    kind = str(obj.get("kind"))
    if kind in _FIRST:
        rank = _FIRST.index(kind)
    elif kind in _LAST:
        rank = len(_FIRST) + 1 + _LAST.index(kind)
    else:
        rank = len(_FIRST)
    meta = obj.get("metadata") or {}
    return rank, kind if rank == len(_FIRST) else "", str(meta.get("name")), str(meta.get("namespace", ""))


def _load_kustomization(directory: Path) -> Obj:
    for name in KUSTOMIZATION_FILES:
        candidate = directory / name
        if candidate.is_file():
            data = yaml.safe_load(candidate.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise KustomizeError(f"{candidate}: not a mapping")
            unknown = set(data) - SUPPORTED_FIELDS
            if unknown:
                raise KustomizeError(f"{candidate}: unsupported fields {sorted(unknown)}")
            return data
    raise KustomizeError(f"{directory}: no kustomization file")


def _load_documents(path: Path) -> list[Obj]:
    docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
    for doc in docs:
        if not isinstance(doc, dict) or "kind" not in doc or "apiVersion" not in doc:
            raise KustomizeError(f"{path}: a document without kind/apiVersion")
    return docs


def _build(directory: Path, accumulated: list[Obj], expect: str) -> list[Obj]:
    """Add `directory`'s resources to `accumulated`, apply its components, then its own transformers."""
    k = _load_kustomization(directory)
    kind = k.get("kind", "Kustomization")
    if kind != expect:
        raise KustomizeError(f"{directory}: kind {kind}, expected {expect}")
    objects = list(accumulated)
    for entry in k.get("resources") or []:
        target = (directory / entry).resolve()
        if target.is_dir():
            objects.extend(_build(target, [], expect="Kustomization"))
        elif target.is_file():
            objects.extend(_load_documents(target))
        else:
            raise KustomizeError(f"{directory}: resource {entry} not found")
    _refuse_duplicates(objects, directory)
    for entry in k.get("components") or []:
        objects = _build((directory / entry).resolve(), objects, expect="Component")
    for patch in k.get("patches") or []:
        objects = _patch(directory, objects, patch)
    if "namespace" in k:
        objects = [_set_namespace(obj, str(k["namespace"])) for obj in objects]
    for image in k.get("images") or []:
        objects = [_set_image(obj, image) for obj in objects]
    return objects


def _key(obj: Obj) -> tuple[str, str, str, str]:
    meta = obj.get("metadata") or {}
    return str(obj.get("apiVersion")), str(obj.get("kind")), str(meta.get("name")), str(meta.get("namespace"))


def _refuse_duplicates(objects: list[Obj], where: Path) -> None:
    seen: set[tuple[str, str, str, str]] = set()
    for obj in objects:
        key = _key(obj)
        if key in seen:
            raise KustomizeError(f"{where}: {key} appears twice")
        seen.add(key)


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def _matches(obj: Obj, target: Obj) -> bool:
    unknown = set(target) - {"group", "version", "kind", "name", "namespace"}
    if unknown:
        raise KustomizeError(f"unsupported patch target fields {sorted(unknown)}")
    api_version = str(obj.get("apiVersion"))
    meta = obj.get("metadata") or {}
    checks = {
        "group": _group(api_version),
        "version": api_version.rpartition("/")[2],
        "kind": obj.get("kind"),
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
    }
    return all(checks[field] == value for field, value in target.items())


def _patch(directory: Path, objects: list[Obj], entry: Obj) -> list[Obj]:
    if set(entry) - {"path", "patch", "target"} or ("path" in entry) == ("patch" in entry):
        raise KustomizeError(f"{directory}: a patch needs exactly one of path/patch (and maybe target)")
    text = (directory / entry["path"]).read_text(encoding="utf-8") if "path" in entry else entry["patch"]
    body = yaml.safe_load(text)
    target = entry.get("target")
    if isinstance(body, list):
        if not isinstance(target, dict):
            raise KustomizeError(f"{directory}: a JSON 6902 patch needs a target")
    elif isinstance(body, dict):
        meta = body.get("metadata") or {}
        target = target or {"kind": body.get("kind"), "name": meta.get("name")}
    else:
        raise KustomizeError(f"{directory}: a patch is a mapping or a list")
    out, hits = [], 0
    for obj in objects:
        if _matches(obj, target):
            hits += 1
            patched = json_patch(obj, body) if isinstance(body, list) else strategic_merge_patch(obj, body)
            out.append(patched)
        else:
            out.append(obj)
    if hits == 0:
        raise KustomizeError(f"{directory}: patch target {target} matches nothing")
    return out


def _set_namespace(obj: Obj, namespace: str) -> Obj:
    obj = copy.deepcopy(obj)
    if obj.get("kind") == "Namespace":  # kustomize renames the Namespace object itself
        obj.setdefault("metadata", {})["name"] = namespace
    elif obj.get("kind") not in CLUSTER_SCOPED:
        obj.setdefault("metadata", {})["namespace"] = namespace
    if obj.get("kind") in ("RoleBinding", "ClusterRoleBinding"):
        for subject in obj.get("subjects") or []:
            if subject.get("kind") == "ServiceAccount" and (
                "namespace" not in subject or subject.get(_BY_NAMESPACE_TRANSFORMER)
            ):
                subject["namespace"] = namespace
                subject[_BY_NAMESPACE_TRANSFORMER] = True
    return obj


def _split_image(image: str) -> tuple[str, str]:
    """`repo/name:tag` → ("repo/name", ":tag"); `name@sha256:…` → ("name", "@sha256:…")."""
    if "@" in image:
        name, _, digest = image.partition("@")
        return name, "@" + digest
    slash = image.rfind("/")
    colon = image.rfind(":")
    if colon > slash:
        return image[:colon], image[colon:]
    return image, ""


def _set_image(obj: Obj, rule: Obj) -> Obj:
    unknown = set(rule) - {"name", "newName", "newTag", "digest"}
    if unknown:
        raise KustomizeError(f"unsupported image fields {sorted(unknown)}")
    obj = copy.deepcopy(obj)
    pod = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    for container in (pod.get("containers") or []) + (pod.get("initContainers") or []):
        name, suffix = _split_image(str(container.get("image", "")))
        if name != rule["name"]:
            continue
        name = rule.get("newName", name)
        if "digest" in rule:
            suffix = "@" + str(rule["digest"])
        elif "newTag" in rule:
            suffix = ":" + str(rule["newTag"])
        container["image"] = name + suffix
    return obj
