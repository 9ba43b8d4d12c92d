"""Runs an informer once the API serves its resource: a kind whose resources come from a CRD waits for it.

`run_when_served` probes the informer's resource at its version, then at its `older_versions` (newest first,
with backoff, one error logged and the `shardsync_source_crd_missing` gauge raised while it is missing),
and runs the informer at the first version served; the other kinds of the watcher do not wait for it
(`on_missing` tells the watcher that the resource is not served: a kind with no objects to list).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import anyio
from prometheus_client import Gauge

from shardsync.backoff import Backoff
from shardsync.informer import Informer
from shardsync.kube import Kube, KubeError
from shardsync.logs import get_logger
from shardsync.objects import Resource
from shardsync.sources.kind import CrdNotice, SourceKind

log = get_logger(__name__)

CRD_MISSING = Gauge(
    "shardsync_source_crd_missing",
    "Source resources whose CRD is not installed, so their kind waits (1: the crd source's DNSEndpoint CRD)",
)


async def run_when_served(
    kube: Kube,
    informer: Informer,
    kinds: Sequence[SourceKind[Any]],
    max_backoff: float,
    on_error: Callable[[], None],
    on_missing: Callable[[], None] = lambda: None,
) -> None:
    """Wait until the API serves the informer's resource at its version or one of its older versions
    (probing newest first, with backoff, one error logged; `on_missing` called when first found not
    served), then run the informer at that version."""
    notice: CrdNotice | None = kinds[0].crd
    assert notice is not None
    names = ",".join(kind.name for kind in kinds)
    declared = informer.resource
    backoff = Backoff(initial=0.5, maximum=max_backoff)
    missing = False
    try:
        while True:
            try:
                informer.resource = await served_version(kube, declared, informer.namespace)
                break
            except KubeError as exc:
                on_error()
                if exc.not_found and not missing:
                    missing = True
                    CRD_MISSING.inc()
                    on_missing()
                    log.error(
                        f"{notice.what} not installed; the {names} source waits for it, the others run",
                        crd=notice.crd,
                        manifest=notice.manifest,
                    )
                elif not exc.not_found:
                    log.warning(f"listing {informer.name} failed", status=exc.status, reason=exc.reason)
                await anyio.sleep(backoff.next())
    finally:
        if missing:
            CRD_MISSING.dec()
    if missing:
        log.info(f"{notice.what} found; {names} source starting", crd=notice.crd)
    if informer.resource != declared:
        log.info(f"{informer.name} served at an older version", version=informer.resource.api_version)
    await informer.run()


async def served_version(kube: Kube, resource: Resource, namespace: str) -> Resource:
    """The resource at the first of its versions the API serves; the newest version's KubeError when
    none is."""
    versions = (resource.version, *resource.older_versions)
    first: KubeError | None = None
    for i, version in enumerate(versions):
        try:
            await kube.list(replace(resource, version=version), namespace=namespace, limit=1)
        except KubeError as exc:
            if not exc.not_found:
                raise
            first = first or exc
            continue
        # A CRD installed between two probes serves all its versions at once: ask the newer ones again
        for newer in versions[:i]:
            try:
                await kube.list(replace(resource, version=newer), namespace=namespace, limit=1)
                return replace(resource, version=newer)
            except KubeError as exc:
                if not exc.not_found:
                    raise
        return replace(resource, version=version)
    assert first is not None
    raise first
