"""The node and pod kinds in a watcher, against the embedded API server: a Node's records follow its
addresses and schedulability, a problem in a Node is an Event in `default` naming the Node (cluster-scoped
objects' Events live there), a host-network Pod's record follows its Node, and with the service kind the
one informer of Nodes keeps what each kind reads."""

from __future__ import annotations

from typing import Any

import pytest

from shardsync.local.apiserver import ApiServer
from shardsync.sources.result import INVALID_REASON
from shardsync.sources.watcher import WatchOptions

from .watching import HOSTNAME, ZONE, Records, blocking, node_status, until, watching

pytestmark = pytest.mark.anyio

NODE_KINDS = WatchOptions(sources=("node", "pod", "service"))


def node(name: str, **annotations: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "annotations": annotations}}


async def test_node_records_follow_addresses_and_schedulability_and_problems_are_events(
    apiserver: ApiServer,
) -> None:
    async with watching(apiserver, NODE_KINDS) as h:
        await blocking(h.core.create_node, node(f"n1.{ZONE}"))  # registering: no address yet, no record
        await blocking(h.core.patch_node_status, f"n1.{ZONE}", node_status(("ExternalIP", "192.0.2.1")))
        await h.settle({(f"n1.{ZONE}", "A"): ("192.0.2.1",)})
        await blocking(h.core.create_node, node(f"n2.{ZONE}"))
        internal = node_status(("InternalIP", "10.0.0.2"))
        internal["status"]["addresses"].append({"type": "InternalIP", "address": "2001:db8::2"})
        await blocking(h.core.replace_node_status, f"n2.{ZONE}", {**node(f"n2.{ZONE}"), **internal})
        both: Records = {
            (f"n1.{ZONE}", "A"): ("192.0.2.1",),
            (f"n2.{ZONE}", "A"): ("10.0.0.2",),  # no ExternalIP: its InternalIPs
            (f"n2.{ZONE}", "AAAA"): ("2001:db8::2",),
        }
        await h.settle(both)
        await blocking(h.core.patch_node, f"n1.{ZONE}", {"spec": {"unschedulable": True}})  # cordoned
        await h.settle({k: v for k, v in both.items() if k[0].startswith("n2")})
        await blocking(h.core.patch_node, f"n1.{ZONE}", {"spec": {"unschedulable": False}})
        await h.settle(both)

        # A Node with a TTL that is none: its records stay, an Event in `default` says why.
        ttl = {"metadata": {"annotations": {"external-dns.kubernetes.io/ttl": "soon"}}}
        await blocking(h.core.patch_node, f"n1.{ZONE}", ttl)

        def warnings() -> list[Any]:
            events = h.core.list_namespaced_event("default", field_selector=f"involvedObject.name=n1.{ZONE}")
            return [e for e in events.items if e.reason == INVALID_REASON]

        async def posted() -> bool:
            return bool(await blocking(warnings))

        await until(posted)
        [event] = await blocking(warnings)
        assert event.involved_object.kind == "Node" and not event.involved_object.namespace
        assert "TTL" in event.message


async def test_a_host_network_pods_record_follows_its_node(apiserver: ApiServer) -> None:
    async with watching(apiserver, NODE_KINDS) as h:
        await blocking(h.core.create_node, node("worker-1"))  # no DNS name: publishes nothing itself
        await blocking(h.core.patch_node_status, "worker-1", node_status(("ExternalIP", "192.0.2.1")))
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "edge", "annotations": {HOSTNAME: f"edge.{ZONE}"}},
            "spec": {
                "nodeName": "worker-1",
                "hostNetwork": True,
                "containers": [{"name": "c", "image": "i"}],
            },
        }
        await blocking(h.core.create_namespaced_pod, "default", body)
        await h.settle({(f"edge.{ZONE}", "A"): ("192.0.2.1",)})
        touched = await h.change(
            blocking(
                h.core.patch_node_status,
                "worker-1",
                node_status(("ExternalIP", "192.0.2.9"), ("InternalIP", "2001:db8::9")),
            )
        )
        assert touched == {ZONE}
        await h.settle({(f"edge.{ZONE}", "A"): ("192.0.2.9",), (f"edge.{ZONE}", "AAAA"): ("2001:db8::9",)})
        # The service and pod kinds read a Node's addresses only; the node kind its annotations too: one
        # informer keeps what covers both.
        kept = h.watcher.informers["nodes"].cache["worker-1"]
        assert set(kept["metadata"]) >= {"name", "creationTimestamp"} and set(kept) == {"metadata", "status"}
