"""Bench: plan one 100,000-record zone (issue 3's target: under 0.5 s on one core).

Builds a zone as a reconcile sees it: `current` as the TXT registry returns it (owner and resource labels),
`desired` as the sources produce it (resource and creation-time labels), with a realistic mix: most records
unchanged, some with new targets or a new TTL, some new, some gone, a few owned by someone else, a few
claimed by two objects. Times `plan()` alone (best of several runs) and, for context, the registry's
`read()` of the zone's records and `with_ownership()` of the plan.

    python -m bench.planner [--records N] [--repeat R]

`run()` returns the figures as a dict for the bench suite.
"""

from __future__ import annotations

import argparse
import gc
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from shardsync.records.endpoint import CREATED_LABEL, OWNER_LABEL, RESOURCE_LABEL, Endpoint
from shardsync.records.plan import Policy, plan
from shardsync.records.registry import TxtRegistry

ZONE = "bench.example.com"
OWNER = "bench"

# The mix, as fractions of the records: what remains is unchanged.
CHANGED_TARGETS = 0.05
CHANGED_TTL = 0.02
NEW = 0.04
DELETED = 0.04
FOREIGN = 0.02
CLAIMED_TWICE = 0.005


@dataclass(frozen=True, slots=True)
class Zone:
    desired: list[Endpoint]
    current: list[Endpoint]  # as the registry labels it
    raw: list[Endpoint]  # as a provider lists it: records plus their TXT ownership records


def _ip(i: int) -> str:
    return f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"


def _record(i: int, targets_shift: int = 0) -> tuple[str, str, list[str]]:
    name = f"host-{i}.{ZONE}"
    kind = i % 20
    if kind == 0:
        return name, "CNAME", [f"lb-{(i + targets_shift) % 97}.elb.example.net"]
    if kind == 1:
        return name, "AAAA", [f"2001:db8::{(i + targets_shift) & 0xFFFF:x}"]
    if kind == 2:
        return name, "A", [_ip(i + targets_shift), _ip(i + targets_shift + 1)]
    return name, "A", [_ip(i + targets_shift)]


def build_zone(records: int = 100_000, seed: int = 1) -> Zone:
    """A zone of about `records` current RRsets and the desired state that goes with it."""
    rng = random.Random(seed)
    registries = {owner: TxtRegistry(owner_id=owner) for owner in (OWNER, "someone-else")}
    desired: list[Endpoint] = []
    current: list[Endpoint] = []
    raw: list[Endpoint] = []
    for i in range(records):
        name, rtype, targets = _record(i)
        resource = f"service/ns-{i % 50}/svc-{i}"
        created = f"2024-01-{1 + i % 28:02d}T{i % 24:02d}:00:00Z"
        roll = rng.random()
        owner = "someone-else" if roll < FOREIGN else OWNER
        labels = {OWNER_LABEL: owner, RESOURCE_LABEL: resource}
        have = Endpoint.new(name, rtype, targets, ttl=300, labels=labels)
        current.append(have)
        raw.append(have.without_labels())
        raw.append(registries[owner].ownership_record(have))
        roll = rng.random()
        if roll < DELETED:
            continue
        labels = {RESOURCE_LABEL: resource, CREATED_LABEL: created}
        if roll < DELETED + CHANGED_TARGETS:
            targets = _record(i, targets_shift=7)[2]
        ttl = 0 if i % 3 else 300
        if DELETED + CHANGED_TARGETS <= roll < DELETED + CHANGED_TARGETS + CHANGED_TTL:
            ttl = 600
        desired.append(Endpoint.new(name, rtype, targets, ttl=ttl, labels=labels))
        if rng.random() < CLAIMED_TWICE:
            other = {RESOURCE_LABEL: f"ingress/ns-{i % 50}/ing-{i}", CREATED_LABEL: "2023-06-01T00:00:00Z"}
            desired.append(Endpoint.new(name, rtype, _record(i, 3)[2], labels=other))
    for j in range(int(records * NEW)):
        name, rtype, targets = _record(records + j)
        labels = {RESOURCE_LABEL: f"ingress/ns-{j % 50}/new-{j}", CREATED_LABEL: "2024-02-01T00:00:00Z"}
        desired.append(Endpoint.new(name, rtype, targets, labels=labels))
    rng.shuffle(desired)
    return Zone(desired, current, raw)


def _best(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def run(records: int = 100_000, repeat: int = 5, seed: int = 1) -> dict[str, float]:
    """Plan a zone of `records` RRsets; the best of `repeat` timings, in seconds and records per second."""
    zone = build_zone(records, seed)
    registry = TxtRegistry(owner_id=OWNER)
    result = plan(zone.desired, zone.current, Policy.SYNC, OWNER)
    view = registry.read(zone.raw)
    plan_s = _best(lambda: plan(zone.desired, zone.current, Policy.SYNC, OWNER), repeat)
    read_s = _best(lambda: registry.read(zone.raw), repeat)
    own_s = _best(lambda: registry.with_ownership(result.changes, view), repeat)
    changes = result.changes
    return {
        "records": float(len(zone.current)),
        "desired": float(len(zone.desired)),
        "plan_seconds": plan_s,
        "plan_records_per_second": len(zone.current) / plan_s,
        "registry_read_seconds": read_s,
        "with_ownership_seconds": own_s,
        "creates": float(len(changes.create)),
        "updates": float(len(changes.update_new)),
        "deletes": float(len(changes.delete)),
        "conflicts": float(len(result.conflicts)),
        "skipped": float(len(result.skipped)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0] if __doc__ else None, allow_abbrev=False
    )
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    figures = run(args.records, args.repeat, args.seed)
    print(
        f"planned {figures['records']:.0f} current / {figures['desired']:.0f} desired records in "
        f"{figures['plan_seconds']:.3f} s ({figures['plan_records_per_second']:,.0f} records/s); "
        f"{figures['creates']:.0f} creates, {figures['updates']:.0f} updates, "
        f"{figures['deletes']:.0f} deletes, {figures['conflicts']:.0f} conflicts, "
        f"{figures['skipped']:.0f} skipped"
    )
    print(
        f"registry: read {figures['registry_read_seconds']:.3f} s, "
        f"with_ownership {figures['with_ownership_seconds']:.3f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
