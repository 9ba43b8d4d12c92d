"""The pdns provider's pure parts, without a server: rrsets ↔ endpoints (rrsets.py), the zone list, the
process-local fence of the lease-timed mode, and the flags.

The expected rrsets and endpoints are external-dns's own fixtures (provider/pdns/pdns_test.go:
RRSetSimpleTXTRecord, ZoneMixed → endpointsMixedRecords, ZoneEmptyToSimplePatch, the ALIAS cases), so a
difference from external-dns's bytes fails here first; tests/providers/test_pdns.py writes them to a real
PowerDNS.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shardsync.flags import ConfigError
from shardsync.providers.base import FencedError, FenceToken, fences_writes
from shardsync.providers.pdns import PdnsOptions, fence_address
from shardsync.providers.pdns.fencing import LeaseTimed
from shardsync.providers.pdns.provider import zone_ids
from shardsync.providers.pdns.rrsets import endpoints_of, patch_of
from shardsync.providers.table import PROVIDERS
from shardsync.records.endpoint import ALIAS_PROPERTY, Changes, Endpoint
from shardsync.records.plan import plan

pytestmark = pytest.mark.anyio

ZONE = "example.com"
OWNER_TXT = '"heritage=external-dns,external-dns/owner=tower-pdns"'


def rrset(name: str, rtype: str, *contents: str, ttl: int = 300, disabled: tuple[bool, ...] = ()) -> Any:
    flags = disabled or (False,) * len(contents)
    records = [{"content": c, "disabled": d} for c, d in zip(contents, flags, strict=True)]
    return {"name": name, "type": rtype, "ttl": ttl, "records": records, "comments": []}


def ep(name: str, rtype: str, *targets: str, ttl: int = 300, **kw: Any) -> Endpoint:
    return Endpoint.new(name, rtype, targets, ttl=ttl, **kw)


# -- read -------------------------------------------------------------------------------------------------


def test_external_dns_mixed_zone_reads_as_external_dns_reads_it() -> None:
    # pdns_test.go's ZoneMixed and endpointsMixedRecords: trailing dots trimmed but on TXT and SRV, ALIAS
    # read as CNAME (here with alias=true below the apex: see test_an_alias_round_trips_without_a_change).
    zone = {
        "rrsets": [
            rrset("cname.example.com.", "CNAME", "example.com."),
            rrset("example.com.", "TXT", "'would smell as sweet'"),
            rrset("example.com.", "A", "8.8.8.8", "8.8.4.4", "4.4.4.4"),
            rrset("alias.example.com.", "ALIAS", "example.by.any.other.name.com."),
            rrset("example.com.", "MX", "10 mailhost1.example.com.", "10 mailhost2.example.com."),
            rrset("_service._tls.example.com.", "SRV", "100 1 443 service.example.com."),
            rrset("sub.example.com.", "NS", "ns1.example.com.", "ns2.example.com."),
        ]
    }
    assert endpoints_of(ZONE, zone).endpoints == [
        ep("cname.example.com", "CNAME", "example.com"),
        ep("example.com", "TXT", "'would smell as sweet'"),
        ep("example.com", "A", "8.8.8.8", "8.8.4.4", "4.4.4.4"),
        ep(
            "alias.example.com",
            "CNAME",
            "example.by.any.other.name.com",
            provider_specific=[("alias", "true")],
        ),
        ep("example.com", "MX", "10 mailhost1.example.com", "10 mailhost2.example.com"),
        ep("_service._tls.example.com", "SRV", "100 1 443 service.example.com."),
        ep("sub.example.com", "NS", "ns1.example.com", "ns2.example.com"),
    ]


def test_disabled_records_soa_other_types_and_the_fence_are_not_read() -> None:
    zone = {
        "rrsets": [
            rrset("example.com.", "A", "8.8.8.8", "8.8.4.4", disabled=(False, True)),  # RRSetDisabledRecord
            rrset("off.example.com.", "A", "192.0.2.1", disabled=(True,)),
            rrset("example.com.", "SOA", "ns. host. 1 3600 600 86400 60"),
            rrset("example.com.", "CAA", '0 issue "letsencrypt.org"'),
            rrset("_shardsync-fence.example.com.", "TXT", '"identity=a,generation=1"'),
            rrset("www.elsewhere.org.", "A", "192.0.2.9"),
        ]
    }
    read = endpoints_of(ZONE, zone, skip=["_shardsync-fence.example.com"])
    assert read.endpoints == [ep("example.com", "A", "8.8.8.8")]
    assert read.unreadable == 0


def test_an_unreadable_rrset_costs_that_rrset_and_a_non_zone_answer_is_an_error() -> None:
    zone = {"rrsets": [{"name": "x.example.com."}, rrset("ok.example.com.", "A", "192.0.2.1"), "junk"]}
    read = endpoints_of(ZONE, zone)
    assert read.endpoints == [ep("ok.example.com", "A", "192.0.2.1")]
    assert read.unreadable == 2
    with pytest.raises(ValueError, match="no rrsets"):
        endpoints_of(ZONE, {"error": "Not Found"})


def test_the_zone_list_keeps_zones_a_client_may_change() -> None:
    answer = [
        {"id": "example.com.", "name": "example.com.", "kind": "Native"},
        {"id": "primary.org.", "name": "Primary.ORG.", "kind": "Master"},
        {"id": "copy.net.", "name": "copy.net.", "kind": "Slave"},
        {"id": "cat.", "name": "cat.", "kind": "Consumer"},
        {"id": "weird=2Fid.", "name": "weird/id."},
        {"name": "no-id.org."},
        "junk",
    ]
    assert zone_ids(answer) == {
        "example.com": "example.com.",
        "primary.org": "primary.org.",
        "weird/id": "weird=2Fid.",
    }


# -- write ------------------------------------------------------------------------------------------------


def test_a_and_txt_are_patched_as_external_dns_patches_them() -> None:
    # pdns_test.go's endpointsSimpleRecord → ZoneEmptyToSimplePatch (records' order and the rrsets' is free)
    changes = Changes(create=[ep(ZONE, "A", "8.8.8.8"), ep(ZONE, "TXT", OWNER_TXT)])
    patch = patch_of(ZONE, changes)
    assert patch.rejected == []
    assert patch.rrsets == [
        {
            "name": "example.com.",
            "type": "A",
            "ttl": 300,
            "changetype": "REPLACE",
            "records": [{"content": "8.8.8.8", "disabled": False}],
        },
        {
            "name": "example.com.",
            "type": "TXT",
            "ttl": 300,
            "changetype": "REPLACE",
            "records": [{"content": OWNER_TXT, "disabled": False}],
        },
    ]


def test_host_name_contents_get_their_trailing_dot_and_a_missing_ttl_is_300() -> None:
    changes = Changes(
        create=[
            ep("cname.example.com", "CNAME", "example.com", ttl=0),
            ep("example.com", "MX", "10 mailhost1.example.com", "20 mailhost2.example.com."),
            ep("_service._tls.example.com", "SRV", "100 1 443 service.example.com"),
            ep("sub.example.com", "NS", "ns1.example.com"),
            ep("4.3.2.1.in-addr.arpa", "PTR", "host.example.com"),
            ep("v6.example.com", "AAAA", "2001:db8::1", ttl=60),
        ]
    )
    by_name = {(r["name"], r["type"]): r for r in patch_of(ZONE, changes).rrsets if "records" in r}
    contents = {key: [rec["content"] for rec in r["records"]] for key, r in by_name.items()}
    assert contents == {
        ("cname.example.com.", "CNAME"): ["example.com."],
        ("example.com.", "MX"): ["10 mailhost1.example.com.", "20 mailhost2.example.com."],
        ("_service._tls.example.com.", "SRV"): ["100 1 443 service.example.com."],
        ("sub.example.com.", "NS"): ["ns1.example.com."],
        ("v6.example.com.", "AAAA"): ["2001:db8::1"],
    }
    assert by_name[("cname.example.com.", "CNAME")]["ttl"] == 300
    assert by_name[("v6.example.com.", "AAAA")]["ttl"] == 60
    # the PTR name is outside example.com: rejected, not sent
    assert [r.endpoint.dns_name for r in patch_of(ZONE, changes).rejected] == ["4.3.2.1.in-addr.arpa"]


def test_a_cname_at_the_apex_or_marked_alias_is_written_as_alias() -> None:
    # pdns_test.go: endpointsApexRecords and endpointWithAliasAnnotation → ZoneEmptyToPreferAliasPatch
    changes = Changes(
        create=[
            ep("example.com", "CNAME", "example.by.any.other.name.com"),
            ep("cname.example.com", "CNAME", "example.by.any.other.name.com"),
            ep(
                "sub.example.com", "CNAME", "target.example.com", provider_specific=[(ALIAS_PROPERTY, "true")]
            ),
        ]
    )
    types = {r["name"]: (r["type"], r["records"][0]["content"]) for r in patch_of(ZONE, changes).rrsets}
    assert types == {
        "example.com.": ("ALIAS", "example.by.any.other.name.com."),
        "cname.example.com.": ("CNAME", "example.by.any.other.name.com."),
        "sub.example.com.": ("ALIAS", "target.example.com."),
    }


def test_deletes_go_first_and_carry_no_ttl() -> None:
    old = ep("www.example.com", "A", "192.0.2.1")
    new = ep("www.example.com", "A", "192.0.2.2")
    changes = Changes(
        create=[ep("new.example.com", "A", "192.0.2.3")],
        update_old=[old],
        update_new=[new],
        delete=[ep("gone.example.com", "A", "192.0.2.4"), ep("gone.example.com", "A", "192.0.2.4")],
    )
    rrsets = patch_of(ZONE, changes).rrsets
    assert [(r["changetype"], r["name"]) for r in rrsets] == [
        ("DELETE", "gone.example.com."),
        ("REPLACE", "www.example.com."),
        ("REPLACE", "new.example.com."),
    ]
    assert rrsets[0] == {"name": "gone.example.com.", "type": "A", "changetype": "DELETE"}


def test_an_update_between_cname_and_alias_deletes_the_old_type_in_the_same_patch() -> None:
    old = ep("sub.example.com", "CNAME", "a.example.org", provider_specific=[(ALIAS_PROPERTY, "true")])
    new = ep("sub.example.com", "CNAME", "a.example.org")
    rrsets = patch_of(ZONE, Changes(update_old=[old], update_new=[new])).rrsets
    assert [(r["changetype"], r["type"]) for r in rrsets] == [("DELETE", "ALIAS"), ("REPLACE", "CNAME")]


@pytest.mark.parametrize(
    ("endpoint", "reason"),
    [
        (ep("www.example.org", "A", "192.0.2.1"), "not in zone"),
        (ep("_shardsync-fence.example.com", "TXT", '"x"'), "reserved"),
        (ep("t.example.com", "TXT", "v=spf1 -all"), "double quotes"),
        (ep("t.example.com", "NAPTR", "1 1 S SIP+D2U  _sip._udp.example.com."), "not managed"),
        (ep("t.example.com", "A"), "no targets"),
        (ep("t.example.com", "A", "192.0.2.1", ttl=2**31), "TTL"),
    ],
)
def test_a_change_that_cannot_be_written_is_rejected_and_the_rest_sent(
    endpoint: Endpoint, reason: str
) -> None:
    good = ep("ok.example.com", "A", "192.0.2.1")
    patch = patch_of(ZONE, Changes(create=[endpoint, good]), reserved=["_shardsync-fence.example.com"])
    assert [r["name"] for r in patch.rrsets] == ["ok.example.com."]
    assert [r.endpoint for r in patch.rejected] == [endpoint]
    assert reason in patch.rejected[0].reason


def test_a_second_change_of_one_rrset_is_rejected_as_powerdns_would_refuse_the_patch() -> None:
    one = ep("w.example.com", "A", "192.0.2.1", set_identifier="blue")
    two = ep("w.example.com", "A", "192.0.2.2", set_identifier="green")
    patch = patch_of(ZONE, Changes(create=[one, two]))
    assert len(patch.rrsets) == 1 and [r.endpoint for r in patch.rejected] == [two]


# -- both ways --------------------------------------------------------------------------------------------

label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
host = st.lists(label, min_size=1, max_size=3).map(".".join)
targets_of = {
    "A": st.ip_addresses(v=4).map(str),
    "AAAA": st.ip_addresses(v=6).map(str),
    "CNAME": host,
    "TXT": st.from_regex(r'"[a-z0-9=,/ -]{0,40}"', fullmatch=True),
    "MX": st.tuples(st.integers(0, 65535), host).map(lambda t: f"{t[0]} {t[1]}"),
    "NS": host,
}


@st.composite
def written_endpoint(draw: st.DrawFn) -> Endpoint:
    rtype = draw(st.sampled_from(sorted(targets_of)))
    count = 1 if rtype == "CNAME" else draw(st.integers(1, 3))
    name = draw(st.one_of(st.just(ZONE), host.map(lambda h: f"{h}.{ZONE}")))
    specific = draw(st.sampled_from([(), ((ALIAS_PROPERTY, "true"),)])) if rtype == "CNAME" else ()
    if name == ZONE:
        specific = ()  # the apex is ALIAS by position, read back without the property
    ttl = draw(st.sampled_from([0, 60, 300, 3600]))
    return Endpoint.new(
        name,
        rtype,
        draw(st.lists(targets_of[rtype], min_size=count, max_size=count)),
        ttl,
        provider_specific=specific,
    )


@given(written_endpoint())
def test_what_is_written_reads_back_as_no_change(endpoint: Endpoint) -> None:
    # What PowerDNS stores is the PATCH's content as sent (tests/providers/test_pdns.py shows it on a real
    # server for each type); read back, the plan finds nothing to do.
    (replace,) = patch_of(ZONE, Changes(create=[endpoint])).rrsets
    stored = {"rrsets": [{k: v for k, v in replace.items() if k != "changetype"}]}
    (read,) = endpoints_of(ZONE, stored).endpoints
    assert plan([endpoint], [read], owner_id="").changes.is_empty()


# -- the lease-timed fence ----------------------------------------------------------------------------------


async def test_lease_timed_keeps_the_newest_token_in_this_process() -> None:
    fence = LeaseTimed()
    old, new = FenceToken(1, "a"), FenceToken(2, "b")
    await fence.acquire(ZONE, old)
    await fence.check(ZONE, old)
    await fence.acquire(ZONE, new)
    with pytest.raises(FencedError):
        await fence.check(ZONE, old)
    with pytest.raises(FencedError):
        await fence.acquire(ZONE, old)
    await fence.check(ZONE, new)
    assert fence.reserved(ZONE) == ()


@pytest.mark.parametrize("fence", ["", "127.0.0.1:53"], ids=["lease-timed", "fenced"])
async def test_the_replicas_keep_the_conservative_timing(fence: str) -> None:
    # The fence's check precedes the PATCH, not within it: with the fence or without, the provider says its
    # writes are not fenced, so the sharding loops keep the unfenced timings.
    provider = PROVIDERS["pdns"].create(PdnsOptions(api_key="k", rfc2136_fence=fence), "shardsync-0")
    assert await fences_writes(provider) is False
    await provider.close()


# -- flags --------------------------------------------------------------------------------------------------


def validate(**fields: Any) -> None:
    flags = PROVIDERS["pdns"].flags
    flags.validate(flags.options(**{"api_key": "k", **fields}))


def test_external_dns_defaults() -> None:
    options = PdnsOptions()
    assert (options.server, options.server_id, options.skip_tls_verify) == (
        "http://localhost:8081",
        "localhost",
        False,
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"api_key": ""}, "--pdns-api-key"),
        ({"server": "localhost:8081"}, "--pdns-server=localhost:8081"),
        ({"server_id": ""}, "--pdns-server-id"),
        ({"timeout": 0.0}, "--pdns-timeout"),
        ({"rfc2136_fence": "127.0.0.1"}, "HOST:PORT"),
        ({"rfc2136_fence": "127.0.0.1:70000"}, "HOST:PORT"),
        ({"fence_tsig_keyname": "k"}, "needs --pdns-rfc2136-fence"),
        ({"rfc2136_fence": "127.0.0.1:53", "fence_tsig_keyname": "k"}, "--pdns-fence-tsig-secret"),
        ({"rfc2136_fence": "127.0.0.1:53", "fence_tsig_keyname": "k", "fence_tsig_secret": "!"}, "base64"),
        ({"server": "https://pdns:8081", "tls_client_cert": "/c.pem"}, "--tls-client-cert-key"),
    ],
)
def test_bad_flags_are_refused_naming_the_flag(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        validate(**fields)


def test_a_missing_ca_file_is_an_environment_error_naming_the_flag() -> None:
    with pytest.raises(OSError, match=r"--tls-ca=/nonexistent/ca\.pem"):
        validate(server="https://pdns:8081", tls_ca="/nonexistent/ca.pem")


def test_fence_addresses() -> None:
    assert fence_address("127.0.0.1:5300") == ("127.0.0.1", 5300)
    assert fence_address("[::1]:53") == ("::1", 53)
    assert fence_address("pdns.dns.svc:53") == ("pdns.dns.svc", 53)
