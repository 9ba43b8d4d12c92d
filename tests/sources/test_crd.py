"""DNSEndpoint translation: valid endpoints kept, invalid ones dropped and reported, never an exception.

Rows naming an external-dns test mirror kubernetes-sigs/external-dns v0.22.0 (source/crd_test.go,
endpoint/endpoint_test.go).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardsync.records.endpoint import CREATED_LABEL, RESOURCE_LABEL, normalize_name
from shardsync.sources.crd import dnsendpoint_endpoints, dnsendpoint_names
from shardsync.sources.options import SourceOptions
from shardsync.sources.status import observed_generation_to_write

from .objects import CREATED, dnsendpoint, records


def test_valid_endpoints_with_labels_ttl_and_provider_specific() -> None:
    obj = dnsendpoint(
        [
            {"dnsName": "a.example.com", "recordType": "A", "targets": ["1.2.3.4"], "recordTTL": 60},
            {
                "dnsName": "txt.example.com",
                "recordType": "TXT",
                "targets": ["hello world."],
                "labels": {"team": "dns", "shardsync/created": "1970-01-01T00:00:00Z"},
                "setIdentifier": "eu",
                "providerSpecific": [{"name": "webhook/x", "value": "y"}],
            },
        ]
    )
    result = dnsendpoint_endpoints(obj)
    assert result.problems == []
    a, txt = result.endpoints
    assert (a.dns_name, a.ttl, a.targets) == ("a.example.com", 60, ("1.2.3.4",))
    assert txt.labels == {"team": "dns", RESOURCE_LABEL: "crd/default/records", CREATED_LABEL: CREATED}
    assert (txt.set_identifier, txt.provider_specific) == ("eu", (("webhook/x", "y"),))


def test_endpoints_without_labels_of_their_own_share_the_objects_labels() -> None:
    obj = dnsendpoint(
        [{"dnsName": f"{n}.example.com", "recordType": "A", "targets": ["192.0.2.1"]} for n in ("a", "b")]
        + [{"dnsName": "c.example.com", "recordType": "A", "targets": ["192.0.2.1"], "labels": {"t": "x"}}]
    )
    a, b, c = dnsendpoint_endpoints(obj).endpoints
    assert a.labels == {RESOURCE_LABEL: "crd/default/records", CREATED_LABEL: CREATED}
    assert a.labels is b.labels  # one dict per object, not per endpoint
    assert c.labels == {"t": "x", **a.labels}


@pytest.mark.parametrize(
    ("endpoint", "reason"),
    [
        ({"dnsName": "a.example.com", "recordType": "A", "targets": ["1.2.3.4."]}, "trailing dot"),
        # external-dns v0.22.0 endpoint_test.go TestCheckEndpoint / NewSRVRecord: the SRV host is absolute
        (
            {"dnsName": "_x._tcp.a.example.com", "recordType": "SRV", "targets": ["0 50 80 x.example.com"]},
            "must end in a dot",
        ),
        (
            {"dnsName": "_x._tcp.a.example.com", "recordType": "SRV", "targets": ["0 50 x.example.com."]},
            "SRV",
        ),
        (
            {
                "dnsName": "_x._tcp.a.example.com",
                "recordType": "SRV",
                "targets": ["0 50 70000 x.example.com."],
            },
            "port '70000'",
        ),
        ({"dnsName": "a.example.com", "recordType": "A", "targets": ["not-an-ip"]}, "IPv4"),
        ({"dnsName": "a.example.com", "recordType": "A", "targets": []}, "no targets"),
        ({"dnsName": "a.example.com", "recordType": "NAPTR", "targets": ["x."]}, "unsupported"),
        (
            {
                "dnsName": "a.example.com",
                "recordType": "CNAME",
                "targets": ["x.example.net", "y.example.net"],
            },
            "CNAME",
        ),
        ({"dnsName": "bad name", "recordType": "A", "targets": ["1.2.3.4"]}, "characters"),
        ({"dnsName": "a.example.com", "recordType": "A", "targets": ["1.2.3.4"], "recordTTL": -1}, "TTL"),
        (
            {"dnsName": "a.example.com", "recordType": "A", "targets": ["1.2.3.4"], "recordTTL": "60"},
            "integer",
        ),
        ({"recordType": "A", "targets": ["1.2.3.4"]}, "dnsName"),
        ("a.example.com", "object"),
    ],
)
def test_invalid_endpoint_dropped_and_reported(endpoint: Any, reason: str) -> None:
    good = {"dnsName": "ok.example.com", "recordType": "A", "targets": ["192.0.2.1"]}
    result = dnsendpoint_endpoints(dnsendpoint([good, endpoint]))
    assert records(result) == {("ok.example.com", "A", ("192.0.2.1",))}
    [problem] = result.problems
    assert problem.field == "spec.endpoints[1]"
    assert reason in problem.message
    assert (problem.ref.kind, problem.ref.api_version) == ("DNSEndpoint", "externaldns.k8s.io/v1alpha1")


@pytest.mark.parametrize(
    ("record_type", "target", "want"),
    [
        ("CNAME", "target.example.net.", "target.example.net"),
        ("MX", "10 mail.example.com.", "10 mail.example.com."),
        # crd_test.go "SRV target with trailing dot (RFC 2782 absolute FQDN host) is valid (#6357)"
        ("SRV", "10 20 443 def.example.org.", "10 20 443 def.example.org."),
    ],
)
def test_trailing_dot_allowed_for_cname_mx_txt_srv(record_type: str, target: str, want: str) -> None:
    result = dnsendpoint_endpoints(
        dnsendpoint([{"dnsName": "a.example.com", "recordType": record_type, "targets": [target]}])
    )
    assert records(result) == {("a.example.com", record_type, (want,))}


def test_same_rrset_twice_merges_targets_first_metadata_wins() -> None:
    result = dnsendpoint_endpoints(
        dnsendpoint(
            [
                {
                    "dnsName": "a.example.com",
                    "recordType": "AAAA",
                    "targets": ["2001:DB8::1"],
                    "recordTTL": 30,
                },
                {
                    "dnsName": "A.example.com.",
                    "recordType": "AAAA",
                    "targets": ["2001:db8::2"],
                    "recordTTL": 90,
                },
            ]
        )
    )
    [ep] = result.endpoints
    assert (ep.targets, ep.ttl) == (("2001:db8::1", "2001:db8::2"), 30)
    assert result.problems == []


def test_second_cname_target_refused() -> None:
    result = dnsendpoint_endpoints(
        dnsendpoint(
            [
                {"dnsName": "a.example.com", "recordType": "CNAME", "targets": ["x.example.net"]},
                {"dnsName": "a.example.com", "recordType": "CNAME", "targets": ["x.example.net"]},
                {"dnsName": "a.example.com", "recordType": "CNAME", "targets": ["y.example.net"]},
            ]
        )
    )
    assert records(result) == {("a.example.com", "CNAME", ("x.example.net",))}
    [problem] = result.problems
    assert problem.field == "spec.endpoints[2]"


@pytest.mark.parametrize(("spec_endpoints", "problems"), [(None, 0), ([], 0), ({"a": 1}, 1), ("x", 1)])
def test_missing_or_malformed_endpoint_list(spec_endpoints: Any, problems: int) -> None:
    result = dnsendpoint_endpoints(dnsendpoint(spec_endpoints))
    assert result.endpoints == []
    assert len(result.problems) == problems


@pytest.mark.parametrize(("generation", "observed", "want"), [(3, 2, 3), (3, 3, None), (1, None, 1)])
def test_observed_generation_to_write(generation: int, observed: int | None, want: int | None) -> None:
    assert observed_generation_to_write(dnsendpoint([], generation=generation, observed=observed)) == want


TEXT = st.text(max_size=20)
ENDPOINT = st.fixed_dictionaries(
    {},
    optional={
        "dnsName": st.one_of(
            st.sampled_from(["a.example.com", "*.example.com", "", "x..y"]), TEXT, st.integers()
        ),
        "recordType": st.one_of(
            st.sampled_from(["A", "AAAA", "CNAME", "TXT", "SRV", "MX", "NS", "PTR", "a"]), TEXT
        ),
        "targets": st.one_of(
            st.lists(
                st.one_of(st.sampled_from(["1.2.3.4", "::1", "x.example.com", "10 mx.example.com"]), TEXT),
                max_size=3,
            ),
            TEXT,
            st.none(),
        ),
        "recordTTL": st.one_of(st.integers(), st.booleans(), TEXT, st.floats()),
        "setIdentifier": st.one_of(TEXT, st.integers()),
        "labels": st.one_of(
            st.dictionaries(TEXT, TEXT, max_size=2), st.dictionaries(TEXT, st.integers(), max_size=1), TEXT
        ),
        "providerSpecific": st.one_of(
            st.lists(st.fixed_dictionaries({"name": TEXT}, optional={"value": TEXT}), max_size=2),
            st.lists(st.integers(), max_size=2),
            TEXT,
        ),
    },
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.lists(st.one_of(ENDPOINT, TEXT, st.none()), max_size=5), ENDPOINT, TEXT, st.none()))
def test_any_spec_translates_without_exception(spec_endpoints: Any) -> None:
    obj = dnsendpoint(spec_endpoints)
    result = dnsendpoint_endpoints(obj)
    names = {normalize_name(n) for n in dnsendpoint_names(obj, SourceOptions())}  # SourceKind.names
    for ep in result.endpoints:
        ep.validate()
        assert ep.labels[RESOURCE_LABEL] == "crd/default/records"
        assert ep.dns_name in names
    given_count = len(spec_endpoints) if isinstance(spec_endpoints, list) else 0
    # Every entry is either kept (possibly merged into another) or reported.
    assert len(result.endpoints) + len(result.problems) <= max(given_count, 1)
    if isinstance(spec_endpoints, list):
        assert len(result.problems) + len({ep.key for ep in result.endpoints}) <= given_count
