"""Builders for Kubernetes objects in their JSON (plain-dict) form, as the API server sends them."""

from __future__ import annotations

from typing import Any

ALPHA = "external-dns.alpha.kubernetes.io/"
GA = "external-dns.kubernetes.io/"
CREATED = "2024-05-01T10:00:00Z"
# external-dns annotation names (after the prefix), and two that are not, for property tests.
ANNOTATION_NAMES = (
    "hostname",
    "internal-hostname",
    "target",
    "ttl",
    "controller",
    "set-identifier",
    "access",
    "endpoints-type",
    "ingress-hostname-source",
    "alias",
    "aws-x",
    "cloudflare-proxied",
    "other",
)


def meta(
    name: str, namespace: str = "default", annotations: dict[str, str] | None = None, **extra: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "creationTimestamp": CREATED,
    }
    if annotations:
        out["annotations"] = annotations
    out.update(extra)
    return out


def service(
    name: str = "web",
    type_: str = "LoadBalancer",
    annotations: dict[str, str] | None = None,
    cluster_ip: str = "10.96.0.10",
    lb: list[dict[str, str]] | None = None,
    namespace: str = "default",
    **spec: Any,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(name, namespace, annotations),
        "spec": {"type": type_, "clusterIP": cluster_ip, "selector": {"app": name}, **spec},
        "status": {"loadBalancer": {"ingress": lb or []}},
    }


def node(name: str, *addresses: tuple[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {"addresses": [{"type": t, "address": a} for t, a in addresses]},
    }


def pod(
    name: str,
    app: str = "web",
    node_name: str = "n1",
    hostname: str = "",
    ready: bool = True,
    phase: str = "Running",
    host_ip: str = "192.0.2.1",
    namespace: str = "default",
    annotations: dict[str, str] | None = None,
    deleting: bool = False,
) -> dict[str, Any]:
    m = meta(name, namespace, annotations, labels={"app": app})
    if deleting:
        m["deletionTimestamp"] = "2024-05-02T00:00:00Z"
    spec: dict[str, Any] = {"nodeName": node_name}
    if hostname:
        spec["hostname"] = hostname
    return {
        "metadata": m,
        "spec": spec,
        "status": {
            "phase": phase,
            "hostIP": host_ip,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def endpoint_slice(
    service_name: str,
    endpoints: list[tuple[str, str, bool | None]],
    address_type: str = "IPv4",
    namespace: str = "default",
    name: str = "",
) -> dict[str, Any]:
    """endpoints: (address, pod name, ready) — ready None leaves the condition out."""
    eps = []
    for address, pod_name, ready in endpoints:
        ep: dict[str, Any] = {
            "addresses": [address],
            "targetRef": {"kind": "Pod", "name": pod_name, "namespace": namespace},
            "conditions": {} if ready is None else {"ready": ready},
        }
        eps.append(ep)
    return {
        "metadata": {
            "name": name or f"{service_name}-abcde",
            "namespace": namespace,
            "labels": {"kubernetes.io/service-name": service_name},
        },
        "addressType": address_type,
        "endpoints": eps,
    }


def ingress(
    name: str = "web",
    rules: list[str] | None = None,
    tls: list[list[str]] | None = None,
    annotations: dict[str, str] | None = None,
    lb: list[dict[str, str]] | None = None,
    class_name: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"rules": [{"host": h} for h in (rules or [])]}
    if tls is not None:
        spec["tls"] = [{"hosts": hosts} for hosts in tls]
    if class_name is not None:
        spec["ingressClassName"] = class_name
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": meta(name, annotations=annotations),
        "spec": spec,
        "status": {"loadBalancer": {"ingress": lb or []}},
    }


def dnsendpoint(
    endpoints: Any, name: str = "records", generation: int = 1, observed: int | None = None
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "externaldns.k8s.io/v1alpha1",
        "kind": "DNSEndpoint",
        "metadata": meta(name, generation=generation),
        "spec": {"endpoints": endpoints},
    }
    if observed is not None:
        obj["status"] = {"observedGeneration": observed}
    return obj


def records(result: Any) -> set[tuple[str, str, tuple[str, ...]]]:
    """A result's endpoints as (name, type, targets), for compact assertions."""
    return {(e.dns_name, e.record_type, e.targets) for e in result.endpoints}
