"""SourceWatcher against the embedded API server: the official client writes the objects, the watcher keeps
the DesiredIndex in step and reports exactly the zones whose desired endpoints changed."""

from __future__ import annotations

import copy
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread
import pytest
from kubernetes import client
from prometheus_client import REGISTRY

from shardsync.desired import DesiredIndex
from shardsync.endpoint import RESOURCE_LABEL, Endpoint
from shardsync.events import EventRecorder
from shardsync.kube import Kube
from shardsync.local.apiserver import ApiServer
from shardsync.manifests import load_crd
from shardsync.sources import service as service_module
from shardsync.sources.filters import ObjectFilter, RecordTypeFilter
from shardsync.sources.ingress import IngressOptions
from shardsync.sources.service import service_endpoints
from shardsync.sources.watcher import INVALID_REASON, SourceWatcher, WatchOptions
from tests.conftest import MakeApiServer
from tests.kubeclient import raw_body
from tests.waits import eventually

pytestmark = pytest.mark.anyio

ZONE, OTHER = "ex.com", "other.org"
HOSTNAME = "external-dns.kubernetes.io/hostname"
TARGET = "external-dns.alpha.kubernetes.io/target"  # the old prefix works as well
GROUP, VERSION, PLURAL = "externaldns.k8s.io", "v1alpha1", "dnsendpoints"

Records = dict[tuple[str, str], tuple[str, ...]]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def apiserver(make_apiserver: MakeApiServer) -> ApiServer:
    """The embedded API server, sending BOOKMARKs often. Cancelling a watch (Kube.watch closes the response
    from the event loop) waits until the reader thread's current read returns, that is until the server
    sends something; frequent bookmarks keep each test's teardown short."""
    server: ApiServer = make_apiserver(bookmark_interval=0.2)
    return server


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


@asynccontextmanager
async def watching(
    apiserver: ApiServer,
    options: WatchOptions | None = None,
    write_status: Callable[[], bool] = lambda: True,
    wait_synced: bool = True,
) -> AsyncIterator[Harness]:
    api = apiserver.api_client()
    watcher_api = apiserver.api_client(user_agent="shardsync-watcher")
    kube = Kube(watcher_api)
    desired = DesiredIndex([ZONE, OTHER])
    dirty: list[set[str]] = []
    recorder = EventRecorder(kube, "test-replica")
    watcher = SourceWatcher(
        kube, options or WatchOptions(), desired, dirty.append, recorder, write_status=write_status
    )
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
        srv = {("_loc._tcp.loc.ex.com", "SRV"): (f"0 50 {node_port} loc.ex.com",)}
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


def test_shipped_crd_has_external_dns_schema_and_status_subresource() -> None:
    crd = load_crd()
    assert crd["metadata"]["name"] == f"{PLURAL}.{GROUP}"
    assert crd["spec"]["group"] == GROUP and crd["spec"]["names"]["kind"] == "DNSEndpoint"
    [version] = crd["spec"]["versions"]
    assert version["name"] == VERSION and version["served"] and version["storage"]
    assert version["subresources"] == {"status": {}}
    schema = version["schema"]["openAPIV3Schema"]["properties"]
    item = schema["spec"]["properties"]["endpoints"]["items"]["properties"]
    assert set(item) == {
        "dnsName",
        "targets",
        "recordType",
        "recordTTL",
        "setIdentifier",
        "labels",
        "providerSpecific",
    }
    assert item["recordTTL"] == {**item["recordTTL"], "type": "integer", "format": "int64"}
    assert set(item["providerSpecific"]["items"]["properties"]) == {"name", "value"}
    assert schema["status"]["properties"]["observedGeneration"]["type"] == "integer"
    # Every field shardsync itself writes in that form is in the schema.
    full = Endpoint.new(
        "a.ex.com",
        "A",
        ["192.0.2.1"],
        ttl=5,
        set_identifier="x",
        labels={"k": "v"},
        provider_specific=[("n", "v")],
    )
    assert set(full.to_json()) <= set(item)


async def install_crd(h: Harness) -> None:
    await blocking(client.ApiextensionsV1Api(h.api).create_custom_resource_definition, load_crd())


async def observed_generation(h: Harness, name: str) -> Any:
    obj = await blocking(h.custom.get_namespaced_custom_object, GROUP, VERSION, "default", PLURAL, name)
    return (obj.get("status") or {}).get("observedGeneration")


async def test_dnsendpoint_status_and_invalid_endpoint_event(apiserver: ApiServer) -> None:
    async with watching(apiserver, WatchOptions(sources=("crd",)), wait_synced=False) as h:
        await install_crd(h)
        with anyio.fail_after(5):
            await h.watcher.synced.wait()
        invalid_before = metric("shardsync_source_invalid_endpoints_total", kind="crd")
        body = dnsendpoint(
            "records",
            {"dnsName": "a.ex.com", "recordType": "A", "targets": ["192.0.2.1"], "recordTTL": 60},
            {"dnsName": "bad.ex.com", "recordType": "A", "targets": ["not-an-address"]},
        )
        create = h.custom.create_namespaced_custom_object
        touched = await h.change(blocking(create, GROUP, VERSION, "default", PLURAL, body))
        assert touched == {ZONE}
        assert h.records() == {("a.ex.com", "A"): ("192.0.2.1",)}
        assert h.desired.desired(ZONE)[0].ttl == 60

        async def status_is(generation: int) -> None:
            async def check() -> bool:
                return bool(await observed_generation(h, "records") == generation)

            await until(check)

        await status_is(1)

        def warnings() -> list[Any]:
            events = h.core.list_namespaced_event("default", field_selector="involvedObject.name=records")
            return [e for e in events.items if e.type == "Warning" and e.reason == INVALID_REASON]

        async def posted() -> bool:
            return bool(await blocking(warnings))

        await until(posted)
        [event] = await blocking(warnings)
        assert event.involved_object.kind == "DNSEndpoint"
        assert event.involved_object.api_version == f"{GROUP}/{VERSION}"
        assert "spec.endpoints[1]" in event.message and "not-an-address" in event.message

        patch = {
            "spec": {
                "endpoints": [
                    {**body["spec"]["endpoints"][0], "targets": ["192.0.2.2"]},
                    body["spec"]["endpoints"][1],
                ]
            }
        }
        touched = await h.change(
            blocking(
                h.custom.patch_namespaced_custom_object, GROUP, VERSION, "default", PLURAL, "records", patch
            )
        )
        assert touched == {ZONE}
        assert h.records() == {("a.ex.com", "A"): ("192.0.2.2",)}
        await status_is(2)
        # The problem is the same one: reported once, though the object was translated again four times.
        assert metric("shardsync_source_invalid_endpoints_total", kind="crd") == invalid_before + 1
        assert len(await blocking(warnings)) == 1


async def test_dnsendpoint_status_is_written_only_by_the_writer(apiserver: ApiServer) -> None:
    writer = {"on": False}
    options = WatchOptions(sources=("crd",))
    async with watching(apiserver, options, write_status=lambda: writer["on"], wait_synced=False) as h:
        await install_crd(h)
        body = dnsendpoint("quiet", {"dnsName": "q.ex.com", "recordType": "A", "targets": ["192.0.2.7"]})
        create = h.custom.create_namespaced_custom_object
        await h.change(blocking(create, GROUP, VERSION, "default", PLURAL, body))
        await anyio.sleep(0.3)  # time enough for a write this replica must not make
        assert await observed_generation(h, "quiet") is None

        writer["on"] = True
        h.watcher.request_status_sweep()

        async def written() -> bool:
            return bool(await observed_generation(h, "quiet") == 1)

        await until(written)


async def test_missing_crd_holds_up_only_the_crd_source(apiserver: ApiServer) -> None:
    options = WatchOptions(sources=("service", "crd"), max_backoff=0.2)
    errors_before = metric("external_dns_source_errors_total")
    async with watching(apiserver, options, wait_synced=False) as h:
        web = service("web", {HOSTNAME: "www.ex.com"}, externalIPs=["192.0.2.1"])
        await blocking(h.core.create_namespaced_service, "default", web)
        await h.settle({("www.ex.com", "A"): ("192.0.2.1",)})
        assert not h.watcher.synced.is_set()
        assert h.watcher.unsynced() == ["dnsendpoints"]
        assert metric("shardsync_source_crd_missing") == 1
        assert metric("external_dns_source_errors_total") > errors_before

        await install_crd(h)
        body = dnsendpoint("late", {"dnsName": "late.ex.com", "recordType": "A", "targets": ["192.0.2.8"]})
        await blocking(h.custom.create_namespaced_custom_object, GROUP, VERSION, "default", PLURAL, body)
        await h.settle({("www.ex.com", "A"): ("192.0.2.1",), ("late.ex.com", "A"): ("192.0.2.8",)})
        with anyio.fail_after(5):
            await h.watcher.synced.wait()
        assert metric("shardsync_source_crd_missing") == 0


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
