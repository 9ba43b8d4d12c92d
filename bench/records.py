"""The records the API objects ask for, and a zone's records in the same form, so the multi-process tests and
the chaos scenario compare them one way.

A record is `(name, type, sorted targets)`; beside each A record the objects ask for stands the typed TXT
ownership record external-dns writes (`a-<name>`: heritage, our owner id, the object as resource), reduced
to its labels. A TXT record that is no ownership record is kept as `foreign:<targets>`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from bench.cluster import OWNER_ID
from shardsync.kube.client import BlockingKube
from shardsync.local import seed
from shardsync.records.endpoint import Endpoint
from shardsync.records.registry import parse_labels
from shardsync.sources.crd import DNS_ENDPOINTS
from shardsync.sources.service import SERVICES

Record = tuple[str, str, tuple[str, ...]]  # (name, type, sorted targets) for A; (name, "TXT", labels) for TXT


def expected_records(services: Iterable[dict[str, Any]], endpoints: Iterable[dict[str, Any]]) -> set[Record]:
    """What the objects ask for: the A records of Services (hostname annotation, external IPs) and of
    DNSEndpoints, each with its TXT ownership record."""
    out: set[Record] = set()

    def add(name: str, targets: Iterable[str], resource: str) -> None:
        out.add((name, "A", tuple(sorted(targets))))
        labels = f"external-dns/owner={OWNER_ID},external-dns/resource={resource}"
        out.add((f"a-{name}", "TXT", (labels,)))

    for svc in services:
        meta = svc["metadata"]
        hostname = (meta.get("annotations") or {}).get(seed.HOSTNAME_ANNOTATION)
        if hostname:
            add(hostname, svc["spec"]["externalIPs"], f"service/{seed.NAMESPACE}/{meta['name']}")
    for obj in endpoints:
        for ep in obj["spec"]["endpoints"]:
            add(ep["dnsName"], ep["targets"], f"crd/{seed.NAMESPACE}/{obj['metadata']['name']}")
    return out


def actual_records(records: Iterable[Endpoint]) -> set[Record]:
    """A zone's records in the same form (TXT ownership contents reduced to their labels)."""
    out: set[Record] = set()
    for ep in records:
        if ep.record_type == "TXT":
            labels = parse_labels(ep.targets[0]) if ep.targets else None
            text = ",".join(f"external-dns/{k}={v}" for k, v in sorted((labels or {}).items()))
            out.add((ep.dns_name, "TXT", (text if labels is not None else f"foreign:{ep.targets}",)))
        else:
            out.add((ep.dns_name, ep.record_type, tuple(sorted(ep.targets))))
    return out


def zone_of(record: Record, zones: Collection[str]) -> str:
    return next(z for z in zones if record[0].endswith("." + z))


def desired_by_zone(kube: BlockingKube, zones: Collection[str]) -> dict[str, set[Record]]:
    """zone -> the records the Services and DNSEndpoints in the API ask for now."""
    services = kube.list(SERVICES, namespace=seed.NAMESPACE)
    endpoints = kube.list(DNS_ENDPOINTS, namespace=seed.NAMESPACE)
    out: dict[str, set[Record]] = {z: set() for z in zones}
    for record in expected_records(services["items"], endpoints["items"]):
        out[zone_of(record, zones)].add(record)
    return out
