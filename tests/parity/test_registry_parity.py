"""Registry parity with external-dns v0.22.0 (kubernetes-sigs/external-dns, tag v0.22.0).

One table per area; each row names the external-dns test it mirrors (registry/txt/registry_test.go,
registry/mapper/mapper_test.go). Where shardsync keeps a documented difference (README, "Differences from
external-dns"), the row says so and pins our behaviour.
"""

from __future__ import annotations

import pytest

from shardsync.records.endpoint import Changes, Endpoint
from shardsync.records.plan import SkipReason
from shardsync.records.registry import TxtRegistry, serialize_labels
from shardsync.records.txt_names import TxtNameMapper, txt_name_fits

ME = "owner"
ZONE = "test-zone.example.org"
LONG = "a" * 63  # a first label at the 63-character limit: `cname-` + it is over the limit
LONG_58 = "b" * 58  # `cname-` + 58 = 64: over; the legacy (untyped) name still fits


def rec(name: str, rtype: str, *targets: str, alias: str | None = None, **labels: str) -> Endpoint:
    specific = (("alias", alias),) if alias is not None else ()
    return Endpoint.new(name, rtype, targets, labels=labels, provider_specific=specific)


def txt(name: str, owner: str = ME) -> Endpoint:
    return Endpoint(name, "TXT", (serialize_labels({"owner": owner}),))


# -- name mapper ------------------------------------------------------------------------------------------

MAPPER_ROWS = [
    # (external-dns test, prefix, suffix, TXT name, endpoint name, record type)
    # registry/mapper/mapper_test.go TestAffixNameMapper_ToEndpointName (DNAME in the affix)
    ("ToEndpointName dname", "%{record_type}-", "", "dname-foo.example.com", "foo.example.com", "DNAME"),
    # registry/mapper/mapper_test.go TestToEndpointNameNewTXT (default affix, DNAME in the default position)
    ("ToEndpointNameNewTXT dname", "", "", "dname-foo.example.com", "foo.example.com", "DNAME"),
    # registry/mapper/mapper_test.go TestToEndpointNameNewTXT (CNAME)
    ("ToEndpointNameNewTXT cname", "", "", "cname-foo.example.com", "foo.example.com", "CNAME"),
    # registry/mapper/mapper_test.go TestExtractRecordTypeDefaultPosition (no type: legacy name)
    ("ExtractRecordTypeDefaultPosition", "", "", "zone.example.com", "zone.example.com", ""),
]


@pytest.mark.parametrize(("test", "prefix", "suffix", "txt_name", "name", "rtype"), MAPPER_ROWS)
def test_mapper_to_endpoint_name(
    test: str, prefix: str, suffix: str, txt_name: str, name: str, rtype: str
) -> None:
    mapper = TxtNameMapper(prefix, suffix)
    assert mapper.endpoint_name(txt_name) == (name, rtype), test
    if rtype:
        assert mapper.txt_name(name, rtype) == txt_name, test


FITS_ROWS = [
    # (external-dns test, TXT name, fits): endpoint.NewEndpoint returns nil for a label over 63 characters
    # registry/txt/registry_test.go TestFailGenerateTXT
    (
        "FailGenerateTXT",
        "cname-foo-some-really-big-name-not-supported-and-will-fail-000000000000000000.test-zone.example.org",
        False,
    ),
    ("FailGenerateTXT (63 after the type)", f"cname-{LONG}.{ZONE}", False),
    ("GenerateTXT (label exactly 63)", f"a-{'x' * 61}.{ZONE}", True),
    ("GenerateTXT", f"cname-foo.{ZONE}", True),
]


@pytest.mark.parametrize(("test", "name", "fits"), FITS_ROWS)
def test_txt_name_fits(test: str, name: str, fits: bool) -> None:
    assert txt_name_fits(name) is fits, test


# -- too-long TXT names ---------------------------------------------------------------------------------


def test_no_txt_and_no_upgrade_for_a_too_long_typed_name() -> None:
    # registry/txt/registry_test.go TestFailGenerateTXT: generateTXTRecord returns nothing, so Records()
    # arms no force-update for it. Here: a record of ours found through its legacy TXT (whose name fits)
    # gets no typed TXT record created, sync after sync.
    reg = TxtRegistry(ME)
    name = f"{LONG_58}.{ZONE}"
    ep = rec(name, "CNAME", "lb.example.net")
    view = reg.read([ep, txt(name)])
    assert view.current[0].labels["owner"] == ME
    assert view.upgrades == []
    assert reg.with_ownership(_changes(), view).changes.is_empty()


TOO_LONG_ROWS = [
    # (external-dns test, change kind, outcome)
    # registry/txt/registry_test.go TestFailGenerateTXT + ApplyChanges: no TXT in update or delete
    ("FailGenerateTXT update", "update"),
    ("FailGenerateTXT delete", "delete"),
]


@pytest.mark.parametrize(("test", "kind"), TOO_LONG_ROWS)
def test_no_txt_change_for_a_too_long_typed_name(test: str, kind: str) -> None:
    reg = TxtRegistry(ME)
    name = f"{LONG}.{ZONE}"
    old = rec(name, "CNAME", "old.example.net", owner=ME)
    new = rec(name, "CNAME", "new.example.net", owner=ME)
    changes = _changes(update=[(old, new)]) if kind == "update" else _changes(delete=[old])
    for view in (None, reg.read([old])):
        out = reg.with_ownership(changes, view).changes
        assert [e.record_type for e in out.create + out.update_new + out.delete] == ["CNAME"], test


def test_create_with_a_too_long_typed_name_is_skipped() -> None:
    # Difference (README): external-dns (TestFailGenerateTXT + ApplyChanges) creates the record without a
    # TXT record, which it can then never claim, update or delete; we skip the create and report it.
    reg = TxtRegistry(ME)
    ep = rec(f"{LONG}.{ZONE}", "CNAME", "lb.example.net")
    result = reg.with_ownership(_changes(create=[ep]), reg.read([]))
    assert result.changes.is_empty()
    assert [s.reason for s in result.skipped] == [SkipReason.TXT_NAME_TOO_LONG]


# -- A alias records and the old `cname-` TXT ------------------------------------------------------------

ALIAS_ROWS = [
    # (external-dns test, alias property, TXT names in the zone, owned?, typed TXT created?)
    # registry/txt/registry_test.go TestTXTRegistryAliasARecordForceUpdateOnMigration "legacy cname- only"
    ("AliasARecordForceUpdateOnMigration cname- only", "true", ["cname-alias"], True, True),
    # registry/txt/registry_test.go TestTXTRegistryAliasARecordForceUpdateOnMigration "a- and cname- coexist"
    ("AliasARecordForceUpdateOnMigration both", "true", ["cname-alias", "a-alias"], True, False),
    # registry/txt/registry.go isAliasARecord: alias=A counts too
    ("isAliasARecord alias=A", "A", ["cname-alias"], True, True),
    # registry/txt/registry.go isAliasARecord: a non-alias A record does not fall back to cname-
    ("isAliasARecord not alias", None, ["cname-alias"], False, False),
    ("isAliasARecord alias=false", "false", ["cname-alias"], False, False),
]


@pytest.mark.parametrize(("test", "alias", "txts", "owned", "upgraded"), ALIAS_ROWS)
def test_alias_a_record_owned_through_cname_txt(
    test: str, alias: str | None, txts: list[str], owned: bool, upgraded: bool
) -> None:
    reg = TxtRegistry(ME, managed_types=["A"])
    ep = rec(f"alias.{ZONE}", "A", "foo.eu-central-1.elb.amazonaws.com", alias=alias)
    view = reg.read([ep, *(txt(f"{t}.{ZONE}") for t in txts)])
    assert (view.current[0].labels.get("owner") == ME) is owned, test
    created = reg.with_ownership(_changes(), view).changes.create
    assert [e.dns_name for e in created] == ([f"a-alias.{ZONE}"] if upgraded else []), test


def test_alias_a_record_create_writes_a_txt() -> None:
    # registry/txt/registry_test.go TestTXTRegistryAliasARecordUsesARecordTXTPrefix
    reg = TxtRegistry(ME)
    ep = rec(f"alias.{ZONE}", "A", "foo.eu-central-1.elb.amazonaws.com", alias="true")
    out = reg.with_ownership(_changes(create=[ep]), reg.read([])).changes
    assert sorted(e.dns_name for e in out.create if e.record_type == "TXT") == [f"a-alias.{ZONE}"]


def test_alias_a_record_delete_leaves_legacy_cname_txt() -> None:
    # registry/txt/registry_test.go TestTXTRegistryAliasARecordDeleteLeavesLegacyCNAME
    reg = TxtRegistry(ME, managed_types=["A"])
    ep = rec(f"alias.{ZONE}", "A", "foo.eu-central-1.elb.amazonaws.com", alias="true")
    view = reg.read([ep, txt(f"a-alias.{ZONE}"), txt(f"cname-alias.{ZONE}")])
    out = reg.with_ownership(_changes(delete=[view.current[0]]), view).changes
    assert sorted((e.dns_name, e.record_type) for e in out.delete) == [
        (f"a-alias.{ZONE}", "TXT"),
        (f"alias.{ZONE}", "A"),
    ]


def _changes(
    create: list[Endpoint] | None = None,
    update: list[tuple[Endpoint, Endpoint]] | None = None,
    delete: list[Endpoint] | None = None,
) -> Changes:
    return Changes(
        create=list(create or []),
        update_old=[o for o, _ in update or []],
        update_new=[n for _, n in update or []],
        delete=list(delete or []),
    )


def test_excluded_type_is_not_managed() -> None:
    # plan/plan.go IsManagedRecord (used by registry/txt/registry.go Records for the upgrade): an excluded
    # type is not managed even when listed in --managed-record-types.
    reg = TxtRegistry(ME, managed_types=["A", "CNAME"], exclude_types=["cname"])
    assert reg.managed_types == frozenset({"A"})
    ep = rec(f"www.{ZONE}", "CNAME", "lb.example.net")
    view = reg.read([ep, txt(f"www.{ZONE}")])  # ours through a legacy TXT: no upgrade for an unmanaged type
    assert view.upgrades == []
