"""bench.simulate at small sizes: the protocol's invariants hold after every event (one runner per zone,
the one the final generation names; a join moves about 1/(N+1) of the zones, all to the joiner; a crashed
replica's zones run again only after its lease and the acquire margin; a rolling restart moves nothing),
runs are deterministic, forking changes nothing, and the JSON has its documented keys. A few seconds."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from bench.simulate import table
from bench.simulate.__main__ import main
from bench.simulate.params import (
    ALL_EVENTS,
    CRASH,
    CRASH_COORDINATOR,
    JOIN,
    LEAVE,
    ROLLING_RESTART,
    Matrix,
    Timing,
    parse_count,
)
from bench.simulate.runner import run_matrix
from bench.simulate.scenarios import Outcome, simulate
from bench.simulate.zones import ZoneBook
from shardsync.sharding.timings import Timings

BOOK = ZoneBook()
ROW_KEYS = {
    "replicas",
    "zones",
    "event",
    "victim",
    "generation_before",
    "generation_after",
    "generations_published",
    "balance_max_over_mean",
    "zones_moved",
    "ideal_moved",
    "moved_ratio",
    "moved_only_as_needed",
    "seconds_to_publish",
    "seconds_to_full_ownership",
    "longest_unowned_seconds",
    "lease_writes_per_second",
    "lease_writes_per_second_peak",
    "watch_events_per_second_per_replica",
    "watch_events_per_second_per_member",
    "watch_events_per_second_coordinator",
    "watch_events_per_second_per_member_peak",
    "watch_events_per_second_coordinator_peak",
    "watch_deliveries_per_second",
    "watch_deliveries_per_second_peak",
    "api_requests_per_second",
    "api_requests_per_second_per_member",
    "api_requests_per_second_coordinator",
    "configmap_writes",
    "assignment_bytes",
    "overlapping_zones",
    "stale_view_waits",
    "stale_view_wait_max_seconds",
    "restarts",
    "roll_seconds",
    "restart_seconds_to_full_ownership_mean",
    "simulated_seconds",
    "simulation_events",
    "wall_seconds",
}


def run(event: str, replicas: int = 6, zones: int = 3000, seed: int = 1) -> Outcome:
    return simulate(replicas, zones, event, seed=seed, book=BOOK)


def assert_settled(outcome: Outcome) -> None:
    """Every zone runs at exactly one replica, the one the final generation names, and every running
    replica works under that generation."""
    c = outcome.cluster
    final = c.parsed.assignment
    assert c.ledger.overlaps == 0
    assert c.ledger.full and len(c.ledger.runner) == len(c.zones)
    assert all(c.ledger.runner[zone] == final.owner_of(zone) for zone in c.zones)
    assert {r.view.generation for r in c.live() if r.view is not None} == {final.generation}
    assert not c.pending


@pytest.mark.parametrize("event", ALL_EVENTS)
def test_every_event_settles_with_one_runner_per_zone(event: str) -> None:
    outcome = run(event)
    assert_settled(outcome)
    row = outcome.row
    assert row["overlapping_zones"] == 0
    assert row["moved_only_as_needed"] is True
    assert row["seconds_to_full_ownership"] is not None


def test_join_moves_about_one_in_n_plus_one_zones_all_to_the_joiner() -> None:
    outcome = run(JOIN, replicas=6, zones=6000)
    row = outcome.row
    assert outcome.moves and {m.after for m in outcome.moves} == {row["victim"]}
    assert row["ideal_moved"] == pytest.approx(6000 / 7, abs=0.1)
    assert 0.7 <= row["moved_ratio"] <= 1.3
    assert row["generations_published"] == 1
    # Zero latency: the generation comes one settle delay after the new Lease, and every previous owner
    # acknowledges it at once, so the joiner starts its zones at the same instant.
    assert row["seconds_to_publish"] == pytest.approx(Timing().settle)
    assert row["seconds_to_full_ownership"] == pytest.approx(Timing().settle)


def test_leave_drains_its_zones_to_the_others_and_deletes_its_lease() -> None:
    outcome = run(LEAVE)
    row = outcome.row
    assert row["victim"] == "shardsync-5"  # a scale-down drains the highest ordinal
    assert {m.before for m in outcome.moves} == {"shardsync-5"}
    assert "shardsync-5" not in outcome.cluster.api.members
    assert row["seconds_to_full_ownership"] == pytest.approx(Timing().settle)
    assert row["longest_unowned_seconds"] == 0.0  # released and acquired in the same instant


@pytest.mark.parametrize("event", [CRASH, CRASH_COORDINATOR])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_crashed_replicas_zones_run_again_only_after_its_lease_and_margin(event: str, seed: int) -> None:
    outcome = run(event, seed=seed)
    c, timing = outcome.cluster, Timing()
    assert outcome.victim is not None
    last_renewal = c.api.members[outcome.victim].written_at  # the Lease stays; nobody renews it
    assert last_renewal == outcome.event_at  # the crash comes just after a renewal
    lapsed = last_renewal + timing.lease_duration + timing.acquire_margin
    taken = [c.ledger.acquired_at[m.zone] for m in outcome.moves]
    assert taken and {m.before for m in outcome.moves} == {outcome.victim}
    assert min(taken) >= lapsed
    # ...and not much later: the coordinator sees the expiry at one of its renewals, publishes a settle
    # delay later, and the new owners may wait for one renewal of their own (stale_view_waits).
    assert max(taken) <= lapsed + timing.settle + 2 * timing.renew_interval
    assert_settled(outcome)


def test_a_crashed_coordinator_is_replaced_by_another_replica() -> None:
    outcome = run(CRASH_COORDINATOR)
    holder = outcome.cluster.api.coordinator
    assert holder is not None and holder.holder not in ("", outcome.victim)
    assert holder.transitions >= 1
    assert outcome.cluster.parsed.assignment.coordinator == holder.holder


def test_a_rolling_restart_moves_nothing_and_parks_each_replicas_zones_for_its_downtime() -> None:
    outcome = run(ROLLING_RESTART)
    row, timing = outcome.row, Timing()
    assert row["zones_moved"] == 0 and row["generations_published"] == 0
    assert row["restarts"] == 6 and len(outcome.restarts) == 6
    assert [r.identity for r in outcome.restarts] == [f"shardsync-{i}" for i in range(5, -1, -1)]
    for restart in outcome.restarts:  # the coordinator's own restart included
        assert restart.seconds_to_full_ownership == pytest.approx(timing.restart_downtime)
    assert row["longest_unowned_seconds"] == pytest.approx(timing.restart_downtime)
    coordinator = outcome.cluster.api.coordinator
    assert coordinator is not None and coordinator.transitions >= 1  # the coordinator pod restarted too
    assert_settled(outcome)


@pytest.mark.parametrize("replicas", [10, 40])
def test_steady_rates_are_one_write_per_lease_per_renew_interval(replicas: int) -> None:
    row = run(JOIN, replicas=replicas, zones=1000).row
    # N member Leases and the coordinator Lease, each written every second. A replica that does not lead
    # is sent the coordinator Lease and the coordinator's member Lease; the coordinator every Lease.
    assert row["lease_writes_per_second"] == pytest.approx(replicas + 1)
    assert row["watch_events_per_second_per_member"] == pytest.approx(2.0)
    assert row["watch_events_per_second_coordinator"] == pytest.approx(replicas + 1)
    assert row["watch_deliveries_per_second"] == pytest.approx(2 * (replicas - 1) + replicas + 1)
    assert row["watch_deliveries_per_second"] <= 3 * replicas + replicas  # issue 39's bound
    # Requests: each renews its member Lease; the coordinator renews the coordinator Lease too. Nobody
    # reads the coordinator Lease: they watch it.
    assert row["api_requests_per_second_per_member"] == pytest.approx(1.0)
    assert row["api_requests_per_second_coordinator"] == pytest.approx(2.0)
    assert row["api_requests_per_second"] == pytest.approx(replicas + 1)
    # The join: the joiner lists and watches every Lease while it hears from its many donors (at 10 it
    # hears from 9, more than FEW), and the coordinator sees every acknowledgement.
    assert row["watch_events_per_second_coordinator_peak"] >= replicas + 2
    assert row["watch_events_per_second_per_member_peak"] >= 3


def test_runs_are_deterministic_for_a_seed() -> None:
    def strip(row: dict[str, object]) -> dict[str, object]:
        return {k: v for k, v in row.items() if k != "wall_seconds"}

    for event in (CRASH, ROLLING_RESTART):
        assert strip(run(event, seed=7).row) == strip(run(event, seed=7).row)


def test_forking_the_warm_cluster_gives_the_rows_of_separate_runs() -> None:
    matrix = Matrix((5,), (2000,), (JOIN, CRASH, ROLLING_RESTART))
    forked = run_matrix(matrix, Timing(), seed=3, say=lambda _: None, fork=True)
    separate = run_matrix(matrix, Timing(), seed=3, say=lambda _: None, fork=False)
    for a, b in zip(forked["rows"], separate["rows"], strict=True):
        a.pop("wall_seconds")
        b.pop("wall_seconds")
        assert a == b


def test_quick_run_writes_the_documented_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "simulate.json"
    assert main(["--quick", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "moved/ideal" in printed and "zones run by two replicas at once: 0" in printed
    doc = orjson.loads(out.read_bytes())
    top = {"schema", "kind", "seed", "started", "finished", "duration_seconds", "machine", "timing"}
    assert top | {"matrix", "rows"} <= set(doc)
    assert doc["kind"] == "simulate" and doc["matrix"]["events"] == [JOIN, LEAVE, CRASH, ROLLING_RESTART]
    assert len(doc["rows"]) == 2 * 1 * 4
    for row in doc["rows"]:
        assert set(row) == ROW_KEYS
        assert row["overlapping_zones"] == 0
    assert main(["--report", str(out), "--markdown"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("|") and "moved/ideal" in line for line in lines)


def test_cli_picks_the_matrix(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    assert main(["--replicas", "3", "--zones", "1k", "--events", "crash", "--out", str(out)]) == 0
    rows = orjson.loads(out.read_bytes())["rows"]
    assert [(r["replicas"], r["zones"], r["event"]) for r in rows] == [(3, 1000, CRASH)]
    with pytest.raises(SystemExit):
        main(["--events", "explode"])


def test_timing_matches_the_shipped_derivation() -> None:
    # As shardsync derives them from its default flags with a fencing provider.
    t = Timing()
    shipped = Timings.resolve(True)
    assert (t.lease_duration, t.renew_interval, t.settle) == (3, 1.0, 0.5)
    assert (t.fence_margin, t.acquire_margin, t.renew_deadline) == (
        shipped.fence_margin,
        shipped.acquire_margin,
        shipped.renew_deadline,
    )
    assert (t.max_delay, t.drain_timeout) == (10.0, shipped.drain_timeout)
    assert t.publisher_config() == shipped.publisher_config()


def test_counts_and_table_formatting() -> None:
    assert [parse_count(s) for s in ("10", "10k", "1M", "100_000")] == [10, 10_000, 1_000_000, 100_000]
    with pytest.raises(ValueError):
        parse_count("0")
    row = dict.fromkeys(ROW_KEYS, 0) | {"replicas": 1000, "zones": 1_000_000, "event": JOIN}
    row |= {"moved_ratio": None, "seconds_to_full_ownership": None}
    text = table.render({"rows": [row], "seed": 1})
    assert "1M" in text and "join" in text
