"""What keeps changing during a chaos run, and the records that must never change.

`SourceChurn` changes the sources from a thread, one change every `period` seconds, drawn from its own
seeded generator: create a Service (`churn-<n>`, hostname `c<n>.<zone>`), point one at a new address,
delete one, or move a seeded Service's or DNSEndpoint's addresses. A change the API server refuses or does
not answer in time (paused, slow) is counted and skipped: the records wanted are read back from the API at
the end anyway, so a write that happened after all is no error.

`seed_foreign` puts records of another owner id into every zone before the chaos (an A record and its
external-dns TXT ownership record naming owner `other`), written unfenced as a person or another
controller would; `foreign_touched` counts those that are not exactly as seeded at the end.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

import httpx

from shardsync.kube.client import BlockingKube, KubeError
from shardsync.local import seed
from shardsync.records.endpoint import Changes, Endpoint
from shardsync.sources.crd import DNS_ENDPOINTS
from shardsync.sources.service import SERVICES

FOREIGN_OWNER = "other"
FOREIGN_WRITER = "chaos-foreign-seed"
REQUEST_TIMEOUT = 10.0
FIRST_ADDRESS = 100_000  # churned addresses start here (seed.address wraps within 198.18.0.0/15)


def churn_service(n: int, zone: str, address: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": f"churn-{n:05d}",
            "labels": {"app.kubernetes.io/part-of": "shardsync-chaos"},
            "annotations": {seed.HOSTNAME_ANNOTATION: f"c{n}.{zone}"},
        },
        "spec": {"type": "LoadBalancer", "externalIPs": [address], "ports": [{"port": 80}]},
    }


class SourceChurn:
    """Creates, changes and deletes source objects from a thread (see the module docstring)."""

    def __init__(
        self,
        kube: BlockingKube,
        zones: Sequence[str],
        per_zone: int,
        period: float,
        rng: random.Random,
        max_created: int = 200,
    ) -> None:
        self.kube = kube
        self.zones = list(zones)
        self.per_zone = per_zone
        self.period = period
        self.rng = rng
        self.max_created = max_created
        self.counts = {"created": 0, "changed": 0, "deleted": 0, "refused": 0}
        self._mine: list[str] = []  # churn Services believed to exist
        self._next = 0
        self._address = FIRST_ADDRESS
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-churn", daemon=True)

    def _new_address(self) -> str:
        self._address += 1
        return seed.address(self._address)

    def change(self) -> str:
        """One change; returns which kind (a key of `counts`)."""
        roll = self.rng.random()
        ns = seed.NAMESPACE
        if roll < 0.3 and len(self._mine) < self.max_created:
            self._next += 1
            zone = self.rng.choice(self.zones)
            body = churn_service(self._next, zone, self._new_address())
            self._mine.append(body["metadata"]["name"])
            self.kube.create(SERVICES, body, namespace=ns, request_timeout=REQUEST_TIMEOUT)
            return "created"
        if roll < 0.5 and self._mine:
            name = self._mine.pop(self.rng.randrange(len(self._mine)))
            try:
                self.kube.delete(SERVICES, name, namespace=ns, request_timeout=REQUEST_TIMEOUT)
            except KubeError as exc:
                if not exc.not_found:  # its create had not happened after all: nothing to delete
                    raise
            return "deleted"
        if roll < 0.65 and self._mine:
            name = self.rng.choice(self._mine)
            body = {"spec": {"externalIPs": [self._new_address()]}}
            self.kube.patch(SERVICES, name, body, namespace=ns, request_timeout=REQUEST_TIMEOUT)
            return "changed"
        index = self.rng.randrange(len(self.zones))
        zone = self.zones[index]
        if roll < 0.85 or self.per_zone == 0:
            name = seed.service(index, zone)["metadata"]["name"]
            body = {"spec": {"externalIPs": [self._new_address()]}}
            self.kube.patch(SERVICES, name, body, namespace=ns, request_timeout=REQUEST_TIMEOUT)
        else:
            obj = seed.dns_endpoint(index, zone, self.per_zone)
            for ep in obj["spec"]["endpoints"]:
                ep["targets"] = [self._new_address()]
            name = obj["metadata"]["name"]
            self.kube.patch(
                DNS_ENDPOINTS, name, {"spec": obj["spec"]}, namespace=ns, request_timeout=REQUEST_TIMEOUT
            )
        return "changed"

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.counts[self.change()] += 1
            except Exception:  # paused, cut or slow: the API said no or did not answer in time
                self.counts["refused"] += 1
            self._stop.wait(self.period)

    def __enter__(self) -> SourceChurn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


# ---- records of another owner -----------------------------------------------------------------------


def foreign_records(zone: str, count: int) -> list[Endpoint]:
    """`count` A records `other-<k>.<zone>` owned by FOREIGN_OWNER, each with its TXT ownership record."""
    out = []
    for k in range(count):
        name = f"other-{k}.{zone}"
        out.append(Endpoint.new(name, "A", [f"192.0.2.{k % 250 + 1}"]))
        labels = f"heritage=external-dns,external-dns/owner={FOREIGN_OWNER},external-dns/resource=service/x/y"
        out.append(Endpoint.new(f"a-{name}", "TXT", [f'"{labels}"']))
    return out


def seed_foreign(provider_url: str, zones: Sequence[str], count: int) -> dict[str, list[Endpoint]]:
    """Write `foreign_records` into every zone, unfenced, as FOREIGN_WRITER; zone -> what was written."""
    seeded: dict[str, list[Endpoint]] = {}
    with httpx.Client(timeout=REQUEST_TIMEOUT) as http:
        for zone in zones:
            records = foreign_records(zone, count)
            body = {"changes": Changes(create=records).to_json(), "fence": None, "writer": FOREIGN_WRITER}
            http.post(f"{provider_url}/v1/zones/{quote(zone, safe='')}/changes", json=body).raise_for_status()
            seeded[zone] = records
    return seeded


def _key(ep: Endpoint) -> tuple[str, str, tuple[str, ...]]:
    return ep.dns_name, ep.record_type, tuple(sorted(ep.targets))


def foreign_touched(now: Mapping[str, Sequence[Endpoint]], seeded: Mapping[str, Sequence[Endpoint]]) -> int:
    """Seeded foreign records missing or changed in `now` (zone -> its records), plus records that appeared
    under a foreign name."""
    touched = 0
    for zone, records in seeded.items():
        names = {ep.dns_name for ep in records}
        want = {_key(ep) for ep in records}
        have = {_key(ep) for ep in now.get(zone, ()) if ep.dns_name in names}
        touched += len(want - have) + len(have - want)
    return touched
