"""SourceWatcher and the gateway kinds against the embedded API server: routes translated through their
Gateways, a Gateway change re-translating exactly the routes attached to it, a Gateway in another namespace
than --namespace still read, older served versions found, and the kinds waiting for missing CRDs."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from kubernetes import client

from shardsync.local.apiserver import ApiServer
from shardsync.manifests import load_gateway_crds
from shardsync.sources import gateway as gw
from shardsync.sources.gateway import RouteIndex
from shardsync.sources.watcher import WatchOptions
from tests.waits import eventually

from .gateway_objects import GROUP, gateway, listener, namespace, parent, route
from .watching import ZONE, Harness, blocking, metric, watching

pytestmark = pytest.mark.anyio


async def install_crds(h: Harness) -> None:
    for crd in load_gateway_crds():
        await blocking(client.ApiextensionsV1Api(h.api).create_custom_resource_definition, crd)


async def create(h: Harness, plural: str, obj: dict[str, Any], version: str = "v1") -> None:
    """Create a Gateway API object, then write its status (the status subresource ignores it on create)."""
    ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
    await blocking(h.custom.create_namespaced_custom_object, GROUP, version, ns, plural, obj)
    body = {"status": obj["status"]}
    await blocking(h.custom.patch_namespaced_custom_object_status, GROUP, version, ns, plural, name, body)


async def move_gateway(h: Harness, name: str, address: str, ns: str = "default") -> None:
    body = {"status": {"addresses": [{"type": "IPAddress", "value": address}]}}
    await blocking(h.custom.patch_namespaced_custom_object_status, GROUP, "v1", ns, "gateways", name, body)


async def create_namespace(h: Harness, name: str, **labels: str) -> None:
    try:
        await blocking(h.core.create_namespace, namespace(name, **labels))
    except client.ApiException as exc:
        if exc.status != 409:
            raise


def test_route_index_names_exactly_the_attached_routes() -> None:
    idx = RouteIndex()
    idx.register("default/a", route("a", parents=(parent("one"),)))
    idx.register("default/b", route("b", parents=(parent("two"),)))
    idx.register("apps/c", route("c", "apps", parents=(parent("one", "default"),), accepted_status="False"))
    one = gateway("one")
    moved = {**one, "status": {"addresses": [{"value": "5.6.7.8"}]}}
    assert idx.gateway_changed("default/one", None, one) == {"default/a", "apps/c"}
    assert idx.gateway_changed("default/one", one, moved) == {"default/a", "apps/c"}
    # A change to what is not read (conditions) re-translates nothing.
    conditions = {**one, "status": {**one["status"], "conditions": [{"type": "Programmed"}]}}
    assert idx.gateway_changed("default/one", one, conditions) == set()
    assert idx.gateway_changed("default/two", gateway("two"), None) == {"default/b"}
    assert idx.gateway_changed("default/three", None, gateway("three")) == set()
    # A route now attached elsewhere leaves its old Gateway's list.
    idx.register("default/a", route("a", parents=(parent("two"),)))
    assert idx.gateway_changed("default/one", None, one) == {"apps/c"}
    idx.unregister("apps/c")
    assert idx.gateway_changed("default/one", None, one) == set()
    # Namespaces: only a label change re-translates the routes in it.
    ns = namespace("default", team="a")
    assert idx.namespace_changed("default", ns, namespace("default", team="a")) == set()
    assert idx.namespace_changed("default", ns, namespace("default", team="b")) == {"default/a", "default/b"}
    assert len(idx) == 2


async def test_gateway_address_change_retranslates_only_its_routes(apiserver: ApiServer) -> None:
    options = WatchOptions(sources=("gateway-httproute",))
    async with watching(apiserver, options, wait_synced=False) as h:
        await install_crds(h)
        await create_namespace(h, "default")
        await create(h, "gateways", gateway("one", addresses=("192.0.2.1",)))
        await create(h, "gateways", gateway("two", addresses=("192.0.2.2",)))
        await create(h, "httproutes", route("a", hostnames=(f"a.{ZONE}",), parents=(parent("one"),)))
        await create(h, "httproutes", route("b", hostnames=(f"b.{ZONE}",), parents=(parent("two"),)))
        await h.settle({(f"a.{ZONE}", "A"): ("192.0.2.1",), (f"b.{ZONE}", "A"): ("192.0.2.2",)}, within=10)

        translator = h.watcher._sources["gateway-httproute"].translator
        assert isinstance(translator, gw.RouteTranslator)
        seen: list[str] = []
        original = translator.translate

        def counting(key: str, obj: Any) -> Any:
            seen.append(key)
            return original(key, obj)

        translator.translate = counting  # type: ignore[method-assign]
        assert await h.change(move_gateway(h, "one", "192.0.2.9")) == {ZONE}
        await h.settle({(f"a.{ZONE}", "A"): ("192.0.2.9",), (f"b.{ZONE}", "A"): ("192.0.2.2",)})
        assert seen == ["default/a"]

        await blocking(h.custom.delete_namespaced_custom_object, GROUP, "v1", "default", "httproutes", "a")
        await h.settle({(f"b.{ZONE}", "A"): ("192.0.2.2",)})


async def test_gateway_outside_namespace_and_older_versions(apiserver: ApiServer) -> None:
    # --namespace=apps reads the routes of apps, but the Gateway in infra all the same (as external-dns,
    # whose Gateway informer follows --gateway-namespace only); TCPRoute is served at v1alpha2 only.
    options = WatchOptions(sources=("gateway-tcproute", "gateway-tlsroute"), namespace="apps")
    async with watching(apiserver, options, wait_synced=False) as h:
        await install_crds(h)
        for name in ("infra", "apps"):
            await create_namespace(h, name, team=name)
        selector = {"namespaces": {"from": "Selector", "selector": {"matchLabels": {"team": "apps"}}}}
        gw_obj = gateway(
            "edge",
            "infra",
            listener("tcp", protocol="TCP", port=5432, allowed=selector),
            listener("tls", protocol="TLS", port=443, hostname=f"*.{ZONE}", allowed=selector),
            addresses=("192.0.2.7",),
        )
        await create(h, "gateways", gw_obj)
        tcp = route(
            "db",
            "apps",
            parents=(parent("edge", "infra", section="tcp"),),
            kind="TCPRoute",
            version="v1alpha2",
            annotations={"external-dns.kubernetes.io/hostname": f"db.{ZONE}"},
        )
        tls = route(
            "web", "apps", (f"web.{ZONE}",), (parent("edge", "infra"),), kind="TLSRoute", version="v1alpha3"
        )
        await create(h, "tcproutes", tcp, version="v1alpha2")
        await create(h, "tlsroutes", tls, version="v1alpha3")
        await h.settle({(f"db.{ZONE}", "A"): ("192.0.2.7",), (f"web.{ZONE}", "A"): ("192.0.2.7",)}, within=10)
        informers = h.watcher.informers
        assert informers["tcproutes.gateway.networking.k8s.io"].resource.version == "v1alpha2"
        assert informers["tlsroutes.gateway.networking.k8s.io"].resource.version == "v1alpha3"
        assert (
            informers["gateways.gateway.networking.k8s.io"].namespace == ""
            and informers["tcproutes.gateway.networking.k8s.io"].namespace == "apps"
        )
        # Routes are read by key (packed JSON), not the Gateways and Namespaces a translation reads whole.
        assert (
            informers["tcproutes.gateway.networking.k8s.io"].packed
            and informers["tlsroutes.gateway.networking.k8s.io"].packed
        )
        assert (
            not informers["gateways.gateway.networking.k8s.io"].packed and not informers["namespaces"].packed
        )

        # The namespace no longer carries the label the listeners select: the routes lose their names.
        await blocking(h.core.patch_namespace, "apps", {"metadata": {"labels": {"team": "other"}}})
        await h.settle({})


async def test_routes_wait_for_the_gateway_api_crds(
    apiserver: ApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    # Asked for without the CRDs: one warning per CRD not installed, naming it and what to install; the
    # service kind beside it runs, and the Namespaces the routes read too.
    caplog.set_level(logging.INFO, logger="shardsync.sources.served")
    crds = [f"{plural}.gateway.networking.k8s.io" for plural in ("gateways", "httproutes")]

    def missing() -> float:
        return sum(metric("shardsync_source_crd_missing", crd=crd) for crd in crds)

    before = missing()
    options = WatchOptions(sources=("service", "gateway-httproute"))
    async with watching(apiserver, options, wait_synced=False) as h:
        await eventually(lambda: missing() == before + 2, within=5)
        await eventually(h.watcher.complete.is_set, within=5)
        await eventually(lambda: h.watcher.unsynced() == [], within=5)  # the Namespaces too
        assert h.watcher.waiting() == [
            f"{crd} not installed: the gateway-httproute source waits for it" for crd in crds
        ]
        said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        wanted = "Gateway API CRDs not installed; the gateway-httproute source waits for it, the others run"
        assert [e for e in said if wanted in e] and len(said) == 2, said
        named = [str(getattr(r, "kv", {}).get("crd")) for r in caplog.records if r.levelno >= logging.WARNING]
        assert sorted(named) == crds
        await install_crds(h)
        await eventually(h.watcher.synced.is_set, within=2)
        assert missing() == before and h.watcher.waiting() == []
        said = [r.getMessage() for r in caplog.records if "Gateway API" in r.getMessage()]
        assert len(said) == 4, said  # and one line each as it was found


async def test_without_a_gateway_source_nothing_is_said_of_the_crds(
    apiserver: ApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    async with watching(apiserver, WatchOptions(sources=("service",))) as h:
        assert "gateways" not in h.watcher.informers
    assert "Gateway API" not in caplog.text
