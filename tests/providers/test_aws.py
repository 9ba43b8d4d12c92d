"""The aws provider on the wire, against moto's Route53 server on loopback (tests/motoserver.py).

What these prove: boto3 calls shaped as Route53 takes them (zones, tags, paged listings, change batches,
alias and routing-policy RRsets), zone discovery and its filters, the split of a plan into batches at the
limits, and the adoption of a zone external-dns wrote with no record write. What moto cannot prove: it does
not enforce Route53's semantics (a stale DELETE succeeds there, a refused batch is partly applied), so the
fence compare-and-swap is proven against the fake provider's `route53` profile
(tests/providers/test_fake_route53.py) and the batch layout in tests/providers/test_aws_parts.py.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

import anyio
import pytest

from shardsync.providers.aws.api import Route53Api
from shardsync.providers.aws.batches import Limits, fence_name
from shardsync.providers.aws.errors import Start
from shardsync.providers.aws.provider import AwsProvider
from shardsync.providers.aws.zones import HostedZone, ZoneFilter
from shardsync.providers.base import FencedError, FenceToken
from shardsync.reconcile.worker import Worker, WorkerOptions
from shardsync.records.desired import DesiredIndex
from shardsync.records.endpoint import RESOURCE_LABEL, Changes, Endpoint
from shardsync.records.registry import TxtRegistry
from tests.motoserver import MotoRoute53, moto_route53
from tests.waits import eventually

ELB = "k8s-web-1234567890.us-east-1.elb.amazonaws.com"
ELB_ZONE = "Z35SXDOTRQ7X7K"  # us-east-1's ELB/ALB canonical hosted zone


class CountingApi:
    """The real boto3 API, counting calls by method (the figures of "calls per change")."""

    def __init__(self, api: Route53Api) -> None:
        self.api = api
        self.calls: Counter[str] = Counter()
        self.batches: list[list[dict[str, Any]]] = []

    def hosted_zones(self) -> list[HostedZone]:
        self.calls["hosted_zones"] += 1
        return self.api.hosted_zones()

    def tags(self, zone_ids: Iterable[str]) -> dict[str, dict[str, str]]:
        self.calls["tags"] += 1
        return self.api.tags(zone_ids)

    def rrsets(
        self, zone_id: str, start: Start | None, max_items: int
    ) -> tuple[list[dict[str, Any]], Start | None]:
        self.calls["rrsets"] += 1
        return self.api.rrsets(zone_id, start, max_items)

    def change(self, zone_id: str, changes: list[dict[str, Any]], comment: str = "") -> None:
        self.calls["change"] += 1
        self.batches.append(changes)
        self.api.change(zone_id, changes, comment)


@pytest.fixture(scope="module")
def moto_server() -> Iterator[MotoRoute53]:
    with moto_route53() as server:
        yield server


@pytest.fixture
def moto(moto_server: MotoRoute53, monkeypatch: pytest.MonkeyPatch) -> MotoRoute53:
    moto_server.reset()
    for key, value in moto_server.environment().items():
        monkeypatch.setenv(key, value)
    return moto_server


def provider(**kw: Any) -> tuple[AwsProvider, CountingApi]:
    api = CountingApi(Route53Api(retries=0))
    kw.setdefault("batch_interval", 0.0)
    return AwsProvider(api, **kw), api


def run(fn: Any) -> Any:
    return anyio.run(fn)


def a(name: str, *targets: str, **kw: Any) -> Endpoint:
    return Endpoint.new(name, "A", targets or ["192.0.2.1"], **kw)


# ---- zone discovery ----


def test_zone_discovery_and_its_filters(moto: MotoRoute53) -> None:
    public = moto.create_zone("a.org", tags={"env": "prod", "team": "x"})
    private = moto.create_zone("a.org", private=True)
    moto.create_zone("b.org", private=True, tags={"env": "dev"})
    moto.create_zone("c.org", tags={"env": "dev"})

    def zones(**kw: Any) -> dict[str, str]:
        p, _ = provider(zone_filter=ZoneFilter(**kw))
        names = run(p.zones)
        return {n: p._zones[n].id for n in names}

    assert zones() == {"a.org": public, "b.org": zones()["b.org"], "c.org": zones()["c.org"]}  # public a.org
    assert zones(zone_type="private") == {"a.org": private, "b.org": zones()["b.org"]}
    assert set(zones(zone_type="public")) == {"a.org", "c.org"}
    assert zones(tags={"env": "prod"}) == {"a.org": public}
    assert set(zones(tags={"env": ""})) == {"a.org", "b.org", "c.org"}
    assert set(zones(tags={"team": "", "env": "prod"})) == {"a.org"}
    assert zones(ids=(f"/hostedzone/{private}",)) == {"a.org": private}


# ---- listing ----


def test_listing_pages_past_300_records_and_hides_the_fence(moto: MotoRoute53) -> None:
    zone_id = moto.create_zone("big.org")
    for start in (0, 350):
        moto.change(
            zone_id,
            *(
                {
                    "Action": "CREATE",
                    "ResourceRecordSet": {
                        "Name": f"h{i:04d}.big.org",
                        "Type": "A",
                        "TTL": 60,
                        "ResourceRecords": [{"Value": f"10.0.{i // 250}.{i % 250}"}],
                    },
                }
                for i in range(start, start + 350)
            ),
        )
    p, api = provider()

    async def main() -> list[Endpoint]:
        await p.zones()
        await p.acquire_fence("big.org", FenceToken(1, "r0"))
        return await p.records("big.org")

    records = run(main)
    assert len([r for r in records if r.record_type == "A"]) == 700
    assert fence_name("big.org") not in {r.dns_name for r in records}
    assert {r.record_type for r in records} == {"A", "NS"}  # SOA is never listed
    # 700 A + NS + SOA + fence = 703 RRsets: 3 pages of at most 300, plus the fence's read of one
    assert api.calls["rrsets"] == 3 + 1


# ---- writing: batches, aliases, routing policies ----


def test_a_plan_is_split_into_batches_at_the_limits_each_carrying_the_fence(moto: MotoRoute53) -> None:
    zone_id = moto.create_zone("many.org")
    p, api = provider(limits=Limits(changes=100, values=150, chars=32_000))
    token = FenceToken(3, "r0")
    creates = [a(f"h{i:03d}.many.org", "192.0.2.1", "192.0.2.2") for i in range(180)]  # 2 values each

    async def main() -> None:
        await p.zones()
        await p.acquire_fence("many.org", token)
        await p.apply("many.org", Changes(create=creates), token)

    run(main)
    data_batches = api.batches[1:]  # the first is the fence's acquisition
    # 150 values less the fence's 3 leave 147: 73 records of 2 values per batch
    assert [len(b) - 2 for b in data_batches] == [73, 73, 34]
    for batch in data_batches:
        assert [c["Action"] for c in batch[:2]] == ["DELETE", "UPSERT"]
        assert {c["ResourceRecordSet"]["Name"] for c in batch[:2]} == {fence_name("many.org")}
    listed = moto.rrsets(zone_id)
    assert len([r for r in listed if r["Type"] == "A"]) == 180
    fence = [r for r in listed if r["Name"].rstrip(".") == fence_name("many.org")]
    assert fence == [
        {
            "Name": fence_name("many.org") + ".",
            "Type": "TXT",
            "TTL": 60,
            "ResourceRecords": [{"Value": f'"{token.to_text()}"'}],
        }
    ]


def test_alias_and_routing_policy_records_round_trip(moto: MotoRoute53) -> None:
    zone_id = moto.create_zone("ex.org")
    p, _ = provider()
    desired = p.adjust_desired(
        [
            Endpoint.new("lb.ex.org", "CNAME", [ELB]),  # a load balancer: A and AAAA alias records
            Endpoint.new("cname.ex.org", "CNAME", ["other.example.net"]),
            a("w.ex.org", "192.0.2.1", set_identifier="blue", provider_specific=[("aws/weight", "90")]),
            a("w.ex.org", "192.0.2.2", set_identifier="green", provider_specific=[("aws/weight", "10")]),
            a(
                "f.ex.org",
                set_identifier="primary",
                provider_specific=[("aws/failover", "PRIMARY"), ("aws/health-check-id", "hc-1")],
            ),
            a("g.ex.org", set_identifier="eu", provider_specific=[("aws/geolocation-continent-code", "EU")]),
            a(
                "g.ex.org",
                "192.0.2.9",
                set_identifier="de",
                provider_specific=[("aws/geolocation-country-code", "DE")],
            ),
            a("r.ex.org", set_identifier="use1", provider_specific=[("aws/region", "us-east-1")]),
        ]
    )
    assert [(e.dns_name, e.record_type) for e in desired][:2] == [
        ("lb.ex.org", "A"),
        ("cname.ex.org", "CNAME"),
    ]

    async def main() -> list[Endpoint]:
        await p.zones()
        await p.apply("ex.org", Changes(create=desired))
        return await p.records("ex.org")

    listed = {e.key: e for e in run(main) if e.record_type != "NS"}
    for want in desired:
        have = listed[want.key]
        assert (have.targets, dict(have.provider_specific)) == (want.targets, dict(want.provider_specific))
    raw = {(r["Name"], r["Type"], r.get("SetIdentifier")): r for r in moto.rrsets(zone_id)}
    assert raw[("lb.ex.org.", "AAAA", None)]["AliasTarget"] == {
        "HostedZoneId": ELB_ZONE,
        "DNSName": ELB,
        "EvaluateTargetHealth": True,
    }
    assert raw[("w.ex.org.", "A", "blue")]["Weight"] == 90
    assert raw[("f.ex.org.", "A", "primary")]["HealthCheckId"] == "hc-1"
    assert raw[("g.ex.org.", "A", "de")]["GeoLocation"] == {"CountryCode": "DE"}


def test_the_fence_on_the_wire_and_its_provider_side_checks(moto: MotoRoute53) -> None:
    # moto does not check the DELETE inside a stale owner's batch against the current fence (the fake's
    # route53 profile does); here: the fence RRset, the acquisition's swap and the generation check.
    zone_id = moto.create_zone("f.org")
    p, api = provider()
    old, new = FenceToken(1, "r0"), FenceToken(2, "r1")

    async def main() -> None:
        await p.zones()
        await p.acquire_fence("f.org", old)
        await p.acquire_fence("f.org", old)  # held already: no write
        await p.acquire_fence("f.org", new)
        with pytest.raises(FencedError, match="generation 2"):
            await p.acquire_fence("f.org", old)

    run(main)
    assert [[c["Action"] for c in b] for b in api.batches] == [["CREATE"], ["DELETE", "UPSERT"]]
    values = [r["ResourceRecords"] for r in moto.rrsets(zone_id) if r["Type"] == "TXT"]
    assert values == [[{"Value": f'"{new.to_text()}"'}]]


# ---- adoption of what external-dns wrote ----


def external_dns_zone(moto: MotoRoute53) -> str:
    """A zone as external-dns (owner "default") leaves it: a plain A, an ELB alias pair, weighted records,
    each with its TXT ownership record (TTL 300: external-dns's default)."""
    zone_id = moto.create_zone("adopt.org")

    def txt(name: str, resource: str, **extra: Any) -> dict[str, Any]:
        value = f'"heritage=external-dns,external-dns/owner=default,external-dns/resource={resource}"'
        rrset = {"Name": name, "Type": "TXT", "TTL": 300, "ResourceRecords": [{"Value": value}], **extra}
        return {"Action": "CREATE", "ResourceRecordSet": rrset}

    def rr(name: str, rtype: str, **body: Any) -> dict[str, Any]:
        return {"Action": "CREATE", "ResourceRecordSet": {"Name": name, "Type": rtype, **body}}

    alias = {"HostedZoneId": ELB_ZONE, "DNSName": ELB, "EvaluateTargetHealth": True}
    moto.change(
        zone_id,
        rr("web.adopt.org", "A", TTL=300, ResourceRecords=[{"Value": "192.0.2.10"}]),
        txt("a-web.adopt.org", "service/default/web"),
        rr("lb.adopt.org", "A", AliasTarget=alias),
        rr("lb.adopt.org", "AAAA", AliasTarget=alias),
        txt("a-lb.adopt.org", "service/default/lb"),
        txt("aaaa-lb.adopt.org", "service/default/lb"),
        rr(
            "w.adopt.org",
            "A",
            TTL=300,
            SetIdentifier="blue",
            Weight=90,
            ResourceRecords=[{"Value": "192.0.2.1"}],
        ),
        txt("a-w.adopt.org", "service/default/blue", SetIdentifier="blue", Weight=90),
    )
    return zone_id


def desired_of_sources() -> DesiredIndex:
    desired = DesiredIndex(["adopt.org"])
    desired.set_object(
        "service/default/web",
        [a("web.adopt.org", "192.0.2.10", labels={RESOURCE_LABEL: "service/default/web"})],
    )
    desired.set_object(
        "service/default/lb",
        [Endpoint.new("lb.adopt.org", "CNAME", [ELB], labels={RESOURCE_LABEL: "service/default/lb"})],
    )
    desired.set_object(
        "service/default/blue",
        [
            a(
                "w.adopt.org",
                "192.0.2.1",
                set_identifier="blue",
                labels={RESOURCE_LABEL: "service/default/blue"},
                provider_specific=[("aws/weight", "90")],
            )
        ],
    )
    return desired


@pytest.mark.parametrize("fenced", [False, True])
def test_an_external_dns_zone_is_adopted_without_a_record_write(moto: MotoRoute53, fenced: bool) -> None:
    zone_id = external_dns_zone(moto)
    before = moto.rrsets(zone_id)
    p, api = provider()
    worker = Worker(
        p,
        TxtRegistry(owner_id="default"),
        desired_of_sources(),
        WorkerOptions(interval=60, event_delay=0, concurrency=1),
    )

    async def main() -> None:
        await p.zones()
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            worker.own("adopt.org", FenceToken(1, "r0") if fenced else None)
            await eventually(
                lambda: (
                    worker.statuses["adopt.org"].syncs >= 1 or bool(worker.statuses["adopt.org"].last_error)
                ),
                within=20,
            )
            tg.cancel_scope.cancel()

    run(main)
    assert worker.statuses["adopt.org"].last_error == ""
    # fenced: the one write is the fence's own CREATE; not one record changed
    assert [[c["ResourceRecordSet"]["Name"] for c in b] for b in api.batches] == (
        [[fence_name("adopt.org")]] if fenced else []
    )
    after = [r for r in moto.rrsets(zone_id) if r["Name"].rstrip(".") != fence_name("adopt.org")]
    assert after == before
