"""Runs an informer once the API serves its resource: a kind whose resources come from a CRD waits for it.

`run_when_served` follows the CustomResourceDefinition of the informer's resource by name (a list and watch
of `customresourcedefinitions` with fieldSelector `metadata.name=<plural>.<group>`: RBAC grants it by
`resourceNames`, and the watch tells of an install at once, without polling the API). Once the CRD is
Established and serves the resource's version, or else the first of its `older_versions`, the informer
runs at that version. Until then the kind waits while the others run: said once (a warning naming the CRD
and where its manifest is, the `shardsync_source_crd_missing{crd=...}` gauge, and `on_missing`, which the
watcher turns into `/readyz` detail); `on_found` and an info line when it arrives. A CRD that cannot be
read (RBAC without that rule: 403) is probed for instead, by listing the resource with a backoff capped at
`PROBE_CAP` seconds, after one warning saying what to grant.

A resource a waiting kind reads beside its CRDs (the Gateway kinds' Namespaces) runs at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import anyio
from prometheus_client import Gauge

from shardsync.kube.client import Kube, KubeError
from shardsync.kube.informer import Informer
from shardsync.kube.objects import CUSTOM_RESOURCE_DEFINITIONS, Obj, Resource, get
from shardsync.logs import get_logger
from shardsync.pacing.backoff import Backoff
from shardsync.pacing.notify import Notifier
from shardsync.sources.kind import CrdNotice, SourceKind

log = get_logger(__name__)

CRD_MISSING = Gauge(
    "shardsync_source_crd_missing",
    "1 while a CRD a chosen source kind reads is not installed (the kind waits, the others run), by CRD",
    ["crd"],
)

# Without read access to the CRDs, the longest wait between two probes of a resource for its CRD.
PROBE_CAP = 2.0
# Once a CRD is Established, the longest wait between two probes of its resource while the API server
# still answers 404 (its handler for the new resource not installed yet, on every API server instance).
SETTLE_CAP = 1.0
_DENIED = frozenset({401, 403})


def crd_name(resource: Resource) -> str:
    """The name of the CustomResourceDefinition that would define `resource`: `<plural>.<group>`."""
    return f"{resource.plural}.{resource.group}"


def served_version(crd: Obj | None, versions: Sequence[str]) -> str | None:
    """The first of `versions` the CRD serves once Established; None while it does not (or is absent)."""
    if crd is None:
        return None
    conditions = get(crd, "status", "conditions")
    established = isinstance(conditions, list) and any(
        isinstance(c, dict) and c.get("type") == "Established" and c.get("status") == "True"
        for c in conditions
    )
    listed = get(crd, "spec", "versions")
    if not established or not isinstance(listed, list):
        return None
    served = {v.get("name") for v in listed if isinstance(v, dict) and v.get("served", True)}
    return next((v for v in versions if v in served), None)


def _slim_crd(crd: Obj) -> Obj:
    """What is kept of a CRD: its name, versions and conditions (not its schemas, often hundreds of KiB)."""
    versions = get(crd, "spec", "versions")
    return {
        "metadata": {
            k: v for k, v in (crd.get("metadata") or {}).items() if k in ("name", "resourceVersion")
        },
        "spec": {
            "versions": [
                {"name": v.get("name"), "served": v.get("served", True)}
                for v in (versions if isinstance(versions, list) else [])
                if isinstance(v, dict)
            ]
        },
        "status": {"conditions": get(crd, "status", "conditions") or []},
    }


class _Waiting:
    """One resource's wait for its CRD: the condition said once, and its end."""

    def __init__(self, crd: str, notice: CrdNotice, kinds: str, on_missing: Callable[[], None]) -> None:
        self.crd = crd
        self.notice = notice
        self.kinds = kinds
        self._on_missing = on_missing
        self.missing = False

    def not_there(self) -> None:
        if self.missing:
            return
        self.missing = True
        CRD_MISSING.labels(self.crd).inc()
        self._on_missing()
        log.warning(
            f"{self.notice.what} not installed; the {self.kinds} source waits for it, the others run",
            crd=self.crd,
            manifest=self.notice.manifest,
        )

    def end(self) -> None:
        if self.missing:
            CRD_MISSING.labels(self.crd).dec()


async def run_when_served(
    kube: Kube,
    informer: Informer,
    kinds: Sequence[SourceKind[Any]],
    on_error: Callable[[], None],
    on_missing: Callable[[], None] = lambda: None,
    on_found: Callable[[], object] = lambda: None,
) -> None:
    """Run the informer once the API serves its resource (see the module docstring)."""
    notice = kinds[0].crd
    assert notice is not None
    declared = informer.resource
    crd = crd_name(declared)
    if crd not in notice.crds:
        await informer.run()
        return
    versions = (declared.version, *declared.older_versions)
    waiting = _Waiting(crd, notice, ",".join(kind.name for kind in kinds), on_missing)
    try:
        version = await _follow_crd(kube, crd, versions, waiting)
        if version is None:  # the CRDs cannot be read: probe the resource itself
            version = await _probe(kube, declared, informer.namespace, PROBE_CAP, waiting, on_error)
        elif waiting.missing:  # just installed: the API server may not serve it everywhere yet
            settling = replace(declared, version=version, older_versions=())
            version = await _probe(kube, settling, informer.namespace, SETTLE_CAP)
    finally:
        waiting.end()
    informer.resource = replace(declared, version=version)
    if waiting.missing:
        on_found()
        log.info(f"{notice.what} found; {waiting.kinds} source starting", crd=crd, version=version)
    elif version != declared.version:
        log.info(f"{informer.name} served at an older version", version=informer.resource.api_version)
    await informer.run()


async def _follow_crd(kube: Kube, crd: str, versions: Sequence[str], waiting: _Waiting) -> str | None:
    """Watch the CRD named `crd` until it serves one of `versions` (returned); None when the CRDs cannot be
    read (warned once)."""
    changed = Notifier()
    denied: list[KubeError] = []

    def on_error(exc: KubeError) -> None:
        if exc.status in _DENIED:
            denied.append(exc)
            changed.notify()

    async def notify_synced() -> None:
        await follower.synced.wait()
        changed.notify()

    follower = Informer(
        kube,
        CUSTOM_RESOURCE_DEFINITIONS,
        field_selector=f"metadata.name={crd}",
        on_change=lambda key, old, new: changed.notify(),
        on_error=on_error,
        name=f"customresourcedefinitions/{crd}",
        project=_slim_crd,
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(follower.run)
        tg.start_soon(notify_synced)
        while True:
            ticket = changed.ticket()
            if denied:
                log.warning(
                    "cannot read CustomResourceDefinitions: probing the resource instead; grant list and "
                    "watch on customresourcedefinitions for this name (deploy/base/rbac.yaml)",
                    crd=crd,
                    status=denied[0].status,
                    probe_every=f"{PROBE_CAP:g}s",
                )
                tg.cancel_scope.cancel()
                return None
            if follower.synced.is_set():
                version = served_version(next(iter(follower.cache.values()), None), versions)
                if version is not None:
                    tg.cancel_scope.cancel()
                    return version
                waiting.not_there()
            await changed.wait(ticket)
    raise AssertionError("unreachable")  # the loop returns; mypy cannot tell a task group ends there


async def _probe(
    kube: Kube,
    resource: Resource,
    namespace: str,
    cap: float,
    waiting: _Waiting | None = None,
    on_error: Callable[[], None] = lambda: None,
) -> str:
    """List the resource (one object) at its version, then its older ones, until one is served; a backoff
    capped at `cap` between rounds. With `waiting`, the first round that finds none says so."""
    backoff = Backoff(initial=min(0.1, cap), maximum=cap)
    health = kube.health
    while True:
        recoveries = health.recoveries
        try:
            return await _first_served(kube, resource, namespace)
        except KubeError as exc:
            on_error()
            if not exc.not_found:
                log.warning(f"listing {resource.plural} failed", status=exc.status, reason=exc.reason)
            elif waiting is not None:
                waiting.not_there()
            if await health.pause(backoff.next(), recoveries):
                backoff.reset()


async def _first_served(kube: Kube, resource: Resource, namespace: str) -> str:
    """The first of the resource's versions the API serves; the newest version's KubeError when none is."""
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
        # A CRD installed between two probes serves all its versions at once: ask the newer ones again.
        for newer in versions[:i]:
            try:
                await kube.list(replace(resource, version=newer), namespace=namespace, limit=1)
                return newer
            except KubeError as exc:
                if not exc.not_found:
                    raise
        return version
    assert first is not None
    raise first
