"""`--migrate-from-txt-owner`: the old owner's records become ours and their TXT records name us (as
external-dns's TXT registry with `old_owner_id` and its plan's forced update do)."""

from __future__ import annotations

import pytest

from shardsync.records.endpoint import OWNER_LABEL, Changes
from shardsync.records.plan import Policy, plan
from shardsync.records.registry import TxtRegistry, parse_labels
from tests.records.test_registry import ME, apply, rec, txt
from tests.replica.test_config import FAKE, parse

OLD = "old-cluster"


def test_old_owners_records_read_as_ours_and_their_txt_is_rewritten() -> None:
    reg = TxtRegistry(ME, old_owner_id=OLD)
    stored = txt("a-www.ex.com", OLD, "service/ns/web")
    other = txt("a-api.ex.com", "someone-else", "service/ns/api")
    zone = [rec("www.ex.com", "A", "1.1.1.1"), stored, rec("api.ex.com", "A", "2.2.2.2"), other]
    view = reg.read(zone)
    owners = {e.dns_name: e.labels.get(OWNER_LABEL) for e in view.current}
    assert owners == {"www.ex.com": ME, "api.ex.com": "someone-else"}
    changes = reg.with_ownership(Changes(), view).changes
    assert changes.update_old == [stored]
    [new] = changes.update_new
    assert parse_labels(new.targets[0]) == {"owner": ME, "resource": "service/ns/web"}
    assert changes.create == [] and changes.delete == []


def test_without_the_flag_the_old_owner_is_foreign() -> None:
    reg = TxtRegistry(ME)
    view = reg.read([rec("www.ex.com", "A", "1.1.1.1"), txt("a-www.ex.com", OLD)])
    assert view.current[0].labels[OWNER_LABEL] == OLD
    assert reg.with_ownership(Changes(), view).changes.is_empty()


def test_old_owners_record_can_be_deleted_with_its_txt_and_a_legacy_one_is_upgraded() -> None:
    reg = TxtRegistry(ME, old_owner_id=OLD)
    stored = txt("a-www.ex.com", OLD)
    view = reg.read([rec("www.ex.com", "A", "1.1.1.1"), stored])
    assert reg.with_ownership(Changes(delete=list(view.current)), view).changes.delete == [
        *view.current,
        stored,
    ]
    legacy = reg.read([rec("old.ex.com", "A", "1.1.1.1"), txt("old.ex.com", OLD)])
    [typed] = reg.with_ownership(Changes(), legacy).changes.create
    assert typed.dns_name == "a-old.ex.com" and parse_labels(typed.targets[0]) == {"owner": ME}


def test_reconcile_converges_to_the_new_owner() -> None:
    reg = TxtRegistry(ME, old_owner_id=OLD)
    www = rec("www.ex.com", "A", "1.1.1.1")
    zone = {e.key: e for e in [www, txt("a-www.ex.com", OLD, "service/ns/web")]}
    desired = [rec("www.ex.com", "A", "1.1.1.2", resource="service/ns/web")]
    for _ in range(2):
        view = reg.read(zone.values())
        apply(zone, reg.with_ownership(plan(desired, view.current, Policy.SYNC, ME).changes, view).changes)
    view = reg.read(zone.values())
    assert reg.with_ownership(plan(desired, view.current, Policy.SYNC, ME).changes, view).changes.is_empty()
    assert zone[("www.ex.com", "A", "")].targets == ("1.1.1.2",)
    assert parse_labels(zone[("a-www.ex.com", "TXT", "")].targets[0]) == {
        "owner": ME,
        "resource": "service/ns/web",
    }
    # a registry without the flag now finds the records ours
    assert TxtRegistry(ME).read(zone.values()).current[0].labels[OWNER_LABEL] == ME


def test_flag() -> None:
    assert parse(FAKE).migrate_from_txt_owner == ""
    assert parse(["--migrate-from-txt-owner=old", *FAKE]).migrate_from_txt_owner == "old"
    for argv in (["--migrate-from-txt-owner=old", "--registry=noop"], ["--migrate-from-txt-owner=default"]):
        with pytest.raises(ValueError, match="--migrate-from-txt-owner"):
            parse([*argv, *FAKE])
