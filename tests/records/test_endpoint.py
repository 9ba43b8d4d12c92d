"""Endpoint canonical form, validation, external-dns JSON round trips and zone matching."""

from __future__ import annotations

import pytest

from shardsync.records.endpoint import Changes, Endpoint, InvalidEndpoint, ZoneIndex, name_error


def test_new_is_canonical() -> None:
    ep = Endpoint.new("WWW.Example.COM.", "a", ["10.0.0.2", "10.0.0.1", "10.0.0.1"])
    assert ep.dns_name == "www.example.com"
    assert ep.record_type == "A"
    assert ep.targets == ("10.0.0.1", "10.0.0.2")
    assert ep == Endpoint.new("www.example.com", "A", ["10.0.0.1", "10.0.0.2"])


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("www.example.com", True),
        ("*.example.com", True),
        ("_sip._tcp.example.com", True),
        ("a.*.example.com", False),
        ("-bad.example.com", False),
        ("bad-.example.com", False),
        ("sp ace.example.com", False),
        ("a..b", False),
        ("x" * 64 + ".com", False),
        (".".join(["a" * 60] * 5), False),
        ("", False),
    ],
)
def test_name_rules(name: str, ok: bool) -> None:
    assert (name_error(name) is None) is ok


@pytest.mark.parametrize(
    ("rtype", "targets"),
    [
        ("A", ["::1"]),
        ("AAAA", ["10.0.0.1"]),
        ("CNAME", ["a.example.com", "b.example.com"]),
        ("SRV", ["10 5 http host.example.com"]),
        ("MX", ["mail.example.com"]),
        ("BOGUS", ["x"]),
        ("A", []),
    ],
)
def test_validate_rejects(rtype: str, targets: list[str]) -> None:
    with pytest.raises(InvalidEndpoint):
        Endpoint.new("x.example.com", rtype, targets).validate()


def test_validate_accepts_each_supported_type() -> None:
    for rtype, target in [
        ("A", "192.0.2.1"),
        ("AAAA", "2001:db8::1"),
        ("CNAME", "lb.example.net"),
        ("TXT", "hello world"),
        ("SRV", "10 5 443 host.example.com"),
        ("MX", "10 mail.example.com"),
        ("NS", "ns1.example.com"),
        ("PTR", "host.example.com"),
    ]:
        # a PTR lives under a reverse zone (external-dns v0.22's CheckEndpoint; tests/parity has the table)
        name = "1.2.0.192.in-addr.arpa" if rtype == "PTR" else "x.example.com"
        Endpoint.new(name, rtype, [target], ttl=300).validate()


def test_json_round_trip_uses_external_dns_names() -> None:
    ep = Endpoint.new(
        "api.example.com",
        "CNAME",
        ["lb.example.net"],
        ttl=60,
        set_identifier="eu",
        labels={"resource": "service/default/api"},
        provider_specific=[("alias", "true")],
    )
    data = ep.to_json()
    assert data == {
        "dnsName": "api.example.com",
        "targets": ["lb.example.net"],
        "recordType": "CNAME",
        "setIdentifier": "eu",
        "recordTTL": 60,
        "labels": {"resource": "service/default/api"},
        "providerSpecific": [{"name": "alias", "value": "true"}],
    }
    assert Endpoint.from_json(data) == ep


@pytest.mark.parametrize(
    "bad",
    [
        [],
        {"targets": ["1.2.3.4"]},
        {"dnsName": "a.com", "targets": "1.2.3.4"},
        {"dnsName": "a.com", "recordTTL": "60"},
        {"dnsName": "a.com", "labels": {"a": 1}},
        {"dnsName": "a.com", "providerSpecific": [{"value": "x"}]},
    ],
)
def test_from_json_rejects_bad_shapes(bad: object) -> None:
    with pytest.raises(InvalidEndpoint):
        Endpoint.from_json(bad)  # type: ignore[arg-type]


def test_changes_accepts_legacy_capitalised_keys() -> None:
    a = Endpoint.new("a.example.com", "A", ["192.0.2.1"])
    b = Endpoint.new("a.example.com", "A", ["192.0.2.2"])
    legacy = {"Create": [a.to_json()], "UpdateOld": [a.to_json()], "UpdateNew": [b.to_json()], "Delete": []}
    changes = Changes.from_json(legacy)
    assert changes.create == [a] and changes.update_old == [a] and changes.update_new == [b]
    assert len(changes) == 2
    assert Changes.from_json(changes.to_json()) == changes


def test_zone_index_picks_most_specific_zone() -> None:
    zones = ZoneIndex(["example.com", "sub.example.com", "other.org."])
    assert zones.zone_of("www.sub.example.com.") == "sub.example.com"
    assert zones.zone_of("www.example.com") == "example.com"
    assert zones.zone_of("example.com") == "example.com"
    assert zones.zone_of("notexample.com") is None
    assert zones.zone_of("other.org") == "other.org"
    # one string per zone, whatever name it is found from (what holds a zone per object holds no copy)
    assert zones.zone_of("a.example.com") is zones.zone_of("b.example.com") is next(iter(zones))


def test_zone_index_reach_is_a_names_zone_and_every_zone_below_it() -> None:
    zones = ZoneIndex(["example.com", "pods.svc.example.com", "deep.x.pods.svc.example.com", "other.org"])
    assert zones.reach("www.example.com") == ("example.com",)
    assert sorted(zones.reach("SVC.example.com.") or ()) == [
        "deep.x.pods.svc.example.com",
        "example.com",
        "pods.svc.example.com",
    ]
    assert zones.reach("pods.svc.example.com") == ("pods.svc.example.com", "deep.x.pods.svc.example.com")
    assert zones.reach("a.other.org") == ("other.org",)
    assert zones.reach("example.net") is None  # its own records would fall in no zone
    assert zones.reach("com") is None  # though zones lie below it
