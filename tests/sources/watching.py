"""The harness of the SourceWatcher tests against the embedded API server: object builders (Kubernetes JSON),
blocking client calls off the event loop, and `watching(...)`, a running watcher with its DesiredIndex and
the zones each change reported."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from random import Random
from typing import Any

import anyio
import anyio.to_thread
from kubernetes import client
from prometheus_client import REGISTRY

from shardsync.kube.client import Kube
from shardsync.kube.events import EventRecorder
from shardsync.local.apiserver import ApiServer
from shardsync.records.desired import DesiredIndex
from shardsync.sources.kind import SourceKind
from shardsync.sources.namespace_policy import NamespacePolicy
from shardsync.sources.table import SOURCES
from shardsync.sources.watcher import SourceWatcher, WatchOptions
from tests.waits import eventually

ZONE, OTHER = "ex.com", "other.org"
HOSTNAME = "external-dns.kubernetes.io/hostname"
TARGET = "external-dns.alpha.kubernetes.io/target"  # the old prefix works as well
GROUP, VERSION, PLURAL = "externaldns.k8s.io", "v1alpha1", "dnsendpoints"

Records = dict[tuple[str, str], tuple[str, ...]]


async def blocking(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """A client call, off the event loop the watcher runs on."""
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))


async def until(check: Callable[[], Awaitable[bool]], within: float = 5.0) -> None:
    """Poll an async check (a read from the API server) until it holds; fail after `within` seconds."""
    with anyio.fail_after(within):
        while not await check():  # noqa: ASYNC110 - polling the API server's state
            await anyio.sleep(0.02)


def metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


# -- object builders (Kubernetes JSON) ------------------------------------------------------------------


def service(
    name: str,
    annotations: dict[str, str] | None = None,
    type_: str = "LoadBalancer",
    labels: dict[str, str] | None = None,
    namespace: str = "default",
    **spec: Any,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": annotations or {},
            "labels": labels or {},
        },
        "spec": {
            "type": type_,
            "selector": {"app": name},
            "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
            **spec,
        },
    }


def pod(name: str, app: str, node: str = "n1", hostname: str = "", **annotations: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeName": node, "containers": [{"name": "c", "image": "registry.invalid/c"}]}
    if hostname:
        spec["hostname"] = hostname
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": app}, "annotations": annotations},
        "spec": spec,
    }


def pod_status(ready: bool) -> dict[str, Any]:
    condition = {"type": "Ready", "status": "True" if ready else "False"}
    return {"status": {"phase": "Running", "conditions": [condition]}}


def endpoint_slice(name: str, service_name: str, *endpoints: tuple[str, str, bool]) -> dict[str, Any]:
    """endpoints: (pod name, address, ready)."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": name, "labels": {"kubernetes.io/service-name": service_name}},
        "addressType": "IPv4",
        "endpoints": [
            {
                "addresses": [ip],
                "conditions": {"ready": ready},
                "targetRef": {"kind": "Pod", "name": pod_name},
            }
            for pod_name, ip, ready in endpoints
        ],
        "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
    }


def node_status(*addresses: tuple[str, str]) -> dict[str, Any]:
    return {"status": {"addresses": [{"type": t, "address": a} for t, a in addresses]}}


def dnsendpoint(name: str, *endpoints: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "DNSEndpoint",
        "metadata": {"name": name},
        "spec": {"endpoints": list(endpoints)},
    }


# -- the harness -----------------------------------------------------------------------------------------


@dataclass
class Harness:
    watcher: SourceWatcher
    desired: DesiredIndex
    api: Any  # the test's own kubernetes.client.ApiClient
    dirty: list[set[str]] = field(default_factory=list)

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def discovery(self) -> client.DiscoveryV1Api:
        return client.DiscoveryV1Api(self.api)

    @property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    def records(self, zone: str = ZONE) -> Records:
        return {(e.dns_name, e.record_type): e.targets for e in self.desired.desired(zone)}

    async def change(self, action: Awaitable[Any]) -> set[str]:
        """Run `action` and return the zones of the on_dirty calls it caused (waits for at least one)."""
        mark = len(self.dirty)
        await action
        await eventually(lambda: len(self.dirty) > mark)
        return set().union(*self.dirty[mark:])

    async def settle(self, expected: Records, zone: str = ZONE, within: float = 5.0) -> None:
        await eventually(lambda: self.records(zone) == expected, within=within)

    def hold(self, zones: set[str]) -> None:
        """A sharded replica's zones change to `zones` (of ZONE and OTHER), as its worker gains and drops
        them."""
        for zone in zones:
            self.desired.keep(zone)
        self.desired.expect(zones)
        for zone in {ZONE, OTHER} - zones:
            self.desired.drop(zone)

    async def churn_pod(self, op: str, pods: set[str], rng: Random, apps: tuple[str, ...]) -> None:
        """The churn tests' Pod steps: `relabel` one of `pods` to one of `apps`, or delete one (`unpod`)."""
        if op == "relabel" and pods:
            patch = {"metadata": {"labels": {"app": rng.choice(apps)}}}
            await blocking(self.core.patch_namespaced_pod, rng.choice(sorted(pods)), "default", patch)
        elif op == "unpod" and pods:
            name = rng.choice(sorted(pods))
            pods.discard(name)
            await blocking(self.core.delete_namespaced_pod, name, "default", grace_period_seconds=0)

    async def agrees_with(self, everything: Harness, zones: set[str]) -> None:
        """Once quiet, the records of the zones held here are those of a watcher keeping everything."""

        def agree() -> bool:
            return all(self.desired.ready(z) and self.records(z) == everything.records(z) for z in zones)

        await eventually(agree)


@asynccontextmanager
async def watching(
    apiserver: ApiServer,
    options: WatchOptions | None = None,
    write_status: Callable[[], bool] = lambda: True,
    wait_synced: bool = True,
    table: Mapping[str, SourceKind[Any]] = SOURCES,
    restricted: bool = False,
    policy_annotation: str = "",
    expect: tuple[str, ...] | None = None,
) -> AsyncIterator[Harness]:
    api = apiserver.api_client()
    watcher_api = apiserver.api_client(user_agent="shardsync-watcher")
    kube = Kube(watcher_api)
    desired = DesiredIndex([ZONE, OTHER], restricted=restricted)
    dirty: list[set[str]] = []
    recorder = EventRecorder(kube, "test-replica")
    watcher = SourceWatcher(
        kube,
        options or WatchOptions(),
        desired,
        dirty.append,
        recorder,
        write_status=write_status,
        table=table,
        policy=NamespacePolicy.configured(kube, policy_annotation),
    )
    if expect is not None:  # what a sharded replica learns from the assignment before listing
        desired.expect(expect)
        watcher.shard_hint.set()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(watcher.run)
            tg.start_soon(recorder.run)
            try:
                if wait_synced:
                    with anyio.fail_after(5):
                        await watcher.synced.wait()
                yield Harness(watcher, desired, api, dirty)
            finally:
                tg.cancel_scope.cancel()
    finally:
        api.close()
        watcher_api.close()


# -- Service ---------------------------------------------------------------------------------------------
