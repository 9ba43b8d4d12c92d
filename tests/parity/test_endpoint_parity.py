"""Endpoint validation parity with external-dns v0.22.0 (kubernetes-sigs/external-dns, tag v0.22.0).

Mirrors endpoint/endpoint_test.go TestCheckEndpoint row by row (the row's description is the test id);
`Endpoint.validate()` is our CheckEndpoint. Rows where we deliberately differ say so (README, "Differences
from external-dns").
"""

from __future__ import annotations

import pytest

from shardsync.records.endpoint import Endpoint, InvalidEndpoint

V6_REVERSE = "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa"

# (TestCheckEndpoint description, name, type, targets, alias property or None, valid)
CHECK_ENDPOINT_ROWS = [
    ("Valid MX record target", "example.com", "MX", ["10 example.com"], None, True),
    ("Invalid MX record target", "example.com", "MX", ["example.com"], None, False),
    ("Valid SRV record target", "_service._tcp.example.com", "SRV", ["10 5 5060 example.com."], None, True),
    ("Invalid SRV record target", "_service._tcp.example.com", "SRV", ["10 5 example.com."], None, False),
    ("Non-MX/SRV record type", "example.com", "A", ["192.168.1.1"], None, True),
    ("Valid AAAA record", "example.com", "AAAA", ["2001:db8::1"], None, True),
    ("Invalid A record - not an IP", "example.com", "A", ["not-an-ip"], None, False),
    ("Invalid A record - IPv6 address", "example.com", "A", ["2001:db8::1"], None, False),
    ("Invalid AAAA record - IPv4 address", "example.com", "AAAA", ["192.168.1.1"], None, False),
    ("Invalid AAAA record - not an IP", "example.com", "AAAA", ["not-an-ip"], None, False),
    (
        "A record with alias=true is valid",
        "example.com",
        "A",
        ["my-elb-123.us-east-1.elb.amazonaws.com"],
        "true",
        True,
    ),
    (
        "AAAA record with alias=true is valid",
        "example.com",
        "AAAA",
        ["dualstack.my-elb-123.us-east-1.elb.amazonaws.com"],
        "true",
        True,
    ),
    (
        "CNAME record with alias=true is valid",
        "example.com",
        "CNAME",
        ["d111111abcdef8.cloudfront.net"],
        "true",
        True,
    ),
    ("MX record with alias=true is invalid", "example.com", "MX", ["10 mail.example.com"], "true", False),
    ("TXT record with alias=true is invalid", "example.com", "TXT", ["v=spf1 ~all"], "true", False),
    ("NS record with alias=true is invalid", "example.com", "NS", ["ns1.example.com"], "true", False),
    (
        "SRV record with alias=true is invalid",
        "_sip._tcp.example.com",
        "SRV",
        ["10 5 5060 sip.example.com."],
        "true",
        False,
    ),
    (
        "MX record with alias=false is also invalid",
        "example.com",
        "MX",
        ["10 mail.example.com"],
        "false",
        False,
    ),
    ("MX record without alias property is valid", "example.com", "MX", ["10 mail.example.com"], None, True),
    (
        "Valid PTR record with in-addr.arpa",
        "2.49.168.192.in-addr.arpa",
        "PTR",
        ["web.example.com"],
        None,
        True,
    ),
    ("Valid PTR record with ip6.arpa", V6_REVERSE, "PTR", ["v6.example.com"], None, True),
    (
        "Valid PTR record with multiple hostname targets",
        "1.0.0.10.in-addr.arpa",
        "PTR",
        ["a.example.com", "b.example.com"],
        None,
        True,
    ),
    ("Invalid PTR record - DNS name not reverse DNS", "web.example.com", "PTR", ["10.0.0.1"], None, False),
    (
        "Invalid PTR record - DNS name not reverse, hostname target",
        "web.example.com",
        "PTR",
        ["a.example.com"],
        None,
        False,
    ),
    (
        "Invalid PTR record - target is an IP address",
        "1.0.0.10.in-addr.arpa",
        "PTR",
        ["10.0.0.1"],
        None,
        False,
    ),
    ("Invalid PTR record - target is an IPv6 address", V6_REVERSE, "PTR", ["2001:db8::1"], None, False),
    ("Invalid PTR record - empty target", "1.0.0.10.in-addr.arpa", "PTR", [""], None, False),
    ("Invalid PTR record - no targets", "1.0.0.10.in-addr.arpa", "PTR", [], None, False),
    ("Invalid PTR record - bare in-addr.arpa", "in-addr.arpa", "PTR", ["web.example.com"], None, False),
    # endpoint.go ValidateMXRecord / ValidateSRVRecord parse the numbers as uint16
    ("NewMXRecord priority over 65535", "example.com", "MX", ["70000 mail.example.com"], None, False),
    ("NewSRVRecord port over 65535", "_s._tcp.example.com", "SRV", ["1 1 70000 h.example.com."], None, False),
    # endpoint.go isAlias: only "true" skips the address check, alias=A does not
    ("isAlias alias=A on an A record with a hostname", "example.com", "A", ["lb.example.net"], "A", False),
    ("supportsAlias alias=false on an A record", "example.com", "A", ["192.0.2.1"], "false", True),
]


@pytest.mark.parametrize(("test", "name", "rtype", "targets", "alias", "valid"), CHECK_ENDPOINT_ROWS)
def test_check_endpoint(
    test: str, name: str, rtype: str, targets: list[str], alias: str | None, valid: bool
) -> None:
    # endpoint/endpoint_test.go TestCheckEndpoint
    specific = [("alias", alias)] if alias is not None else []
    ep = Endpoint.new(name, rtype, targets, provider_specific=specific)
    if valid:
        ep.validate()
    else:
        with pytest.raises(InvalidEndpoint):
            ep.validate()


# Deliberate differences (README, "Differences from external-dns"): rows where CheckEndpoint says one thing
# and we say another, each with the reason.
DIFFERENCE_ROWS = [
    # external-dns wants the SRV host absolute ("... example.com."); our providers always write it absolute,
    # so the dot is optional here: accepting more cannot publish a wrong record.
    ("SRV host without trailing dot", "_s._tcp.example.com", "SRV", ["10 5 5060 example.com"], True),
    # A CNAME RRset holds one target (RFC 2181 10.1); external-dns passes two to the provider, which refuses
    # the whole batch. We reject the endpoint so the rest of the zone still syncs.
    ("CNAME with two targets", "example.com", "CNAME", ["a.example.com", "b.example.com"], False),
    # external-dns does not check owner names in CheckEndpoint; a name no provider accepts fails its batch.
    ("owner name with a bad label", "-bad.example.com", "A", ["192.0.2.1"], False),
]


@pytest.mark.parametrize(("test", "name", "rtype", "targets", "valid"), DIFFERENCE_ROWS)
def test_check_endpoint_differences(
    test: str, name: str, rtype: str, targets: list[str], valid: bool
) -> None:
    ep = Endpoint.new(name, rtype, targets)
    if valid:
        ep.validate()
    else:
        with pytest.raises(InvalidEndpoint):
            ep.validate()
