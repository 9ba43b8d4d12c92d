"""The aws provider's pure parts: RRsets and endpoints both ways, AdjustEndpoints, change batches and the
fence, the zone filter, the canonical hosted zones; and throttling through botocore's own retries against a
loopback server that always answers Throttling (moto never throttles)."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import pytest

from shardsync.flags import ConfigError
from shardsync.providers.aws import AwsOptions, _validate
from shardsync.providers.aws.api import Route53Api
from shardsync.providers.aws.batches import (
    Limits,
    fence_changes,
    fence_reserve,
    route53_changes,
    split,
    token_of,
)
from shardsync.providers.aws.canonical import canonical_hosted_zone
from shardsync.providers.aws.errors import AwsThrottledError, Start
from shardsync.providers.aws.provider import AwsProvider
from shardsync.providers.aws.records import adjust, endpoints_of, requires_delete_create, rrset_of, unescape
from shardsync.providers.aws.zones import HostedZone, ZoneFilter, by_name, parse_tags
from shardsync.providers.base import FenceToken, ProviderError
from shardsync.records.endpoint import OWNED_RECORD_LABEL, Changes, Endpoint

ELB = "my-lb-1.eu-west-1.elb.amazonaws.com"
NLB = "net-lb-abc.elb.us-east-2.amazonaws.com"


# ---- records ----


def test_canonical_hosted_zones_of_load_balancers() -> None:
    assert canonical_hosted_zone(ELB) == "Z32O12XQLNTSW2"
    assert canonical_hosted_zone(NLB) == "ZLMOA37VPKANP"
    assert canonical_hosted_zone("d111.cloudfront.net") == "Z2FDTNDATAQYW2"
    assert canonical_hosted_zone("example.com") == ""
    assert canonical_hosted_zone("x.nowhere-1.elb.amazonaws.com") == ""


def test_listed_rrsets_become_endpoints_as_external_dns_reads_them() -> None:
    assert endpoints_of(
        {"Name": "\\052.ex.org.", "Type": "CNAME", "TTL": 60, "ResourceRecords": [{"Value": "t.ex.net"}]}
    ) == [Endpoint.new("*.ex.org", "CNAME", ["t.ex.net"], ttl=60, provider_specific=[("alias", "false")])]
    alias = endpoints_of(
        {
            "Name": "lb.ex.org.",
            "Type": "AAAA",
            "AliasTarget": {"HostedZoneId": "Z", "DNSName": ELB + ".", "EvaluateTargetHealth": False},
        }
    )
    assert alias == [
        Endpoint.new(
            "lb.ex.org",
            "AAAA",
            [ELB],
            ttl=300,
            provider_specific=[("aws/evaluate-target-health", "false"), ("alias", "true")],
        )
    ]
    geo = endpoints_of(
        {
            "Name": "g.ex.org.",
            "Type": "A",
            "TTL": 1,
            "SetIdentifier": "de",
            "GeoLocation": {"CountryCode": "DE", "SubdivisionCode": "BY"},
            "HealthCheckId": "h",
            "ResourceRecords": [{"Value": "192.0.2.1"}],
        }
    )[0]
    assert geo.set_identifier == "de"
    assert dict(geo.provider_specific) == {
        "aws/geolocation-country-code": "DE",
        "aws/geolocation-subdivision-code": "BY",
        "aws/health-check-id": "h",
    }
    assert (
        endpoints_of({"Name": "ex.org.", "Type": "SOA", "TTL": 1, "ResourceRecords": [{"Value": "x"}]}) == []
    )
    assert unescape("a\\100b") == "a@b"


def test_rrsets_written_for_endpoints() -> None:
    assert rrset_of(Endpoint.new("a.ex.org", "A", ["192.0.2.1"]), True) == {
        "Name": "a.ex.org",
        "Type": "A",
        "TTL": 300,
        "ResourceRecords": [{"Value": "192.0.2.1"}],
    }
    alias = Endpoint.new("lb.ex.org", "A", [ELB], provider_specific=[("alias", "true")])
    assert rrset_of(alias, False)["AliasTarget"] == {
        "HostedZoneId": "Z32O12XQLNTSW2",
        "DNSName": ELB,
        "EvaluateTargetHealth": False,
    }
    inner = Endpoint.new("x.ex.org", "A", ["y.ex.org"], provider_specific=[("alias", "true")])
    assert rrset_of(inner, True, "/hostedzone/ZOWN")["AliasTarget"]["HostedZoneId"] == "ZOWN"
    weighted = Endpoint.new(
        "w.ex.org",
        "A",
        ["192.0.2.1"],
        set_identifier="b",
        provider_specific=[("aws/weight", "bad"), ("aws/multi-value-answer", "")],
    )
    rrset = rrset_of(weighted, True)
    assert (rrset["SetIdentifier"], rrset["Weight"], rrset["MultiValueAnswer"]) == ("b", 0, True)


def test_adjust_turns_a_cname_to_a_load_balancer_into_alias_records() -> None:
    out = adjust(
        [
            Endpoint.new("lb.ex.org", "CNAME", [ELB], ttl=60),
            Endpoint.new("c.ex.org", "CNAME", ["t.ex.net"]),
            Endpoint.new("a.ex.org", "A", ["192.0.2.1"], provider_specific=[("alias", "false")]),
        ],
        prefer_cname=False,
        evaluate_target_health=True,
    )
    assert [(e.dns_name, e.record_type, e.ttl, dict(e.provider_specific)) for e in out] == [
        ("lb.ex.org", "A", 300, {"alias": "true", "aws/evaluate-target-health": "true"}),
        ("c.ex.org", "CNAME", 0, {"alias": "false"}),
        ("a.ex.org", "A", 0, {}),
        ("lb.ex.org", "AAAA", 300, {"alias": "true", "aws/evaluate-target-health": "true"}),
    ]
    kept = adjust([Endpoint.new("lb.ex.org", "CNAME", [ELB])], prefer_cname=True, evaluate_target_health=True)
    assert [(e.record_type, dict(e.provider_specific)) for e in kept] == [("CNAME", {"alias": "false"})]


def test_which_updates_need_delete_and_create() -> None:
    old = Endpoint.new(
        "w.ex.org", "A", ["192.0.2.1"], set_identifier="b", provider_specific=[("aws/weight", "1")]
    )
    assert not requires_delete_create(
        old,
        Endpoint.new(
            "w.ex.org", "A", ["192.0.2.2"], set_identifier="b", provider_specific=[("aws/weight", "5")]
        ),
    )
    assert requires_delete_create(
        old,
        Endpoint.new(
            "w.ex.org",
            "A",
            ["192.0.2.1"],
            set_identifier="b",
            provider_specific=[("aws/region", "eu-west-1")],
        ),
    )
    assert requires_delete_create(old, Endpoint.new("w.ex.org", "A", ["192.0.2.1"], set_identifier="c"))


# ---- batches and the fence ----


def owned(name: str, n_values: int = 1) -> list[Endpoint]:
    record = Endpoint.new(name, "A", [f"192.0.2.{i + 1}" for i in range(n_values)])
    txt = Endpoint.new(
        "a-" + name,
        "TXT",
        ['"heritage=external-dns,external-dns/owner=x"'],
        labels={OWNED_RECORD_LABEL: name},
    )
    return [record, txt]


def test_a_record_and_its_txt_record_stay_in_one_batch_in_external_dns_order() -> None:
    creates = [e for i in range(5) for e in owned(f"h{i}.ex.org")]
    old = Endpoint.new("u.ex.org", "A", ["192.0.2.1"])
    changes = route53_changes(
        Changes(
            create=creates,
            update_old=[old],
            update_new=[Endpoint.new("u.ex.org", "A", ["192.0.2.2"])],
            delete=[Endpoint.new("d.ex.org", "A", ["192.0.2.3"])],
        ),
        lambda ep: rrset_of(ep, True),
    )
    batches = split(changes, Limits(changes=5, values=100, chars=10_000), reserved=(2, 3, 0))
    for batch in batches:
        names = {c.rrset["Name"].removeprefix("a-") for c in batch}
        assert all(sum(c.rrset["Name"].removeprefix("a-") == n for c in batch) in (1, 2) for n in names)
        assert len(batch) <= 3
    flat = [c for b in batches for c in b]
    assert sorted(c.rrset["Name"] for c in flat) == sorted(c.rrset["Name"] for c in changes)
    first = next(b for b in batches if any(c.action == "UPSERT" for c in b))
    assert [c.action for c in first] == sorted(
        (c.action for c in first), key=["UPSERT", "DELETE", "CREATE"].index
    )


def test_an_upsert_counts_twice_and_a_group_too_big_goes_alone() -> None:
    new = Endpoint.new("u.ex.org", "A", ["192.0.2.1", "192.0.2.2"])
    (upsert,) = route53_changes(Changes(update_old=[new], update_new=[new]), lambda ep: rrset_of(ep, True))
    assert upsert.size == (4, 36)
    big = route53_changes(
        Changes(create=owned("big.ex.org", 20) + owned("s.ex.org")), lambda ep: rrset_of(ep, True)
    )
    batches = split(big, Limits(changes=10, values=10, chars=10_000))
    assert [sorted(c.rrset["Name"] for c in b) for b in batches] == [
        ["a-big.ex.org", "big.ex.org"],
        ["a-s.ex.org", "s.ex.org"],
    ]


def test_the_fence_changes_are_a_compare_and_swap() -> None:
    old, new = FenceToken(1, "a"), FenceToken(2, "b")
    assert [c["Action"] for c in fence_changes("ex.org", None, new)] == ["CREATE"]
    cas = fence_changes("ex.org", old, new)
    assert [(c["Action"], token_of(c["ResourceRecordSet"])) for c in cas] == [
        ("DELETE", old),
        ("UPSERT", new),
    ]
    assert cas[0]["ResourceRecordSet"]["Name"] == "_shardsync-fence.ex.org"
    assert fence_reserve("ex.org", new)[:2] == (2, 3)
    assert token_of({"ResourceRecords": [{"Value": '"not a token"'}]}) is None


# ---- zones and options ----


def test_zone_filter_and_one_zone_per_name() -> None:
    pub, priv = HostedZone("Z1", "ex.org", False), HostedZone("Z2", "ex.org", True)
    assert ZoneFilter(ids=("Z2",)).matches(priv) and not ZoneFilter(ids=("Z2",)).matches(pub)
    assert not ZoneFilter(zone_type="private").matches(pub)
    tags = parse_tags(["env=prod", " team ", "=x"])
    assert tags == {"env": "prod", "team": ""}
    f = ZoneFilter(tags=tags)
    assert f.matches_tags({"env": "prod", "team": "y"}) and not f.matches_tags({"env": "dev", "team": "y"})
    chosen, left = by_name([priv, pub])
    assert chosen == {"ex.org": pub} and left == [priv]


def test_options_are_checked() -> None:
    _validate(AwsOptions())
    for bad in (
        AwsOptions(zone_type="both"),
        AwsOptions(batch_change_size=2),
        AwsOptions(api_retries=-1),
        AwsOptions(assume_role_external_id="x"),
    ):
        with pytest.raises(ConfigError):
            _validate(bad)


# ---- throttling through botocore's retries ----


class _Throttling(BaseHTTPRequestHandler):
    requests = 0

    def do_GET(self) -> None:
        type(self).requests += 1
        body = (
            b'<?xml version="1.0"?><ErrorResponse xmlns="https://route53.amazonaws.com/doc/2013-04-01/">'
            b"<Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error>"
            b"<RequestId>r</RequestId></ErrorResponse>"
        )
        self.send_response(400)
        self.send_header("Content-Type", "text/xml")
        self.send_header("Retry-After", "7")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def throttling(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_Throttling]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Throttling)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    for key, value in {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{server.server_address[1]}",
        "AWS_ACCESS_KEY_ID": "t",
        "AWS_SECRET_ACCESS_KEY": "t",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    _Throttling.requests = 0
    try:
        yield _Throttling
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_throttling_is_retried_a_bounded_number_of_times_then_a_typed_error(
    throttling: type[_Throttling],
) -> None:
    with pytest.raises(AwsThrottledError, match="Throttling: Rate exceeded") as info:
        Route53Api(retries=1).hosted_zones()
    assert throttling.requests == 2  # the call and one retry (--aws-api-retries=1)
    assert info.value.retry_after == 7.0


def test_the_zone_list_is_reused_for_aws_zones_cache_duration() -> None:
    class Listing:
        calls = 0

        def hosted_zones(self) -> list[HostedZone]:
            Listing.calls += 1
            return [HostedZone("Z1", "ex.org", False)]

        def tags(self, zone_ids: Iterable[str]) -> dict[str, dict[str, str]]:
            return {}

        def rrsets(self, zone_id: str, start: Start | None, max_items: int) -> tuple[list[Any], Start | None]:
            return [], None

        def change(self, zone_id: str, changes: list[dict[str, Any]], comment: str = "") -> None:
            return None

    async def main() -> None:
        cached, fresh = AwsProvider(Listing(), zones_cache=600), AwsProvider(Listing())
        for provider in (cached, cached, fresh, fresh):
            assert await provider.zones() == ["ex.org"]
        assert Listing.calls == 3
        with pytest.raises(ProviderError, match="no such Route53 hosted zone"):
            await cached.records("elsewhere.org")  # an unknown zone lists again, cache or not
        assert Listing.calls == 4

    anyio.run(main)
