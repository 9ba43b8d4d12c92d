"""NodePort Services → node addresses and SRV records, as external-dns's service source computes them (pure).

- targets (`node_port_targets`): the nodes' ExternalIPs, else their InternalIPs, as the `access`
  annotation chooses (`public`: ExternalIPs only, `private`: InternalIPs); with `--expose-internal-ipv6`
  the nodes' IPv6 InternalIPs are added to the ExternalIPs. Unschedulable nodes (spec.unschedulable) are
  left out unless `--exclude-unschedulable=false`. With externalTrafficPolicy Local only the nodes running
  the Service's pods count (`local_traffic_nodes`).
- SRV (`node_port_srv`): one record `_<service name>._<protocol>.<hostname>` → `0 50 <nodePort>
  <hostname>.` per node port (RFC 2782: the target host is absolute, so it ends in a dot).

Pinned against external-dns v0.22.0 (source/service.go: extractNodePortTargets, extractNodePortEndpoints).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from shardsync.kube.objects import get, get_list, get_str
from shardsync.sources.result import suitable_type

Obj = Mapping[str, Any]


def pod_ready(pod: Obj) -> bool:
    return any(
        get_str(c, "type") == "Ready" and get_str(c, "status") == "True"
        for c in get_list(pod, "status", "conditions")
    )


def local_traffic_nodes(pods: Iterable[Obj], nodes: Mapping[str, Obj]) -> list[Obj]:
    """Nodes running the Service's pods: with a ready non-terminating pod, else a ready pod, else any.

    Unlike external-dns, which judges a node by whichever of its pods it meets first, a node counts as
    ready when any of its pods is, so the answer does not depend on the order of the pod cache.
    """
    running: dict[str, Obj] = {}
    ready: dict[str, Obj] = {}
    serving: dict[str, Obj] = {}
    for pod in pods:
        if get_str(pod, "status", "phase") != "Running":
            continue
        node_name = get_str(pod, "spec", "nodeName")
        node = nodes.get(node_name)
        if node is None:
            continue
        running[node_name] = node
        if pod_ready(pod):
            ready[node_name] = node
            if get(pod, "metadata", "deletionTimestamp") is None:
                serving[node_name] = node
    return list((serving or ready or running).values())


def unschedulable(node: Obj) -> bool:
    return get(node, "spec", "unschedulable") is True


def node_port_targets(
    node_list: Iterable[Obj], access: str, expose_internal_ipv6: bool, exclude_unschedulable: bool
) -> list[str]:
    """external-dns's extractNodePortTargets over the nodes `node_list` (already chosen by traffic policy)."""
    external: list[str] = []
    internal: list[str] = []
    internal_v6: list[str] = []
    for node in node_list:
        if exclude_unschedulable and unschedulable(node):
            continue
        for address in get_list(node, "status", "addresses"):
            value = get_str(address, "address")
            if get_str(address, "type") == "ExternalIP":
                external.append(value)
            elif get_str(address, "type") == "InternalIP":
                internal.append(value)
                if suitable_type(value) == "AAAA":
                    internal_v6.append(value)
    if access == "public" or (access != "private" and external):
        return external + internal_v6 if expose_internal_ipv6 else external
    return internal


def node_port_srv(svc: Obj, hostname: str) -> list[tuple[str, str]]:
    """(record name, SRV target) per node port of the Service, for `hostname` (no trailing dot)."""
    out: list[tuple[str, str]] = []
    name = get_str(svc, "metadata", "name")
    for port in get_list(svc, "spec", "ports"):
        node_port = get(port, "nodePort")
        if not isinstance(node_port, int) or isinstance(node_port, bool) or node_port <= 0:
            continue
        protocol = get_str(port, "protocol").lower() or "tcp"
        out.append((f"_{name}._{protocol}.{hostname}", f"0 50 {node_port} {hostname}."))
    return out
