"""The azure provider through the official SDK (azure-mgmt-dns, azure-identity) over HTTPS, against the
contract fake on loopback (tests/cloudfakes/azure.py, which says what it encodes and what it cannot prove).

What these prove: the SDK's requests as the fake takes them (a token for the config file's service
principal, zones and record sets paged by nextLink, PUTs and DELETEs with their conditions); records
written as external-dns writes them (TTL 300 when none is set, the TXT ownership record byte for byte); a
foreign record left alone, updates and deletes; an external-dns zone adopted with no record written; a
record set Azure refuses reported while the rest applies; a record changed behind our back refusing the
write that would overwrite it; and a 429 taken as throttling with its Retry-After, the SDK retrying none.
The fence is tests/providers/azure/test_azure_fence.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from shardsync.providers.azure.errors import AzureThrottledError, ZoneChangedError
from shardsync.providers.azure.records import METADATA_KEYS, METADATA_PREFIX, TAGS
from shardsync.providers.base import FenceToken, RecordsRejectedError
from shardsync.providers.budget import Budget, BudgetedProvider
from shardsync.records.desired import DesiredIndex
from shardsync.records.endpoint import RESOURCE_LABEL, Changes, Endpoint
from tests.cloudfakes.azure import AzureFake
from tests.cloudfakes.tls import LoopbackCert
from tests.providers.azure.helpers import CLIENTS, GROUP, ZONE, owner_txt, provider, stored, sync
from tests.providers.fake_helpers import FakeClock


def web(*targets: str, **kw: Any) -> DesiredIndex:
    desired = DesiredIndex([ZONE])
    if targets:
        ep = Endpoint.new(f"web.{ZONE}", "A", targets, labels={RESOURCE_LABEL: "service/default/web"}, **kw)
        desired.set_object("service/default/web", [ep])
    return desired


# ---- zones and listings ----


def test_zones_are_listed_page_by_page_by_group_or_subscription_and_filtered_by_id(
    fake: AzureFake, cert: LoopbackCert, tmp_path: Path
) -> None:
    for i in range(120):  # with ex.org, two pages of 100
        fake.add_zone(f"z{i:03d}.org", GROUP)
    fake.add_zone("other.net", "rg-other")

    async def main() -> None:
        by_group = provider(tmp_path, fake, cert)
        zones = await by_group.zones()
        assert len(zones) == 121 and "other.net" not in zones
        whole = provider(tmp_path, fake, cert, config={"resourceGroup": ""})
        assert len(await whole.zones()) == 122
        flag = provider(tmp_path, fake, cert, config={"resourceGroup": ""}, resource_group="rg-other")
        assert await flag.zones() == ["other.net"]  # --azure-resource-group over the file's
        ids = ("dnszones/z001.org", "/resourceGroups/rg-other/providers/Microsoft.Network/dnszones/other.net")
        picked = provider(tmp_path, fake, cert, config={"resourceGroup": ""}, zone_id_filter=ids)
        assert await picked.zones() == ["other.net", "z001.org"]
        for p in (by_group, whole, flag, picked):
            await p.close()

    anyio.run(main)
    # two pages for each listing of more than 100 zones, the last one named by no nextLink: no third
    assert fake.requests[("client-1", "GET")] == 2 + 2 + 1 + 2


def test_record_sets_are_listed_in_pages_as_endpoints_without_the_fence(
    fake: AzureFake, cert: LoopbackCert, tmp_path: Path
) -> None:
    for i in range(150):
        fake.add_record_set(ZONE, "A", f"h{i:03d}", {"TTL": 300, "ARecords": [{"ipv4Address": "192.0.2.1"}]})
    fake.add_record_set(
        ZONE, "A", "multi", {"TTL": 60, "ARecords": [{"ipv4Address": f"192.0.2.{i}"} for i in (1, 2)]}
    )
    fake.add_record_set(
        ZONE, "MX", "@", {"TTL": 300, "MXRecords": [{"preference": 10, "exchange": "mail.ex.org"}]}
    )
    srv = {"priority": 0, "weight": 1, "port": 443, "target": "cal.ex.org"}
    fake.add_record_set(ZONE, "SRV", "_cal._tcp", {"TTL": 300, "SRVRecords": [srv]})
    fake.add_record_set(ZONE, "TXT", "spf", {"TTL": 300, "TXTRecords": [{"value": ["v=spf1 ", "-all"]}]})
    fake.add_record_set(
        ZONE, "CAA", "@", {"TTL": 300, "caaRecords": [{"flags": 0, "tag": "issue", "value": "ca"}]}
    )
    tagged = {"TTL": 300, "metadata": {"team": "a", "env": "prod"}, "CNAMERecord": {"cname": "lb.ex.net"}}
    fake.add_record_set(ZONE, "CNAME", "tagged", tagged)

    async def main() -> list[Endpoint]:
        p = provider(tmp_path, fake, cert)
        await p.zones()
        await p.acquire_fence(ZONE, FenceToken(1, "r0"))
        listed = await p.records(ZONE)
        await p.close()
        return listed

    found = {(e.dns_name, e.record_type): e for e in anyio.run(main)}
    assert "_shardsync-fence.ex.org" not in {name for name, _ in found}
    assert found[(f"multi.{ZONE}", "A")].targets == ("192.0.2.1", "192.0.2.2")
    assert found[(f"multi.{ZONE}", "A")].ttl == 60
    assert found[(ZONE, "MX")].targets == ("10 mail.ex.org",)
    assert found[(ZONE, "NS")].targets == (
        "ns1-01.azure-dns.com",
        "ns2-01.azure-dns.net",
        "ns3-01.azure-dns.org",
        "ns4-01.azure-dns.info",
    )
    assert found[(f"_cal._tcp.{ZONE}", "SRV")].targets == ("0 1 443 cal.ex.org",)
    assert found[(f"spf.{ZONE}", "TXT")].targets == ("v=spf1 -all",)  # a record's strings joined
    assert dict(found[(f"tagged.{ZONE}", "CNAME")].provider_specific) == {
        METADATA_PREFIX + "env": "prod",
        METADATA_PREFIX + "team": "a",
        METADATA_KEYS: "env,team",
    }
    assert (ZONE, "CAA") not in found and (ZONE, "SOA") not in found  # not read, as external-dns
    assert len(found) == 150 + 6


# ---- writing as external-dns writes ----


def test_an_a_record_and_its_txt_record_are_written_as_external_dns_writes_them(
    fake: AzureFake, cert: LoopbackCert, tmp_path: Path
) -> None:
    sync(tmp_path, fake, cert, web("192.0.2.10"), FenceToken(1, "r0"))
    # external-dns v0.22's newRecordSet: TTL 300 when none is configured; the TXT record one record of one
    # string, the registry's quoted value as it is
    assert stored(fake) == {
        ("A", "web"): {"TTL": 300, "ARecords": [{"ipv4Address": "192.0.2.10"}]},
        ("TXT", "a-web"): {"TTL": 300, "TXTRecords": [{"value": [owner_txt("service/default/web")]}]},
    }
    creates = [(e.rtype, e.name, e.if_none_match) for e in fake.writes() if e.name != "_shardsync-fence"]
    assert creates == [("A", "web", "*"), ("TXT", "a-web", "*")]  # the record before its TXT record


def test_tags_ttl_and_a_foreign_record_then_an_update_and_a_delete(
    fake: AzureFake, cert: LoopbackCert, tmp_path: Path
) -> None:
    fake.add_record_set(ZONE, "A", "other", {"TTL": 300, "ARecords": [{"ipv4Address": "198.51.100.1"}]})
    foreign = stored(fake)
    token = FenceToken(1, "r0")
    sync(
        tmp_path,
        fake,
        cert,
        web("192.0.2.10", ttl=600, provider_specific=[(TAGS, "team=a, env = prod")]),
        token,
    )
    written = stored(fake)
    assert written[("A", "web")] == {
        "TTL": 600,
        "metadata": {"env": "prod", "team": "a"},
        "ARecords": [{"ipv4Address": "192.0.2.10"}],
    }
    assert written[("TXT", "a-web")]["metadata"] == {
        "env": "prod",
        "team": "a",
    }  # as external-dns copies them
    sync(tmp_path, fake, cert, web("192.0.2.10", "192.0.2.11"), token)
    updated = [e for e in fake.writes() if e.name == "web"][-1]
    assert updated.if_match and not updated.if_none_match  # on the etag read
    assert stored(fake)[("A", "web")] == {
        "TTL": 300,
        "ARecords": [{"ipv4Address": "192.0.2.10"}, {"ipv4Address": "192.0.2.11"}],
    }
    sync(tmp_path, fake, cert, web(), token)
    assert stored(fake) == foreign
    deletes = [(e.rtype, e.name) for e in fake.writes() if e.method == "DELETE"]
    assert deletes == [("A", "web"), ("TXT", "a-web")]


def test_an_external_dns_zone_is_adopted_without_a_record_write(
    fake: AzureFake, cert: LoopbackCert, tmp_path: Path
) -> None:
    # the zone as external-dns v0.22 left it: TTL 300 where none was set, TXT records of one quoted string
    fake.add_record_set(ZONE, "A", "web", {"TTL": 300, "ARecords": [{"ipv4Address": "192.0.2.10"}]})
    fake.add_record_set(
        ZONE, "TXT", "a-web", {"TTL": 300, "TXTRecords": [{"value": [owner_txt("service/default/web")]}]}
    )
    api = {
        "TTL": 60,
        "metadata": {"team": "a"},
        "ARecords": [{"ipv4Address": f"192.0.2.{i}"} for i in (20, 21)],
    }
    fake.add_record_set(ZONE, "A", "api", api)
    fake.add_record_set(
        ZONE,
        "TXT",
        "a-api",
        {
            "TTL": 300,
            "metadata": {"team": "a"},
            "TXTRecords": [{"value": [owner_txt("service/default/api")]}],
        },
    )
    fake.add_record_set(ZONE, "CNAME", "www", {"TTL": 300, "CNAMERecord": {"cname": "web.ex.org"}})
    fake.add_record_set(
        ZONE, "TXT", "cname-www", {"TTL": 300, "TXTRecords": [{"value": [owner_txt("ingress/default/www")]}]}
    )
    before = stored(fake)
    desired = web("192.0.2.10")
    desired.set_object(
        "service/default/api",
        [
            Endpoint.new(
                f"api.{ZONE}",
                "A",
                ["192.0.2.21", "192.0.2.20"],
                ttl=60,
                labels={RESOURCE_LABEL: "service/default/api"},
                provider_specific=[(TAGS, "team=a")],
            )
        ],
    )
    desired.set_object(
        "ingress/default/www",
        [
            Endpoint.new(
                f"www.{ZONE}", "CNAME", ["web.ex.org"], labels={RESOURCE_LABEL: "ingress/default/www"}
            )
        ],
    )
    sync(tmp_path, fake, cert, desired, FenceToken(1, "r0"))
    assert stored(fake) == before
    assert {e.name for e in fake.writes()} == {"_shardsync-fence"}  # the fence's acquisition alone


# ---- refusals ----


def test_a_record_set_azure_refuses_is_reported_and_the_rest_applies(
    fake: AzureFake, cert: LoopbackCert, tmp_path: Path
) -> None:
    many = Endpoint.new(f"many.{ZONE}", "A", [f"192.0.2.{i}" for i in range(1, 26)])  # over 20 records
    bad_mx = Endpoint.new(f"mx.{ZONE}", "MX", ["ten mail.ex.org"])
    good = Endpoint.new(f"good.{ZONE}", "A", ["192.0.2.1"])
    token = FenceToken(1, "r0")

    async def main() -> RecordsRejectedError:
        p = provider(tmp_path, fake, cert)
        await p.acquire_fence(ZONE, token)
        with pytest.raises(RecordsRejectedError) as caught:
            await p.apply(ZONE, Changes(create=[many, bad_mx, good]), token)
        await p.close()
        return caught.value

    error = anyio.run(main)
    assert sorted(r.endpoint.dns_name for r in error.rejected) == [f"many.{ZONE}", f"mx.{ZONE}"]
    assert set(stored(fake)) == {("A", "good")}
    assert [e.name for e in fake.writes() if e.name != "_shardsync-fence"] == [
        "good",
        "many",
    ]  # MX never sent


def test_a_record_changed_behind_our_back_is_not_overwritten(
    fake: AzureFake, cert: LoopbackCert, tmp_path: Path
) -> None:
    fake.add_record_set(ZONE, "A", "web", {"TTL": 300, "ARecords": [{"ipv4Address": "192.0.2.10"}]})
    token = FenceToken(1, "r0")

    async def main() -> None:
        p = provider(tmp_path, fake, cert)
        await p.acquire_fence(ZONE, token)
        (old,) = [e for e in await p.records(ZONE) if e.dns_name == f"web.{ZONE}"]
        fake.add_record_set(ZONE, "A", "web", {"TTL": 300, "ARecords": [{"ipv4Address": "203.0.113.9"}]})
        new = Endpoint.new(old.dns_name, "A", ["192.0.2.11"])
        with pytest.raises(ZoneChangedError):
            await p.apply(ZONE, Changes(update_old=[old], update_new=[new]), token)
        created = Endpoint.new(f"late.{ZONE}", "A", ["192.0.2.12"])
        fake.add_record_set(ZONE, "A", "late", {"TTL": 300, "ARecords": [{"ipv4Address": "203.0.113.8"}]})
        with pytest.raises(ZoneChangedError):
            await p.apply(ZONE, Changes(create=[created]), token)  # If-None-Match: * finds it there
        await p.close()

    anyio.run(main)
    assert stored(fake)[("A", "web")]["ARecords"] == [{"ipv4Address": "203.0.113.9"}]
    assert stored(fake)[("A", "late")]["ARecords"] == [{"ipv4Address": "203.0.113.8"}]
    assert [e.status for e in fake.writes() if e.name in ("web", "late")] == [412, 412]


# ---- throttling ----


def test_a_429_is_throttling_with_retry_after_and_the_budget_waits_it_out(
    cert: LoopbackCert, tmp_path: Path
) -> None:
    clock = FakeClock()
    # a thousandth of ARM's limits: one read token, refilled every 40 s
    with AzureFake(clients=CLIENTS, limits_scale=0.001, clock=clock).serve(cert) as fake:
        fake.add_zone(ZONE, GROUP)

        async def sleep(seconds: float) -> None:
            clock.now += seconds  # the budget's naps pass the fake's time

        async def main() -> None:
            p = provider(tmp_path, fake, cert)
            assert await p.zones() == [ZONE]
            with pytest.raises(AzureThrottledError) as caught:
                await p.zones()
            assert caught.value.retry_after == 40
            paced = BudgetedProvider(p, Budget(1.0, clock=clock), sleep=sleep)
            assert await paced.zones() == [ZONE]  # throttled once more, then waited the bucket out
            await p.close()

        anyio.run(main)
        assert clock() >= 100 + 40
        assert fake.limits["client-1"].throttled == 2
        assert fake.requests[("client-1", "GET")] == 4  # the SDK retried no 429 itself
