"""End to end: a real `shardsync run --provider=aws` process, the embedded API server and moto's Route53 on
loopback (tests/motoserver.py), reached through boto3's `AWS_ENDPOINT_URL` as a user would point it.

The replica discovers its hosted zones (the domain filter leaves one out), writes a Service's A record with
its TXT ownership record, turns a load balancer hostname into A and AAAA alias records to the load
balancer's canonical hosted zone, follows an update and a delete, writes every batch under its zone fence,
and adopts a zone external-dns wrote without writing to it; also behind the provider budget and the record
cache (`--provider-rate-limit`, `--provider-cache-time`). What moto cannot show: that a stale owner's
batch is refused (moto does not check a DELETE against the current values); the fake provider's `route53`
profile proves that (tests/providers/test_fake_route53.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from shardsync.local.apiserver import ApiServer
from shardsync.providers.base import FenceToken
from tests.e2e.cloud_replica import load_balancer, replica_args, set_ingress
from tests.motoserver import MotoRoute53, moto_route53
from tests.processes import Processes, free_port, wait_ready
from tests.waits import eventually_sync

pytestmark = pytest.mark.multiprocess

ZONE = "e2e.example.org"
ADOPT = "adopt.example.org"
ELB = "k8s-web-1234567890.eu-west-1.elb.amazonaws.com"
OWNER = "default"
ADOPTED_TXT = f'"heritage=external-dns,external-dns/owner={OWNER},external-dns/resource=service/default/kept"'


@pytest.fixture
def moto() -> Iterator[MotoRoute53]:
    with moto_route53() as server:
        yield server


def by_key(moto: MotoRoute53, zone_id: str) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["Name"].rstrip("."), r["Type"]): r for r in moto.rrsets(zone_id)}


@pytest.mark.parametrize(
    "budget", [(), ("--provider-rate-limit=10", "--provider-cache-time=1h")], ids=["plain", "budget+cache"]
)
def test_a_replica_keeps_route53_in_step_with_services(
    apiserver: ApiServer, moto: MotoRoute53, procs: Processes, budget: tuple[str, ...]
) -> None:
    zone_id = moto.create_zone(ZONE)
    adopt_id = moto.create_zone(ADOPT)
    moto.create_zone("elsewhere.net")  # outside --domain-filter: never listed as a zone
    kept = {"Name": f"kept.{ADOPT}", "Type": "A", "TTL": 300, "ResourceRecords": [{"Value": "192.0.2.50"}]}
    kept_txt = {
        "Name": f"a-kept.{ADOPT}",
        "Type": "TXT",
        "TTL": 300,
        "ResourceRecords": [{"Value": ADOPTED_TXT}],
    }
    moto.change(
        adopt_id,
        {"Action": "CREATE", "ResourceRecordSet": kept},
        {"Action": "CREATE", "ResourceRecordSet": kept_txt},
    )
    adopted_before = moto.rrsets(adopt_id)

    core = k8s.CoreV1Api(apiserver.api_client())
    load_balancer(core, "web", f"web.{ZONE}", {"ip": "192.0.2.10"})
    load_balancer(core, "lb", f"lb.{ZONE}", {"hostname": ELB})
    load_balancer(core, "kept", f"kept.{ADOPT}", {"ip": "192.0.2.50"})
    port = free_port()
    args = replica_args(
        str(apiserver.kubeconfig), port, OWNER, "--provider=aws", "--aws-batch-change-interval=0s", *budget
    )
    replica = procs.start("replica", args, env=moto.environment())
    wait_ready(f"http://127.0.0.1:{port}", replica)

    def values(key: tuple[str, str]) -> list[str] | None:
        rrset = by_key(moto, zone_id).get(key)
        return None if rrset is None else [v["Value"] for v in rrset.get("ResourceRecords", [])]

    eventually_sync(lambda: values((f"web.{ZONE}", "A")) == ["192.0.2.10"], within=30)
    owner = f'"heritage=external-dns,external-dns/owner={OWNER},external-dns/resource=service/default/web"'
    assert values((f"a-web.{ZONE}", "TXT")) == [owner]
    eventually_sync(lambda: (f"lb.{ZONE}", "AAAA") in by_key(moto, zone_id), within=15)
    rrsets = by_key(moto, zone_id)
    for rtype in ("A", "AAAA"):
        assert rrsets[(f"lb.{ZONE}", rtype)]["AliasTarget"] == {
            "HostedZoneId": "Z32O12XQLNTSW2",
            "DNSName": ELB,
            "EvaluateTargetHealth": True,
        }
        assert (f"{rtype.lower()}-lb.{ZONE}", "TXT") in rrsets
    fence = values((f"_shardsync-fence.{ZONE}", "TXT"))
    assert fence is not None and FenceToken.from_text(fence[0]).identity == "shardsync-0"

    set_ingress(core, "web", {"ip": "192.0.2.11"})
    eventually_sync(lambda: values((f"web.{ZONE}", "A")) == ["192.0.2.11"], within=15)
    core.delete_namespaced_service("web", "default")
    eventually_sync(lambda: values((f"web.{ZONE}", "A")) is None, within=15)
    assert values((f"a-web.{ZONE}", "TXT")) is None

    # the zone external-dns wrote: adopted, not one record written (its fence is the only addition)
    eventually_sync(lambda: (f"_shardsync-fence.{ADOPT}", "TXT") in by_key(moto, adopt_id), within=15)
    after = [r for r in moto.rrsets(adopt_id) if not r["Name"].startswith("_shardsync-fence.")]
    assert after == adopted_before
    applied = [line for line in replica.log().splitlines() if 'event="zone changes applied"' in line]
    assert applied and not any(f"zone={ADOPT}" in line for line in applied)
    assert "elsewhere.net" not in replica.log()
    assert replica.alive()
