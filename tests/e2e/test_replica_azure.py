"""End to end: a real `shardsync run --provider=azure` process, the embedded API server and the Azure DNS
contract fake over HTTPS on loopback (tests/cloudfakes/azure.py), reached as a user reaches Azure: through
external-dns's azure.json (`--azure-config-file`; an AzureStackCloud names the fake's endpoints) with a
service principal, the fake's certificate trusted by `SSL_CERT_FILE`.

The replica writes a Service's A record and its TXT ownership record as external-dns writes them, every
batch headed by its fence bump, follows the Service's update and delete, leaves a foreign record alone, and
adopts a zone external-dns wrote without writing a record to it. What the fake cannot show is said in its
docstring.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from shardsync.local.apiserver import ApiServer
from shardsync.providers.base import FenceToken
from tests.cloudfakes.azure import AzureFake
from tests.cloudfakes.tls import LoopbackCert, loopback_cert
from tests.e2e.cloud_replica import load_balancer, replica_args, set_ingress
from tests.processes import Processes, free_port, wait_ready
from tests.providers.azure.helpers import CLIENTS, GROUP, config_file
from tests.waits import eventually_sync

pytestmark = pytest.mark.multiprocess

ZONE = "e2e.example.org"
ADOPT = "adopt.example.org"
OWNER = "default"
FENCE = "_shardsync-fence"


def owner_txt(name: str) -> str:
    return f'"heritage=external-dns,external-dns/owner={OWNER},external-dns/resource=service/default/{name}"'


@pytest.fixture
def cert(tmp_path: Path) -> LoopbackCert:
    return loopback_cert(tmp_path)


@pytest.fixture
def fake(cert: LoopbackCert) -> Iterator[AzureFake]:
    with AzureFake(clients=CLIENTS).serve(cert) as server:
        yield server


def test_a_replica_keeps_azure_dns_in_step_with_services(
    apiserver: ApiServer, fake: AzureFake, cert: LoopbackCert, procs: Processes, tmp_path: Path
) -> None:
    fake.add_zone(ZONE, GROUP)
    fake.add_zone(ADOPT, GROUP)
    fake.add_zone("elsewhere.net", GROUP)  # outside --domain-filter
    fake.add_record_set(ZONE, "A", "foreign", {"TTL": 300, "ARecords": [{"ipv4Address": "198.51.100.7"}]})
    fake.add_record_set(ADOPT, "A", "kept", {"TTL": 300, "ARecords": [{"ipv4Address": "192.0.2.50"}]})
    fake.add_record_set(ADOPT, "TXT", "a-kept", {"TTL": 300, "TXTRecords": [{"value": [owner_txt("kept")]}]})
    adopted_before = fake.record_sets(ADOPT)

    core = k8s.CoreV1Api(apiserver.api_client())
    load_balancer(core, "web", f"web.{ZONE}", {"ip": "192.0.2.10"})
    load_balancer(core, "kept", f"kept.{ADOPT}", {"ip": "192.0.2.50"})
    port = free_port()
    args = replica_args(
        str(apiserver.kubeconfig),
        port,
        OWNER,
        "--provider=azure",
        f"--azure-config-file={config_file(tmp_path, fake)}",
        "--provider-rate-limit=5",
        "--provider-cache-time=1h",
    )
    replica = procs.start("replica", args, env={"SSL_CERT_FILE": str(cert.cert)})
    wait_ready(f"http://127.0.0.1:{port}", replica)

    def sets(zone: str) -> dict[tuple[str, str], dict[str, Any]]:
        return fake.record_sets(zone)

    eventually_sync(lambda: ("TXT", "a-web") in sets(ZONE), within=30)  # written after its record
    written = sets(ZONE)
    assert written[("A", "web")]["properties"]["ARecords"] == [{"ipv4Address": "192.0.2.10"}]
    txt = written[("TXT", "a-web")]["properties"]
    assert (txt["TXTRecords"], txt["TTL"]) == ([{"value": [owner_txt("web")]}], 300)
    fence = written[("TXT", FENCE)]["properties"]["TXTRecords"][0]["value"][0]
    assert FenceToken.from_text(fence).identity == "shardsync-0"
    assert ("A", "foreign") in written  # a record without our TXT record is left alone

    set_ingress(core, "web", {"ip": "192.0.2.11"})
    eventually_sync(
        lambda: sets(ZONE)[("A", "web")]["properties"]["ARecords"] == [{"ipv4Address": "192.0.2.11"}],
        within=15,
    )
    core.delete_namespaced_service("web", "default")
    eventually_sync(lambda: ("TXT", "a-web") not in sets(ZONE), within=15)  # deleted after its record
    assert ("A", "web") not in sets(ZONE)
    assert ("A", "foreign") in sets(ZONE)

    # each change's record writes came right after a bump of the fence (one batch each: a record and its
    # TXT record), and every write was accepted
    kinds = "".join("f" if e.name == FENCE else "r" for e in fake.audit if e.zone == ZONE)
    assert kinds == "f" + "frr" + "fr" + "frr", kinds  # acquisition; create; update; delete
    assert all(e.ok for e in fake.audit if e.zone == ZONE)

    eventually_sync(lambda: any(e.zone == ADOPT for e in fake.audit), within=30)  # its fence
    after = {k: v for k, v in sets(ADOPT).items() if k[1] != FENCE}
    assert after == adopted_before
    assert {e.name for e in fake.audit if e.zone == ADOPT} == {FENCE}
    assert "elsewhere.net" not in {e.zone for e in fake.audit}
