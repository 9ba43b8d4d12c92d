"""End to end: a real `shardsync run --provider=google` process, the embedded API server and the Cloud DNS
contract fake on loopback (tests/cloudfakes/google.py), reached through `--google-api-endpoint` with
credentials from the standard chain (a service account key file named by GOOGLE_APPLICATION_CREDENTIALS,
whose token endpoint is the fake; the fake refuses any request without that token; the project comes from
the key file).

The replica discovers its managed zones (the domain filter leaves one out), writes a Service's A record
with its TXT ownership record byte for byte as external-dns writes them, follows an update and a delete,
writes every change under its zone fence, and adopts a zone external-dns wrote without writing to it. What
the fake cannot show is listed in its docstring; the fence under two writers is proven in
tests/providers/test_google_fence.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s

from shardsync.local.apiserver import ApiServer
from shardsync.providers.base import FenceToken
from tests.cloudfakes.google import GoogleCloudDnsFake
from tests.e2e.cloud_replica import load_balancer, replica_args, set_ingress
from tests.processes import Processes, free_port, wait_ready
from tests.waits import eventually_sync

pytestmark = pytest.mark.multiprocess

ZONE = "e2e.example.org"
ADOPT = "adopt.example.org"
OWNER = "default"


def owner_txt(resource: str) -> str:
    return f'"heritage=external-dns,external-dns/owner={OWNER},external-dns/resource={resource}"'


@pytest.fixture
def fake() -> Iterator[GoogleCloudDnsFake]:
    server = GoogleCloudDnsFake(project="e2e-project", token="e2e-token").start()
    try:
        yield server
    finally:
        server.stop()


def test_a_replica_keeps_cloud_dns_in_step_with_services(
    apiserver: ApiServer, fake: GoogleCloudDnsFake, procs: Processes, tmp_path: Path
) -> None:
    zone = fake.add_zone(ZONE)
    adopt = fake.add_zone(ADOPT)
    fake.add_zone("elsewhere.net")  # outside --domain-filter: never a zone of the replica
    fake.put(adopt, f"kept.{ADOPT}.", "A", ["192.0.2.50"])
    fake.put(adopt, f"a-kept.{ADOPT}.", "TXT", [owner_txt("service/default/kept")])
    adopted_before = fake.rrsets(adopt)

    core = k8s.CoreV1Api(apiserver.api_client())
    load_balancer(core, "web", f"web.{ZONE}", {"ip": "192.0.2.10"})
    load_balancer(core, "kept", f"kept.{ADOPT}", {"ip": "192.0.2.50"})
    port = free_port()
    args = replica_args(
        str(apiserver.kubeconfig),
        port,
        OWNER,
        "--provider=google",
        f"--google-api-endpoint={fake.url}",
        "--google-batch-change-interval=0s",
    )
    replica = procs.start("replica", args, env=fake.environment(tmp_path))
    wait_ready(f"http://127.0.0.1:{port}", replica)

    def values(name: str, rtype: str, of: str = zone) -> list[str] | None:
        found = [r for r in fake.rrsets(of) if (r["name"], r["type"]) == (name, rtype)]
        return found[0]["rrdatas"] if found else None

    eventually_sync(lambda: values(f"web.{ZONE}.", "A") == ["192.0.2.10"], within=30)
    assert values(f"a-web.{ZONE}.", "TXT") == [owner_txt("service/default/web")]
    written = {(r["name"], r["type"]): r["ttl"] for r in fake.rrsets(zone)}
    assert written[(f"web.{ZONE}.", "A")] == written[(f"a-web.{ZONE}.", "TXT")] == 300
    fence = values(f"_shardsync-fence.{ZONE}.", "TXT")
    assert fence is not None and FenceToken.from_text(fence[0]).identity == "shardsync-0"

    set_ingress(core, "web", {"ip": "192.0.2.11"})
    eventually_sync(lambda: values(f"web.{ZONE}.", "A") == ["192.0.2.11"], within=15)
    core.delete_namespaced_service("web", "default")
    eventually_sync(lambda: values(f"web.{ZONE}.", "A") is None, within=15)
    assert values(f"a-web.{ZONE}.", "TXT") is None
    # every change the replica made to the zone carried the fence's compare-and-swap
    changes = fake.audit(zone)
    assert [e.outcome for e in changes] == ["ok"] * len(changes) and len(changes) >= 4
    assert all(e.deletions[0][0] == f"_shardsync-fence.{ZONE}." for e in changes[1:])
    assert {e.writer for e in changes} == {"shardsync-0"}

    # the zone external-dns wrote: adopted, not one record written (its fence is the only addition)
    eventually_sync(lambda: values(f"_shardsync-fence.{ADOPT}.", "TXT", adopt) is not None, within=15)
    after = [r for r in fake.rrsets(adopt) if not r["name"].startswith("_shardsync-fence.")]
    assert after == adopted_before
    assert [len(e.additions) + len(e.deletions) for e in fake.audit(adopt)] == [1]
    assert "elsewhere.net" not in replica.log()
    assert replica.alive()
