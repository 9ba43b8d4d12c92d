"""The state names /shards shows have one home, each an enum with a parser."""

from __future__ import annotations

from shardsync.sharding.states import MemberState, ZoneState


def test_the_names_are_the_contract() -> None:
    assert [str(s) for s in MemberState] == ["ready", "restarting", "draining", "expired"]
    assert [str(s) for s in ZoneState] == ["active", "pending", "parked", "orphaned"]  # summary order


def test_parse_reads_a_name_back_and_none_for_one_it_does_not_know() -> None:
    assert MemberState.parse("ready") is MemberState.READY
    assert MemberState.parse(" Draining ") is MemberState.DRAINING
    assert ZoneState.parse("parked") is ZoneState.PARKED
    assert ZoneState.parse("ready") is None  # a member state is not a zone state
    assert MemberState.parse("hibernating") is None  # a newer replica's: still readable as text
