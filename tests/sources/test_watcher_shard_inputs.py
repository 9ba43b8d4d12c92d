"""A sharded replica keeps only the Pods and EndpointSlices of the Services it runs (sources.watcher's
`_stream_read`, `Translator.admits`), against the embedded API server.

The trap these tests guard: a Service that comes to read Pods left out here (read back for a gained zone,
created, or given a new selector) must not be translated before they are read back, or its records are
planned from half its inputs and deleted. So each test records what every translation of a Service saw.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from shardsync.local.apiserver import ApiServer
from shardsync.sources import refetch
from shardsync.sources import service as service_module
from shardsync.sources.watcher import WatchOptions
from tests.kubeclient import raw_body
from tests.waits import eventually

from .watching import HOSTNAME, OTHER, ZONE, blocking, endpoint_slice, pod, service, watching

pytestmark = pytest.mark.anyio

SHARDED = WatchOptions(shard_hint_wait=5.0)
Seen = dict[str, list[tuple[frozenset[str], int]]]  # Service name → (pods, slices) of each translation


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> Iterator[Seen]:
    calls: Seen = defaultdict(list)
    real = service_module.service_endpoints

    def recording(svc: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        pods = kwargs.get("pods") or {}
        calls[svc["metadata"]["name"]].append((frozenset(pods), len(kwargs.get("slices") or ())))
        return real(svc, *args, **kwargs)

    monkeypatch.setattr(service_module, "service_endpoints", recording)
    yield calls


def _headless(name: str, zone: str) -> dict[str, Any]:
    return service(name, {HOSTNAME: f"{name}.{zone}"}, type_="ClusterIP", clusterIP="None")


def _members(name: str, base: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Two pods (`<name>-0` with a hostname) and the EndpointSlice listing both, ready."""
    pods = [pod(f"{name}-0", name, hostname=f"{name}-0"), pod(f"{name}-1", name)]
    addresses = [(f"{name}-{i}", f"10.0.{base}.{i + 1}", True) for i in range(2)]
    return pods, endpoint_slice(f"{name}-x", name, *addresses)


def _create(
    core: client.CoreV1Api, discovery: client.DiscoveryV1Api, name: str, zone: str, base: int
) -> None:
    pods, slice_ = _members(name, base)
    for body in pods:
        core.create_namespaced_pod("default", raw_body(client.V1Pod, body))
    discovery.create_namespaced_endpoint_slice("default", raw_body(client.V1EndpointSlice, slice_))
    core.create_namespaced_service("default", raw_body(client.V1Service, _headless(name, zone)))


def _records(name: str, zone: str, base: int) -> dict[tuple[str, str], tuple[str, ...]]:
    return {
        (f"{name}.{zone}", "A"): (f"10.0.{base}.1", f"10.0.{base}.2"),
        (f"{name}-0.{name}.{zone}", "A"): (f"10.0.{base}.1",),
    }


def _whole(seen: Seen, name: str) -> bool:
    """Every translation of the Service saw both its pods and its slice."""
    return bool(seen[name]) and all(
        pods == {f"default/{name}-0", f"default/{name}-1"} and slices == 1 for pods, slices in seen[name]
    )


@pytest.mark.parametrize("batch", [100, 0], ids=["a list per service", "one list of all"])
async def test_only_the_pods_of_the_zones_run_here_are_kept_and_a_gained_zone_reads_its_back_first(
    apiserver: ApiServer, seen: Seen, batch: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(refetch, "LOAD_BATCH", batch)
    api = apiserver.api_client()
    try:
        core, discovery = client.CoreV1Api(api), client.DiscoveryV1Api(api)
        for i, (name, zone) in enumerate((("a", OTHER), ("b", ZONE), ("c", OTHER), ("d", ZONE))):
            _create(core, discovery, name, zone, i)
    finally:
        api.close()

    async with watching(apiserver, SHARDED, restricted=True, expect=(OTHER,)) as h:
        pods, slices = h.watcher.informers["pods"], h.watcher.informers["endpointslices.discovery.k8s.io"]
        assert set(pods.cache) == {f"default/{n}-{i}" for n in "ac" for i in range(2)}
        assert set(slices.cache) == {"default/a-x", "default/c-x"}
        assert h.records(OTHER) == {**_records("a", OTHER, 0), **_records("c", OTHER, 2)}
        assert _whole(seen, "a") and _whole(seen, "c") and not seen["b"]

        h.desired.keep(ZONE)  # the Services are read back, then their Pods and slices, then translated
        assert not h.desired.ready(ZONE)
        await eventually(lambda: h.desired.ready(ZONE))
        assert h.records() == {**_records("b", ZONE, 1), **_records("d", ZONE, 3)}
        assert _whole(seen, "b") and _whole(seen, "d")
        assert len(pods.cache) == 8 and len(slices.cache) == 4

        h.desired.expect((ZONE,))  # OTHER released: its Services are forgotten, then the Pods they read
        await eventually(lambda: set(slices.cache) == {"default/b-x", "default/d-x"})
        assert set(pods.cache) == {f"default/{n}-{i}" for n in "bd" for i in range(2)}
        assert h.records() == {**_records("b", ZONE, 1), **_records("d", ZONE, 3)}


async def test_a_service_created_or_reselecting_reads_its_pods_back_before_it_is_translated(
    apiserver: ApiServer, seen: Seen
) -> None:
    async with watching(apiserver, SHARDED, restricted=True, expect=(OTHER,)) as h:
        pods_cache = h.watcher.informers["pods"].cache
        pods, slice_ = _members("e", 4)
        for body in pods:
            await blocking(h.core.create_namespaced_pod, "default", body)
        await blocking(h.discovery.create_namespaced_endpoint_slice, "default", slice_)
        stray = pod("stray", "nobody", hostname="stray")
        await blocking(h.core.create_namespaced_pod, "default", stray)
        marker = pod("marker", "nobody")
        await blocking(h.core.create_namespaced_pod, "default", marker)
        await eventually(lambda: h.watcher.informers["pods"].left_out)
        assert not pods_cache  # no Service here reads them

        # Created: its Pods and slice were left out as they came; read back before its translation.
        await blocking(h.core.create_namespaced_service, "default", _headless("e", OTHER))
        await h.settle(_records("e", OTHER, 4), zone=OTHER)
        assert _whole(seen, "e")

        # A Pod left out that comes to be selected arrives by the watch.
        await blocking(
            h.core.patch_namespaced_pod, "stray", "default", {"metadata": {"labels": {"app": "e"}}}
        )
        await eventually(lambda: "default/stray" in pods_cache)

        # A new selector: the Pods it now selects are read back before the Service is translated again.
        await blocking(h.core.create_namespaced_pod, "default", pod("f-0", "f", hostname="f-0"))
        seen.clear()
        patch = {"spec": {"selector": {"app": "f"}}}
        await blocking(h.core.patch_namespaced_service, "e", "default", patch)
        await eventually(lambda: "default/f-0" in pods_cache and bool(seen["e"]))
        assert all(pods == {"default/f-0"} for pods, _ in seen["e"])
        assert "default/marker" not in pods_cache


async def test_pods_dropped_after_a_listing_that_kept_all_are_read_back_when_their_zone_is_gained(
    apiserver: ApiServer, seen: Seen
) -> None:
    api = apiserver.api_client()
    try:
        core, discovery = client.CoreV1Api(api), client.DiscoveryV1Api(api)
        _create(core, discovery, "a", OTHER, 0)
        _create(core, discovery, "b", ZONE, 1)
    finally:
        api.close()
    # No hint in time: everything is listed and kept, as a replica that has not read the assignment yet.
    async with watching(apiserver, WatchOptions(shard_hint_wait=0.2), restricted=True) as h:
        pods = h.watcher.informers["pods"]
        assert len(pods.cache) == 4 and not pods.left_out
        h.desired.expect((OTHER,))  # the assignment: ZONE is another replica's, its Pods are dropped
        await eventually(lambda: set(pods.cache) == {"default/a-0", "default/a-1"})
        seen.clear()
        h.desired.keep(ZONE)
        await eventually(lambda: h.desired.ready(ZONE))
        assert h.records() == _records("b", ZONE, 1) and _whole(seen, "b")


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_after_any_churn_the_records_of_the_zones_held_are_those_of_a_replica_keeping_everything(
    apiserver: ApiServer, seed: int
) -> None:
    """Services, Pods and EndpointSlices created, relabelled, reselected and deleted while the held zones
    change: once quiet, a sharded watcher's records for the zones it holds equal an unsharded one's."""
    rng = random.Random(seed)
    apps = ("a0", "a1", "a2")
    async with watching(apiserver, SHARDED, restricted=True, expect=(OTHER,)) as h:
        services: set[str] = set()
        pods: set[str] = set()
        held = {OTHER}
        for step in range(60):
            op = rng.choice(
                ("service", "service", "reselect", "delete", "pod", "pod", "relabel", "unpod", "zones")
            )
            if op == "service":
                name = f"s{step}"
                body = _headless(name, rng.choice((ZONE, OTHER)))
                body["spec"]["selector"] = {"app": rng.choice(apps)}
                await blocking(h.core.create_namespaced_service, "default", body)
                addresses = [(p, f"10.1.{step}.{i + 1}", True) for i, p in enumerate(sorted(pods)[:3])]
                slice_ = endpoint_slice(f"{name}-x", name, *addresses)
                await blocking(h.discovery.create_namespaced_endpoint_slice, "default", slice_)
                services.add(name)
            elif op == "reselect" and services:
                patch = {"spec": {"selector": {"app": rng.choice(apps)}}}
                await blocking(
                    h.core.patch_namespaced_service, rng.choice(sorted(services)), "default", patch
                )
            elif op == "delete" and services:
                name = rng.choice(sorted(services))
                services.discard(name)
                await blocking(h.core.delete_namespaced_service, name, "default")
            elif op == "pod":
                name = f"p{step}"
                await blocking(
                    h.core.create_namespaced_pod, "default", pod(name, rng.choice(apps), hostname=name)
                )
                pods.add(name)
            elif op in ("relabel", "unpod"):
                await h.churn_pod(op, pods, rng, apps)
            elif op == "zones":
                held = set(rng.choice(([ZONE], [OTHER], [ZONE, OTHER])))
                h.hold(held)
        async with watching(apiserver) as everything:
            await h.agrees_with(everything, held)
            # with hostnames from Pods, read back as zones were gained and selectors changed
            assert any(name.count(".") > 2 for z in held for name, _ in h.records(z))
