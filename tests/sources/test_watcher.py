"""SourceWatcher against the embedded API server: the official client writes the objects, the watcher keeps
the DesiredIndex in step and reports exactly the zones whose desired endpoints changed (Services, Ingresses,
the object filters, restarts; DNSEndpoints: test_watcher_crd.py)."""

from __future__ import annotations

import copy
from typing import Any

import anyio
import anyio.to_thread
import pytest
from kubernetes import client

from shardsync.local.apiserver import ApiServer
from shardsync.records.endpoint import RESOURCE_LABEL
from shardsync.sources import service as service_module
from shardsync.sources.filters import ObjectFilter, RecordTypeFilter
from shardsync.sources.ingress import IngressOptions
from shardsync.sources.service import service_endpoints
from shardsync.sources.watcher import WatchOptions
from tests.kubeclient import raw_body
from tests.waits import eventually

from .watching import (
    HOSTNAME,
    OTHER,
    TARGET,
    ZONE,
    Harness,
    blocking,
    endpoint_slice,
    node_status,
    pod,
    pod_status,
    service,
    watching,
)

pytestmark = pytest.mark.anyio


async def test_service_create_change_delete_touch_only_their_zone(apiserver: ApiServer) -> None:
    async with watching(apiserver) as h:
        web = service("web", {HOSTNAME: "www.ex.com"}, externalIPs=["192.0.2.1"])
        touched = await h.change(blocking(h.core.create_namespaced_service, "default", web))
        assert touched == {ZONE}
        assert h.records() == {("www.ex.com", "A"): ("192.0.2.1",)}
        assert h.desired.desired(ZONE)[0].labels[RESOURCE_LABEL] == "service/default/web"

        # A Service without annotations touches nothing: the next report is the other zone's alone.
        await blocking(
            h.core.create_namespaced_service, "default", service("plain", externalIPs=["192.0.2.3"])
        )
        api = service("api", {HOSTNAME: "api.other.org"}, externalIPs=["192.0.2.4"])
        assert await h.change(blocking(h.core.create_namespaced_service, "default", api)) == {OTHER}

        patch = {"metadata": {"annotations": {TARGET: "192.0.2.9,2001:db8::9"}}}
        touched = await h.change(blocking(h.core.patch_namespaced_service, "web", "default", patch))
        assert touched == {ZONE}
        assert h.records() == {("www.ex.com", "A"): ("192.0.2.9",), ("www.ex.com", "AAAA"): ("2001:db8::9",)}

        touched = await h.change(blocking(h.core.delete_namespaced_service, "web", "default"))
        assert touched == {ZONE}
        assert h.records() == {}
        assert h.records(OTHER) == {("api.other.org", "A"): ("192.0.2.4",)}


async def test_load_balancer_status_update(apiserver: ApiServer) -> None:
    async with watching(apiserver) as h:
        await blocking(h.core.create_namespaced_service, "default", service("lb", {HOSTNAME: "lb.ex.com"}))
        status = {"status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.7"}]}}}
        touched = await h.change(blocking(h.core.patch_namespaced_service_status, "lb", "default", status))
        assert touched == {ZONE}
        assert h.records() == {("lb.ex.com", "A"): ("198.51.100.7",)}
        status = {"status": {"loadBalancer": {"ingress": [{"hostname": "lb-1.elb.example.net"}]}}}
        await blocking(h.core.patch_namespaced_service_status, "lb", "default", status)
        await h.settle({("lb.ex.com", "CNAME"): ("lb-1.elb.example.net",)})


async def test_headless_service_follows_endpoint_slices_and_pods(apiserver: ApiServer) -> None:
    async with watching(apiserver) as h:
        await blocking(h.core.create_namespaced_pod, "default", pod("db-0", "db", hostname="db-0"))
        await blocking(h.core.create_namespaced_pod, "default", pod("db-1", "db"))
        headless = service("db", {HOSTNAME: "db.ex.com"}, type_="ClusterIP", clusterIP="None")
        await blocking(h.core.create_namespaced_service, "default", headless)
        slice_ = endpoint_slice("db-x1", "db", ("db-0", "10.0.0.1", True), ("db-1", "10.0.0.2", False))
        await blocking(h.discovery.create_namespaced_endpoint_slice, "default", slice_)
        await h.settle({("db.ex.com", "A"): ("10.0.0.1",), ("db-0.db.ex.com", "A"): ("10.0.0.1",)})
        # What a translation reads by key is cached as packed JSON (shardsync.kube.packed); the Nodes that
        # every NodePort translation reads whole are not.
        informers = h.watcher.informers
        assert all(informers[r].packed for r in ("services", "pods", "endpointslices.discovery.k8s.io"))
        assert not informers["nodes"].packed

        # db-1 becomes ready: its pod's status, then its slice condition (the EndpointSlice controller's job).
        await blocking(h.core.patch_namespaced_pod_status, "db-1", "default", pod_status(True))
        slice_["endpoints"][1]["conditions"]["ready"] = True
        touched = await h.change(
            blocking(h.discovery.replace_namespaced_endpoint_slice, "db-x1", "default", slice_)
        )
        assert touched == {ZONE}
        assert h.records() == {
            ("db.ex.com", "A"): ("10.0.0.1", "10.0.0.2"),
            ("db-0.db.ex.com", "A"): ("10.0.0.1",),
        }

        # A pod's own target annotation replaces its address: a Pod event re-translates the Service.
        patch = {"metadata": {"annotations": {TARGET: "203.0.113.5"}}}
        touched = await h.change(blocking(h.core.patch_namespaced_pod, "db-0", "default", patch))
        assert touched == {ZONE}
        assert h.records() == {
            ("db.ex.com", "A"): ("10.0.0.2", "203.0.113.5"),
            ("db-0.db.ex.com", "A"): ("203.0.113.5",),
        }

        touched = await h.change(blocking(h.discovery.delete_namespaced_endpoint_slice, "db-x1", "default"))
        assert touched == {ZONE}
        assert h.records() == {}


async def make_node(h: Harness, name: str, *addresses: tuple[str, str]) -> None:
    await blocking(h.core.create_node, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    await blocking(h.core.patch_node_status, name, node_status(*addresses))


async def test_node_port_follows_node_addresses(apiserver: ApiServer) -> None:
    async with watching(apiserver) as h:
        await make_node(h, "n1", ("InternalIP", "10.1.0.1"), ("ExternalIP", "203.0.113.1"))
        await make_node(h, "n2", ("InternalIP", "10.1.0.2"), ("ExternalIP", "203.0.113.2"))
        np = service("np", {HOSTNAME: "np.ex.com"}, type_="NodePort")
        await blocking(h.core.create_namespaced_service, "default", np)
        # The SRV record a NodePort also makes is not a managed type by default (A, AAAA, CNAME).
        await h.settle({("np.ex.com", "A"): ("203.0.113.1", "203.0.113.2")})

        status = node_status(("InternalIP", "10.1.0.2"), ("ExternalIP", "203.0.113.20"))
        touched = await h.change(blocking(h.core.patch_node_status, "n2", status))
        assert touched == {ZONE}
        assert h.records() == {("np.ex.com", "A"): ("203.0.113.1", "203.0.113.20")}

        touched = await h.change(blocking(h.core.delete_node, "n1"))
        assert touched == {ZONE}
        assert h.records() == {("np.ex.com", "A"): ("203.0.113.20",)}


async def test_node_port_local_traffic_follows_pod_readiness(apiserver: ApiServer) -> None:
    options = WatchOptions(record_types=RecordTypeFilter.parse(["A", "SRV"]))
    async with watching(apiserver, options) as h:
        await make_node(h, "n1", ("ExternalIP", "203.0.113.1"))
        await make_node(h, "n2", ("ExternalIP", "203.0.113.2"))
        for name, node, ready in (("loc-a", "n1", True), ("loc-b", "n2", False)):
            await blocking(h.core.create_namespaced_pod, "default", pod(name, "loc", node=node))
            await blocking(h.core.patch_namespaced_pod_status, name, "default", pod_status(ready))
        local = service("loc", {HOSTNAME: "loc.ex.com"}, type_="NodePort", externalTrafficPolicy="Local")
        created = await blocking(h.core.create_namespaced_service, "default", local)
        node_port = created.spec.ports[0].node_port
        srv = {("_loc._tcp.loc.ex.com", "SRV"): (f"0 50 {node_port} loc.ex.com.",)}
        await h.settle({("loc.ex.com", "A"): ("203.0.113.1",), **srv})

        touched = await h.change(
            blocking(h.core.patch_namespaced_pod_status, "loc-b", "default", pod_status(True))
        )
        assert touched == {ZONE}
        assert h.records() == {("loc.ex.com", "A"): ("203.0.113.1", "203.0.113.2"), **srv}


async def test_ingress_rules_status_and_class(apiserver: ApiServer) -> None:
    options = WatchOptions(
        sources=("ingress",), source_options={"ingress": IngressOptions(ingress_class_names=("public",))}
    )
    net = client.NetworkingV1Api
    async with watching(apiserver, options) as h:

        def ingress(name: str, host: str, ingress_class: str) -> dict[str, Any]:
            return {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "Ingress",
                "metadata": {"name": name},
                "spec": {"ingressClassName": ingress_class, "rules": [{"host": host}]},
            }

        lb = {"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.50"}]}}}
        for name, host, cls in (("app", "app.ex.com", "public"), ("intra", "intra.ex.com", "internal")):
            await blocking(net(h.api).create_namespaced_ingress, "default", ingress(name, host, cls))
            await blocking(net(h.api).patch_namespaced_ingress_status, name, "default", lb)
        await h.settle({("app.ex.com", "A"): ("192.0.2.50",)})
        assert h.desired.desired(ZONE)[0].labels[RESOURCE_LABEL] == "ingress/default/app"

        patch = {"spec": {"tls": [{"hosts": ["secure.other.org"]}]}}
        touched = await h.change(blocking(net(h.api).patch_namespaced_ingress, "app", "default", patch))
        assert touched == {OTHER}
        assert h.records(OTHER) == {("secure.other.org", "A"): ("192.0.2.50",)}


async def test_namespace_and_label_filters(apiserver: ApiServer) -> None:
    options = WatchOptions(namespace="team-a", objects=ObjectFilter.parse("team-a", "team=dns"))
    core = client.CoreV1Api(apiserver.api_client())
    await blocking(core.create_namespace, {"metadata": {"name": "team-a"}})
    async with watching(apiserver, options) as h:
        dns = {"team": "dns"}
        for name, namespace, labels in (("in", "team-a", dns), ("un", "team-a", {}), ("out", "default", dns)):
            body = service(name, {HOSTNAME: f"{name}.ex.com"}, labels=labels, namespace=namespace)
            body["spec"]["externalIPs"] = ["192.0.2.10"]
            await blocking(h.core.create_namespaced_service, namespace, body)
        await h.settle({("in.ex.com", "A"): ("192.0.2.10",)})
        # Namespaced list calls: the other namespace is not even cached.
        await eventually(lambda: len(h.watcher.informers["services"].cache) == 2)
        assert set(h.watcher.informers["services"].cache) == {"team-a/in", "team-a/un"}

        patch = {"metadata": {"labels": dns}}
        touched = await h.change(blocking(h.core.patch_namespaced_service, "un", "team-a", patch))
        assert touched == {ZONE}
        assert h.records() == {("in.ex.com", "A"): ("192.0.2.10",), ("un.ex.com", "A"): ("192.0.2.10",)}

        patch = {"metadata": {"labels": {"team": "web"}}}
        touched = await h.change(blocking(h.core.patch_namespaced_service, "in", "team-a", patch))
        assert touched == {ZONE}
        assert h.records() == {("un.ex.com", "A"): ("192.0.2.10",)}


async def test_watch_resumes_after_apiserver_restart_without_losing_changes(apiserver: ApiServer) -> None:
    async with watching(apiserver) as h:
        for name, ip in (("web", "192.0.2.1"), ("old", "192.0.2.2")):
            body = service(name, {HOSTNAME: f"{name}.ex.com"}, externalIPs=[ip])
            await blocking(h.core.create_namespaced_service, "default", body)
        await h.settle({("web.ex.com", "A"): ("192.0.2.1",), ("old.ex.com", "A"): ("192.0.2.2",)})

        # Down: change the stored objects behind the watcher's back, then come back with an empty watch
        # window (a resumed watch gets 410 Gone, as from a restarted real API server).
        apiserver.stop()
        store = apiserver.store
        services = store.table.lookup("", "v1", "services")
        assert services is not None

        def retarget(current: dict[str, Any]) -> dict[str, Any]:
            changed = copy.deepcopy(current)
            changed["metadata"]["annotations"][TARGET] = "192.0.2.11"
            return changed

        store.modify(services, "default", "web", retarget)
        store.delete(services, "default", "old")
        new = service("new", {HOSTNAME: "new.ex.com"}, externalIPs=["192.0.2.3"])
        store.create(services, "default", new)
        apiserver.restart()

        await h.settle({("web.ex.com", "A"): ("192.0.2.11",), ("new.ex.com", "A"): ("192.0.2.3",)}, within=15)
        assert ZONE in set().union(*h.dirty)

        # And the watch goes on.
        patch = {"metadata": {"annotations": {TARGET: "192.0.2.12"}}}
        await blocking(h.core.patch_namespaced_service, "web", "default", patch)
        await h.settle({("web.ex.com", "A"): ("192.0.2.12",), ("new.ex.com", "A"): ("192.0.2.3",)})


async def test_initial_sync_translates_each_service_once(
    apiserver: ApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many pods, slices and headless Services listed at once: one translation per Service, not one per
    event; afterwards a pod event re-translates only the Service that selects it."""
    core = client.CoreV1Api(apiserver.api_client())
    discovery = client.DiscoveryV1Api(apiserver.api_client())
    services, pods_each = 40, 5

    def populate() -> None:
        for s in range(services):
            name = f"s{s}"
            members = []
            for p in range(pods_each):
                pod_name = f"{name}-{p}"
                core.create_namespaced_pod(
                    "default", raw_body(client.V1Pod, pod(pod_name, name, hostname=pod_name))
                )
                members.append((pod_name, f"10.{s}.0.{p + 1}", True))
            body = service(name, {HOSTNAME: f"{name}.ex.com"}, type_="ClusterIP", clusterIP="None")
            core.create_namespaced_service("default", raw_body(client.V1Service, body))
            slice_ = endpoint_slice(f"{name}-x", name, *members)
            discovery.create_namespaced_endpoint_slice("default", raw_body(client.V1EndpointSlice, slice_))

    await anyio.to_thread.run_sync(populate)
    translated: list[str] = []
    real = service_endpoints  # what the service kind's translator calls, before the patch below

    def counting(svc: Any, *args: Any, **kwargs: Any) -> Any:
        translated.append(svc["metadata"]["name"])
        return real(svc, *args, **kwargs)

    monkeypatch.setattr(service_module, "service_endpoints", counting)
    async with watching(apiserver) as h:
        assert sorted(translated) == sorted(f"s{s}" for s in range(services))
        assert len(h.desired) == services * (pods_each + 1)
        assert h.records()[("s7.ex.com", "A")] == tuple(f"10.7.0.{p + 1}" for p in range(pods_each))

        translated.clear()
        patch = {"metadata": {"annotations": {TARGET: "203.0.113.9"}}}
        touched = await h.change(blocking(h.core.patch_namespaced_pod, "s3-0", "default", patch))
        assert touched == {ZONE}
        assert translated == ["s3"]
        assert h.records()[("s3-0.s3.ex.com", "A")] == ("203.0.113.9",)


async def test_restricted_index_translates_again_what_a_gained_zone_needs(apiserver: ApiServer) -> None:
    """Per-shard state: a zone gained after the objects were translated gets them from the slim caches."""
    async with watching(apiserver, restricted=True) as h:
        h.desired.keep(OTHER)
        web = service("web", {HOSTNAME: "www.ex.com,www.other.org"}, externalIPs=["192.0.2.1"])
        await h.change(blocking(h.core.create_namespaced_service, "default", web))
        assert h.records() == {}  # ex.com not held
        assert h.records(OTHER) == {("www.other.org", "A"): ("192.0.2.1",)}

        h.desired.keep(ZONE)
        assert not h.desired.ready(ZONE)
        await eventually(lambda: h.desired.ready(ZONE))
        assert h.records() == {("www.ex.com", "A"): ("192.0.2.1",)}

        h.desired.drop(ZONE)
        assert h.records() == {}


async def test_restricted_index_forgets_objects_held_nowhere_and_reads_them_again(
    apiserver: ApiServer,
) -> None:
    """Per-shard state: a Service whose records all fall in zones not held leaves the cache; gaining its zone
    reads it back from the API server; a change or deletion while forgotten still arrives by the watch."""
    async with watching(apiserver, restricted=True) as h:
        h.desired.keep(OTHER)
        services = h.watcher.informers["services"]
        web = service("web", {HOSTNAME: "www.ex.com"}, externalIPs=["192.0.2.1"])
        await h.change(blocking(h.core.create_namespaced_service, "default", web))
        assert "default/web" not in services.cache and "default/web" in services.forgotten

        patch = {"metadata": {"annotations": {TARGET: "192.0.2.7"}}}
        await h.change(blocking(h.core.patch_namespaced_service, "web", "default", patch))
        assert "default/web" in services.forgotten  # translated, still held nowhere: forgotten again

        h.desired.keep(ZONE)
        await eventually(lambda: h.desired.ready(ZONE))
        assert h.records() == {("www.ex.com", "A"): ("192.0.2.7",)}
        assert "default/web" in services.cache

        h.desired.drop(ZONE)  # freed: forgotten at once
        assert "default/web" in services.forgotten
        await blocking(h.core.delete_namespaced_service, "web", "default")
        await eventually(lambda: "default/web" not in services.forgotten)
        h.desired.keep(ZONE)
        # the informer's deletion may reach the index after this keep: the zone is then rebuilt, from nothing
        await eventually(lambda: h.desired.ready(ZONE))
        assert h.records() == {}


async def test_objects_translated_before_any_zone_is_held_are_forgotten_once_zones_are(
    apiserver: ApiServer,
) -> None:
    async with watching(apiserver, restricted=True) as h:
        services = h.watcher.informers["services"]
        web = service("web", {HOSTNAME: "www.ex.com"}, externalIPs=["192.0.2.1"])
        await h.change(blocking(h.core.create_namespaced_service, "default", web))
        assert "default/web" in services.cache  # nothing held yet: what will be is not known
        h.desired.keep(OTHER)
        await eventually(lambda: "default/web" in services.forgotten)
