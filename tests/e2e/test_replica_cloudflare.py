"""End to end: a real `shardsync run --provider=cloudflare` process, the embedded API server and the
Cloudflare contract fake on loopback (tests/cloudfakes/cloudflare.py), reached through the SDK's
`CLOUDFLARE_BASE_URL` and authenticated with `CF_API_TOKEN` as a user would set them.

The replica writes a Service's A record and its TXT ownership record as external-dns writes them, every
batch under its zone fence, follows the Service's update and delete, leaves a foreign record alone, and
adopts a zone external-dns wrote without writing a record to it. What the fake cannot show is said in its
docstring.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client as k8s

from shardsync.local.apiserver import ApiServer
from shardsync.providers.base import FenceToken, fence_record_name
from tests.cloudfakes.cloudflare import CloudflareFake
from tests.e2e.cloud_replica import load_balancer, replica_args
from tests.processes import Processes, free_port, wait_ready
from tests.waits import eventually_sync

pytestmark = pytest.mark.multiprocess

ZONE = "e2e.example.org"
ADOPT = "adopt.example.org"
OWNER = "default"


def owner_txt(name: str) -> str:
    return f'"heritage=external-dns,external-dns/owner={OWNER},external-dns/resource=service/default/{name}"'


@pytest.fixture
def fake() -> Iterator[CloudflareFake]:
    with CloudflareFake().serve() as server:
        yield server


def test_a_replica_keeps_cloudflare_in_step_with_services(
    apiserver: ApiServer, fake: CloudflareFake, procs: Processes
) -> None:
    zone_id = fake.add_zone(ZONE)
    adopt_id = fake.add_zone(ADOPT)
    fake.add_zone("elsewhere.net")  # outside --domain-filter
    fake.add_record(zone_id, {"name": f"foreign.{ZONE}", "type": "A", "content": "198.51.100.7", "ttl": 300})
    fake.add_record(adopt_id, {"name": f"kept.{ADOPT}", "type": "A", "content": "192.0.2.50", "ttl": 1})
    fake.add_record(
        adopt_id, {"name": f"a-kept.{ADOPT}", "type": "TXT", "content": owner_txt("kept"), "ttl": 1}
    )
    adopted_before = fake.listed(adopt_id)

    core = k8s.CoreV1Api(apiserver.api_client())
    load_balancer(core, "web", f"web.{ZONE}", {"ip": "192.0.2.10"})
    load_balancer(core, "kept", f"kept.{ADOPT}", {"ip": "192.0.2.50"})
    port = free_port()
    args = replica_args(
        str(apiserver.kubeconfig),
        port,
        OWNER,
        "--provider=cloudflare",
        "--batch-change-interval=0s",
        "--cloudflare-dns-records-per-page=5000",
        "--provider-rate-limit=3.8",
        "--provider-cache-time=1h",
    )
    env = {"CF_API_TOKEN": "test-token", "CLOUDFLARE_BASE_URL": fake.url}
    replica = procs.start("replica", args, env=env)
    wait_ready(f"http://127.0.0.1:{port}", replica)

    def records(zone_id: str) -> dict[tuple[str, str], dict[str, object]]:
        return {(r["name"], r["type"]): r for r in fake.listed(zone_id)}

    eventually_sync(lambda: (f"web.{ZONE}", "A") in records(zone_id), within=30)
    written = records(zone_id)
    assert written[(f"web.{ZONE}", "A")]["content"] == "192.0.2.10"
    txt = written[(f"a-web.{ZONE}", "TXT")]
    assert (txt["content"], txt["ttl"], txt["proxied"]) == (owner_txt("web"), 1, False)
    fence = written[(fence_record_name(ZONE), "TXT")]
    assert FenceToken.from_text(str(fence["content"])).identity == "shardsync-0"
    assert all(e.posts[0]["name"] == fence_record_name(ZONE) for e in fake.audit if e.zone == ZONE)

    assert (f"foreign.{ZONE}", "A") in written  # a record without our TXT record is left alone

    core.patch_namespaced_service_status(
        "web", "default", {"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.11"}]}}}
    )
    eventually_sync(lambda: records(zone_id)[(f"web.{ZONE}", "A")]["content"] == "192.0.2.11", within=15)
    core.delete_namespaced_service("web", "default")
    eventually_sync(lambda: (f"web.{ZONE}", "A") not in records(zone_id), within=15)
    assert (f"a-web.{ZONE}", "TXT") not in records(zone_id)
    assert (f"foreign.{ZONE}", "A") in records(zone_id)

    eventually_sync(lambda: any(e.zone == ADOPT for e in fake.audit), within=30)  # its fence
    after = [r for r in fake.listed(adopt_id) if r["name"] != fence_record_name(ADOPT)]
    assert after == adopted_before
    assert [{b["name"] for b in e.posts} for e in fake.audit if e.zone == ADOPT] == [
        {fence_record_name(ADOPT)}
    ]
    assert "elsewhere.net" not in {e.zone for e in fake.audit}
