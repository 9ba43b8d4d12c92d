"""End to end with the Gateway API: a `shardsync run` process with `--source=gateway-httproute`, the
embedded API server holding the (minimal) Gateway API CRDs, a Gateway and an HTTPRoute, and real BIND 9.

The route's name reaches BIND as an A record with its TXT ownership record; moving the Gateway's address
moves the record in one reconcile, started by the Gateway's event (the interval is a minute: an interval
sweep cannot be what did it); deleting the route removes both records.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from shardsync.local.apiserver import ApiServer
from shardsync.manifests import load_gateway_crds
from shardsync.sources.gateway_match import GROUP
from tests.dnsservers import DnsTestServer, running_bind
from tests.e2e.test_replica_rfc2136 import OWNER, start_replica
from tests.kubeclient import raw_body
from tests.processes import Processes
from tests.waits import eventually_sync

ZONE = "gateway.shardsync.test"
APPLIED = 'event="zone changes applied"'

pytestmark = pytest.mark.bind


@pytest.fixture(scope="module")
def dns_server() -> Iterator[DnsTestServer]:
    yield from running_bind([ZONE])


def gateway_object(address: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Gateway",
        "metadata": {"name": "edge", "namespace": "default"},
        "spec": {
            "gatewayClassName": "example",
            "listeners": [{"name": "http", "protocol": "HTTP", "port": 80, "hostname": f"*.{ZONE}"}],
        },
        "status": {"addresses": [{"type": "IPAddress", "value": address}]},
    }


def route_object() -> dict[str, Any]:
    ref = {"group": GROUP, "kind": "Gateway", "name": "edge"}
    accepted = {"type": "Accepted", "status": "True", "reason": "Accepted"}
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "shop", "namespace": "default"},
        "spec": {"hostnames": [f"shop.{ZONE}"], "parentRefs": [ref]},
        "status": {
            "parents": [{"parentRef": ref, "controllerName": "example.com/gw", "conditions": [accepted]}]
        },
    }


def create_with_status(custom: k8s.CustomObjectsApi, plural: str, obj: dict[str, Any]) -> None:
    name = obj["metadata"]["name"]
    custom.create_namespaced_custom_object(GROUP, "v1", "default", plural, obj)
    status = {"status": obj["status"]}
    custom.patch_namespaced_custom_object_status(GROUP, "v1", "default", plural, name, status)


def applied(log: str) -> int:
    return sum(1 for line in log.splitlines() if APPLIED in line and f"zone={ZONE}" in line)


def test_gateway_and_route_reach_bind(
    apiserver: ApiServer, dns_server: DnsTestServer, procs: Processes, tmp_path: Path
) -> None:
    api = apiserver.api_client()
    for crd in load_gateway_crds():
        k8s.ApiextensionsV1Api(api).create_custom_resource_definition(
            raw_body(k8s.V1CustomResourceDefinition, crd)
        )
    custom = k8s.CustomObjectsApi(api)
    create_with_status(custom, "gateways", gateway_object("192.0.2.40"))
    create_with_status(custom, "httproutes", route_object())
    replica = start_replica(
        apiserver, dns_server, procs, tmp_path, "--source=gateway-httproute", zones=(ZONE,)
    )

    eventually_sync(lambda: dns_server.texts(f"shop.{ZONE}", "A") == {"192.0.2.40"}, within=30)
    owner = f'"heritage=external-dns,external-dns/owner={OWNER},external-dns/resource=httproute/default/shop"'
    assert dns_server.texts(f"a-shop.{ZONE}", "TXT") == {owner}

    # The Gateway moves: one reconcile of the zone, started by the Gateway's event, moves the record.
    eventually_sync(lambda: applied(replica.log()) >= 1, within=5)
    before = applied(replica.log())
    moved = {"status": {"addresses": [{"type": "IPAddress", "value": "192.0.2.41"}]}}
    custom.patch_namespaced_custom_object_status(GROUP, "v1", "default", "gateways", "edge", moved)
    eventually_sync(lambda: dns_server.texts(f"shop.{ZONE}", "A") == {"192.0.2.41"}, within=15)
    eventually_sync(lambda: applied(replica.log()) > before, within=5)  # the log line follows the write
    assert applied(replica.log()) == before + 1

    # The route goes: its records go.
    custom.delete_namespaced_custom_object(GROUP, "v1", "default", "httproutes", "shop")
    eventually_sync(lambda: dns_server.texts(f"shop.{ZONE}", "A") == set(), within=15)
    assert dns_server.texts(f"a-shop.{ZONE}", "TXT") == set()
    assert replica.alive()
