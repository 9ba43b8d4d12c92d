"""End to end with the node and pod sources: a `shardsync run` process with `--source=node` (or `pod`), the
embedded API server holding Nodes and Pods, and real BIND 9.

Node: a Node named in the zone publishes its ExternalIP (A) and, with `--expose-internal-ipv6`, its IPv6
InternalIP (AAAA); a Node whose `target` annotation is a name publishes a CNAME; each record has its TXT
ownership record naming `node/<name>`, as external-dns writes it. Cordoning the Node takes its records away,
deleting a Node takes its CNAME away.

Pod: a host-network Pod's `hostname` publishes its Node's ExternalIP (A) and IPv6 InternalIP (AAAA), its
`internal-hostname` its own IP, a `target` that is a name a CNAME, with TXT records naming
`pod/<namespace>/<name>`; a new Node address moves the record (started by the Node's event: the interval
is a minute), and deleting the Pod removes its records.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from shardsync.local.apiserver import ApiServer
from tests.dnsservers import DnsTestServer, running_bind
from tests.e2e.test_replica_rfc2136 import OWNER, start_replica
from tests.kubeclient import raw_body
from tests.processes import Processes
from tests.waits import eventually_sync

NODES, PODS = "nodes.shardsync.test", "pods.shardsync.test"
HOSTNAME = "external-dns.kubernetes.io/hostname"
INTERNAL = "external-dns.kubernetes.io/internal-hostname"
TARGET = "external-dns.kubernetes.io/target"

pytestmark = pytest.mark.bind


@pytest.fixture(scope="module")
def dns_server() -> Iterator[DnsTestServer]:
    yield from running_bind([NODES, PODS])


def owner_txt(resource: str) -> set[str]:
    return {f'"heritage=external-dns,external-dns/owner={OWNER},external-dns/resource={resource}"'}


def create_node(core: k8s.CoreV1Api, name: str, *addresses: tuple[str, str], **annotations: str) -> None:
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
    if annotations:
        body["metadata"]["annotations"] = annotations
    core.create_node(raw_body(k8s.V1Node, body))
    set_addresses(core, name, *addresses)


def set_addresses(core: k8s.CoreV1Api, name: str, *addresses: tuple[str, str]) -> None:
    """What a kubelet writes: the Node's status addresses, replaced whole."""
    node = core.read_node(name)
    node.status = k8s.V1NodeStatus(addresses=[k8s.V1NodeAddress(type=t, address=a) for t, a in addresses])
    core.replace_node_status(name, node)


def test_nodes_reach_bind_with_a_aaaa_cname_and_ownership(
    apiserver: ApiServer, dns_server: DnsTestServer, procs: Processes, tmp_path: Path
) -> None:
    core = k8s.CoreV1Api(apiserver.api_client())
    create_node(core, f"n1.{NODES}", ("ExternalIP", "192.0.2.50"), ("InternalIP", "2001:db8::50"))
    create_node(core, f"lb.{NODES}", ("ExternalIP", "192.0.2.51"), **{TARGET: "edge.example.net"})
    create_node(core, "worker-7", ("ExternalIP", "192.0.2.52"))  # its name is in no zone: nothing
    start_replica(
        apiserver, dns_server, procs, tmp_path, "--source=node", "--expose-internal-ipv6", zones=(NODES,)
    )

    eventually_sync(lambda: dns_server.texts(f"n1.{NODES}", "A") == {"192.0.2.50"}, within=30)
    assert dns_server.texts(f"n1.{NODES}", "AAAA") == {"2001:db8::50"}
    assert dns_server.texts(f"lb.{NODES}", "CNAME") == {"edge.example.net."}
    assert dns_server.texts(f"a-n1.{NODES}", "TXT") == owner_txt(f"node/n1.{NODES}")
    assert dns_server.texts(f"aaaa-n1.{NODES}", "TXT") == owner_txt(f"node/n1.{NODES}")
    assert dns_server.texts(f"cname-lb.{NODES}", "TXT") == owner_txt(f"node/lb.{NODES}")

    # Cordoned (--exclude-unschedulable, on by default): its records and their TXT records go.
    core.patch_node(f"n1.{NODES}", {"spec": {"unschedulable": True}})
    eventually_sync(lambda: dns_server.texts(f"n1.{NODES}", "A") == set(), within=15)
    assert dns_server.texts(f"n1.{NODES}", "AAAA") == set()
    assert dns_server.texts(f"a-n1.{NODES}", "TXT") == set()
    # Deleted: its CNAME goes.
    core.delete_node(f"lb.{NODES}")
    eventually_sync(lambda: dns_server.texts(f"lb.{NODES}", "CNAME") == set(), within=15)
    assert dns_server.texts(f"cname-lb.{NODES}", "TXT") == set()


def pod(name: str, node: str, **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {"nodeName": node, "hostNetwork": True, "containers": [{"name": "c", "image": "i"}]},
    }


def test_pods_reach_bind_with_their_nodes_addresses_their_own_and_ownership(
    apiserver: ApiServer, dns_server: DnsTestServer, procs: Processes, tmp_path: Path
) -> None:
    core = k8s.CoreV1Api(apiserver.api_client())
    create_node(core, "worker-1", ("ExternalIP", "192.0.2.60"), ("InternalIP", "2001:db8::60"))
    edge = pod("edge", "worker-1", **{HOSTNAME: f"edge.{PODS}", INTERNAL: f"edge-internal.{PODS}"})
    alias = pod("alias", "worker-1", **{HOSTNAME: f"alias.{PODS}", TARGET: "edge.example.net"})
    plain = pod("plain", "worker-1")  # no names: publishes nothing
    for body in (edge, alias, plain):
        core.create_namespaced_pod("default", raw_body(k8s.V1Pod, body))
    running = {"status": {"phase": "Running", "podIP": "10.0.0.60"}}
    core.patch_namespaced_pod_status("edge", "default", running)
    replica = start_replica(apiserver, dns_server, procs, tmp_path, "--source=pod", zones=(PODS,))

    eventually_sync(lambda: dns_server.texts(f"edge.{PODS}", "A") == {"192.0.2.60"}, within=30)
    assert dns_server.texts(f"edge.{PODS}", "AAAA") == {"2001:db8::60"}  # the Node's IPv6 InternalIP
    assert dns_server.texts(f"edge-internal.{PODS}", "A") == {"10.0.0.60"}
    assert dns_server.texts(f"alias.{PODS}", "CNAME") == {"edge.example.net."}
    assert dns_server.texts(f"a-edge.{PODS}", "TXT") == owner_txt("pod/default/edge")
    assert dns_server.texts(f"aaaa-edge.{PODS}", "TXT") == owner_txt("pod/default/edge")
    assert dns_server.texts(f"cname-alias.{PODS}", "TXT") == owner_txt("pod/default/alias")

    # The Node's address changes: the Node's event moves the record (the interval is a minute).
    set_addresses(core, "worker-1", ("ExternalIP", "192.0.2.61"), ("InternalIP", "2001:db8::60"))
    eventually_sync(lambda: dns_server.texts(f"edge.{PODS}", "A") == {"192.0.2.61"}, within=15)

    # The Pod goes: its records go.
    core.delete_namespaced_pod("edge", "default", grace_period_seconds=0)
    eventually_sync(lambda: dns_server.texts(f"edge.{PODS}", "A") == set(), within=15)
    assert dns_server.texts(f"edge.{PODS}", "AAAA") == dns_server.texts(f"edge-internal.{PODS}", "A") == set()
    assert dns_server.texts(f"a-edge.{PODS}", "TXT") == set()
    assert dns_server.texts(f"alias.{PODS}", "CNAME") == {"edge.example.net."}
    assert replica.alive()
