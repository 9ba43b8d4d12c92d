"""The bench's pure parts: readings of /shards samples and of the provider's audit, /proc readers,
percentiles, scaling's derived figures and the table of a partly failed run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench import observe, plots, procstat, report
from bench.__main__ import main as bench_main
from bench.audit import overlapping_writes
from bench.scenarios import memory_at_scale
from bench.scenarios.common import percentile
from bench.scenarios.scaling import derive
from shardsync.providers.fake.audit import AuditEntry


def view(
    identity: str,
    active: set[str],
    generation: int = 2,
    coordinator: str = "a",
    parked: frozenset[str] | set[str] = frozenset(),
) -> observe.View:
    return observe.View(identity, generation, coordinator, frozenset(active), frozenset(parked), {}, {})


def sample(t: float, **active: set[str]) -> observe.Sample:
    return observe.Sample(t, {i: view(i, zones) for i, zones in active.items()})


def entry(
    seq: int, zone: str, writer: str, start: float, end: float, op: str = "apply", outcome: str = "ok"
) -> AuditEntry:
    return AuditEntry.from_json(
        {
            "seq": seq,
            "op": op,
            "zone": zone,
            "writer": writer,
            "generation": 1,
            "fence": None,
            "start": start,
            "end": end,
            "startWall": start,
            "endWall": end,
            "outcome": outcome,
            "changes": 1,
        }
    )


def test_reduce_counts_only_zones_the_replica_itself_runs() -> None:
    doc = {
        "generation": 3,
        "coordinator": "a",
        "self": "a",
        "members": [{"identity": "a", "state": "ready"}, {"identity": "b", "state": "ready"}],
        "zones": [
            {"zone": "z1", "owner": "a", "state": "active"},
            {"zone": "z2", "owner": "a", "state": "pending"},
            {"zone": "z3", "owner": "b", "state": "active"},
            {"zone": "z4", "owner": None, "state": "orphaned"},
        ],
    }
    v = observe.reduce(doc)
    assert v.active == {"z1"} and v.parked == frozenset()
    assert v.owners == {"z1": "a", "z2": "a", "z3": "b", "z4": None}
    assert (v.generation, v.coordinator, v.member_states["b"]) == (3, "a", "ready")


def test_fully_owned_needs_one_expected_runner_per_zone_and_one_generation() -> None:
    zones = ["z1", "z2"]
    assert observe.fully_owned(sample(0, a={"z1"}, b={"z2"}), zones, ["a", "b"])
    assert not observe.fully_owned(sample(0, a={"z1"}, b=set()), zones, ["a", "b"])  # z2 unowned
    assert not observe.fully_owned(sample(0, a={"z1", "z2"}, b={"z2"}), zones, ["a", "b"])  # z2 twice
    assert not observe.fully_owned(sample(0, a={"z1", "z2"}, c=set()), zones, ["a", "b"])  # b silent
    assert not observe.fully_owned(sample(0, a={"z1"}, c={"z2"}), zones, ["a", "c2"])
    mixed = observe.Sample(0, {"a": view("a", {"z1"}, 2), "b": view("b", {"z2"}, 3)})
    assert not observe.fully_owned(mixed, zones, ["a", "b"])
    newer = observe.full_ownership(zones, ["a", "b"], min_generation=3)
    assert not newer(sample(0, a={"z1"}, b={"z2"}))


def test_unowned_spans_and_the_longest() -> None:
    samples = [
        sample(0.0, a={"z1", "z2"}),
        sample(1.0, a={"z2"}),
        sample(2.0, a={"z2"}),
        sample(3.0, a={"z1"}, b=set()),
        sample(4.0, a={"z1"}),
    ]
    spans = observe.unowned_spans(samples, ["z1", "z2"])
    assert spans == {"z1": [(1.0, 3.0)], "z2": [(3.0, 4.0)]}
    assert observe.longest_unowned(spans) == (2.0, "z1")
    assert observe.longest_unowned({"z": []}) == (0.0, None)


def test_moved_and_load() -> None:
    before = {"z1": "a", "z2": "a", "z3": "b"}
    after = {"z1": "a", "z2": "c", "z4": "b"}
    assert observe.moved(before, after) == {"z2", "z3", "z4"}
    assert observe.load(after, ["a", "b", "c", "d"]) == (1, 0.75)


def test_first_apply_and_first_fence_read_the_audit() -> None:
    audit = [
        entry(0, "z1", "a", 1.0, 1.2),
        entry(1, "z1", "a", 0.5, 2.0),
        entry(2, "z2", "a", 0.1, 0.3, outcome="fenced"),
        entry(3, "z2", "b", 5.0, 5.5, op="fence"),
        entry(4, "z2", "a", 6.0, 6.5, op="fence"),
        entry(5, "z3", "c", 7.0, 7.5, op="fence"),
    ]
    first = observe.first_apply(audit, after=0.0)
    assert set(first) == {"z1"} and first["z1"].seq == 0
    assert observe.first_apply(audit, after=0.9)["z1"].seq == 0
    fences = observe.first_fence(audit, {"z2"}, after=4.0, excluded={"b"})
    assert {z: e.seq for z, e in fences.items()} == {"z2": 4}


def test_safety_counts_overlaps_of_two_writers_and_refused_writes() -> None:
    audit = [
        entry(0, "z1", "a", 1.0, 2.0),
        entry(1, "z1", "b", 1.5, 2.5),  # overlaps a's write
        entry(2, "z1", "a", 3.0, 4.0),
        entry(3, "z1", "b", 4.0, 5.0),  # only touches
        entry(4, "z2", "b", 1.0, 2.0, outcome="fenced"),
    ]
    assert observe.safety(audit) == {"overlapping_writes": 1, "fenced_writes": 1, "writes": 5}


def test_overlapping_writes_finds_two_writers_at_once() -> None:
    e1, e2 = entry(0, "z1", "a", 1.0, 2.0), entry(1, "z1", "b", 1.5, 2.5)
    assert overlapping_writes([e2, e1]) == [(e1, e2)]


@pytest.mark.parametrize(
    "audit",
    [
        [entry(0, "z1", "a", 1.0, 2.0), entry(1, "z1", "a", 1.5, 2.5)],  # same writer
        [entry(0, "z1", "a", 1.0, 2.0), entry(1, "z1", "b", 2.0, 3.0)],  # touching, not overlapping
        [entry(0, "z1", "a", 1.0, 2.0), entry(1, "z2", "b", 1.5, 2.5)],  # different zones
        [entry(0, "z1", "a", 1.0, 2.0), entry(1, "z1", "b", 1.5, 2.5, outcome="fenced")],  # refused write
    ],
)
def test_overlapping_writes_ignores_safe_pairs(audit: list[AuditEntry]) -> None:
    assert overlapping_writes(audit) == []


def test_overlapping_writes_long_write_spanning_several() -> None:
    long = entry(0, "z1", "a", 0.0, 10.0)
    audit = [
        long,
        entry(1, "z1", "b", 1.0, 2.0),
        entry(2, "z1", "a", 3.0, 4.0),
        entry(3, "z1", "c", 11.0, 12.0),
    ]
    assert overlapping_writes(audit) == [(long, audit[1])]
    refused = entry(4, "z1", "d", 5.0, 6.0, outcome="fenced")
    assert (long, refused) in overlapping_writes([*audit, refused], include_refused=True)


def test_timeline_counts_zones_run_parked_and_unowned() -> None:
    rows = observe.timeline([sample(10.0, a={"z1"}, b=set())], ["z1", "z2"], t0=8.0)
    assert rows == [{"t": 2.0, "owned": {"a": 1, "b": 0}, "parked": 0, "unowned": 1}]
    # z2 parked for a restarting owner is not "unowned": it waits for its owner by design.
    restart = observe.Sample(10.0, {"a": view("a", {"z1"}, parked={"z2"}), "b": view("b", set())})
    assert observe.timeline([restart], ["z1", "z2", "z3"], t0=8.0) == [
        {"t": 2.0, "owned": {"a": 1, "b": 0}, "parked": 1, "unowned": 1}
    ]


def test_percentile() -> None:
    assert percentile([], 99) == 0.0
    assert percentile([0.3], 50) == 0.3
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == pytest.approx(50.5)
    assert percentile(values, 99) == pytest.approx(99.01)


def test_procstat_reads_a_live_process_and_none_for_a_gone_one() -> None:
    assert (procstat.peak_rss_mib(os.getpid()) or 0) > 1
    before = procstat.cpu_seconds(os.getpid())
    sum(i * i for i in range(300_000))
    after = procstat.cpu_seconds(os.getpid())
    assert before is not None and after is not None and after > before
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=30)
    assert procstat.cpu_seconds(child.pid) is None
    assert procstat.peak_rss_mib(child.pid) is None


def test_cpu_meter_sees_a_busy_child() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import time\nend = time.time() + 0.6\nwhile time.time() < end: pass"]
    )
    try:
        meter = procstat.CpuMeter({"busy": child.pid})
        meter.start()
        child.wait(timeout=30)
    finally:
        child.kill()
        child.wait(timeout=30)
    use = meter.stop()
    assert "busy" not in use.per_process  # exited before the end of the window: no figure, no crash
    assert use.machine_busy_cores >= 0


def test_derive_speedup_efficiency_and_vs_active_passive() -> None:
    result: dict[str, Any] = {
        "sharded": {
            "1": {"zones_per_second": 10.0, "steady_reconciles_per_second": 100.0, "cpu_bound": False},
            "2": {
                "zones_per_second": 19.0,
                "aggregate_zones_per_second": 20.0,
                "steady_reconciles_per_second": 200.0,
                "cpu_bound": True,
                "cpu": {
                    "converge": {
                        "cores": 2,
                        "machine_busy_cores": 1.9,
                        "ours_cores": 1.5,
                        "per_process_cores": {"shardsync-0": 0.5, "shardsync-1": 0.6, "fake-provider": 0.4},
                    },
                    "steady": {
                        "cores": 2,
                        "machine_busy_cores": 1.0,
                        "ours_cores": 0.9,
                        "per_process_cores": {},
                    },
                },
            },
            "4": {"error": "boom"},
        },
        "active_passive": {
            "1": {"zones_per_second": 10.0, "steady_reconciles_per_second": 100.0},
            "2": {"zones_per_second": 10.0, "steady_reconciles_per_second": 100.0},
            "4": {"zones_per_second": 10.0, "steady_reconciles_per_second": 100.0},
        },
    }
    derive(result)
    two = result["sharded"]["2"]
    assert (two["speedup"], two["efficiency"], two["vs_active_passive"]) == (1.9, 0.95, 1.9)
    assert result["active_passive"]["4"]["efficiency"] == 0.25
    assert "speedup" not in result["sharded"]["4"]
    assert two["aggregate_efficiency"] == 1.0
    assert result["cpu_bound_runs"] == ["sharded N=2"]
    assert (
        "sharded N=2 (converge: ours 1.50 of 2 cores, machine 1.90; replicas 1.10 (0.60 at most each), "
        "fake provider 0.40" in result["note"]
    )


def test_cpu_bound_is_judged_on_our_processes_not_the_machine() -> None:
    cores = procstat.cores()
    busy_elsewhere = procstat.CpuUse(seconds=1.0, per_process={"shardsync-0": 0.1}, machine_busy_cores=cores)
    assert not busy_elsewhere.saturated()
    ours = procstat.CpuUse(
        seconds=1.0, per_process={"a": 0.5 * cores, "b": 0.4 * cores}, machine_busy_cores=0
    )
    assert ours.saturated()


def test_render_shows_failed_and_not_run_sections() -> None:
    doc = {
        "profile": "quick",
        "machine": {"cores": 2, "cpu_model": "x", "python": "3.11"},
        "duration_seconds": 1.0,
        "scaling": {"error": "ScenarioError: no replica"},
        "planner": {"not_run": "not selected with --only"},
        "apiserver": {"get_replace_pairs_per_second": 1234.5},
        "safety": {
            "scenarios": {"s": {"overlapping_writes": 0, "fenced_writes": 2, "writes": 9}},
            "total_overlapping_writes": 0,
        },
    }
    text = report.render(doc)
    assert "scaling: FAILED: ScenarioError: no replica" in text
    assert "planner: not run" in text
    assert "1,234 get+replace pairs/s" in text or "1,235 get+replace pairs/s" in text
    assert "event_latency: missing" in text
    assert "overlapping writes must be 0 everywhere: OK" in text


def test_memory_at_scale_reports_the_median_run_with_the_largest_peak_and_every_repeat() -> None:
    def run(cpu: float, peak: float) -> dict[str, Any]:
        return {"sync_cpu_seconds": cpu, "peak_rss_mib": peak, "sync_cpu_seconds_per_replica": {"r": cpu}}

    entry = memory_at_scale.combine([run(15.8, 92.0), run(13.2, 95.5), run(14.6, 91.0)])
    assert entry["sync_cpu_seconds"] == 14.6
    assert entry["sync_cpu_seconds_per_replica"] == {"r": 14.6}  # the median run's own figures
    assert entry["peak_rss_mib"] == 95.5
    assert [r["sync_cpu_seconds"] for r in entry["repeats"]] == [15.8, 13.2, 14.6]
    assert memory_at_scale.combine([run(10.0, 141.0)]) == run(10.0, 141.0)  # one run: as it was

    one = run(10.0, 141.0) | {"sync_cpu_above_baseline_seconds": 9.0}
    result: dict[str, Any] = {"runs": {"1": one, "4": entry | {"sync_cpu_above_baseline_seconds": 10.1}}}
    memory_at_scale.derive(result)
    assert result["runs"]["4"]["sync_cpu_vs_one"] == 1.46
    assert result["runs"]["4"]["sync_cpu_above_baseline_vs_one"] == 1.122
    table = report._memory_at_scale(result)
    assert "14.6 (13.2-15.8)" in table and "1.46" in table and "1.12" in table
    result["pod_source"] = {
        "runs": {"1": run(11.0, 148.0) | {"peak_vs_without": 1.05}, "2": {"error": "E: x"}}
    }
    table = report._memory_at_scale(result)
    assert "N=1 with --source=pod: peak 148.0 MiB/replica (x1.050 of without)" in table
    assert "N=2 with --source=pod: FAILED E: x" in table


def test_report_draws_beside_the_input_without_overwriting_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `--report` on bench/results/example must not redraw the committed plots of that run.
    run = tmp_path / "20261202T130239Z.json"
    run.write_bytes(orjson.dumps({"safety": {"total_overlapping_writes": 0}}))
    committed = tmp_path / "20261202T130239Z-scaling.png"
    committed.write_bytes(b"committed")
    drawn: list[tuple[Path, str, bool]] = []

    def draw(doc: dict[str, Any], out_dir: Path, stamp: str, latest: bool = True) -> list[Path]:
        drawn.append((out_dir, stamp, latest))
        path = out_dir / f"{stamp}-scaling.png"
        path.write_bytes(b"drawn")
        return [path]

    monkeypatch.setattr(plots, "available", lambda: True)
    monkeypatch.setattr(plots, "draw", draw)
    assert bench_main(["--report", str(run)]) == 0
    assert drawn == [(tmp_path, "20261202T130239Z-report", False)]
    assert committed.read_bytes() == b"committed"
    assert (tmp_path / "20261202T130239Z-report-scaling.png").read_bytes() == b"drawn"
