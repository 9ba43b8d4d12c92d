"""The sharding rules played together: replicas, a coordinator and an API, all pure, on one fake clock.

Hypothesis draws sequences of joins, crashes, restarts, drains, weight changes, network partitions and
coordinator failovers, with lagging watches. Checked at every step: no zone is written by two replicas at
once (the safety invariant of design §2). Checked once the faults stop: every zone has exactly one active
owner, the one the latest assignment names (liveness). Derandomized, so CI runs the same cases every time.

As built (issue 39): only the coordinator reads every member Lease; a replica reads the Leases of the
peers rule 4 names for its pending zones (`ShardState.hearing`: their previous owners when the generation
vouches for the rest, else everyone), after reading the assignment.
"""

from __future__ import annotations

import random
from collections.abc import Collection
from dataclasses import dataclass, field, replace

from hypothesis import given, settings
from hypothesis import strategies as st

from shardsync.sharding.assignment import Assignment, is_successor
from shardsync.sharding.clock import FakeClock
from shardsync.sharding.handoff import handoff, may_acquire, peers_to_hear
from shardsync.sharding.membership import LivenessTracker, MemberLease, may_write
from shardsync.sharding.publisher import Publisher, PublisherConfig

LEASE = 15
RENEW_EVERY = 5.0
FENCE_MARGIN = 3.0  # writes stop 3 s before a lease could lapse (rule 5)
ACQUIRE_MARGIN = 2.0  # a silent peer counts as gone 2 s after its lease lapses (rule 4)
STEP = 0.5
WATCH_DELIVERY = 0.6  # chance per step that a replica's view catches up (lagging watches)
ZONES = [f"zone-{i}.example.org" for i in range(24)]
IDS = [f"r{i}" for i in range(5)]
INSTANCE = "dns"


@dataclass
class Api:
    leases: dict[str, MemberLease] = field(default_factory=dict)
    assignment: Assignment | None = None


@dataclass
class Replica:
    identity: str
    alive: bool = False
    partitioned: bool = False  # cut off from the API: cannot renew, cannot read
    stalled: bool = False  # its watches stalled: renews fine, sees nothing new
    draining: bool = False
    weight: int = 1
    last_renewed: float | None = None
    acked: int | None = None
    view: Assignment | None = None
    previous: Assignment | None = None
    active: set[str] = field(default_factory=set)
    pending: set[str] = field(default_factory=set)
    tracker: LivenessTracker = field(default_factory=LivenessTracker)
    needs_read: bool = True
    received_at: float = 0.0  # when the view was taken

    def start(self) -> None:
        # A new process: runs nothing, knows nothing, must read before it writes.
        self.alive, self.draining = True, False
        self.last_renewed, self.view, self.previous = None, None, None
        self.active, self.pending = set(), set()
        self.tracker = LivenessTracker()
        self.needs_read = True

    def write_lease(self, api: Api, clock: FakeClock, restarting: bool = False) -> None:
        current = api.leases.get(self.identity) or MemberLease.new(
            INSTANCE, self.identity, clock.now(), LEASE
        )
        api.leases[self.identity] = replace(
            current.renewed(clock.now()),
            weight=self.weight,
            draining=self.draining,
            restarting=restarting,
            observed_generation=self.acked,
        )
        self.last_renewed = clock.monotonic()

    def writing(self, now: float) -> set[str]:
        """The zones this replica would write to at `now`."""
        if not self.alive or self.needs_read or not may_write(self.last_renewed, now, LEASE, FENCE_MARGIN):
            return set()
        return self.active

    def step(self, api: Api, clock: FakeClock, rng: random.Random) -> None:
        now = clock.monotonic()
        if not self.alive:
            return
        if not may_write(self.last_renewed, now, LEASE, FENCE_MARGIN):
            self.needs_read = True  # fenced: after renewing, read the assignment afresh before writing
        if not self.partitioned and (self.last_renewed is None or now - self.last_renewed >= RENEW_EVERY):
            self.write_lease(api, clock)
        if not self.partitioned and not self.stalled and (self.needs_read or rng.random() < WATCH_DELIVERY):
            self.sync(api, clock)
        if self.view is None or self.needs_read:
            return
        peers = self.tracker.statuses(now)  # possibly stale: judged at the view's own time
        view, previous, received = self.view, self.previous, self.received_at
        for zone in sorted(self.pending):  # rule 4: acquire second
            verdict = may_acquire(
                zone, self.identity, view, previous, peers, ACQUIRE_MARGIN, now=now, received_at=received
            )
            if verdict.allowed:
                self.pending.discard(zone)
                self.active.add(zone)

    def sync(self, api: Api, clock: FakeClock) -> None:
        """The watches catch up (or a fresh read): the assignment as the API has it now, then the Leases of
        the peers rule 4 must hear from (everyone's, or only its pending zones' previous owners)."""
        now = clock.monotonic()
        self.needs_read = False
        if api.assignment is not None and is_successor(self.view, api.assignment):
            self.previous, self.view = self.view, api.assignment
            self.received_at = now
        if self.view is None:
            self.tracker.resync((), now)
            return
        h = handoff(self.identity, self.view, ZONES, self.active | self.pending)
        self.active -= h.release  # rule 3: release first ...
        self.pending -= h.release
        self.pending |= h.gain
        if self.acked != self.view.generation:
            self.acked = self.view.generation  # ... then acknowledge
            self.write_lease(api, clock)
        if self.draining and self.identity not in self.view.identities and not (self.active | self.pending):
            del api.leases[self.identity]  # rule 6: released everything, leave for good
            self.alive = False
            return
        heard: Collection[str] | None = ()
        if self.pending:
            heard = peers_to_hear(self.pending, self.identity, self.view, self.previous)
        leases = api.leases.values()
        self.tracker.resync(leases if heard is None else [x for x in leases if x.identity in heard], now)


@dataclass
class Coordinator:
    publisher: Publisher
    tracker: LivenessTracker = field(default_factory=LivenessTracker)
    synced: bool = False

    def step(self, api: Api, clock: FakeClock, rng: random.Random) -> None:
        now = clock.monotonic()
        if rng.random() < WATCH_DELIVERY:
            self.tracker.resync(api.leases.values(), now)
            self.synced = True
        if not self.synced:
            return
        proposal = self.publisher.observe(self.tracker.statuses(now), {}, now, clock.now())
        if proposal is None:
            return
        stored = api.assignment
        if stored == self.publisher.current:  # the resourceVersion precondition
            api.assignment = proposal
            self.publisher.committed(proposal)
        else:
            self.publisher.reset(stored)


def new_coordinator(api: Api) -> Coordinator:
    return Coordinator(
        Publisher(
            "coordinator", PublisherConfig(settle=2.0, restart_grace=30.0, ack_wait=LEASE), api.assignment
        )
    )


EVENTS = ("join", "crash", "restart", "drain", "weight", "partition", "stall", "heal", "failover")


@dataclass
class Cluster:
    clock: FakeClock = field(default_factory=FakeClock)
    api: Api = field(default_factory=Api)
    replicas: dict[str, Replica] = field(default_factory=lambda: {i: Replica(i) for i in IDS})
    coordinator: Coordinator | None = None
    restarts: dict[str, float] = field(default_factory=dict)  # identity -> when it comes back
    overlaps: list[str] = field(default_factory=list)

    def apply(self, event: str, identity: str, rng: random.Random) -> None:
        r = self.replicas[identity]
        if event == "join" and not r.alive and identity not in self.restarts:
            r.start()
        elif event == "crash":
            r.alive = False
        elif event == "restart" and r.alive:
            if not r.partitioned:
                r.write_lease(self.api, self.clock, restarting=True)
            r.alive = False
            self.restarts[identity] = self.clock.monotonic() + rng.uniform(1, 50)
        elif event == "drain" and r.alive:
            r.draining = True
            if not r.partitioned:
                r.write_lease(self.api, self.clock)
        elif event == "weight":
            r.weight = rng.randint(1, 3)
        elif event == "partition":
            r.partitioned = True
        elif event == "stall":
            r.stalled = True
        elif event == "heal":
            r.partitioned = r.stalled = False
        elif event == "failover":
            self.coordinator = new_coordinator(self.api)

    def step(self, rng: random.Random) -> None:
        now = self.clock.monotonic()
        for identity, at in sorted(self.restarts.items()):
            if now >= at:
                del self.restarts[identity]
                self.replicas[identity].start()
        order = list(self.replicas.values())
        rng.shuffle(order)
        for replica in order:
            replica.step(self.api, self.clock, rng)
        assert self.coordinator is not None
        self.coordinator.step(self.api, self.clock, rng)
        writers: dict[str, list[str]] = {}
        for replica in self.replicas.values():
            for zone in replica.writing(now):
                writers.setdefault(zone, []).append(replica.identity)
        self.overlaps += [f"t={now}: {zone} written by {w}" for zone, w in writers.items() if len(w) > 1]
        self.clock.advance(STEP)


event_lists = st.lists(
    st.tuples(st.integers(0, 240), st.sampled_from(EVENTS), st.sampled_from(IDS)), max_size=30
)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(events=event_lists, seed=st.integers(0, 2**16))
def test_no_zone_ever_has_two_writers_and_every_zone_ends_with_its_owner(
    events: list[tuple[int, str, str]], seed: int
) -> None:
    rng = random.Random(seed)
    cluster = Cluster()
    cluster.coordinator = new_coordinator(cluster.api)
    for identity in IDS[:3]:
        cluster.replicas[identity].start()
    by_step: dict[int, list[tuple[str, str]]] = {}
    for at, event, identity in events:
        by_step.setdefault(at, []).append((event, identity))
    for step in range(241):
        for event, identity in by_step.get(step, []):
            cluster.apply(event, identity, rng)
        cluster.step(rng)
        assert not cluster.overlaps, cluster.overlaps[:5]

    # Faults stop: heal everything, let restarts come back, and give the cluster two minutes.
    for replica in cluster.replicas.values():
        replica.partitioned = replica.stalled = False
    for _ in range(240):
        cluster.step(rng)
    assert not cluster.overlaps, cluster.overlaps[:5]

    alive = {i for i, r in cluster.replicas.items() if r.alive}
    final = cluster.api.assignment
    if not alive:
        return
    assert final is not None
    assert final.identities == alive
    for zone in ZONES:
        owner = final.owner_of(zone)
        holders = [i for i, r in cluster.replicas.items() if zone in r.writing(cluster.clock.monotonic())]
        assert holders == [owner], (zone, owner, holders)


def test_a_plain_scale_up_moves_zones_only_to_the_new_replica() -> None:
    rng = random.Random(7)
    cluster = Cluster()
    cluster.coordinator = new_coordinator(cluster.api)
    for identity in IDS[:3]:
        cluster.replicas[identity].start()
    for _ in range(40):
        cluster.step(rng)
    before = {i: set(r.active) for i, r in cluster.replicas.items()}
    assert sum(len(zones) for zones in before.values()) == len(ZONES)
    cluster.replicas["r3"].start()
    for _ in range(40):
        cluster.step(rng)
    after = {i: set(r.active) for i, r in cluster.replicas.items()}
    assert not cluster.overlaps
    assert sum(len(zones) for zones in after.values()) == len(ZONES)
    for identity in IDS[:3]:
        assert after[identity] <= before[identity]  # old replicas only lose zones
    assert after["r3"] == set().union(*(before[i] - after[i] for i in IDS[:3]))


def settle(cluster: Cluster, rng: random.Random, seconds: float) -> None:
    for _ in range(int(seconds / STEP)):
        cluster.step(rng)
        assert not cluster.overlaps, cluster.overlaps[:5]


def started_cluster(n: int, seed: int) -> tuple[Cluster, random.Random]:
    rng = random.Random(seed)
    cluster = Cluster()
    cluster.coordinator = new_coordinator(cluster.api)
    for identity in IDS[:n]:
        cluster.replicas[identity].start()
    settle(cluster, rng, 20)
    return cluster, rng


def test_a_replica_with_stalled_watches_never_takes_a_zone_from_a_peer_that_keeps_renewing() -> None:
    cluster, rng = started_cluster(3, seed=3)
    r1, r3 = cluster.replicas["r1"], cluster.replicas["r3"]
    r1.stalled = True  # keeps renewing and writing its zones, never sees generation g+1
    r3.start()
    generation = cluster.api.assignment.generation if cluster.api.assignment else 0
    for _ in range(100):
        cluster.step(rng)
        if r3.view is not None and r3.view.generation > generation:
            break
    assert r3.view is not None and r3.view.generation > generation
    waiting = {z for z in r3.pending if r1.view is not None and r1.view.owner_of(z) == "r1"}
    assert waiting, "r3 should be waiting for zones r1 still writes"
    r3.stalled = True  # now r3 sees r1 go silent, but only because r3 itself sees nothing any more
    settle(cluster, rng, 40)
    assert waiting <= r3.pending and waiting <= r1.active
    for replica in (r1, r3):
        replica.stalled = False
    settle(cluster, rng, 20)
    assert waiting <= r3.active and not waiting & r1.active


def test_a_replica_back_from_a_partition_rereads_before_writing() -> None:
    cluster, rng = started_cluster(3, seed=5)
    r0 = cluster.replicas["r0"]
    owned = set(r0.active)
    assert owned
    r0.partitioned = True
    settle(cluster, rng, 30)  # fenced itself; its zones went to the others
    assert owned & (cluster.replicas["r1"].active | cluster.replicas["r2"].active)
    assert r0.active == owned  # it still thinks they are its own ...
    assert not r0.writing(cluster.clock.monotonic())  # ... but has stopped writing
    # Back on the network: it renews at once, but its watches have not caught up yet. It must not write
    # on the strength of the view it had before the partition.
    r0.partitioned, r0.stalled = False, True
    settle(cluster, rng, 3)
    assert r0.active == owned and not r0.writing(cluster.clock.monotonic())
    r0.stalled = False
    cluster.step(rng)  # once it can read, it reads before writing anything
    assert not cluster.overlaps
    assert not r0.active & (cluster.replicas["r1"].active | cluster.replicas["r2"].active)
    settle(cluster, rng, 40)
    assert r0.active  # it rejoined and got zones back


def test_a_generation_that_cannot_vouch_for_a_stalled_replica_makes_the_next_owner_hear_from_everyone() -> (
    None
):
    # r1 keeps renewing and writing but never sees a new generation. Generation 2 (r3 joins) vouches that
    # everyone had acknowledged 1; generation 3 (r4 joins) cannot vouch for 2, so whoever gains a zone in
    # it hears from every member, r1 included, rather than only from the zone's owner in generation 2.
    cluster, rng = started_cluster(3, seed=11)
    r1 = cluster.replicas["r1"]
    r1.stalled = True
    cluster.replicas["r3"].start()
    settle(cluster, rng, 10)
    cluster.replicas["r4"].start()
    settle(cluster, rng, 40)
    final = cluster.api.assignment
    assert final is not None and final.generation == 3 and final.acknowledged == 1
    assert (
        r1.view is not None and r1.view.generation == 1 and r1.active
    )  # still writing its generation-1 zones
    for identity in ("r3", "r4"):
        assert not cluster.replicas[identity].active & r1.active
