"""The provider readers the fuzz tests feed odd zones to, one `Reader` each: what a provider's answer looks
like (a Hypothesis strategy) and the function that turns it into the zone's records: rfc2136's AXFR, the
webhook's answer, Route53's listing pages (read by the aws provider itself, through a double of the three
calls it makes; the double cannot show what botocore's own parsing would refuse) and PowerDNS's zone answer
(read by the pdns provider itself, through a double of its API client). A provider added later is
one more entry in `READERS`; tests/fuzz/test_fuzz_readers.py fuzzes every entry
and runs the records it returns through the TXT registry and the planner."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import anyio
import dns.name
import dns.rdataclass
import dns.rdatatype
import dns.rdtypes.ANY.CNAME
import dns.rdtypes.ANY.MX
import dns.rdtypes.ANY.NS
import dns.rdtypes.ANY.PTR
import dns.rdtypes.ANY.TXT
import dns.rdtypes.IN.A
import dns.rdtypes.IN.AAAA
import dns.rdtypes.IN.SRV
import dns.rrset
from hypothesis import strategies as st

from shardsync.providers.aws.errors import Start
from shardsync.providers.aws.provider import AwsProvider
from shardsync.providers.aws.zones import HostedZone
from shardsync.providers.pdns.fencing import LeaseTimed
from shardsync.providers.pdns.provider import PdnsProvider
from shardsync.providers.rfc2136.messages import endpoints_from_rrsets
from shardsync.providers.webhook.client import WebhookProvider
from shardsync.records.endpoint import Endpoint
from tests.fuzz.objects import dns_endpoint
from tests.fuzz.support import junk, maybe

ZONE = "ex.com"
_GEO_KEYS = ("ContinentCode", "CountryCode", "SubdivisionCode")
IN = dns.rdataclass.IN


@dataclass(frozen=True, slots=True)
class Reader:
    name: str
    answers: st.SearchStrategy[Any]  # what the provider may send
    read: Callable[[Any], list[Endpoint]]  # may raise only ProviderError


# -- RFC 2136: the RRsets of an AXFR ---------------------------------------------------------------------

raw_label = st.binary(min_size=1, max_size=63)
owner = st.one_of(
    st.lists(raw_label, max_size=4).map(lambda labels: dns.name.Name([*labels, b"ex", b"com", b""])),
    st.sampled_from(
        [dns.name.from_text("ex.com."), dns.name.from_text("other.org."), dns.name.from_text("*.ex.com.")]
    ),
)
relative_name = st.lists(raw_label, min_size=1, max_size=3).map(lambda labels: dns.name.Name([*labels, b""]))
ownership_text = st.one_of(
    st.builds(
        lambda owner_id, resource: (
            f"heritage=external-dns,external-dns/owner={owner_id},external-dns/resource={resource}"
        ),
        st.text(max_size=15),
        st.text(max_size=30),
    ),
    st.just("heritage=external-dns"),
    st.text(max_size=80),
).map(lambda t: t.encode("utf-8", "surrogatepass")[:255])
txt_strings = st.lists(st.one_of(ownership_text, st.binary(max_size=255)), min_size=1, max_size=4)


def _rd(cls: Any, rdtype: dns.rdatatype.RdataType, *args: Any) -> Any:
    return cls(IN, rdtype, *args)


T = dns.rdatatype
rdata = st.one_of(
    st.ip_addresses(v=4).map(lambda a: _rd(dns.rdtypes.IN.A.A, T.A, str(a))),
    st.ip_addresses(v=6).map(lambda a: _rd(dns.rdtypes.IN.AAAA.AAAA, T.AAAA, str(a))),
    relative_name.map(lambda n: _rd(dns.rdtypes.ANY.CNAME.CNAME, T.CNAME, n)),
    relative_name.map(lambda n: _rd(dns.rdtypes.ANY.NS.NS, T.NS, n)),
    relative_name.map(lambda n: _rd(dns.rdtypes.ANY.PTR.PTR, T.PTR, n)),
    st.builds(lambda p, n: _rd(dns.rdtypes.ANY.MX.MX, T.MX, p, n), st.integers(0, 65535), relative_name),
    st.builds(
        lambda p, w, port, n: _rd(dns.rdtypes.IN.SRV.SRV, T.SRV, p, w, port, n),
        st.integers(0, 65535),
        st.integers(0, 65535),
        st.integers(0, 65535),
        relative_name,
    ),
    txt_strings.map(lambda strings: _rd(dns.rdtypes.ANY.TXT.TXT, T.TXT, strings)),
)


def rrset(name: dns.name.Name, ttl: int, rdatas: list[Any]) -> dns.rrset.RRset:
    out = dns.rrset.RRset(name, IN, rdatas[0].rdtype)
    for rd in rdatas:
        if rd.rdtype == out.rdtype:
            out.add(rd, ttl)
    return out


axfr = st.lists(
    st.builds(rrset, owner, st.integers(0, 2**31 - 1), st.lists(rdata, min_size=1, max_size=4)), max_size=8
)


def read_axfr(rrsets: list[dns.rrset.RRset]) -> list[Endpoint]:
    return endpoints_from_rrsets(ZONE, rrsets, skip=[f"_fence.{ZONE}"])


# -- the webhook provider: GET /records -------------------------------------------------------------------

webhook_answer = st.one_of(st.lists(maybe(dns_endpoint), max_size=6), junk)


def read_webhook(data: Any) -> list[Endpoint]:
    return WebhookProvider._endpoints(data, "GET /records")


# -- Route53: ListResourceRecordSets pages, as botocore parses them -------------------------------------
# botocore validates the XML against the service model, so fields keep their types (Name and Value strings,
# TTL and Weight integers); what varies is their content: escaped octal names (\\052 for *), names outside
# the zone, values of any text, alias targets, routing policies, and pages that end anywhere.

r53_name = st.one_of(
    st.text(max_size=40).map(lambda t: f"{t}.ex.com."),
    st.sampled_from(["ex.com.", "\\052.ex.com.", "a\\100b.ex.com.", "other.org.", "\\777.ex.com.", ""]),
    st.text(max_size=20),
)
r53_type = st.sampled_from(["A", "AAAA", "CNAME", "TXT", "SRV", "MX", "NS", "PTR", "NAPTR", "SOA", "CAA"])
r53_policy = st.one_of(
    st.just({}),
    st.fixed_dictionaries({"Weight": st.integers(0, 2**63)}),
    st.fixed_dictionaries({"Region": st.text(max_size=12)}),
    st.fixed_dictionaries({"Failover": st.sampled_from(["PRIMARY", "SECONDARY", ""])}),
    st.fixed_dictionaries({"MultiValueAnswer": st.booleans()}),
    st.fixed_dictionaries(
        {"GeoLocation": st.fixed_dictionaries({}, optional={k: st.text(max_size=4) for k in _GEO_KEYS})}
    ),
)
r53_rrset = st.builds(
    lambda base, policy, set_id: {**base, **policy, **({"SetIdentifier": set_id} if set_id else {})},
    st.fixed_dictionaries(
        {"Name": r53_name, "Type": r53_type},
        optional={
            "TTL": st.integers(0, 2**31),
            "ResourceRecords": st.lists(st.fixed_dictionaries({"Value": st.text(max_size=60)}), max_size=4),
            "AliasTarget": st.fixed_dictionaries(
                {
                    "HostedZoneId": st.text(max_size=14),
                    "DNSName": r53_name,
                    "EvaluateTargetHealth": st.booleans(),
                }
            ),
            "HealthCheckId": st.text(max_size=36),
        },
    ),
    r53_policy,
    st.text(max_size=12),
)
route53_pages = st.lists(st.lists(r53_rrset, max_size=6), min_size=1, max_size=3)


class _Pages:
    """The Route53 calls `AwsProvider.records` makes, answering with the drawn pages (and one zone)."""

    def __init__(self, pages: list[list[dict[str, Any]]]) -> None:
        self.pages = pages

    def hosted_zones(self) -> list[HostedZone]:
        return [HostedZone("Z1", ZONE, private=False)]

    def tags(self, zone_ids: Iterable[str]) -> dict[str, dict[str, str]]:
        return {}

    def rrsets(
        self, zone_id: str, start: Start | None, max_items: int
    ) -> tuple[list[dict[str, Any]], Start | None]:
        index = 0 if start is None else int(start[0])
        more = index + 1 < len(self.pages)
        return self.pages[index], ((str(index + 1), "", "") if more else None)

    def change(self, zone_id: str, changes: list[dict[str, Any]], comment: str = "") -> None:
        raise AssertionError("reading never writes")


def read_route53(pages: list[list[dict[str, Any]]]) -> list[Endpoint]:
    provider = AwsProvider(_Pages(pages))

    async def read() -> list[Endpoint]:
        await provider.zones()
        return await provider.records(ZONE)

    return anyio.run(read)


# -- PowerDNS: GET /api/v1/servers/<id>/zones/<zone>, JSON as orjson parses it ---------------------------
# Any JSON may come back; a zone's rrsets carry a name, a type, a TTL and records of content + disabled,
# each of which may be missing, of the wrong type, outside the zone or of a type not managed.

json_scalar = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.text(max_size=20))
pdns_name = st.one_of(
    st.text(max_size=30).map(lambda t: f"{t}.ex.com."),
    st.sampled_from(["ex.com.", "*.ex.com.", "_shardsync-fence.ex.com.", "other.org.", "EX.COM", ""]),
    json_scalar,
)
pdns_record = st.fixed_dictionaries(
    {},
    optional={
        "content": st.one_of(st.text(max_size=60), json_scalar, st.sampled_from(['"heritage=external-dns"'])),
        "disabled": st.one_of(st.booleans(), json_scalar),
    },
)
pdns_rrset = st.one_of(
    st.fixed_dictionaries(
        {"name": pdns_name, "type": st.one_of(r53_type, st.sampled_from(["ALIAS", "a", "LUA"]), json_scalar)},
        optional={
            "ttl": st.one_of(st.integers(0, 2**31), json_scalar),
            "records": st.one_of(st.lists(pdns_record, max_size=4), json_scalar),
            "comments": st.lists(json_scalar, max_size=2),
        },
    ),
    json_scalar,
)
pdns_answer = st.one_of(st.fixed_dictionaries({"rrsets": st.lists(pdns_rrset, max_size=8)}), junk)


class _PdnsZone:
    """The API calls `PdnsProvider.records` makes, answering with the drawn zone."""

    base = "http://pdns.test/api/v1/servers/localhost"

    def __init__(self, answer: Any) -> None:
        self.answer = answer

    async def zones(self) -> Any:
        return [{"id": "ex.com.", "name": "ex.com.", "kind": "Native"}]

    async def zone(self, zone_id: str) -> Any:
        return self.answer

    async def patch(self, zone_id: str, rrsets: list[dict[str, Any]]) -> None:
        raise AssertionError("reading never writes")

    async def close(self) -> None:
        return None


def read_pdns(answer: Any) -> list[Endpoint]:
    return anyio.run(PdnsProvider(_PdnsZone(answer), LeaseTimed()).records, ZONE)


READERS: list[Reader] = [
    Reader("rfc2136 axfr", axfr, read_axfr),
    Reader("webhook records", webhook_answer, read_webhook),
    Reader("route53 rrsets", route53_pages, read_route53),
    Reader("pdns zone", pdns_answer, read_pdns),
]
