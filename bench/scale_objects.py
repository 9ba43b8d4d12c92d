"""The objects of the `memory_at_scale` scenario: a cluster the size external-dns users run into trouble with,
seeded into the embedded API server.

`Sizes` says how many of each; `seed(kube, sizes, zones)` creates them from a few threads. Services take
one of three shapes (LoadBalancer with an external IP, NodePort with `externalTrafficPolicy: Local`
whose records follow its Pods' Nodes, headless whose records come from its EndpointSlice and Pods), each
named `svc-<i>.<zone>` with zone `i mod zones`; every Pod belongs to a NodePort or headless Service and runs
on a Node; DNSEndpoints carry three A records each. Pods, Services and Nodes are padded the way a real API
server returns them (managedFields, kubectl's last-applied annotation, a container spec), because what a
replica keeps of such objects is what the scenario measures.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import orjson

from shardsync.kube.client import BlockingKube
from shardsync.kube.objects import Resource
from shardsync.sources.crd import DNS_ENDPOINTS
from shardsync.sources.service import ENDPOINT_SLICES, NODES, PODS, SERVICES

NAMESPACE = "default"
HOSTNAME = "external-dns.alpha.kubernetes.io/hostname"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
# Service `i` has shape SHAPES[i % 10]: 60 % LoadBalancer, 30 % headless, 10 % NodePort (node ports are
# finite, 30000-32767, as in Kubernetes: 20,000 Services cannot all have one).
_LB, _NP, _HL = "LoadBalancer", "NodePort", "headless"
SHAPES = (_LB, _NP, _HL, _LB, _LB, _HL, _LB, _LB, _HL, _LB)


def shape(index: int) -> str:
    return SHAPES[index % len(SHAPES)]


_POD_NET = ipaddress.IPv4Address("10.128.0.0")
_NODE_NET = ipaddress.IPv4Address("10.64.0.0")
_EXTERNAL = ipaddress.IPv4Address("198.18.0.0")  # RFC 2544 benchmarking range


@dataclass(frozen=True, slots=True)
class Sizes:
    services: int
    pods: int
    nodes: int
    dns_endpoints: int
    zones: int

    def scaled(self, factor: float) -> Sizes:
        return Sizes(
            *(
                max(1, round(v * factor))
                for v in (self.services, self.pods, self.nodes, self.dns_endpoints, self.zones)
            )
        )

    @property
    def objects(self) -> int:
        return self.services + self.pods + self.nodes + self.dns_endpoints


def _bookkeeping(name: str, body: dict[str, Any]) -> dict[str, Any]:
    """managedFields and the last-applied annotation, as `kubectl apply` leaves them."""
    return {
        "managedFields": [
            {
                "manager": "kubectl-client-side-apply",
                "operation": "Update",
                "apiVersion": "v1",
                "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:metadata": {"f:annotations": {".": {}, f"f:{LAST_APPLIED}": {}}},
                    "f:spec": {},
                },
            }
        ],
        "annotations": {LAST_APPLIED: orjson.dumps(body).decode()},
    }


def _ip(base: ipaddress.IPv4Address, index: int) -> str:
    return str(base + index % (1 << 16))


def node(index: int) -> dict[str, Any]:
    name = f"node-{index:04d}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": "a"},
        },
        "spec": {"podCIDR": f"10.{128 + index // 256}.{index % 256}.0/24"},
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": _ip(_NODE_NET, index)},
                {"type": "ExternalIP", "address": _ip(_EXTERNAL, 40_000 + index)},
                {"type": "Hostname", "address": name},
            ],
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "nodeInfo": {
                "kubeletVersion": "v1.32.0",
                "osImage": "Debian GNU/Linux 12",
                "architecture": "amd64",
            },
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
        },
    }


def service(index: int, zone: str) -> dict[str, Any]:
    kind = shape(index)
    name = f"svc-{index:05d}"
    spec: dict[str, Any] = {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}
    if kind == "LoadBalancer":
        spec.update(
            type="LoadBalancer", externalIPs=[_ip(_EXTERNAL, index)], allocateLoadBalancerNodePorts=False
        )
    elif kind == "NodePort":
        spec.update(type="NodePort", externalTrafficPolicy="Local", selector={"app": name})
    else:
        spec.update(clusterIP="None", selector={"app": name})
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": {HOSTNAME: f"{name}.{zone}"}},
        "spec": spec,
    }
    extra = _bookkeeping(name, body)
    body["metadata"]["annotations"].update(extra["annotations"])
    body["metadata"]["managedFields"] = extra["managedFields"]
    body["metadata"]["labels"] = {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "bench"}
    return body


def _selecting(sizes: Sizes) -> list[int]:
    """Indexes of the Services that select Pods (NodePort and headless)."""
    return [i for i in range(sizes.services) if shape(i) != "LoadBalancer"]


def pod(index: int, owner: int, sizes: Sizes) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Pod (as created) and its status (written through the status subresource)."""
    name = f"svc-{owner:05d}-{index:05d}"
    node_name = f"node-{index % sizes.nodes:04d}"
    container = {
        "name": "app",
        "image": "registry.example/app:1.2.3",
        "ports": [{"containerPort": 8080, "protocol": "TCP"}],
        "env": [{"name": f"SETTING_{k}", "value": "x" * 24} for k in range(8)],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
        "volumeMounts": [{"name": "token", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
    }
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"app": f"svc-{owner:05d}", "pod-template-hash": "5d8f7c9b6"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"svc-{owner:05d}-5d8f7c9b6",
                    "uid": f"uid-{owner}",
                    "controller": True,
                }
            ],
            "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "8080"},
        },
        "spec": {
            "nodeName": node_name,
            "hostname": name,
            "containers": [container],
            "volumes": [
                {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}
            ],
        },
    }
    body["metadata"]["managedFields"] = _bookkeeping(name, body)["managedFields"]
    status = {
        "status": {
            "phase": "Running",
            "hostIP": _ip(_NODE_NET, index % sizes.nodes),
            "podIP": _ip(_POD_NET, index),
            "podIPs": [{"ip": _ip(_POD_NET, index)}],
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
                for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "containerStatuses": [
                {
                    "name": "app",
                    "ready": True,
                    "restartCount": 0,
                    "image": container["image"],
                    "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
                }
            ],
        }
    }
    return body, status


def endpoint_slice(owner: int, pods: Sequence[int]) -> dict[str, Any]:
    name = f"svc-{owner:05d}"
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{name}-abcde",
            "namespace": NAMESPACE,
            "labels": {"kubernetes.io/service-name": name},
        },
        "addressType": "IPv4",
        "endpoints": [
            {
                "addresses": [_ip(_POD_NET, p)],
                "conditions": {"ready": True},
                "targetRef": {"kind": "Pod", "name": f"{name}-{p:05d}", "namespace": NAMESPACE},
            }
            for p in pods
        ],
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
    }


def dns_endpoint(index: int, zone: str) -> dict[str, Any]:
    return {
        "apiVersion": DNS_ENDPOINTS.api_version,
        "kind": DNS_ENDPOINTS.kind,
        "metadata": {"name": f"ep-{index:05d}", "namespace": NAMESPACE},
        "spec": {
            "endpoints": [
                {
                    "dnsName": f"ep-{index:05d}-{j}.{zone}",
                    "recordType": "A",
                    "recordTTL": 300,
                    "targets": [_ip(_EXTERNAL, 20_000 + index * 3 + j)],
                }
                for j in range(3)
            ]
        },
    }


def _jobs(kube: BlockingKube, sizes: Sizes, zones: Sequence[str]) -> Iterator[Callable[[], Any]]:
    def create(
        resource: Resource, body: dict[str, Any], status: dict[str, Any] | None = None
    ) -> Callable[[], Any]:
        def job() -> None:
            namespace = NAMESPACE if resource.namespaced else ""
            kube.create(resource, body, namespace=namespace)
            if status is not None:
                kube.patch(
                    resource, body["metadata"]["name"], status, namespace=namespace, subresource="status"
                )

        return job

    for i in range(sizes.nodes):
        yield create(NODES, node(i))
    owners = _selecting(sizes)
    members: dict[int, list[int]] = {}
    for i in range(sizes.pods):
        owner = owners[i % len(owners)] if owners else 0
        members.setdefault(owner, []).append(i)
        yield create(PODS, *pod(i, owner, sizes))
    for owner, pods in members.items():
        if shape(owner) == "headless":
            yield create(ENDPOINT_SLICES, endpoint_slice(owner, pods))
    for i in range(sizes.services):
        yield create(SERVICES, service(i, zones[i % len(zones)]))
    for i in range(sizes.dns_endpoints):
        yield create(DNS_ENDPOINTS, dns_endpoint(i, zones[i % len(zones)]))


def seed(kube: BlockingKube, sizes: Sizes, zones: Sequence[str], threads: int = 4) -> int:
    """Create every object (KubeError on a refusal); returns how many requests that took."""
    count = 0
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for future in [pool.submit(job) for job in _jobs(kube, sizes, zones)]:
            future.result()
            count += 1
    return count
