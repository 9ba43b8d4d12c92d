"""What `shardsync local` puts into the embedded API server: the DNSEndpoint CRD, objects that ask for
records in every seeded zone, and the StatefulSet the replicas belong to.

Per zone `z` (index i): a LoadBalancer Service `web-<i>` with the hostname annotation `web.<z>` and an
external IP, read by the service source; and a DNSEndpoint `app-<i>` with `per_zone` A records
`app-<j>.<z>`, read by the crd source. The provider's own seeded records carry no ownership, so these are
what the replicas write (with their TXT ownership records).

The StatefulSet `shardsync` never runs a pod here (the launcher runs the processes); it exists because a
replica stopping on SIGTERM reads its StatefulSet's spec.replicas to tell a scale-down (drain) from a
restart (park), so the launcher keeps spec.replicas equal to the replica count it wants.

Blocking calls through the official client: the launcher calls these from its setup, before its event
loop runs, or from a worker thread.
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Sequence
from typing import Any

from kubernetes import client as k8s

from shardsync.manifests import load_crd
from shardsync.sharding.membership import labels

NAMESPACE = "default"
STATEFULSET = "shardsync"
INSTANCE = "shardsync"
HOSTNAME_ANNOTATION = "external-dns.alpha.kubernetes.io/hostname"
CRD_GROUP, CRD_VERSION, CRD_PLURAL = "externaldns.k8s.io", "v1alpha1", "dnsendpoints"
_BASE_IP = ipaddress.IPv4Address("198.18.0.0")  # RFC 2544 benchmarking range: never a real host


def address(index: int) -> str:
    """A distinct test address per index (198.18.0.0/15 holds 131,072)."""
    return str(_BASE_IP + index % (1 << 17))


def service(index: int, zone: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": f"web-{index:04d}",
            "labels": {"app.kubernetes.io/part-of": "shardsync-local"},
            "annotations": {HOSTNAME_ANNOTATION: f"web.{zone}"},
        },
        "spec": {"type": "LoadBalancer", "externalIPs": [address(index)], "ports": [{"port": 80}]},
    }


def dns_endpoint(index: int, zone: str, per_zone: int) -> dict[str, Any]:
    return {
        "apiVersion": f"{CRD_GROUP}/{CRD_VERSION}",
        "kind": "DNSEndpoint",
        "metadata": {"name": f"app-{index:04d}", "labels": {"app.kubernetes.io/part-of": "shardsync-local"}},
        "spec": {
            "endpoints": [
                {
                    "dnsName": f"app-{j}.{zone}",
                    "recordType": "A",
                    "recordTTL": 300,
                    "targets": [address(index * 7 + j)],
                }
                for j in range(per_zone)
            ]
        },
    }


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


def install_crd(api: k8s.ApiClient, timeout: float = 10.0) -> None:
    """Create the DNSEndpoint CRD and wait until its resource is served."""
    # Typed Any: bodies are plain dicts in Kubernetes JSON form, which the client accepts as they are.
    ext: Any = k8s.ApiextensionsV1Api(api)
    try:
        ext.create_custom_resource_definition(load_crd())
    except k8s.ApiException as exc:
        if exc.status != 409:
            raise
    custom = k8s.CustomObjectsApi(api)
    deadline = time.monotonic() + timeout
    while True:
        try:
            custom.list_namespaced_custom_object(CRD_GROUP, CRD_VERSION, NAMESPACE, CRD_PLURAL, limit=1)
            return
        except k8s.ApiException as exc:
            if exc.status != 404 or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def seed_objects(api: k8s.ApiClient, zones: Sequence[str], per_zone: int) -> int:
    """Create a Service and a DNSEndpoint per zone; returns how many DNS names they ask for."""
    core: Any = k8s.CoreV1Api(api)
    custom = k8s.CustomObjectsApi(api)
    for index, zone in enumerate(zones):
        core.create_namespaced_service(NAMESPACE, service(index, zone), _preload_content=False)
        if per_zone > 0:
            custom.create_namespaced_custom_object(
                CRD_GROUP, CRD_VERSION, NAMESPACE, CRD_PLURAL, dns_endpoint(index, zone, per_zone)
            )
    return len(zones) * (1 + per_zone)


def set_replicas(api: k8s.ApiClient, replicas: int) -> None:
    """Create the StatefulSet, or set its spec.replicas (what `kubectl scale` does)."""
    apps: Any = k8s.AppsV1Api(api)
    try:
        apps.patch_namespaced_stateful_set(
            STATEFULSET, NAMESPACE, {"spec": {"replicas": replicas}}, _preload_content=False
        )
    except k8s.ApiException as exc:
        if exc.status != 404:
            raise
        apps.create_namespaced_stateful_set(NAMESPACE, statefulset(replicas), _preload_content=False)
