"""The slot table: balance, minimal movement on joins and leaves, growth, and its encoding."""

from __future__ import annotations

from collections import Counter

import pytest

from shardsync.sharding.balance import rebalance
from shardsync.sharding.slots import (
    decode,
    encode,
    grow,
    slot_count_for,
    slot_of,
)

ZONES = [f"zone-{i:04d}.example" for i in range(400)]


def load(owners: tuple[str, ...], zones: list[str]) -> Counter[str]:
    return Counter(owners[slot_of(zone, len(owners))] for zone in zones)


def owner_map(owners: tuple[str, ...], zones: list[str]) -> dict[str, str]:
    return {zone: owners[slot_of(zone, len(owners))] for zone in zones}


def test_zones_hash_the_same_whatever_their_spelling_and_halves_keep_their_slot() -> None:
    assert slot_of("Example.COM.", 1024) == slot_of("example.com", 1024)
    for zone in ZONES[:50]:
        assert slot_of(zone, 2048) % 1024 == slot_of(zone, 1024)
    assert grow(["a", "b"], 4) == ["a", "b", "a", "b"]


def test_the_slot_count_grows_with_the_members_and_never_shrinks() -> None:
    assert slot_count_for(3) == 1024
    assert slot_count_for(100) == 8192
    assert slot_count_for(1000) == 65536
    assert slot_count_for(3, current=4096) == 4096


@pytest.mark.parametrize("members", [3, 4, 10])
def test_a_join_moves_only_to_the_joiner_and_a_leave_only_from_the_leaver(members: int) -> None:
    names = {f"m{i}": 1 for i in range(members)}
    first = rebalance([], names, ZONES)
    before = owner_map(first.owners, ZONES)
    mean = len(ZONES) / members
    assert max(load(first.owners, ZONES).values()) <= mean + 1

    joined = rebalance(first.owners, {**names, "new": 1}, ZONES)
    after = owner_map(joined.owners, ZONES)
    moved = [zone for zone in ZONES if before[zone] != after[zone]]
    assert {after[zone] for zone in moved} == {"new"}
    ideal = len(ZONES) / (members + 1)
    assert ideal - 2 <= len(moved) <= 1.10 * ideal
    assert max(load(joined.owners, ZONES).values()) <= 1.05 * ideal + 1

    left = rebalance(first.owners, {m: 1 for m in list(names)[1:]}, ZONES)
    after = owner_map(left.owners, ZONES)
    moved = [zone for zone in ZONES if before[zone] != after[zone]]
    assert {before[zone] for zone in moved} == {"m0"}
    assert max(load(left.owners, ZONES).values()) <= len(ZONES) / (members - 1) + 2


def test_weights_buy_their_share_and_empty_slots_are_shared_too() -> None:
    table = rebalance([], {"a": 1, "b": 3}, ZONES).owners
    counts = load(table, ZONES)
    assert abs(counts["b"] - 300) <= 2 and abs(counts["a"] - 100) <= 2
    # Slots no zone hashes to are shared in proportion too, for the zones that appear later.
    occupied = {slot_of(zone, len(table)) for zone in ZONES}
    slots = Counter(owner for slot, owner in enumerate(table) if slot not in occupied)
    assert abs(slots["b"] - 3 * slots["a"]) <= 4


def test_the_table_encodes_as_member_indexes_and_refuses_what_it_cannot_use() -> None:
    table = rebalance([], {"a": 1, "b": 1}).owners
    assert decode(encode(table, ["a", "b"]), ["a", "b"]) == table
    assert "power of two" in str(decode([0, 1, 0], ["a", "b"]))
    assert "names no member" in str(decode([0, 2], ["a", "b"]))
    assert "names no member" in str(decode([0, False], ["a", "b"]))
    assert "power of two" in str(decode("0,1", ["a", "b"]))
