"""Where shardsync deliberately differs from external-dns v0.22.0 (kubernetes-sigs/external-dns, tag v0.22.0).

One row per difference listed in the README's "Differences from external-dns"; each pins our behaviour and
names what external-dns does (file, test or issue). Differences whose tests sit with their area:
too-long TXT names (test_registry_parity), CNAME with two targets and SRV hosts without a trailing dot
(test_endpoint_parity).
"""

from __future__ import annotations

from shardsync.records.endpoint import Changes, Endpoint
from shardsync.records.plan import SkipReason, plan
from shardsync.records.registry import TxtRegistry, serialize_labels
from shardsync.sources.annotations import parse as parse_annotations

ME = "me"


def txt(name: str, owner: str = ME) -> Endpoint:
    return Endpoint(name, "TXT", (serialize_labels({"owner": owner}),))


def test_legacy_txt_deleted_with_the_last_record_it_labels() -> None:
    # external-dns registry/txt/registry.go ApplyChanges deletes only the typed TXT record and leaves the
    # untyped one for the user to clean up (its PR #5172: "dangling TXT records is not a risk but
    # inconvenience"). We delete it, but only ours, and only when nothing else at the name still uses it.
    reg = TxtRegistry(ME, prefix="txt.")
    cname = Endpoint.new("www.ex.com", "CNAME", ["lb.ex.net"])
    view = reg.read([cname, txt("txt.cname-www.ex.com"), txt("txt.www.ex.com")])
    out = reg.with_ownership(Changes(delete=list(view.current)), view).changes
    assert sorted((e.dns_name, e.record_type) for e in out.delete) == [
        ("txt.cname-www.ex.com", "TXT"),
        ("txt.www.ex.com", "TXT"),  # the legacy record: external-dns would leave it
        ("www.ex.com", "CNAME"),
    ]
    # ... but not while another record at the name is still labelled by it
    mx = Endpoint.new("www.ex.com", "MX", ["10 mail.ex.com"])
    view = reg.read([cname, mx, txt("txt.cname-www.ex.com"), txt("txt.www.ex.com")])
    doomed = [e for e in view.current if e.record_type == "CNAME"]
    out = reg.with_ownership(Changes(delete=doomed), view).changes
    assert sorted((e.dns_name, e.record_type) for e in out.delete) == [
        ("txt.cname-www.ex.com", "TXT"),
        ("www.ex.com", "CNAME"),
    ]


def test_cname_create_beside_an_unmanaged_record_is_skipped() -> None:
    # external-dns's plan sees managed types only (plan/plan.go filterRecordsForPlan), so it sends a CNAME
    # create beside an existing TXT or MX record; the server refuses it (RFC 1034 3.6.2) and with it the
    # zone's whole batch, every sync (its issues #1517, #2863). We skip that create and report it.
    current = [Endpoint.new("www.ex.com", "TXT", ["v=spf1 -all"])]
    desired = [Endpoint.new("www.ex.com", "CNAME", ["lb.ex.net"])]
    result = plan(desired, current, owner_id=ME)
    assert result.changes.is_empty()
    assert [s.reason for s in result.skipped] == [SkipReason.CNAME_CONFLICT]


def test_alpha_annotation_prefix_still_read() -> None:
    # external-dns v0.22 reads only `external-dns.kubernetes.io/` unless --annotation-prefix says otherwise
    # (source/annotations/annotations.go DefaultAnnotationPrefix, its PR #6424). A user switching from
    # v0.21 or older has `external-dns.alpha.kubernetes.io/` annotations; ignoring them would unpublish,
    # under the sync policy delete, every record they make. We read both; the new prefix wins.
    alpha = parse_annotations({"external-dns.alpha.kubernetes.io/hostname": "a.ex.com"})
    assert alpha.hostnames == ("a.ex.com",)
    both = parse_annotations(
        {
            "external-dns.alpha.kubernetes.io/hostname": "old.ex.com",
            "external-dns.kubernetes.io/hostname": "new.ex.com",
        }
    )
    assert both.hostnames == ("new.ex.com",)


def test_cname_against_other_types_across_set_identifiers() -> None:
    # external-dns's PerResource.ResolveRecordTypes (plan/conflict.go) compares types within one
    # (name, set identifier) row; a CNAME and an A under different set identifiers would both be sent,
    # and the server refuses the pair. We drop the CNAME whatever its set identifier.
    desired = [
        Endpoint.new("www.ex.com", "CNAME", ["lb.ex.net"], set_identifier="eu"),
        Endpoint.new("www.ex.com", "A", ["192.0.2.1"], set_identifier="us"),
    ]
    created = plan(desired, [], owner_id=ME).changes.create
    assert [e.record_type for e in created] == ["A"]
