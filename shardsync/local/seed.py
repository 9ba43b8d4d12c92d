"""What `shardsync local` puts into the embedded API server: the DNSEndpoint CRD, objects that ask for
records in every seeded zone, and the StatefulSet the replicas belong to.

Per zone `z` (index i): a LoadBalancer Service `web-<i>` with the hostname annotation `web.<z>` and an
external IP, read by the service source; and a DNSEndpoint `app-<i>` with `per_zone` A records
`app-<j>.<z>`, read by the crd source. The provider's own seeded records carry no ownership, so these are
what the replicas write (with their TXT ownership records).

With gateway-* sources chosen (`shardsync local --source=gateway-httproute`): the minimal Gateway API CRDs,
one Gateway `shardsync-local` (an HTTP, a TLS, a TCP and a UDP listener, one status address) and per zone
and chosen kind a route `<kind>-<i>` (`httproute-0003`) asking for `<kind>.<z>`, accepted by the Gateway
in its status (no Gateway controller runs here to write it).

With istio-* sources chosen: the minimal Istio CRDs and the ingress gateway's LoadBalancer Service
`istio-ingressgateway` (selector `istio: ingressgateway`, one load-balancer address in its status); for
istio-gateway, per zone a Gateway `gateway-<i>` selecting it and asking for `istio-gateway.<z>`; for
istio-virtualservice, one Gateway `shardsync-local` (host `*`) and per zone a VirtualService
`virtualservice-<i>` through it asking for `virtualservice.<z>`.

With the node or pod source chosen (`--source=node`, `--source=pod`): per zone a Node `node.<z>` (an
ExternalIP and an IPv6 InternalIP), whose name the node source publishes, and with the pod source a
host-network Pod `pod-<i>` on it asking for `pod.<z>` (its `hostname` annotation: the Node's ExternalIP) and
`pod-internal.<z>` (`internal-hostname`: the Pod's IP). No kubelet runs here: the seeding writes their
statuses.

The StatefulSet `shardsync` never runs a pod here (the launcher runs the processes); it exists because a
replica stopping on SIGTERM reads its StatefulSet's spec.replicas to tell a scale-down (drain) from a
restart (park), so the launcher keeps spec.replicas equal to the replica count it wants.

Blocking calls (`BlockingKube`): the launcher calls these from its setup, before its event loop runs, or
from a worker thread.
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Sequence
from typing import Any

from shardsync.kube.client import BlockingKube, KubeError
from shardsync.kube.objects import CUSTOM_RESOURCE_DEFINITIONS, STATEFULSETS, Obj, Resource
from shardsync.manifests import load_crd, load_gateway_crds, load_istio_crds
from shardsync.sharding.membership import labels
from shardsync.sources import gateway as gw
from shardsync.sources import istio
from shardsync.sources.crd import DNS_ENDPOINTS
from shardsync.sources.service import NODES, PODS, SERVICES

NAMESPACE = "default"
STATEFULSET = "shardsync"
INSTANCE = "shardsync"
HOSTNAME_ANNOTATION = "external-dns.alpha.kubernetes.io/hostname"
_BASE_IP = ipaddress.IPv4Address("198.18.0.0")  # RFC 2544 benchmarking range: never a real host


def address(index: int) -> str:
    """A distinct test address per index (198.18.0.0/15 holds 131,072)."""
    return str(_BASE_IP + index % (1 << 17))


def seeded_object(
    api_version: str, kind: str, name: str, annotations: dict[str, str] | None = None, **parts: Any
) -> Obj:
    """An object of the seeding, labelled as part of shardsync-local: its metadata (with `annotations` when
    given) and `parts` (spec, status)."""
    metadata: Obj = {"name": name, "labels": {"app.kubernetes.io/part-of": "shardsync-local"}}
    if annotations is not None:
        metadata["annotations"] = annotations
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **parts}


def service(index: int, zone: str) -> dict[str, Any]:
    spec = {"type": "LoadBalancer", "externalIPs": [address(index)], "ports": [{"port": 80}]}
    return seeded_object("v1", "Service", f"web-{index:04d}", {HOSTNAME_ANNOTATION: f"web.{zone}"}, spec=spec)


def dns_endpoint(index: int, zone: str, per_zone: int) -> dict[str, Any]:
    endpoints = [
        {
            "dnsName": f"app-{j}.{zone}",
            "recordType": "A",
            "recordTTL": 300,
            "targets": [address(index * 7 + j)],
        }
        for j in range(per_zone)
    ]
    name = f"app-{index:04d}"
    return seeded_object(DNS_ENDPOINTS.api_version, DNS_ENDPOINTS.kind, name, spec={"endpoints": endpoints})


def statefulset(replicas: int) -> dict[str, Any]:
    selector = labels(INSTANCE)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": STATEFULSET, "labels": selector},
        "spec": {
            "replicas": replicas,
            "serviceName": STATEFULSET,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": selector},
                "spec": {"containers": [{"name": "shardsync", "image": "shardsync:local"}]},
            },
        },
    }


def install_crd(kube: BlockingKube, timeout: float = 10.0) -> None:
    """Create the DNSEndpoint CRD and wait until its resource is served."""
    _install(kube, load_crd(), DNS_ENDPOINTS, timeout)


def _install(kube: BlockingKube, crd: Obj, resource: Resource, timeout: float) -> None:
    try:
        kube.create(CUSTOM_RESOURCE_DEFINITIONS, crd)
    except KubeError as exc:
        if not exc.conflict:
            raise
    deadline = time.monotonic() + timeout
    while True:
        try:
            kube.list(resource, namespace=NAMESPACE, limit=1)
            return
        except KubeError as exc:
            if not exc.not_found or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


GATEWAY = "shardsync-local"
ROUTES = {
    kind.name: route for kind, route in zip(gw.KINDS, (gw.HTTP, gw.GRPC, gw.TLS, gw.TCP, gw.UDP), strict=True)
}


def gateway_resources() -> dict[str, Resource]:
    """The Gateway API resources at the version the shipped CRDs serve first (plural → Resource)."""
    return _resources(load_gateway_crds())


def _resources(crds: list[Obj]) -> dict[str, Resource]:
    out: dict[str, Resource] = {}
    for crd in crds:
        plural, version = crd["spec"]["names"]["plural"], crd["spec"]["versions"][0]["name"]
        out[plural] = Resource(crd["spec"]["group"], version, plural, crd["spec"]["names"]["kind"])
    return out


def install_gateway_crds(kube: BlockingKube, timeout: float = 10.0) -> None:
    """Create the minimal Gateway API CRDs and wait until each is served."""
    _install_all(kube, load_gateway_crds(), timeout)


def _install_all(kube: BlockingKube, crds: list[Obj], timeout: float) -> None:
    served = _resources(crds)
    for crd in crds:
        _install(kube, crd, served[crd["spec"]["names"]["plural"]], timeout)


def gateway_object() -> Obj:
    listeners = [
        {"name": name, "protocol": protocol, "port": port}
        for name, protocol, port in (
            ("http", "HTTP", 80),
            ("tls", "TLS", 443),
            ("tcp", "TCP", 5432),
            ("udp", "UDP", 53),
        )
    ]
    return seeded_object(
        gw.GATEWAYS.api_version,
        gw.GATEWAYS.kind,
        GATEWAY,
        spec={"gatewayClassName": "shardsync-local", "listeners": listeners},
        status={"addresses": [{"type": "IPAddress", "value": address((1 << 17) - 1)}]},
    )


def route_object(route: gw.RouteKind, resource: Resource, index: int, zone: str) -> Obj:
    name = f"{route.label}.{zone}"
    spec: dict[str, Any] = {"parentRefs": [{"name": GATEWAY}]}
    annotations: dict[str, str] = {}
    if route.has_hostnames:
        spec["hostnames"] = [name]
    else:
        annotations[HOSTNAME_ANNOTATION] = name
    accepted = {"type": "Accepted", "status": "True", "reason": "Accepted"}
    parent = {
        "parentRef": {"name": GATEWAY},
        "controllerName": "shardsync.local/none",
        "conditions": [accepted],
    }
    name = f"{route.label}-{index:04d}"
    status = {"parents": [parent]}
    return seeded_object(resource.api_version, resource.kind, name, annotations, spec=spec, status=status)


def _create_with_status(kube: BlockingKube, resource: Resource, obj: Obj) -> None:
    kube.create(resource, obj, namespace=NAMESPACE)
    status = {"status": obj["status"]}
    kube.patch(resource, obj["metadata"]["name"], status, namespace=NAMESPACE, subresource="status")


def seed_gateway_routes(kube: BlockingKube, zones: Sequence[str], sources: Sequence[str]) -> int:
    """The Gateway and, per zone, a route of each chosen gateway-* kind; returns how many names they ask
    for (0, and nothing created, when no gateway-* kind is chosen)."""
    chosen = [ROUTES[s] for s in dict.fromkeys(sources) if s in ROUTES]
    if not chosen:
        return 0
    install_gateway_crds(kube)
    served = gateway_resources()
    _create_with_status(kube, served[gw.GATEWAYS.plural], gateway_object())
    for route in chosen:
        resource = served[route.resource.plural]
        for index, zone in enumerate(zones):
            _create_with_status(kube, resource, route_object(route, resource, index, zone))
    return len(chosen) * len(zones)


ISTIO_KINDS = ("istio-gateway", "istio-virtualservice")
INGRESS_GATEWAY = "istio-ingressgateway"
INGRESS_GATEWAY_SELECTOR = {"istio": "ingressgateway"}


def ingress_gateway_service() -> Obj:
    """The Istio ingress gateway's Service, its load-balancer address in its status."""
    spec = {"type": "LoadBalancer", "selector": INGRESS_GATEWAY_SELECTOR, "ports": [{"port": 80}]}
    status = {"loadBalancer": {"ingress": [{"ip": address((1 << 17) - 2)}]}}
    return seeded_object("v1", "Service", INGRESS_GATEWAY, spec=spec, status=status)


def istio_object(kind: str, name: str, spec: Obj) -> Obj:
    return seeded_object(istio.GATEWAYS.api_version, kind, name, spec=spec)


def seed_istio(kube: BlockingKube, zones: Sequence[str], sources: Sequence[str]) -> int:
    """The Istio objects of the chosen istio-* kinds (see the module docstring); returns how many names they
    ask for (0, and nothing created, when no istio-* kind is chosen)."""
    chosen = [kind for kind in ISTIO_KINDS if kind in sources]
    if not chosen:
        return 0
    _install_all(kube, load_istio_crds(), 10.0)
    _create_with_status(kube, SERVICES, ingress_gateway_service())
    gateways, services = istio.GATEWAYS, istio.VIRTUAL_SERVICES
    for index, zone in enumerate(zones):
        if "istio-gateway" in chosen:
            spec = {"selector": INGRESS_GATEWAY_SELECTOR, "servers": [{"hosts": [f"istio-gateway.{zone}"]}]}
            kube.create(gateways, istio_object("Gateway", f"gateway-{index:04d}", spec), namespace=NAMESPACE)
        if "istio-virtualservice" in chosen:
            spec = {"gateways": [GATEWAY], "hosts": [f"virtualservice.{zone}"]}
            obj = istio_object("VirtualService", f"virtualservice-{index:04d}", spec)
            kube.create(services, obj, namespace=NAMESPACE)
    if "istio-virtualservice" in chosen:
        spec = {"selector": INGRESS_GATEWAY_SELECTOR, "servers": [{"hosts": ["*"]}]}
        kube.create(gateways, istio_object("Gateway", GATEWAY, spec), namespace=NAMESPACE)
    return len(chosen) * len(zones)


def node_object(index: int, zone: str) -> Obj:
    addresses = [
        {"type": "ExternalIP", "address": address(120_000 + index)},
        {"type": "InternalIP", "address": f"fd00:5eed::{index + 1:x}"},
    ]
    return seeded_object("v1", "Node", f"node.{zone}", status={"addresses": addresses})


def pod_object(index: int, zone: str) -> Obj:
    annotations = {
        HOSTNAME_ANNOTATION: f"pod.{zone}",
        "external-dns.alpha.kubernetes.io/internal-hostname": f"pod-internal.{zone}",
    }
    spec = {
        "nodeName": f"node.{zone}",
        "hostNetwork": True,
        "containers": [{"name": "pod", "image": "shardsync:local"}],
    }
    status = {"phase": "Running", "podIP": address(125_000 + index)}
    return seeded_object("v1", "Pod", f"pod-{index:04d}", annotations, spec=spec, status=status)


def seed_nodes_and_pods(kube: BlockingKube, zones: Sequence[str], sources: Sequence[str]) -> int:
    """With the node or pod source chosen, a Node per zone, and with the pod source a host-network Pod on
    it; returns how many names they ask for (0, and nothing created, when neither kind is chosen)."""
    chosen = {"node", "pod"} & set(sources)
    if not chosen:
        return 0
    for index, zone in enumerate(zones):
        node = node_object(index, zone)
        kube.create(NODES, node)
        kube.patch(NODES, node["metadata"]["name"], {"status": node["status"]}, subresource="status")
        if "pod" in chosen:
            _create_with_status(kube, PODS, pod_object(index, zone))
    return len(zones) * (("node" in chosen) + 2 * ("pod" in chosen))


def seed_one(kube: BlockingKube, index: int, zone: str, per_zone: int) -> None:
    """The Service of zone `index` and, with `per_zone` > 0, its DNSEndpoint."""
    kube.create(SERVICES, service(index, zone), namespace=NAMESPACE)
    if per_zone > 0:
        kube.create(DNS_ENDPOINTS, dns_endpoint(index, zone, per_zone), namespace=NAMESPACE)


def seed_objects(kube: BlockingKube, zones: Sequence[str], per_zone: int) -> int:
    """Create a Service and a DNSEndpoint per zone; returns how many DNS names they ask for."""
    for index, zone in enumerate(zones):
        seed_one(kube, index, zone, per_zone)
    return len(zones) * (1 + per_zone)


def set_replicas(kube: BlockingKube, replicas: int) -> None:
    """Create the StatefulSet, or set its spec.replicas (what `kubectl scale` does)."""
    try:
        kube.patch(STATEFULSETS, STATEFULSET, {"spec": {"replicas": replicas}}, namespace=NAMESPACE)
    except KubeError as exc:
        if not exc.not_found:
            raise
        kube.create(STATEFULSETS, statefulset(replicas), namespace=NAMESPACE)
