"""Builders of Gateway API objects (Kubernetes JSON) for the gateway source tests."""

from __future__ import annotations

from typing import Any

GROUP = "gateway.networking.k8s.io"
ALL = {"namespaces": {"from": "All"}}


def listener(
    name: str = "",
    protocol: str = "HTTP",
    hostname: str = "",
    port: int = 80,
    allowed: dict[str, Any] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name or f"l-{protocol.lower()}-{port}", "protocol": protocol, "port": port}
    if hostname:
        out["hostname"] = hostname
    if allowed is not None:
        out["allowedRoutes"] = allowed
    return out


def gateway(
    name: str,
    namespace: str = "default",
    *listeners: dict[str, Any],
    addresses: tuple[str, ...] = ("1.2.3.4",),
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Gateway",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": annotations or {},
            "labels": labels or {},
        },
        "spec": {"gatewayClassName": "test", "listeners": list(listeners) or [listener(allowed=ALL)]},
        "status": {"addresses": [{"type": "IPAddress", "value": a} for a in addresses]},
    }


def parent(
    name: str, namespace: str = "default", section: str = "", port: int | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {"group": GROUP, "kind": "Gateway", "name": name, "namespace": namespace}
    if section:
        out["sectionName"] = section
    if port is not None:
        out["port"] = port
    return out


def route(
    name: str,
    namespace: str = "default",
    hostnames: tuple[str, ...] = (),
    parents: tuple[dict[str, Any], ...] = (),
    accepted: tuple[dict[str, Any], ...] | None = None,
    annotations: dict[str, str] | None = None,
    kind: str = "HTTPRoute",
    version: str = "v1",
    accepted_status: str = "True",
) -> dict[str, Any]:
    """A route naming `parents` in its spec; its status accepts `accepted` (default: the same parents)."""
    spec: dict[str, Any] = {"parentRefs": list(parents)}
    if hostnames:
        spec["hostnames"] = list(hostnames)
    status_parents = [
        {
            "parentRef": ref,
            "controllerName": "example.com/gateway",
            "conditions": [{"type": "Accepted", "status": accepted_status, "reason": "Accepted"}],
        }
        for ref in (parents if accepted is None else accepted)
    ]
    return {
        "apiVersion": f"{GROUP}/{version}",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations or {}},
        "spec": spec,
        "status": {"parents": status_parents},
    }


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
