"""One row of the table: N replicas over Z zones, started together and run to a steady state, then one event
(a join, a graceful leave, a crash, a rolling restart), followed until it settles; and the row's figures.

Timeline. The N pods start within one renew interval (a StatefulSet with Parallel pod management), elect
a coordinator, publish and acquire everything. Every replica acknowledges that generation in the same
instant, which restarts every renew timer: from then on all replicas renew in step, as they do after any
generation of a real cluster (within the spread of their watch and release times, which this model does
not have). Once every zone runs and nothing is pending, a renew interval later the steady window starts
(six renew intervals: every rate counted there is exact), and the event happens at its end (a crash: at
the victim's next renewal, just after it is written). A join, leave or crash is then followed for
`Timing.horizon` seconds; a rolling restart until the last pod is Ready again, plus two renew intervals.
"""

from __future__ import annotations

import itertools
import math
import random
import time
from dataclasses import dataclass, field
from typing import Any

from bench.simulate.api import CONFIGMAP, DELIVERIES, LEASES, REQUESTS, Traffic
from bench.simulate.cluster import Cluster
from bench.simulate.params import (
    CRASH,
    CRASH_COORDINATOR,
    JOIN,
    LEAVE,
    ROLLING_RESTART,
    Timing,
)
from bench.simulate.replica import Replica
from bench.simulate.zones import ZoneBook
from shardsync.sharding.ring import Move

WARM_UP_LIMIT = 600.0  # simulated seconds
START_GRID_DECIMALS = 1  # pods start on a 100 ms grid: those of one instant make one coordinator pass


class SimulationError(RuntimeError):
    """The simulated cluster did not reach the state a step waits for."""


@dataclass(slots=True)
class Restart:
    identity: str
    stopped: float
    started: float | None = None
    ready: float | None = None
    seconds_to_full_ownership: float | None = None


@dataclass(slots=True)
class Outcome:
    row: dict[str, Any]
    cluster: Cluster
    event_at: float
    victim: str | None
    moves: list[Move]
    restarts: list[Restart] = field(default_factory=list)


def warm_up(c: Cluster, replicas: int, rng: random.Random) -> float:
    """Start every pod; return when every zone runs and nothing is pending."""
    for ordinal in range(replicas):
        replica = c.add(ordinal)
        offset = round(rng.uniform(0, c.timing.renew_interval), START_GRID_DECIMALS)
        c.engine.at(c.t0 + offset, replica.start)
    t = c.t0
    while t < c.t0 + WARM_UP_LIMIT:
        t += 1.0
        c.engine.run_until(t)
        if c.published and c.ledger.full and c.quiet():
            return t
    raise SimulationError(f"{replicas} replicas over {len(c.zones)} zones did not settle while warming up")


def rolling_restart(c: Cluster, at: float, rng: random.Random) -> list[Restart]:
    """Restart every pod, highest ordinal first, each once the previous one is Ready (RollingUpdate)."""
    order = sorted(c.live(), key=lambda r: r.ordinal, reverse=True)
    restarts: list[Restart] = []
    timing = c.timing

    def stop(index: int, now: float) -> None:
        replica = order[index]
        record = Restart(replica.identity, now)
        restarts.append(record)
        replica.restart(now)

        def start(t: float) -> None:
            replica.start(t)
            record.started = t
            c.engine.at(t + rng.uniform(0, timing.readiness_period), ready)

        def ready(t: float) -> None:
            record.ready = t
            if c.ledger.full and c.ledger.became_full_at is not None:
                record.seconds_to_full_ownership = c.ledger.became_full_at - record.stopped
            if index + 1 < len(order):
                stop(index + 1, t)

        c.engine.at(now + timing.restart_downtime, start)

    c.engine.at(at, lambda now: stop(0, now))
    t = at
    while len(restarts) < len(order) or restarts[-1].ready is None:
        t += timing.renew_interval
        c.engine.run_until(t)
    c.engine.run_until((restarts[-1].ready or t) + 2 * timing.renew_interval)
    return restarts


def _victim(c: Cluster, event: str, rng: random.Random) -> Replica:
    if event == LEAVE:  # a scale-down drains the highest ordinal
        return max(c.live(), key=lambda r: r.ordinal)
    coordinator = c.coordinator()
    if event == CRASH_COORDINATOR:
        if coordinator is None:
            raise SimulationError("no coordinator to crash")
        return coordinator
    others = sorted((r for r in c.live() if r is not coordinator), key=lambda r: r.ordinal)
    return rng.choice(others)


@dataclass(slots=True)
class Prepared:
    """A cluster warmed up to its steady state, standing at the instant of the event."""

    cluster: Cluster
    replicas: int
    zones: int
    seed: int
    event_at: float
    wall_seconds: float


def prepare(
    replicas: int, zones: int, timing: Timing | None = None, seed: int = 1, book: ZoneBook | None = None
) -> Prepared:
    """Warm up and run through the steady window, up to the event's instant (the same for every event)."""
    wall_started = time.perf_counter()
    timing = timing if timing is not None else Timing()
    book = book if book is not None else ZoneBook()
    c = Cluster(book.names(zones), timing, book)
    warm = warm_up(c, replicas, random.Random(f"{seed}/{replicas}/{zones}"))
    steady_start = c.t0 + math.ceil(warm - c.t0) + math.ceil(timing.renew_interval)
    event_at = steady_start + timing.steady_window
    c.engine.run_until(event_at)
    return Prepared(c, replicas, zones, seed, event_at, time.perf_counter() - wall_started)


def simulate(
    replicas: int,
    zones: int,
    event: str,
    timing: Timing | None = None,
    seed: int = 1,
    book: ZoneBook | None = None,
) -> Outcome:
    """One row, warm-up included."""
    return play(prepare(replicas, zones, timing, seed, book), event)


def play(prepared: Prepared, event: str) -> Outcome:
    """The event on a prepared cluster (which it consumes), followed until it settles; the row."""
    wall_started = time.perf_counter()
    c, replicas, zones, seed = prepared.cluster, prepared.replicas, prepared.zones, prepared.seed
    event_at, timing, names = prepared.event_at, c.timing, c.zones
    rng = random.Random(f"{seed}/{replicas}/{zones}/{event}")
    before = c.parsed
    leader = c.coordinator()
    coordinator = leader.identity if leader is not None else ""
    steady_members = [r.identity for r in c.live() if r.identity != coordinator]
    published_before = len(c.published)
    stale_before = len(c.stale_waits)
    c.ledger.measure()
    victim: Replica | None = None
    restarts: list[Restart] = []
    if event == JOIN:
        victim = c.add(replicas)
        c.engine.at(event_at, victim.start)
    elif event == LEAVE:
        victim = _victim(c, event, rng)
        c.engine.at(event_at, victim.drain)
    elif event in (CRASH, CRASH_COORDINATOR):
        # Just after the victim renewed its Lease (its renewal is queued first at that instant): the Lease
        # has its whole duration to run, the longest wait. A crash later in the interval settles sooner.
        victim = _victim(c, event, rng)
        event_at = victim.next_renew_at
        c.engine.at(event_at, victim.crash)
    elif event == ROLLING_RESTART:
        restarts = rolling_restart(c, event_at, rng)
    else:
        raise ValueError(f"unknown event {event!r}")
    if event != ROLLING_RESTART:
        c.engine.run_until(event_at + timing.horizon)
    end = c.now

    generations = [before] + [parsed for _, parsed in c.published[published_before:]]
    moves: list[Move] = []
    for older, newer in itertools.pairwise(generations):
        moves += older.assignment.moved(newer.assignment, names)
    after = generations[-1]
    victim_id = victim.identity if victim is not None else None
    if event == JOIN:
        as_needed = all(m.after == victim_id for m in moves)
        ideal: float | None = zones / len(after.assignment.members)
    elif event == ROLLING_RESTART:
        as_needed, ideal = not moves, None
    else:
        as_needed = all(m.before == victim_id for m in moves)
        ideal = zones / len(before.assignment.members)

    to_full: float | None = None
    to_publish: float | None = None
    restart_times = [r.seconds_to_full_ownership for r in restarts]
    if event == ROLLING_RESTART:
        if restart_times and None not in restart_times:
            to_full = max(t for t in restart_times if t is not None)
    elif len(generations) > 1:
        to_publish = c.published[published_before][0] - event_at
        if c.ledger.full and c.ledger.became_full_at is not None:
            to_full = max(c.ledger.became_full_at, c.published[-1][0]) - event_at

    steady = (prepared.event_at - timing.steady_window, prepared.event_at)
    traffic = c.traffic
    stale = c.stale_waits[stale_before:]
    seconds = traffic.second(steady[1]) - traffic.second(steady[0])
    member = [traffic.of(identity, *steady) for identity in steady_members]
    lead = traffic.of(coordinator, *steady) if coordinator else (0, 0)
    last = c.coordinator()
    leaders = {coordinator, last.identity if last is not None else ""} - {""}
    everyone = set(c.replicas)
    row: dict[str, Any] = {
        "replicas": replicas,
        "zones": zones,
        "event": event,
        "victim": victim_id,
        "generation_before": before.assignment.generation,
        "generation_after": after.assignment.generation,
        "generations_published": len(generations) - 1,
        "balance_max_over_mean": _round(after.max_over_mean(), 3),
        "zones_moved": len(moves),
        "ideal_moved": _round(ideal, 1),
        "moved_ratio": _round(len(moves) / ideal if ideal else None, 3),
        "moved_only_as_needed": as_needed,
        "seconds_to_publish": _round(to_publish, 3),
        "seconds_to_full_ownership": _round(to_full, 3),
        "longest_unowned_seconds": round(c.ledger.longest_unowned, 3),
        "lease_writes_per_second": round(traffic.rate(LEASES, *steady), 2),
        "lease_writes_per_second_peak": traffic.peak(LEASES, event_at, end),
        "watch_events_per_second_per_replica": round(traffic.rate((DELIVERIES,), *steady) / replicas, 2),
        "watch_events_per_second_per_member": _mean([events for events, _ in member], seconds),
        "watch_events_per_second_coordinator": round(lead[0] / seconds, 2),
        "watch_events_per_second_per_member_peak": busiest(traffic, everyone - leaders, event_at, end),
        "watch_events_per_second_coordinator_peak": busiest(traffic, leaders, event_at, end),
        "watch_deliveries_per_second": round(traffic.rate((DELIVERIES,), *steady), 1),
        "watch_deliveries_per_second_peak": traffic.peak((DELIVERIES,), event_at, end),
        "api_requests_per_second": round(traffic.rate((REQUESTS,), *steady), 1),
        "api_requests_per_second_per_member": _mean([requests for _, requests in member], seconds),
        "api_requests_per_second_coordinator": round(lead[1] / seconds, 2),
        "configmap_writes": traffic.total((CONFIGMAP,), event_at, end),
        "assignment_bytes": after.bytes,
        "overlapping_zones": c.ledger.overlaps,
        "stale_view_waits": len(stale),
        "stale_view_wait_max_seconds": round(max(stale), 3) if stale else 0.0,
        "restarts": len(restarts),
        "roll_seconds": _round(restarts[-1].ready - event_at if restarts and restarts[-1].ready else None, 1),
        "restart_seconds_to_full_ownership_mean": _round(
            sum(t for t in restart_times if t is not None) / len(restarts) if restarts else None, 3
        ),
        "simulated_seconds": round(end - c.t0, 1),
        "simulation_events": c.engine.processed,
        "wall_seconds": round(prepared.wall_seconds + time.perf_counter() - wall_started, 2),
    }
    return Outcome(row, c, event_at, victim_id, moves, restarts)


def _mean(counts: list[int], seconds: int) -> float:
    return round(sum(counts) / len(counts) / seconds, 2) if counts and seconds else 0.0


def busiest(traffic: Traffic, identities: set[str], start: float, end: float) -> int:
    """The busiest whole second in [start, end) of any of `identities`: the watch events sent to it."""
    s0, s1 = traffic.second(start), traffic.second(end)
    most: dict[int, int] = {}
    for (identity, s), n in traffic.received.items():
        if s0 <= s < s1 and identity in identities and n > most.get(s, 0):
            most[s] = n
    if not identities:
        return 0
    return max((most.get(s, 0) + traffic.broadcast[s] for s in range(s0, s1)), default=0)


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)
