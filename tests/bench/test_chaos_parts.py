"""The pure parts of the chaos run (bench/chaos/): the fault plan is a function of its seed and covers every
kind, the liveness bound follows the timings, and foreign records count as touched when anything about
them changed."""

from __future__ import annotations

from collections import Counter

from bench.chaos.churn import FOREIGN_OWNER, foreign_records, foreign_touched
from bench.chaos.plan import API_PAUSE_SECONDS, KINDS, plan
from bench.chaos.run import liveness_bound
from bench.profiles import FULL
from shardsync.records.endpoint import Endpoint
from shardsync.records.registry import parse_labels
from shardsync.sharding.timings import Timings
from tests.multiprocess import harness
from tests.multiprocess.test_chaos import DEFAULT_FAULTS, DEFAULT_SEED


def test_the_plan_is_a_function_of_the_seed() -> None:
    assert plan(7, 50, 4.0) == plan(7, 50, 4.0)
    assert plan(7, 50, 4.0) != plan(8, 50, 4.0)
    assert [f.index for f in plan(7, 50, 4.0)] == list(range(50))


def test_the_full_runs_plan_has_every_kind_of_fault_within_its_bounds() -> None:
    faults = plan(FULL.chaos_seed, FULL.chaos_faults, FULL.chaos_lease_duration)
    assert len(faults) >= 200
    kinds = Counter(f.kind for f in faults)
    assert set(kinds) == set(KINDS), kinds
    lease = FULL.chaos_lease_duration
    replicas = FULL.chaos_replicas
    for fault in faults:
        if fault.kind == "api-pause":
            assert fault.seconds == API_PAUSE_SECONDS and fault.mode in ("503", "hang")
        if fault.kind in ("kill", "kill-coordinator"):
            assert 0 <= fault.seconds <= lease
        if fault.kind in ("stop", "api-cut"):
            assert 0 < fault.seconds <= 2 * lease
        if fault.kind == "scale":
            assert fault.replicas != replicas and fault.replicas in (2, 3, 4)
            replicas = fault.replicas
        if fault.kind == "provider-errors":
            assert 0 < fault.ratio < 1 and 0 < fault.zones < 1
        assert 0 < fault.gap < 2


def test_the_short_runs_default_seed_has_every_kind_of_fault() -> None:
    kinds = Counter(f.kind for f in plan(DEFAULT_SEED, DEFAULT_FAULTS, harness.LEASE))
    assert set(kinds) == set(KINDS), kinds


def test_the_liveness_bound_grows_with_the_lease_and_the_restart_grace() -> None:
    short = liveness_bound(Timings.derive(4, 1, 0.5, 8), start_allowance=15)
    # lease, acquire margin (capped at 0.5 s), restart grace, settle, two renewals, the start allowance
    assert short == 4 + 0.5 + 8 + 0.5 + 2 + 15
    assert liveness_bound(Timings.derive(15, 5, 2, 30), start_allowance=15) > short


def test_foreign_records_carry_another_owner() -> None:
    records = foreign_records("z.example", 2)
    txt = [r for r in records if r.record_type == "TXT"]
    assert len(records) == 4 and len(txt) == 2
    assert all((parse_labels(r.targets[0]) or {}).get("owner") == FOREIGN_OWNER for r in txt)


def test_foreign_touched_counts_missing_changed_and_added_records() -> None:
    seeded = {"z.example": foreign_records("z.example", 2)}
    assert foreign_touched(seeded, seeded) == 0
    ours = Endpoint.new("web.z.example", "A", ["198.18.0.1"])
    assert foreign_touched({"z.example": [*seeded["z.example"], ours]}, seeded) == 0
    assert foreign_touched({"z.example": seeded["z.example"][1:]}, seeded) == 1
    changed = [Endpoint.new("other-0.z.example", "A", ["203.0.113.9"]), *seeded["z.example"][1:]]
    assert foreign_touched({"z.example": changed}, seeded) == 2
    extra = Endpoint.new("other-1.z.example", "AAAA", ["2001:db8::1"])
    assert foreign_touched({"z.example": [*seeded["z.example"], extra]}, seeded) == 1
