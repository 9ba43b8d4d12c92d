"""Per-kind defaulting the real server does on write and that our callers read back: Service cluster IPs,
node ports and type; Secret stringData; the initial status of kinds whose status is a subresource;
a CustomResourceDefinition's accepted names and Established condition.
"""

from __future__ import annotations

import base64
import ipaddress
import random
from collections.abc import Iterable
from typing import Any

from shardsync.local.apiserver.meta import now
from shardsync.local.apiserver.resources import Resource

_SERVICE_CIDR = ipaddress.ip_network("10.96.0.0/16")
_NODE_PORTS = range(30000, 32768)
_FRESH_STATUS: dict[str, dict[str, Any]] = {
    "Service": {"loadBalancer": {}},
    "Ingress": {"loadBalancer": {}},
    "Pod": {"phase": "Pending"},
    "StatefulSet": {"replicas": 0, "availableReplicas": 0},
    "Namespace": {"phase": "Active"},
}


def initial_status(resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
    """Status a create stores: clients cannot set it there (except for Nodes), as in the real strategies."""
    if resource.custom or resource.kind not in _FRESH_STATUS:
        return obj
    return {**obj, "status": dict(_FRESH_STATUS[resource.kind])}


def used_allocations(services: Iterable[dict[str, Any]]) -> tuple[set[str], set[int]]:
    """Cluster IPs and node ports already taken, so a new Service gets unique ones."""
    ips: set[str] = set()
    ports: set[int] = set()
    for svc in services:
        spec = svc.get("spec") or {}
        if spec.get("clusterIP"):
            ips.add(spec["clusterIP"])
        ports.update(
            p["nodePort"] for p in spec.get("ports") or [] if isinstance(p, dict) and p.get("nodePort")
        )
    return ips, ports


def service(
    obj: dict[str, Any], old: dict[str, Any] | None, used_ips: set[str], used_ports: set[int]
) -> dict[str, Any]:
    spec = dict(obj.get("spec") or {})
    old_spec = (old or {}).get("spec") or {}
    svc_type = spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if svc_type != "ExternalName":
        if not spec.get("clusterIP"):
            spec["clusterIP"] = old_spec.get("clusterIP") or _free_ip(used_ips)
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        spec.setdefault("internalTrafficPolicy", "Cluster")
    # A LoadBalancer may opt out of node ports (spec.allocateLoadBalancerNodePorts: false), as in Kubernetes.
    node_ports = svc_type == "NodePort" or (
        svc_type == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is not False
    )
    old_ports = {p.get("port"): p for p in old_spec.get("ports") or [] if isinstance(p, dict)}
    ports = []
    for raw in spec.get("ports") or []:
        port = dict(raw)
        port.setdefault("protocol", "TCP")
        port.setdefault("targetPort", port.get("port"))
        if node_ports and not port.get("nodePort"):
            port["nodePort"] = old_ports.get(port.get("port"), {}).get("nodePort") or _free_port(used_ports)
        ports.append(port)
    if "ports" in spec:
        spec["ports"] = ports
    if svc_type in ("NodePort", "LoadBalancer"):
        spec.setdefault("externalTrafficPolicy", "Cluster")
    return {**obj, "spec": spec}


def _free_ip(used: set[str]) -> str:
    hosts = _SERVICE_CIDR.num_addresses - 2
    for _ in range(1000):
        ip = str(_SERVICE_CIDR.network_address + random.randint(10, hosts))
        if ip not in used:
            used.add(ip)
            return ip
    raise RuntimeError("service IP range exhausted")


def _free_port(used: set[int]) -> int:
    for port in random.sample(_NODE_PORTS, len(_NODE_PORTS)):
        if port not in used:
            used.add(port)
            return port
    raise RuntimeError("node port range exhausted")


def secret(obj: dict[str, Any]) -> dict[str, Any]:
    string_data = obj.get("stringData")
    out = {k: v for k, v in obj.items() if k != "stringData"}
    out.setdefault("type", "Opaque")
    if isinstance(string_data, dict) and string_data:
        data = dict(out.get("data") or {})
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        out["data"] = data
    return out


def statefulset(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj.get("spec") or {}
    if "replicas" in spec:
        return obj
    return {**obj, "spec": {**spec, "replicas": 1}}


def crd(obj: dict[str, Any], old: dict[str, Any] | None) -> dict[str, Any]:
    spec = obj.get("spec") or {}
    names = dict(spec.get("names") or {})
    names.setdefault("singular", str(names.get("kind", "")).lower())
    names.setdefault("listKind", f"{names.get('kind', '')}List")
    stored = list(((old or {}).get("status") or {}).get("storedVersions") or [])
    for version in spec.get("versions") or []:
        if version.get("storage") and version.get("name") not in stored:
            stored.append(version.get("name"))
    old_conditions = ((old or {}).get("status") or {}).get("conditions") or [{}]
    stamp = old_conditions[0].get("lastTransitionTime") or now()
    conditions = [
        {
            "type": "NamesAccepted",
            "status": "True",
            "reason": "NoConflicts",
            "message": "no conflicts found",
            "lastTransitionTime": stamp,
        },
        {
            "type": "Established",
            "status": "True",
            "reason": "InitialNamesAccepted",
            "message": "the initial names have been accepted",
            "lastTransitionTime": stamp,
        },
    ]
    return {
        **obj,
        "spec": {**spec, "names": names},
        "status": {"acceptedNames": names, "conditions": conditions, "storedVersions": stored},
    }


def on_write(
    resource: Resource,
    obj: dict[str, Any],
    old: dict[str, Any] | None,
    allocations: tuple[set[str], set[int]] | None = None,
) -> dict[str, Any]:
    """Applies the kind's defaults to an object about to be stored by a create (old=None) or an update.
    `allocations`: the cluster IPs and node ports Services hold (`used_allocations`); a Service's new
    ones are added to them."""
    if resource.custom:
        return obj
    if resource.kind == "Service":
        ips, ports = allocations if allocations is not None else (set(), set())
        return service(obj, old, ips, ports)
    if resource.kind == "Secret":
        return secret(obj)
    if resource.kind == "StatefulSet":
        return statefulset(obj)
    if resource.kind == "CustomResourceDefinition":
        return crd(obj, old)
    return obj
