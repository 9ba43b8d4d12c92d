"""Real replicas started without the DNSEndpoint CRD (`--source=service --source=crd`): ready at once, the
Services' records written, the missing CRD said once per replica (a log line, the metric, `/readyz` detail);
the CRD installed later is noticed by its watch and the DNSEndpoints' records follow within seconds."""

from __future__ import annotations

import time

import httpx
import pytest

from bench.cluster import Cluster, zone_names
from bench.records import actual_records, expected_records
from shardsync.kube.objects import CUSTOM_RESOURCE_DEFINITIONS
from shardsync.local import seed
from shardsync.manifests import CRD_NAME
from shardsync.sources.crd import DNS_ENDPOINTS
from shardsync.sources.service import SERVICES
from tests.multiprocess.harness import wait_for

pytestmark = pytest.mark.multiprocess

ZONES = 6
REPLICAS = 3
READY_WITHIN = 10.0
RECORDS_WITHIN = 5.0
MAX_LINES = 5  # about the missing CRD, per replica


def records_problems(cluster: Cluster, zones: list[str], with_endpoints: bool) -> list[str]:
    """Zones whose records are not what the Services (and, `with_endpoints`, the DNSEndpoints) ask for."""
    services = cluster.kube.list(SERVICES, namespace=seed.NAMESPACE)["items"]
    endpoints = cluster.kube.list(DNS_ENDPOINTS, namespace=seed.NAMESPACE)["items"] if with_endpoints else []
    wanted = expected_records(services, endpoints)
    problems = []
    for zone in zones:
        have = actual_records(cluster.admin.records(zone))
        want = {r for r in wanted if r[0].endswith("." + zone)}
        if have != want:
            problems.append(
                f"{zone}: missing {sorted(want - have)[:2]}, unexpected {sorted(have - want)[:2]}"
            )
    return problems


def test_replicas_are_ready_without_the_crd_and_follow_it_once_installed(cluster: Cluster) -> None:
    cluster.kube.delete(CUSTOM_RESOURCE_DEFINITIONS, CRD_NAME)  # `shardsync local` installs it
    zones = zone_names(ZONES)
    seed.seed_objects(cluster.kube, zones, per_zone=0)  # Services only
    cluster.open_zones(ZONES)

    started = time.monotonic()
    cluster.scale(REPLICAS)
    cluster.wait_ready(within=READY_WITHIN)
    ready = time.monotonic() - started
    http = httpx.Client(timeout=5.0)
    for replica in cluster.live():
        answer = http.get(replica.url + "/readyz")
        assert answer.status_code == 200, answer.text
        assert f"{CRD_NAME} not installed: the crd source waits for it" in answer.text, answer.text
        assert cluster.metric(replica, "shardsync_source_crd_missing", {"crd": CRD_NAME}) == 1
    services = wait_for(lambda: not records_problems(cluster, zones, False), 15, "the Services' records")

    seed.install_crd(cluster.kube)
    installed = time.monotonic()
    for index, zone in enumerate(zones):
        cluster.kube.create(DNS_ENDPOINTS, seed.dns_endpoint(index, zone, 2), namespace=seed.NAMESPACE)
    try:
        wait_for(
            lambda: not records_problems(cluster, zones, True), RECORDS_WITHIN, "the DNSEndpoints' records"
        )
    except AssertionError:
        raise AssertionError(f"{records_problems(cluster, zones, True)}") from None
    written = time.monotonic() - installed

    lines = {
        r.identity: [ln for ln in r.child.output().splitlines() if CRD_NAME in ln] for r in cluster.live()
    }
    for replica in cluster.live():
        assert http.get(replica.url + "/readyz").text == "ok\n"
        assert cluster.metric(replica, "shardsync_source_crd_missing", {"crd": CRD_NAME}) == 0
    http.close()
    print(
        f"\n{REPLICAS} replicas ready {ready:.2f}s after start without the CRD, Services' records "
        f"{services:.2f}s later; the DNSEndpoints' records {written:.2f}s after the CRD was installed; "
        f"lines naming the CRD per replica: {sorted(len(v) for v in lines.values())}"
    )
    for identity, said in lines.items():
        assert 1 <= len(said) <= MAX_LINES, (identity, said)
