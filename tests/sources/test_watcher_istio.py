"""SourceWatcher and the Istio kinds against the embedded API server: a Service, Ingress or Gateway change
re-translates exactly the Gateways and VirtualServices reading it, older served versions are found
(v1beta1, v1alpha3), the kinds wait for missing CRDs, and a Service that the service kind alone would
leave out of a sharded replica's cache stays there while an Istio kind points at it."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from kubernetes import client

from shardsync.local.apiserver import ApiServer
from shardsync.manifests import load_istio_crds
from shardsync.sources.istio import GROUP, UNRESOLVED
from shardsync.sources.kind import Translator
from shardsync.sources.watcher import WatchOptions
from tests.kubeclient import raw_body
from tests.waits import eventually

from .istio_objects import INGRESS, TARGET, gateway, lb_ingress, lb_service, virtualservice
from .watching import HOSTNAME, OTHER, ZONE, Harness, blocking, metric, until, watching

pytestmark = pytest.mark.anyio

IGW = {"istio": "ingressgateway"}
PROBLEMS = "shardsync_source_invalid_endpoints_total"


async def install_crds(h: Harness, version: str = "v1") -> None:
    """Istio's CRDs, serving only `version` and the versions older than it (Istio before 1.22: v1beta1)."""
    order = ["v1", "v1beta1", "v1alpha3"]
    for crd in load_istio_crds():
        crd = copy.deepcopy(crd)
        versions = [v for v in crd["spec"]["versions"] if order.index(v["name"]) >= order.index(version)]
        for v in versions:
            v["storage"] = v["name"] == version
        crd["spec"]["versions"] = versions
        await blocking(client.ApiextensionsV1Api(h.api).create_custom_resource_definition, crd)


async def create(h: Harness, obj: dict[str, Any], version: str = "v1") -> None:
    """An Istio object, a Service (then its load-balancer status) or an Ingress (likewise)."""
    ns = obj["metadata"]["namespace"]
    if obj["kind"] == "Service":
        await blocking(h.core.create_namespaced_service, ns, raw_body(client.V1Service, obj))
        body = {"status": obj["status"]}
        await blocking(h.core.patch_namespaced_service_status, obj["metadata"]["name"], ns, body)
    elif obj["kind"] == "Ingress":
        net = client.NetworkingV1Api(h.api)
        await blocking(net.create_namespaced_ingress, ns, raw_body(client.V1Ingress, obj))
        body = {"status": obj["status"]}
        await blocking(net.patch_namespaced_ingress_status, obj["metadata"]["name"], ns, body)
    else:
        plural = obj["kind"].lower() + "s"
        body = {**obj, "apiVersion": f"{GROUP}/{version}"}
        await blocking(h.custom.create_namespaced_custom_object, GROUP, version, ns, plural, body)


async def move_service(h: Harness, name: str, address: str) -> None:
    body = {"status": {"loadBalancer": {"ingress": [{"ip": address}]}}}
    await blocking(h.core.patch_namespaced_service_status, name, "default", body)


async def patch_gateway(h: Harness, name: str, patch: dict[str, Any]) -> None:
    args = (GROUP, "v1alpha3", "default", "gateways", name, patch)
    await blocking(h.custom.patch_namespaced_custom_object, *args)


@contextmanager
def counting(translator: Translator) -> Iterator[list[str]]:
    """The keys the translator translates while inside."""
    seen: list[str] = []
    original = translator.translate

    def count(key: str, obj: Any) -> Any:
        seen.append(key)
        return original(key, obj)

    translator.translate = count  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        translator.translate = original  # type: ignore[method-assign]


async def test_service_and_ingress_changes_retranslate_only_the_gateways_they_feed(
    apiserver: ApiServer,
) -> None:
    async with watching(apiserver, WatchOptions(sources=("istio-gateway",)), wait_synced=False) as h:
        await install_crds(h, "v1beta1")  # Istio before 1.22
        await create(h, lb_service("igw-a", selector={"istio": "a"}, ips=["192.0.2.1"]))
        await create(h, lb_service("igw-b", selector={"istio": "b"}, ips=["192.0.2.2"]))
        await create(h, lb_ingress("edge", ips=["192.0.2.3"]))
        for name, label in (("one", "a"), ("two", "b")):
            await create(h, gateway(name, hosts=[[f"{name}.{ZONE}"]], selector={"istio": label}), "v1beta1")
        await create(h, gateway("three", hosts=[[f"three.{ZONE}"]], annotations={INGRESS: "edge"}), "v1beta1")
        await h.settle(
            {
                (f"one.{ZONE}", "A"): ("192.0.2.1",),
                (f"two.{ZONE}", "A"): ("192.0.2.2",),
                (f"three.{ZONE}", "A"): ("192.0.2.3",),
            },
            within=10,
        )
        assert h.watcher._informers[h.watcher._sources["istio-gateway"].kind.resource].resource.version == (
            "v1beta1"
        )
        translator = h.watcher._sources["istio-gateway"].translator
        with counting(translator) as seen:
            assert await h.change(move_service(h, "igw-a", "192.0.2.9")) == {ZONE}
            await h.settle(
                {
                    (f"one.{ZONE}", "A"): ("192.0.2.9",),
                    (f"two.{ZONE}", "A"): ("192.0.2.2",),
                    (f"three.{ZONE}", "A"): ("192.0.2.3",),
                }
            )
            assert seen == ["default/one"]
            seen.clear()
            body = {"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.8"}]}}}
            net = client.NetworkingV1Api(h.api)
            patched = blocking(net.patch_namespaced_ingress_status, "edge", "default", body)
            assert await h.change(patched) == {ZONE}
            await eventually(lambda: h.records()[(f"three.{ZONE}", "A")] == ("192.0.2.8",))
            assert seen == ["default/three"]
            seen.clear()
            # The Ingress goes: the Gateway keeps its record (external-dns would stop syncing) and says why.
            problems = metric(PROBLEMS, kind="istio-gateway")
            await blocking(net.delete_namespaced_ingress, "edge", "default")
            await eventually(lambda: seen == ["default/three"])
            assert h.records()[(f"three.{ZONE}", "A")] == ("192.0.2.8",)
            assert metric(PROBLEMS, kind="istio-gateway") == problems + 1
            await until(lambda: warned(h, "three"))


async def warned(h: Harness, name: str) -> bool:
    """A Warning Event with the unresolved reason was posted on the Gateway `name`."""
    body = await blocking(
        h.core.list_namespaced_event, "default", field_selector=f"involvedObject.name={name}"
    )
    return any(e.reason == UNRESOLVED and e.involved_object.kind == "Gateway" for e in body.items)


async def test_virtualservices_follow_their_gateways_and_the_services_behind_them(
    apiserver: ApiServer,
) -> None:
    async with watching(apiserver, WatchOptions(sources=("istio-virtualservice",)), wait_synced=False) as h:
        await install_crds(h, "v1alpha3")
        await create(h, lb_service("igw", selector=IGW, ips=["192.0.2.1"]))
        await create(h, gateway("edge", hosts=[[f"*.{ZONE}"]], selector=IGW), "v1alpha3")
        await create(h, gateway("other", hosts=[["*"]], annotations={TARGET: "192.0.2.7"}), "v1alpha3")
        await create(h, virtualservice("shop", gateways=["edge", "mesh"], hosts=[f"shop.{ZONE}"]), "v1alpha3")
        await create(
            h, virtualservice("blog", gateways=["default/other"], hosts=[f"blog.{ZONE}"]), "v1alpha3"
        )
        await h.settle(
            {(f"shop.{ZONE}", "A"): ("192.0.2.1",), (f"blog.{ZONE}", "A"): ("192.0.2.7",)}, within=10
        )
        translator = h.watcher._sources["istio-virtualservice"].translator
        with counting(translator) as seen:
            await h.change(move_service(h, "igw", "192.0.2.2"))
            await h.settle({(f"shop.{ZONE}", "A"): ("192.0.2.2",), (f"blog.{ZONE}", "A"): ("192.0.2.7",)})
            assert seen == ["default/shop"]
            seen.clear()
            patch = {"metadata": {"annotations": {TARGET: "192.0.2.8"}}}
            await h.change(patch_gateway(h, "other", patch))
            await h.settle({(f"shop.{ZONE}", "A"): ("192.0.2.2",), (f"blog.{ZONE}", "A"): ("192.0.2.8",)})
            assert seen == ["default/blog"]
            seen.clear()
            # The Gateway stops admitting the host: the VirtualService's record goes.
            narrowed = {"spec": {"servers": [{"hosts": [f"*.{OTHER}"]}]}}
            await h.change(patch_gateway(h, "edge", narrowed))
            await h.settle({(f"blog.{ZONE}", "A"): ("192.0.2.8",)})
            assert seen == ["default/shop"]


async def test_the_kinds_wait_for_their_crds_while_the_others_run(apiserver: ApiServer) -> None:
    options = WatchOptions(sources=("service", "istio-gateway", "istio-virtualservice"))
    async with watching(apiserver, options, wait_synced=False) as h:
        web = lb_service("web", ips=["192.0.2.5"])
        web["metadata"]["annotations"] = {HOSTNAME: f"web.{ZONE}"}
        await create(h, web)
        await h.settle({(f"web.{ZONE}", "A"): ("192.0.2.5",)}, within=10)
        await eventually(lambda: h.watcher.complete.is_set())  # the Istio kinds wait; nothing else does
        assert not h.watcher.synced.is_set()
        await install_crds(h)
        await create(h, gateway("edge", hosts=[[f"edge.{ZONE}"]], annotations={TARGET: "192.0.2.6"}))
        await h.settle(
            {(f"web.{ZONE}", "A"): ("192.0.2.5",), (f"edge.{ZONE}", "A"): ("192.0.2.6",)}, within=15
        )
        await eventually(lambda: h.watcher.synced.is_set(), within=10)


async def test_a_sharded_replica_keeps_the_gateway_service_another_kind_would_leave_out(
    apiserver: ApiServer,
) -> None:
    # The ingress gateway's Service names a record in the zone this replica does not hold: alone, the
    # service kind would leave it out of the cache (sources.shard_cache); the VirtualService needs it.
    options = WatchOptions(sources=("service", "istio-virtualservice"), shard_hint_wait=5.0)
    async with watching(apiserver, options, wait_synced=False, restricted=True, expect=(ZONE,)) as h:
        await install_crds(h)
        igw = lb_service("igw", selector=IGW, ips=["192.0.2.1"])
        igw["metadata"]["annotations"] = {HOSTNAME: f"lb.{OTHER}"}
        await create(h, igw)
        await create(h, gateway("edge", hosts=[["*"]], selector=IGW))
        await create(h, virtualservice("shop", gateways=["edge"], hosts=[f"shop.{ZONE}"]))
        await h.settle({(f"shop.{ZONE}", "A"): ("192.0.2.1",)}, within=10)
        sources = h.watcher._sources
        assert not sources["service"].kind.evictable and sources["istio-virtualservice"].kind.evictable
        assert "default/igw" in h.watcher._informers[sources["service"].kind.resource].cache
        await h.change(move_service(h, "igw", "192.0.2.2"))
        await h.settle({(f"shop.{ZONE}", "A"): ("192.0.2.2",)})
