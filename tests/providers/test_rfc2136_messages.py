"""RFC 2136 message building without a server: targets ↔ rdata, TXT spellings, batching, fencing, AXFR."""

from __future__ import annotations

import base64

import dns.message
import dns.name
import dns.rdataclass
import dns.rdatatype
import dns.rrset
import dns.update
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shardsync.providers.base import FenceToken
from shardsync.providers.rfc2136.messages import (
    UpdateBuilder,
    endpoints_from_rrsets,
    fence_update,
    is_zone_quoted,
    make_tsig_key,
    newest_token,
    to_rdata,
    to_target,
    txt_strings,
    written_spelling,
)
from shardsync.records.endpoint import Changes, Endpoint

SECRET = base64.b64encode(b"k" * 32).decode()
ZONE = "example.test"


@pytest.mark.parametrize(
    ("rtype", "target", "canonical"),
    [
        ("A", "10.0.0.1", "10.0.0.1"),
        ("AAAA", "2001:DB8:0::1", "2001:db8::1"),
        ("CNAME", "Other.Example.test", "other.example.test"),
        ("CNAME", "other.example.test.", "other.example.test"),
        ("NS", "ns1.example.net", "ns1.example.net"),
        ("PTR", "host.example.test", "host.example.test"),
        ("MX", "10 mail.example.test", "10 mail.example.test"),
        ("SRV", "0 5 5060 sip.example.test", "0 5 5060 sip.example.test"),
        (
            "TXT",
            '"heritage=external-dns,external-dns/owner=x"',
            '"heritage=external-dns,external-dns/owner=x"',
        ),
        ("TXT", "v=spf1 -all", '"v=spf1 -all"'),
        ("TXT", '"one" "two"', '"one" "two"'),
        ("TXT", 'say "hi"', '"say \\"hi\\""'),
        ("TXT", "café", '"caf\\195\\169"'),
    ],
)
def test_written_spelling(rtype: str, target: str, canonical: str) -> None:
    assert written_spelling(rtype, target) == canonical
    # The canonical spelling is a fixed point: writing it again yields the same record.
    assert written_spelling(rtype, canonical) == canonical
    assert to_rdata(rtype, canonical) == to_rdata(rtype, target)


def test_quoted_txt_is_zone_text_and_unquoted_is_raw() -> None:
    # external-dns's registry quotes its content; the quotes are syntax, not data (as external-dns writes it).
    assert txt_strings('"heritage=external-dns,external-dns/owner=x"') == [
        b"heritage=external-dns,external-dns/owner=x"
    ]
    # A raw value is kept whole: spaces and semicolons are data, not zone-file syntax.
    assert txt_strings("v=spf1 include:x ~all; y") == [b"v=spf1 include:x ~all; y"]


def test_long_txt_is_split_into_255_byte_strings_without_breaking_utf8() -> None:
    value = "é" * 200  # 400 bytes, two bytes per character
    strings = txt_strings(value)
    assert [len(s) for s in strings] == [254, 146]
    assert b"".join(strings).decode() == value
    quoted = '"' + "a" * 300 + '"'
    assert [len(s) for s in txt_strings(quoted)] == [255, 45]


@given(st.text(min_size=1, max_size=600).filter(lambda s: not is_zone_quoted(s)))
def test_any_txt_value_survives_the_canonical_form(value: str) -> None:
    canonical = written_spelling("TXT", value)
    assert written_spelling("TXT", canonical) == canonical
    rdata = to_rdata("TXT", canonical)
    assert b"".join(rdata.strings).decode("utf-8") == value  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("rtype", "target"),
    [("A", "not-an-ip"), ("A", "10.0.0.1 10.0.0.2"), ("AAAA", "10.0.0.1"), ("MX", "mail"), ("SOA", "x")],
)
def test_bad_targets_raise_value_error(rtype: str, target: str) -> None:
    with pytest.raises(ValueError, match=rtype if rtype == "SOA" else target.split()[0]):
        to_rdata(rtype, target)


def test_tsig_key_validation_never_shows_the_secret() -> None:
    key = make_tsig_key("k1", SECRET, "HMAC-SHA512")
    assert key.algorithm == dns.name.from_text("hmac-sha512")
    with pytest.raises(ValueError, match="not supported") as err:
        make_tsig_key("k1", SECRET, "hmac-sha3")
    assert SECRET not in str(err.value)
    bad = "not base64 !!" + SECRET
    with pytest.raises(ValueError, match="not valid base64") as err:
        make_tsig_key("k1", bad)
    assert bad not in str(err.value)


def _builder(batch_size: int = 50, **kw: object) -> UpdateBuilder:
    return UpdateBuilder(
        ZONE,
        key=make_tsig_key("k1", SECRET),
        ttl_of=lambda ep: ep.ttl or 300,
        batch_size=batch_size,
        reserved=[f"_shardsync-fence.{ZONE}"],
        **kw,  # type: ignore[arg-type]
    )


def _a(name: str, *ips: str, ttl: int = 0) -> Endpoint:
    return Endpoint.new(f"{name}.{ZONE}", "A", ips or ["10.0.0.1"], ttl=ttl)


def test_batches_count_changes_and_keep_deletes_before_creates() -> None:
    changes = Changes(
        create=[_a(f"c{i}") for i in range(120)],
        update_old=[_a("u", "10.0.0.1")],
        update_new=[_a("u", "10.0.0.2", ttl=60)],
        delete=[_a("d")],
    )
    batches, rejected = _builder(50).build(changes)
    assert not rejected
    assert [b.changes for b in batches] == [50, 50, 22]
    labels = [label for b in batches for label in b.labels]
    assert labels[0] == f"delete d.{ZONE} A"
    assert labels[1] == f"update u.{ZONE} A"
    assert labels[2].startswith("create ")
    first = batches[0].message
    # delete: class NONE, TTL 0; update: NONE old then IN new with its TTL; creates with the default TTL.
    assert [(r.deleting, r.ttl) for r in first.update[:4]] == [
        (dns.rdataclass.NONE, 0),
        (dns.rdataclass.NONE, 0),
        (None, 60),
        (None, 300),
    ]
    key = make_tsig_key("k1", SECRET)
    for b in batches:
        assert b.message.keyname == key.name
        # Signed on the wire, and the signature verifies with the same key.
        parsed = dns.message.from_wire(b.message.to_wire(), keyring={key.name: key})
        assert parsed.had_tsig


def test_batches_also_split_on_record_count() -> None:
    big = [_a(f"big{i}", *[f"10.0.{i}.{j}" for j in range(200)]) for i in range(3)]
    batches, _ = _builder(50, max_rrs_per_message=300).build(Changes(create=big))
    assert [b.changes for b in batches] == [1, 1, 1]


def test_every_message_carries_the_fence_prerequisite() -> None:
    token = FenceToken(generation=7, identity="replica-1")
    changes = Changes(create=[_a(f"c{i}") for i in range(5)])
    batches, _ = _builder(2).build(changes, (f"_shardsync-fence.{ZONE}", token))
    assert len(batches) == 3
    for b in batches:
        (prereq,) = b.message.prerequisite
        assert prereq.name == dns.name.from_text(f"_shardsync-fence.{ZONE}.")
        assert prereq.rdtype == dns.rdatatype.TXT and prereq.ttl == 0
        assert [rd.to_text() for rd in prereq] == ['"identity=replica-1,generation=7"']


def test_invalid_changes_are_rejected_and_the_rest_kept() -> None:
    changes = Changes(
        create=[
            _a("ok"),
            Endpoint.new("www.elsewhere.test", "A", ["10.0.0.1"]),
            Endpoint.new(f"bad.{ZONE}", "A", ["nope"]),
            Endpoint.new(f"_shardsync-fence.{ZONE}", "TXT", ["x"]),
            Endpoint.new(f"soa.{ZONE}", "SOA", ["x"]),
        ]
    )
    batches, rejected = _builder().build(changes)
    assert [label for b in batches for label in b.labels] == [f"create ok.{ZONE} A"]
    reasons = {r.endpoint.dns_name: r.reason for r in rejected}
    assert "NOTZONE" in reasons["www.elsewhere.test"]
    assert "nope" in reasons[f"bad.{ZONE}"]
    assert "fence" in reasons[f"_shardsync-fence.{ZONE}"]
    assert "SOA" in reasons[f"soa.{ZONE}"]


def test_mismatched_updates_are_a_value_error() -> None:
    with pytest.raises(ValueError, match="update_old"):
        _builder().build(Changes(update_old=[_a("x")]))


def test_fence_update_is_a_compare_and_set() -> None:
    token = FenceToken(generation=2, identity="b")
    fresh = fence_update(ZONE, f"_f.{ZONE}", None, token, key=None, ttl=60)
    (absent,) = fresh.prerequisite
    assert absent.rdclass == dns.rdataclass.NONE and absent.rdtype == dns.rdatatype.TXT
    old = dns.rrset.from_text(f"_f.{ZONE}.", 60, "IN", "TXT", '"identity=a,generation=1"')
    taken = fence_update(ZONE, f"_f.{ZONE}", old, token, key=None, ttl=60)
    (present,) = taken.prerequisite
    assert present.rdclass == dns.rdataclass.IN and present.ttl == 0
    assert [rd.to_text() for rd in present] == ['"identity=a,generation=1"']
    # replace = delete the RRset, then add ours
    assert [(r.rdclass, r.deleting) for r in taken.update] == [
        (dns.rdataclass.IN, dns.rdataclass.ANY),
        (dns.rdataclass.IN, None),
    ]
    assert newest_token(present) == FenceToken(1, "a")


def test_endpoints_from_rrsets_groups_skips_and_merges() -> None:
    text = [
        (ZONE, "SOA", "ns.x. h.x. 1 2 3 4 5"),
        (ZONE, "NS", "ns.x."),
        (f"_shardsync-fence.{ZONE}", "TXT", '"identity=a,generation=1"'),
        (f"www.{ZONE}", "A", "10.0.0.1"),
        (f"www.{ZONE}", "A", "10.0.0.2"),
        (f"www.{ZONE}", "CAA", '0 issue "x"'),
        (f"mx.{ZONE}", "MX", "10 Mail.example.test."),
    ]
    rrsets = [dns.rrset.from_text(f"{n}.", 300, "IN", t, v) for n, t, v in text]
    rrsets.append(dns.rrset.from_text(f"www.{ZONE}.", 60, "IN", "A", "10.0.0.3"))  # same RRset, next message
    eps = {
        (e.dns_name, e.record_type): e
        for e in endpoints_from_rrsets(ZONE, rrsets, skip=[f"_shardsync-fence.{ZONE}"])
    }
    assert set(eps) == {(ZONE, "NS"), (f"www.{ZONE}", "A"), (f"mx.{ZONE}", "MX")}
    assert eps[(f"www.{ZONE}", "A")].targets == ("10.0.0.1", "10.0.0.2", "10.0.0.3")
    assert eps[(f"www.{ZONE}", "A")].ttl == 60
    assert eps[(f"mx.{ZONE}", "MX")].targets == ("10 Mail.example.test",)
    assert eps[(ZONE, "NS")].targets == ("ns.x",)


def test_to_target_inverts_to_rdata_for_names() -> None:
    rd = to_rdata("SRV", "1 2 3 target.example.test")
    assert to_target(rd) == "1 2 3 target.example.test"
    assert dns.update.UpdateMessage(ZONE)  # the module's zone origin is accepted as text
