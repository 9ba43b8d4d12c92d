"""The pdns provider against a real PowerDNS Authoritative (pdns_server, gsqlite3) with its HTTP API on
loopback and RFC 2136 on for the fence (tests/dnsservers/pdns.py, `api=True`). Marker `pdns`.

What external-dns wrote is seeded here by the PATCH external-dns's pdns provider sends (its
ConvertEndpointsToZones: absolute names, trailing dots on host names, TTL 300 when unset, REPLACE), written
out by hand; the zones are compared row by row in PowerDNS's own database, so "byte-identical" is what the
server stores. The replica's side is the real worker, TXT registry and provider; PATCHes are counted by a
wrapper around the real API client. Each test takes its own zone of one server started per module.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import closing
from typing import Any

import anyio
import pytest

from shardsync.providers.base import (
    BatchRejectedError,
    FencedError,
    FenceToken,
    ProviderError,
    RecordsRejectedError,
)
from shardsync.providers.pdns import PdnsOptions, build
from shardsync.providers.pdns.provider import PdnsProvider
from shardsync.reconcile.worker import Worker, WorkerOptions
from shardsync.records.desired import DesiredIndex
from shardsync.records.endpoint import ALIAS_PROPERTY, RESOURCE_LABEL, Changes, Endpoint
from shardsync.records.registry import TxtRegistry
from tests.dnsservers import PowerDnsServer, require
from tests.dnsservers.pdns import external_dns_rrsets
from tests.dnsservers.pdns import owner_txt as pdns_owner_txt
from tests.waits import eventually

pytestmark = [pytest.mark.pdns]

OWNER = "shard"
ELB = "k8s-lb-1234.elb.example.net"
ZONE_POOL = 16
THEIRS = "theirs.shardsync.test"  # external-dns's copy, for the byte-for-byte comparison
_next_zone = itertools.count()


def owner_txt(resource: str, owner: str = OWNER) -> str:
    return pdns_owner_txt(owner, resource)


@pytest.fixture(scope="module")
def pdns() -> Iterator[PowerDnsServer]:
    require(PowerDnsServer)
    server = PowerDnsServer([*(f"p{i:02d}.shardsync.test" for i in range(ZONE_POOL)), THEIRS], api=True)
    try:
        yield server.start()
    finally:
        server.close()


@pytest.fixture
def zone(pdns: PowerDnsServer) -> str:
    index = next(_next_zone)
    if index >= ZONE_POOL:
        pytest.fail(f"zone pool exhausted: raise ZONE_POOL above {ZONE_POOL}")
    return pdns.zones[index]


class CountingApi:
    """The real API client (api.PdnsApi), keeping every PATCH's rrsets."""

    def __init__(self, api: Any) -> None:
        self.api = api
        self.base = api.base
        self.patches: list[list[dict[str, Any]]] = []

    async def zones(self) -> Any:
        return await self.api.zones()

    async def zone(self, zone_id: str) -> Any:
        return await self.api.zone(zone_id)

    async def patch(self, zone_id: str, rrsets: list[dict[str, Any]]) -> None:
        self.patches.append(rrsets)
        await self.api.patch(zone_id, rrsets)

    async def close(self) -> None:
        await self.api.close()


def make_provider(
    pdns: PowerDnsServer, *, fenced: bool = True, **options: Any
) -> tuple[PdnsProvider, CountingApi]:
    """The provider `--provider=pdns` builds from these flags, its API calls counted."""
    flags: dict[str, Any] = {"server": pdns.api_url, "api_key": pdns.api_key, "timeout": 5.0}
    if fenced:
        flags |= {
            "rfc2136_fence": f"{pdns.host}:{pdns.port}",
            "fence_tsig_keyname": pdns.key_name,
            "fence_tsig_secret": pdns.secret,
            "fence_tsig_secret_alg": pdns.algorithm,
        }
    provider = build(PdnsOptions(**(flags | options)), "shardsync-0")
    counting = CountingApi(provider.api)
    provider.api = counting
    return provider, counting


def external_dns_patch(pdns: PowerDnsServer, zone: str, records: Sequence[Mapping[str, Any]]) -> None:
    pdns.patch(zone, external_dns_rrsets(zone, records))


def web_and_lb(zone: str) -> list[Mapping[str, Any]]:
    """A Service `web` (A, TTL unset) and `lb` (CNAME to a load balancer, TTL 60) with their TXT records,
    as external-dns writes them for owner `shard`."""
    return [
        {"name": "a-web", "type": "TXT", "contents": [owner_txt("service/default/web")]},
        {"name": "cname-lb", "type": "TXT", "contents": [owner_txt("service/default/lb")]},
        {"name": "lb", "type": "CNAME", "ttl": 60, "contents": [ELB + "."]},
        {"name": "web", "type": "A", "contents": ["192.0.2.10"]},
    ]


def desired_web_and_lb(zone: str) -> dict[str, list[Endpoint]]:
    return {
        "service/default/web": [
            Endpoint.new(f"web.{zone}", "A", ["192.0.2.10"], labels={RESOURCE_LABEL: "service/default/web"})
        ],
        "service/default/lb": [
            Endpoint.new(f"lb.{zone}", "CNAME", [ELB], ttl=60, labels={RESOURCE_LABEL: "service/default/lb"})
        ],
    }


def rows(pdns: PowerDnsServer, zone: str) -> list[tuple[Any, ...]]:
    """The zone's records as PowerDNS stores them, names relative to the zone; SOA (its serial moves with
    every UPDATE) and the fence record left out."""
    with closing(sqlite3.connect(pdns.database, timeout=10)) as db:
        found = db.execute(
            "SELECT r.name, r.type, r.content, r.ttl, r.prio, r.disabled, r.auth FROM records r "
            "JOIN domains d ON r.domain_id = d.id WHERE d.name = ? AND r.type != 'SOA'",
            (zone,),
        ).fetchall()
    relative = [(name.removesuffix(zone).rstrip(".") or "@", *rest) for name, *rest in found]
    return sorted(r for r in relative if not r[0].startswith("_shardsync-fence"))


def sync(
    provider: PdnsProvider, zone: str, objects: Mapping[str, list[Endpoint]], fence: FenceToken | None
) -> Worker:
    """One reconcile of the zone by the real worker and TXT registry, as a replica owning it does."""
    desired = DesiredIndex([zone])
    for key, endpoints in objects.items():
        desired.set_object(key, endpoints)
    worker = Worker(provider, TxtRegistry(owner_id=OWNER), desired, WorkerOptions(interval=60, event_delay=0))

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            worker.own(zone, fence)
            status = worker.statuses[zone]
            await eventually(lambda: status.syncs >= 1 or bool(status.last_error), within=20)
            tg.cancel_scope.cancel()

    anyio.run(main)
    assert worker.statuses[zone].last_error == ""
    return worker


def run(fn: Any, *args: Any) -> Any:
    return anyio.run(fn, *args)


def test_records_are_written_byte_identical_to_external_dns(pdns: PowerDnsServer, zone: str) -> None:
    external_dns_patch(pdns, THEIRS, web_and_lb(THEIRS))
    provider, api = make_provider(pdns)
    sync(provider, zone, desired_web_and_lb(zone), FenceToken(1, "shardsync-0"))
    assert len(api.patches) == 1  # the whole plan in one PATCH
    assert rows(pdns, zone) == rows(pdns, THEIRS)
    assert ("a-web", "TXT", owner_txt("service/default/web"), 300, 0, 0, 1) in rows(pdns, zone)
    assert ("lb", "CNAME", ELB, 60, 0, 0, 1) in rows(pdns, zone)  # stored without its dot, as external-dns's
    # and as a resolver sees them
    assert pdns.texts(f"a-web.{zone}", "TXT") == {owner_txt("service/default/web")}
    assert pdns.texts(f"web.{zone}", "A") == {"192.0.2.10"}
    run(provider.close)


@pytest.mark.parametrize("fenced", [False, True], ids=["lease-timed", "fenced"])
def test_a_zone_external_dns_wrote_is_adopted_with_no_write(
    pdns: PowerDnsServer, zone: str, fenced: bool
) -> None:
    external_dns_patch(pdns, zone, web_and_lb(zone))
    before = rows(pdns, zone)
    provider, api = make_provider(pdns, fenced=fenced)
    sync(provider, zone, desired_web_and_lb(zone), FenceToken(1, "shardsync-0"))
    assert api.patches == []
    assert rows(pdns, zone) == before
    run(provider.close)


def test_a_foreign_record_is_left_alone(pdns: PowerDnsServer, zone: str) -> None:
    external_dns_patch(
        pdns,
        zone,
        [
            {"name": "other", "type": "A", "contents": ["198.51.100.7"]},
            {"name": "a-other", "type": "TXT", "contents": [owner_txt("service/default/x", "someone-else")]},
            {"name": "plain", "type": "A", "contents": ["198.51.100.8"]},  # no TXT at all: nobody's
            {"name": "@", "type": "CAA", "contents": ['0 issue "letsencrypt.org"']},  # a type not managed
        ],
    )
    before = rows(pdns, zone)
    provider, api = make_provider(pdns)
    wanted = {
        f"service/default/{name}": [
            Endpoint.new(f"{name}.{zone}", "A", [ip], labels={RESOURCE_LABEL: f"service/default/{name}"})
        ]
        for name, ip in (("other", "192.0.2.99"), ("plain", "192.0.2.98"), ("new", "192.0.2.97"))
    }
    sync(provider, zone, wanted, FenceToken(1, "shardsync-0"))
    after = rows(pdns, zone)
    assert set(before) <= set(after)
    assert sorted(set(after) - set(before)) == [
        ("a-new", "TXT", owner_txt("service/default/new"), 300, 0, 0, 1),
        ("new", "A", "192.0.2.97", 300, 0, 0, 1),
    ]
    assert [sorted(r["name"] for r in patch) for patch in api.patches] == [[f"a-new.{zone}.", f"new.{zone}."]]
    run(provider.close)


def test_records_follow_an_update_and_a_delete(pdns: PowerDnsServer, zone: str) -> None:
    provider, api = make_provider(pdns)
    token = FenceToken(1, "shardsync-0")
    sync(provider, zone, desired_web_and_lb(zone), token)
    moved = desired_web_and_lb(zone)
    moved["service/default/lb"] = [
        Endpoint.new(f"lb.{zone}", "A", ["192.0.2.20"], labels={RESOURCE_LABEL: "service/default/lb"})
    ]
    sync(provider, zone, moved, token)  # CNAME → A: the old rrset and its TXT go in the same PATCH
    assert pdns.texts(f"lb.{zone}", "A") == {"192.0.2.20"}
    assert pdns.texts(f"lb.{zone}", "CNAME") == set()
    assert pdns.texts(f"cname-lb.{zone}", "TXT") == set()
    sync(provider, zone, {}, token)
    assert rows(pdns, zone) == [("@", "NS", "ns.shardsync.test", 300, 0, 0, 1)]
    assert len(api.patches) == 3
    run(provider.close)


def test_a_cname_marked_alias_is_an_alias_record_both_ways(pdns: PowerDnsServer, zone: str) -> None:
    # external-dns writes a CNAME with alias=true (and one at the apex) as PowerDNS's ALIAS. Read back, the
    # ALIAS is that CNAME again, so the next pass writes nothing; dropping the mark turns it into a CNAME,
    # the ALIAS deleted in the same PATCH.
    provider, api = make_provider(pdns, fenced=False)

    def sub(*specific: tuple[str, str]) -> dict[str, list[Endpoint]]:
        labels = {RESOURCE_LABEL: "service/default/sub"}
        marked = Endpoint.new(f"sub.{zone}", "CNAME", [ELB], labels=labels, provider_specific=specific)
        return {"service/default/sub": [marked]}

    sync(provider, zone, sub((ALIAS_PROPERTY, "true")), None)
    assert ("sub", "ALIAS", ELB, 300, 0, 0, 1) in rows(pdns, zone)
    sync(provider, zone, sub((ALIAS_PROPERTY, "true")), None)
    assert len(api.patches) == 1
    sync(provider, zone, sub(), None)
    assert [(r["changetype"], r["type"]) for r in api.patches[-1] if r["name"] == f"sub.{zone}."] == [
        ("DELETE", "ALIAS"),
        ("REPLACE", "CNAME"),
    ]
    assert ("sub", "CNAME", ELB, 300, 0, 0, 1) in rows(pdns, zone)
    assert [r for r in rows(pdns, zone) if r[1] == "ALIAS"] == []
    run(provider.close)


def test_a_stale_writer_is_refused_by_the_fence(pdns: PowerDnsServer, zone: str) -> None:
    old, api_old = make_provider(pdns)
    new, _ = make_provider(pdns)
    token_old, token_new = FenceToken(1, "replica-a"), FenceToken(2, "replica-b")
    write = Changes(create=[Endpoint.new(f"w.{zone}", "A", ["192.0.2.1"])])
    stale = Changes(create=[Endpoint.new(f"stale.{zone}", "A", ["192.0.2.66"])])

    async def main() -> None:
        await old.acquire_fence(zone, token_old)
        await old.apply(zone, write, token_old)
        await new.acquire_fence(zone, token_new)  # the zone moved on: a newer generation took the fence
        with pytest.raises(FencedError, match="fence"):
            await old.apply(zone, stale, token_old)
        with pytest.raises(FencedError):
            await old.acquire_fence(zone, token_old)
        await new.apply(zone, Changes(delete=write.create), token_new)
        assert await new.records(zone) == [Endpoint.new(zone, "NS", ["ns.shardsync.test"], ttl=300)]
        await old.close()
        await new.close()

    run(main)
    assert len(api_old.patches) == 1  # the refused write never reached the API
    assert pdns.texts(f"stale.{zone}", "A") == set()
    assert pdns.texts(f"_shardsync-fence.{zone}", "TXT") == {'"identity=replica-b,generation=2"'}


def test_a_patch_powerdns_refuses_changes_nothing(pdns: PowerDnsServer, zone: str) -> None:
    external_dns_patch(pdns, zone, [{"name": "taken", "type": "A", "contents": ["198.51.100.1"]}])
    provider, _ = make_provider(pdns, fenced=False)
    changes = Changes(
        create=[
            Endpoint.new(f"fine.{zone}", "A", ["192.0.2.1"]),
            Endpoint.new(
                f"taken.{zone}", "CNAME", ["elsewhere.example.org"]
            ),  # beside an A: PowerDNS says no
        ]
    )
    with pytest.raises(BatchRejectedError, match="Conflicts with pre-existing RRset"):
        run(provider.apply, zone, changes)
    assert pdns.texts(f"fine.{zone}", "A") == set()  # one transaction: nothing of the PATCH applied
    run(provider.close)


def test_a_change_refused_before_sending_leaves_the_rest_written(pdns: PowerDnsServer, zone: str) -> None:
    provider, _ = make_provider(pdns, fenced=False)
    changes = Changes(
        create=[
            Endpoint.new(f"spf.{zone}", "TXT", ["v=spf1 -all"]),
            Endpoint.new(f"ok.{zone}", "A", ["192.0.2.1"]),
        ]
    )
    with pytest.raises(RecordsRejectedError, match="double quotes") as caught:
        run(provider.apply, zone, changes)
    assert [r.endpoint.dns_name for r in caught.value.rejected] == [f"spf.{zone}"]
    assert pdns.texts(f"ok.{zone}", "A") == {"192.0.2.1"}
    run(provider.close)


def test_zones_come_from_the_api_and_a_wrong_key_is_named(pdns: PowerDnsServer) -> None:
    provider, _ = make_provider(pdns, fenced=False)
    assert run(provider.zones) == sorted(pdns.zones)
    with pytest.raises(ProviderError, match="not served"):
        run(provider.records, "absent.shardsync.test")
    run(provider.close)
    wrong, _ = make_provider(pdns, fenced=False, api_key="wrong")
    with pytest.raises(ProviderError, match="--pdns-api-key"):
        run(wrong.zones)
    run(wrong.close)
