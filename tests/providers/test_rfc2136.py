"""The rfc2136 provider against a real BIND 9: every record type, batching, TXT quoting, errors (fencing:
test_rfc2136_fences.py).

Every assertion about the zone is checked with a real DNS query or AXFR to the server (tests/bind.py), not
only through the provider under test. BIND runs once per session; each test works in its own zone.
"""

from __future__ import annotations

import base64
import os
import socket
import time
from collections.abc import Iterator

import pytest

from shardsync.endpoint import Changes, Endpoint
from shardsync.providers.base import (
    FenceToken,
    Provider,
    ProviderError,
    RecordsRejectedError,
    UnreachableError,
)
from shardsync.providers.rfc2136.messages import written_spelling
from shardsync.providers.rfc2136.provider import Rfc2136Provider
from tests.bind import BindServer
from tests.providers.rfc2136_helpers import make_provider, serial

pytestmark = [pytest.mark.bind, pytest.mark.anyio]

REGISTRY_TXT = '"heritage=external-dns,external-dns/owner=x,external-dns/resource=service/default/web"'


@pytest.fixture
def provider(bind_server: BindServer) -> Iterator[Rfc2136Provider]:
    yield make_provider(bind_server)


def every_type(zone: str) -> list[Endpoint]:
    return [
        Endpoint.new(f"a.{zone}", "A", ["10.0.0.1", "10.0.0.2"], ttl=120),
        Endpoint.new(f"aaaa.{zone}", "AAAA", ["2001:db8::1"], ttl=120),
        Endpoint.new(f"cname.{zone}", "CNAME", [f"a.{zone}"], ttl=120),
        Endpoint.new(f"txt.{zone}", "TXT", [REGISTRY_TXT], ttl=120),
        Endpoint.new(f"_sip._tcp.{zone}", "SRV", [f"0 5 5060 a.{zone}"], ttl=120),
        Endpoint.new(f"mx.{zone}", "MX", [f"10 a.{zone}"], ttl=120),
        Endpoint.new(f"sub.{zone}", "NS", ["ns1.example.net", "ns2.example.net"], ttl=120),
        Endpoint.new(f"1.{zone}", "PTR", [f"a.{zone}"], ttl=120),
    ]


async def test_is_a_provider(provider: Rfc2136Provider, bind_server: BindServer) -> None:
    assert isinstance(provider, Provider)
    assert await provider.zones() == sorted(bind_server.zones)


async def test_empty_zone_lists_apex_ns_but_never_soa(provider: Rfc2136Provider, fresh_zone: str) -> None:
    records = await provider.records(fresh_zone)
    assert records == [Endpoint.new(fresh_zone, "NS", ["ns.shardsync.test"], ttl=300)]


async def test_create_update_delete_every_type(
    provider: Rfc2136Provider, bind_server: BindServer, fresh_zone: str
) -> None:
    zone = fresh_zone
    created = every_type(zone)
    await provider.apply(zone, Changes(create=created))

    # Real queries: what a resolver would see.
    assert bind_server.texts(f"a.{zone}", "A") == {"10.0.0.1", "10.0.0.2"}
    assert bind_server.texts(f"aaaa.{zone}", "AAAA") == {"2001:db8::1"}
    assert bind_server.texts(f"cname.{zone}", "CNAME") == {f"a.{zone}."}
    assert bind_server.texts(f"txt.{zone}", "TXT") == {REGISTRY_TXT}
    assert bind_server.texts(f"_sip._tcp.{zone}", "SRV") == {f"0 5 5060 a.{zone}."}
    assert bind_server.texts(f"mx.{zone}", "MX") == {f"10 a.{zone}."}
    assert bind_server.texts(f"1.{zone}", "PTR") == {f"a.{zone}."}
    a = bind_server.rrset(f"a.{zone}", "A")
    assert a is not None and a.ttl == 120
    # The delegation is in the zone (a query gets a referral, so read it by AXFR).
    assert any(
        r.to_text().startswith(f"sub.{zone}. 120 IN NS ns1.example.net.") for r in bind_server.axfr(zone)
    )

    listed = {e.key: e for e in await provider.records(zone)}
    for ep in created:
        assert listed[ep.key] == ep, ep.key

    updated = [
        Endpoint.new(f"a.{zone}", "A", ["10.0.0.3"], ttl=60),
        Endpoint.new(f"aaaa.{zone}", "AAAA", ["2001:db8::2", "2001:db8::3"], ttl=60),
        Endpoint.new(f"cname.{zone}", "CNAME", [f"mx.{zone}"], ttl=60),
        Endpoint.new(f"txt.{zone}", "TXT", ['"heritage=external-dns,external-dns/owner=y"'], ttl=60),
        Endpoint.new(f"_sip._tcp.{zone}", "SRV", [f"1 1 5061 a.{zone}"], ttl=60),
        Endpoint.new(f"mx.{zone}", "MX", [f"20 a.{zone}"], ttl=60),
        Endpoint.new(f"sub.{zone}", "NS", ["ns3.example.net"], ttl=60),
        Endpoint.new(f"1.{zone}", "PTR", [f"mx.{zone}"], ttl=60),
    ]
    await provider.apply(zone, Changes(update_old=created, update_new=updated))
    assert bind_server.texts(f"a.{zone}", "A") == {"10.0.0.3"}
    assert bind_server.texts(f"aaaa.{zone}", "AAAA") == {"2001:db8::2", "2001:db8::3"}
    assert bind_server.texts(f"cname.{zone}", "CNAME") == {f"mx.{zone}."}
    assert bind_server.texts(f"txt.{zone}", "TXT") == {'"heritage=external-dns,external-dns/owner=y"'}
    assert bind_server.texts(f"_sip._tcp.{zone}", "SRV") == {f"1 1 5061 a.{zone}."}
    assert bind_server.texts(f"mx.{zone}", "MX") == {f"20 a.{zone}."}
    assert bind_server.texts(f"1.{zone}", "PTR") == {f"mx.{zone}."}
    a = bind_server.rrset(f"a.{zone}", "A")
    assert a is not None and a.ttl == 60
    listed = {e.key: e for e in await provider.records(zone)}
    for ep in updated:
        assert listed[ep.key] == ep, ep.key

    await provider.apply(zone, Changes(delete=updated))
    for ep in updated:
        assert bind_server.rrset(ep.dns_name, ep.record_type) is None, ep.key
    assert await provider.records(zone) == [Endpoint.new(zone, "NS", ["ns.shardsync.test"], ttl=300)]


async def test_batches_of_50_send_one_update_per_50_changes(
    provider: Rfc2136Provider, bind_server: BindServer, fresh_zone: str
) -> None:
    zone = fresh_zone
    before = serial(bind_server, zone)
    eps = [Endpoint.new(f"h{i}.{zone}", "A", [f"10.1.{i // 250}.{i % 250}"]) for i in range(230)]
    await provider.apply(zone, Changes(create=eps))
    # BIND bumps the SOA serial once per successful UPDATE message: 230 changes / 50 = 5 messages.
    assert serial(bind_server, zone) - before == 5
    listed = {e.dns_name: e.targets for e in await provider.records(zone) if e.record_type == "A"}
    assert listed == {e.dns_name: e.targets for e in eps}
    assert bind_server.texts(f"h229.{zone}", "A") == {"10.1.0.229"}

    small = make_provider(bind_server, batch_change_size=100)
    await small.apply(zone, Changes(delete=eps))
    assert serial(bind_server, zone) - before == 5 + 3
    assert [e.record_type for e in await provider.records(zone)] == ["NS"]


async def test_registry_txt_round_trips_exactly(
    provider: Rfc2136Provider, bind_server: BindServer, fresh_zone: str
) -> None:
    zone = fresh_zone
    long_raw = "k=" + "x" * 400
    targets = {
        f"a-www.{zone}": REGISTRY_TXT,
        f"multi.{zone}": '"v=DKIM1; k=rsa; " "p=MIGfMA0"',
        f"raw.{zone}": "v=spf1 include:_spf.example.test ~all",
        f"long.{zone}": long_raw,
        f"utf.{zone}": "café=1",
    }
    await provider.apply(zone, Changes(create=[Endpoint.new(n, "TXT", [t]) for n, t in targets.items()]))
    listed = {e.dns_name: e.targets for e in await provider.records(zone) if e.record_type == "TXT"}
    # The registry's quoted content comes back byte for byte, and so does zone-file text.
    assert listed[f"a-www.{zone}"] == (REGISTRY_TXT,)
    assert listed[f"multi.{zone}"] == ('"v=DKIM1; k=rsa; " "p=MIGfMA0"',)
    # Raw values come back in the canonical (quoted) spelling, which written_spelling predicts.
    for name in (f"raw.{zone}", f"long.{zone}", f"utf.{zone}"):
        assert listed[name] == (written_spelling("TXT", targets[name]),)
    # On the wire the quotes are syntax, not data: exactly what external-dns itself writes.
    rrset = bind_server.rrset(f"a-www.{zone}", "TXT")
    assert rrset is not None
    assert [rd.strings for rd in rrset] == [(REGISTRY_TXT.strip('"').encode(),)]
    raw = bind_server.rrset(f"long.{zone}", "TXT")
    assert raw is not None
    assert b"".join(raw[0].strings) == long_raw.encode()
    # Deleting by the listed target removes the record (exact rdata match on the server).
    current = [e for e in await provider.records(zone) if e.record_type == "TXT"]
    await provider.apply(zone, Changes(delete=current))
    for name in targets:
        assert bind_server.rrset(name, "TXT") is None


async def test_ttls_default_and_minimum(bind_server: BindServer, fresh_zone: str) -> None:
    zone = fresh_zone
    compat = make_provider(bind_server)  # external-dns: no TTL and no --rfc2136-min-ttl → TTL 0
    floor = make_provider(bind_server, min_ttl=90)
    defaulted = make_provider(bind_server, default_ttl=300, min_ttl=30)
    await compat.apply(zone, Changes(create=[Endpoint.new(f"zero.{zone}", "A", ["10.0.0.1"])]))
    await floor.apply(
        zone,
        Changes(
            create=[
                Endpoint.new(f"low.{zone}", "A", ["10.0.0.1"], ttl=10),
                Endpoint.new(f"high.{zone}", "A", ["10.0.0.1"], ttl=3600),
                Endpoint.new(f"unset.{zone}", "A", ["10.0.0.1"]),
            ]
        ),
    )
    await defaulted.apply(zone, Changes(create=[Endpoint.new(f"dflt.{zone}", "A", ["10.0.0.1"])]))
    ttls = {e.dns_name.split(".")[0]: e.ttl for e in await compat.records(zone) if e.record_type == "A"}
    assert ttls == {"zero": 0, "low": 90, "high": 3600, "unset": 90, "dflt": 300}


async def test_delete_cname_and_create_a_at_one_name_in_one_apply(
    provider: Rfc2136Provider, bind_server: BindServer, fresh_zone: str
) -> None:
    zone = fresh_zone
    cname = Endpoint.new(f"svc.{zone}", "CNAME", [f"other.{zone}"])
    await provider.apply(zone, Changes(create=[cname]))
    # BIND silently ignores an A added next to a CNAME: the delete must reach the server first.
    await provider.apply(
        zone, Changes(create=[Endpoint.new(f"svc.{zone}", "A", ["10.0.0.9"])], delete=[cname])
    )
    assert bind_server.texts(f"svc.{zone}", "A") == {"10.0.0.9"}
    assert not any(e.record_type == "CNAME" for e in await provider.records(zone))


async def test_large_rrset(provider: Rfc2136Provider, bind_server: BindServer, fresh_zone: str) -> None:
    zone = fresh_zone
    ips = [f"10.2.{i // 250}.{i % 250}" for i in range(300)]  # above BIND's default of 100 per RRset
    await provider.apply(zone, Changes(create=[Endpoint.new(f"big.{zone}", "A", ips)]))
    (big,) = [e for e in await provider.records(zone) if e.record_type == "A"]
    assert big.targets == tuple(sorted(ips))
    assert len(bind_server.texts(f"big.{zone}", "A")) == 300


async def test_bad_records_are_skipped_and_the_rest_applied(
    provider: Rfc2136Provider, bind_server: BindServer, fresh_zone: str
) -> None:
    zone = fresh_zone
    changes = Changes(
        create=[
            Endpoint.new(f"good.{zone}", "A", ["10.0.0.1"]),
            Endpoint.new("www.not-this-zone.test", "A", ["10.0.0.1"]),
            Endpoint.new(f"bad.{zone}", "A", ["999.0.0.1"]),
        ]
    )
    with pytest.raises(RecordsRejectedError) as err:
        await provider.apply(zone, changes)
    assert "www.not-this-zone.test" in str(err.value) and "NOTZONE" in str(err.value)
    assert f"bad.{zone}" in str(err.value)
    assert {r.endpoint.dns_name for r in err.value.rejected} == {"www.not-this-zone.test", f"bad.{zone}"}
    assert isinstance(err.value, ProviderError)
    assert bind_server.texts(f"good.{zone}", "A") == {"10.0.0.1"}


# -- errors -------------------------------------------------------------------------------------------------


async def test_unsigned_updates_and_transfers_are_refused(bind_server: BindServer, fresh_zone: str) -> None:
    unsigned = Rfc2136Provider(bind_server.host, bind_server.port, bind_server.zones, timeout=5)
    with pytest.raises(ProviderError, match=r"REFUSED.*no TSIG key"):
        await unsigned.apply(fresh_zone, Changes(create=[Endpoint.new(f"u.{fresh_zone}", "A", ["10.0.0.1"])]))
    assert bind_server.rrset(f"u.{fresh_zone}", "A") is None
    with pytest.raises(ProviderError, match=r"AXFR.*REFUSED"):
        await unsigned.records(fresh_zone)


async def test_wrong_secret_or_unknown_key_is_a_clear_error_without_the_secret(
    bind_server: BindServer, fresh_zone: str
) -> None:
    wrong = base64.b64encode(os.urandom(32)).decode()
    bad_secret = make_provider(bind_server, tsig_secret=wrong)
    with pytest.raises(ProviderError, match="BADSIG") as err:
        await bad_secret.apply(
            fresh_zone, Changes(create=[Endpoint.new(f"u.{fresh_zone}", "A", ["10.0.0.1"])])
        )
    assert wrong not in str(err.value) and bind_server.secret not in str(err.value)
    assert not isinstance(err.value, UnreachableError)
    with pytest.raises(ProviderError, match="BADSIG"):
        await bad_secret.records(fresh_zone)
    unknown = make_provider(bind_server, tsig_keyname="no-such-key")
    with pytest.raises(ProviderError, match=r"'no-such-key'.*BADKEY"):
        await unknown.records(fresh_zone)
    with pytest.raises(ProviderError, match="BADKEY"):
        await unknown.acquire_fence(fresh_zone, FenceToken(1, "r"))
    assert bind_server.rrset(f"u.{fresh_zone}", "A") is None


async def test_zone_not_served_is_notauth(bind_server: BindServer) -> None:
    p = make_provider(bind_server)
    p._zones.append("not-served.test")  # configured here, unknown to the server
    with pytest.raises(ProviderError, match="NOTAUTH"):
        await p.apply(
            "not-served.test", Changes(create=[Endpoint.new("x.not-served.test", "A", ["10.0.0.1"])])
        )
    with pytest.raises(ProviderError, match="NOTAUTH"):
        await p.records("not-served.test")


async def test_unconfigured_zone_is_refused_locally(provider: Rfc2136Provider) -> None:
    with pytest.raises(ProviderError, match="not configured"):
        await provider.records("elsewhere.test")


async def test_connection_refused_is_unreachable_at_once(bind_server: BindServer) -> None:
    with socket.socket() as s:  # a port nobody listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        p = Rfc2136Provider("127.0.0.1", port, bind_server.zones, timeout=2.0)
        started = time.monotonic()
        with pytest.raises(UnreachableError, match="ConnectionRefused"):
            await p.records(bind_server.zones[0])
        with pytest.raises(UnreachableError):
            await p.acquire_fence(bind_server.zones[0], FenceToken(1, "r"))
        assert time.monotonic() - started < 2.0


async def test_silent_server_is_unreachable_within_the_timeout(bind_server: BindServer) -> None:
    with socket.socket() as s:  # accepts connections (kernel backlog) but never answers
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        p = Rfc2136Provider("127.0.0.1", s.getsockname()[1], bind_server.zones, timeout=0.5)
        zone = bind_server.zones[0]
        for call in (
            lambda: p.records(zone),
            lambda: p.apply(zone, Changes(create=[Endpoint.new(f"x.{zone}", "A", ["10.0.0.1"])])),
            lambda: p.read_fence(zone),
        ):
            started = time.monotonic()
            with pytest.raises(UnreachableError, match=r"no answer within 0\.5s"):
                await call()
            assert 0.4 < time.monotonic() - started < 2.0


# -- throughput (a figure for the report, not a timed assertion) --------------------------------------------


async def test_thousand_record_write_rate(
    bind_server: BindServer, fresh_zone: str, capsys: pytest.CaptureFixture[str]
) -> None:
    zone = fresh_zone
    token = FenceToken(1, "bench")
    p = make_provider(bind_server)
    await p.acquire_fence(zone, token)
    eps = [Endpoint.new(f"r{i}.{zone}", "A", [f"10.3.{i // 250}.{i % 250}"]) for i in range(1000)]
    started = time.perf_counter()
    await p.apply(zone, Changes(create=eps), token)
    write = time.perf_counter() - started
    started = time.perf_counter()
    listed = await p.records(zone)
    read = time.perf_counter() - started
    assert sum(1 for e in listed if e.record_type == "A") == 1000
    with capsys.disabled():
        print(
            f"\nrfc2136: 1,000 fenced creates in 20 UPDATEs: {1000 / write:,.0f} records/s; "
            f"AXFR of 1,000 records: {read * 1e3:.0f} ms"
        )
