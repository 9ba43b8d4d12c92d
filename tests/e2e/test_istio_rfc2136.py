"""End to end with Istio: a `shardsync run` process with `--source=istio-gateway` (then
`--source=istio-virtualservice`), the embedded API server holding the (minimal) Istio CRDs, the ingress
gateway's LoadBalancer Service, Gateways and VirtualServices, and real BIND 9.

Each kind's names reach BIND as A and AAAA records (the ingress gateway Service's two load-balancer
addresses) and as a CNAME (a Gateway's `target` annotation), each with its TXT ownership record naming the
object; a change of what a record is read from (the Service's address, a Gateway's hosts) reaches DNS in
one reconcile started by that object's event (the interval is a minute: an interval sweep cannot be what
did it); deleting the object removes its records.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from shardsync.local.apiserver import ApiServer
from shardsync.manifests import load_istio_crds
from shardsync.sources.istio import GROUP
from tests.dnsservers import DnsTestServer, running_bind
from tests.e2e.test_replica_rfc2136 import OWNER, start_replica
from tests.kubeclient import raw_body
from tests.processes import Processes
from tests.sources.istio_objects import TARGET, gateway, lb_service, virtualservice
from tests.waits import eventually_sync

ZONE = "istio.shardsync.test"
APPLIED = 'event="zone changes applied"'
IGW = {"istio": "ingressgateway"}
V4, V6 = "192.0.2.60", "2001:db8::60"

pytestmark = pytest.mark.bind


@pytest.fixture(scope="module")
def dns_server() -> Iterator[DnsTestServer]:
    yield from running_bind([ZONE])


def applied(log: str) -> int:
    return sum(1 for line in log.splitlines() if APPLIED in line and f"zone={ZONE}" in line)


def owner(kind: str, name: str) -> set[str]:
    resource = f"{kind}/default/{name}"
    return {f'"heritage=external-dns,external-dns/owner={OWNER},external-dns/resource={resource}"'}


def setup(apiserver: ApiServer) -> tuple[k8s.CoreV1Api, k8s.CustomObjectsApi]:
    """The Istio CRDs and the ingress gateway's Service with an IPv4 and an IPv6 load-balancer address."""
    api = apiserver.api_client()
    for crd in load_istio_crds():
        k8s.ApiextensionsV1Api(api).create_custom_resource_definition(
            raw_body(k8s.V1CustomResourceDefinition, crd)
        )
    core = k8s.CoreV1Api(api)
    igw = lb_service("istio-ingressgateway", selector=IGW, ips=[V4, V6])
    core.create_namespaced_service("default", raw_body(k8s.V1Service, igw))
    core.patch_namespaced_service_status("istio-ingressgateway", "default", {"status": igw["status"]})
    return core, k8s.CustomObjectsApi(api)


def create(custom: k8s.CustomObjectsApi, obj: dict[str, Any]) -> None:
    plural = obj["kind"].lower() + "s"
    custom.create_namespaced_custom_object(GROUP, "v1", "default", plural, obj)


def move_gateway_service(core: k8s.CoreV1Api, address: str) -> None:
    body = {"status": {"loadBalancer": {"ingress": [{"ip": address}, {"ip": V6}]}}}
    core.patch_namespaced_service_status("istio-ingressgateway", "default", body)


def test_istio_gateways_reach_bind(
    apiserver: ApiServer, dns_server: DnsTestServer, procs: Processes, tmp_path: Path
) -> None:
    core, custom = setup(apiserver)
    create(custom, gateway("shop", hosts=[[f"shop.{ZONE}"]], selector=IGW))
    create(custom, gateway("cdn", hosts=[[f"static.{ZONE}"]], annotations={TARGET: "cdn.example.net"}))
    replica = start_replica(apiserver, dns_server, procs, tmp_path, "--source=istio-gateway", zones=(ZONE,))

    eventually_sync(lambda: dns_server.texts(f"shop.{ZONE}", "A") == {V4}, within=30)
    assert dns_server.texts(f"shop.{ZONE}", "AAAA") == {V6}
    eventually_sync(lambda: dns_server.texts(f"static.{ZONE}", "CNAME") == {"cdn.example.net."}, within=15)
    assert dns_server.texts(f"a-shop.{ZONE}", "TXT") == owner("gateway", "shop")
    assert dns_server.texts(f"aaaa-shop.{ZONE}", "TXT") == owner("gateway", "shop")
    assert dns_server.texts(f"cname-static.{ZONE}", "TXT") == owner("gateway", "cdn")

    # The ingress gateway's Service moves: one reconcile, started by the Service's event, moves the record.
    eventually_sync(lambda: applied(replica.log()) >= 1, within=5)
    before = applied(replica.log())
    move_gateway_service(core, "192.0.2.61")
    eventually_sync(lambda: dns_server.texts(f"shop.{ZONE}", "A") == {"192.0.2.61"}, within=15)
    eventually_sync(lambda: applied(replica.log()) > before, within=5)  # the log line follows the write
    assert applied(replica.log()) == before + 1
    assert dns_server.texts(f"shop.{ZONE}", "AAAA") == {V6}

    # The Gateway goes: its records go, the other Gateway's stay.
    custom.delete_namespaced_custom_object(GROUP, "v1", "default", "gateways", "shop")
    eventually_sync(lambda: dns_server.texts(f"shop.{ZONE}", "A") == set(), within=15)
    assert dns_server.texts(f"shop.{ZONE}", "AAAA") == set()
    assert dns_server.texts(f"a-shop.{ZONE}", "TXT") == set()
    assert dns_server.texts(f"static.{ZONE}", "CNAME") == {"cdn.example.net."}
    assert replica.alive()


# (BIND lives for the module: the names differ from the first test's, whose records this replica deletes)
def test_istio_virtualservices_reach_bind(
    apiserver: ApiServer, dns_server: DnsTestServer, procs: Processes, tmp_path: Path
) -> None:
    _, custom = setup(apiserver)
    create(custom, gateway("edge", hosts=[[f"*.{ZONE}"]], selector=IGW))
    create(custom, gateway("cdn", hosts=[["*"]], annotations={TARGET: "cdn.example.net"}))
    create(custom, virtualservice("store", gateways=["edge", "mesh"], hosts=[f"store.{ZONE}"]))
    create(custom, virtualservice("assets", gateways=["default/cdn"], hosts=[f"assets.{ZONE}"]))
    replica = start_replica(
        apiserver, dns_server, procs, tmp_path, "--source=istio-virtualservice", zones=(ZONE,)
    )

    eventually_sync(lambda: dns_server.texts(f"store.{ZONE}", "A") == {V4}, within=30)
    assert dns_server.texts(f"store.{ZONE}", "AAAA") == {V6}
    eventually_sync(lambda: dns_server.texts(f"assets.{ZONE}", "CNAME") == {"cdn.example.net."}, within=15)
    assert dns_server.texts(f"a-store.{ZONE}", "TXT") == owner("virtualservice", "store")
    assert dns_server.texts(f"aaaa-store.{ZONE}", "TXT") == owner("virtualservice", "store")
    assert dns_server.texts(f"cname-assets.{ZONE}", "TXT") == owner("virtualservice", "assets")

    # The Gateway stops admitting the host: one reconcile, started by the Gateway's event, removes them.
    eventually_sync(lambda: applied(replica.log()) >= 1, within=5)
    before = applied(replica.log())
    narrowed = {"spec": {"servers": [{"hosts": ["*.elsewhere.test"]}]}}
    custom.patch_namespaced_custom_object(GROUP, "v1", "default", "gateways", "edge", narrowed)
    eventually_sync(lambda: dns_server.texts(f"store.{ZONE}", "A") == set(), within=15)
    eventually_sync(lambda: applied(replica.log()) > before, within=5)
    assert applied(replica.log()) == before + 1
    assert dns_server.texts(f"store.{ZONE}", "AAAA") == set()
    assert dns_server.texts(f"aaaa-store.{ZONE}", "TXT") == set()

    # The VirtualService goes: its CNAME and ownership record go.
    custom.delete_namespaced_custom_object(GROUP, "v1", "default", "virtualservices", "assets")
    eventually_sync(lambda: dns_server.texts(f"assets.{ZONE}", "CNAME") == set(), within=15)
    assert dns_server.texts(f"cname-assets.{ZONE}", "TXT") == set()
    assert replica.alive()
