"""The source kinds `--source` can name: one line each, in the order of `--help` and the README.

A kind's module owns its translator, what it watches and its flags (its `KIND`, a `SourceKind`); adding a kind
is its module plus one line here (plus its RBAC rule and docs). Everything else reads this table: the
`--source` choices and the kinds' flag groups (`shardsync.replica.config`), the generic watcher, the RBAC
check (tests/deploy), and the worker, which posts an Event on the object an endpoint's `resource` label names
(`event_ref`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shardsync.flags import FlagGroup
from shardsync.kube.objects import ObjectRef
from shardsync.sources import (
    crd,
    gateway,
    ingress,
    istio_gateway,
    istio_virtualservice,
    node,
    options,
    pod,
    service,
)
from shardsync.sources.kind import SourceKind

SOURCES: dict[str, SourceKind[Any]] = {
    kind.name: kind
    for kind in (
        service.KIND,
        ingress.KIND,
        crd.KIND,
        *gateway.KINDS,
        istio_gateway.KIND,
        istio_virtualservice.KIND,
        node.KIND,
        pod.KIND,
    )
}


# The flags every kind shares (external-dns's global source flags): `SourceContext.common`.
SHARED_FLAGS = options.FLAGS


def flag_groups(table: Mapping[str, SourceKind[Any]] = SOURCES) -> tuple[FlagGroup[Any], ...]:
    """The shared group, then the kinds' flag groups in table order, each once (several kinds may share
    one)."""
    groups = {kind.flags.name: kind.flags for kind in table.values() if kind.flags is not None}
    return (SHARED_FLAGS, *groups.values())


def event_ref(resource: str, table: Mapping[str, SourceKind[Any]] = SOURCES) -> ObjectRef | None:
    """The object an endpoint's `resource` label (`<kind>/<namespace>/<name>`, or `<kind>/<name>` for a
    cluster-scoped kind's object: `node/<name>`) names, to post an Event on; None when the label is not of
    that form. A kind no source in the table writes (an endpoint of another external-dns source) is taken
    for a core `v1` object of that kind."""
    parts = resource.split("/")
    if len(parts) not in (2, 3):
        return None
    resource_kind, namespace, name = parts[0], parts[1] if len(parts) == 3 else "", parts[-1]
    for kind in table.values():
        if kind.resource_kind == resource_kind and kind.resource.namespaced == bool(namespace):
            return ObjectRef(
                kind.resource.kind,
                namespace,
                name,
                api_version=kind.resource.api_version,
                resource_kind=resource_kind,
            )
    return ObjectRef(resource_kind, namespace, name, resource_kind=resource_kind) if namespace else None
