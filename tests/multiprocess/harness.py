"""A real-process cluster for the multi-process tests, with short timings and the means to hurt it.

The processes are exactly what `shardsync local` starts (the bench's `Cluster`, on the local Launcher): the
embedded API server and the fake provider as child processes, and `shardsync run` replicas `shardsync-<i>`
kept like StatefulSet pods (`scale` writes spec.replicas first, then starts or SIGTERMs ordinals). On top:

- `faults`: the API server's fault control over its admin endpoint (pause everything; refuse one replica by
  its User-Agent `shardsync/<version> (<identity>)`);
- `sampler`: every live replica's /shards polled every `SAMPLE_PERIOD` in a thread (who actively runs which
  zone over time), from the bench's observer;
- `Generations`: the published assignment generation followed from the API in a thread;
- changes that keep flowing: Service and DNSEndpoint updates through the API, and drift written straight
  into the provider (an unfenced write by `DRIFT_WRITER`, as a person editing the zone by hand);
- the records the seeded objects ask for, read back from the API objects, and the zone's records compared
  with them (A records and their external-dns ownership TXT records).

Everything is blocking: tests are sequential scripts. `Harness.stop()` ends every process it started.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import httpx

from bench import observe
from bench.audit import overlapping_writes
from bench.cluster import Cluster, ClusterSpec, Replica, zone_names
from bench.records import Record, actual_records, desired_by_zone
from shardsync.durations import format_duration
from shardsync.local import seed
from shardsync.local.apiserver.admin import RemoteFaults
from shardsync.providers.fake.audit import AuditEntry
from shardsync.records.endpoint import Changes, Endpoint
from shardsync.sharding.timings import Timings
from shardsync.sources.crd import DNS_ENDPOINTS
from shardsync.sources.service import SERVICES
from tests.waits import eventually_sync

LEASE = 3.0  # --lease-duration
RENEW = 0.5  # --renew-interval
SETTLE = 0.3  # --settle-delay
TIMINGS = Timings.derive(LEASE, RENEW, SETTLE)
DEFAULT_TIMINGS = Timings.resolve(fences=True)  # `default_timing=True`
# A replica cut off from the API stops writing this long after its last renewal was sent (rule 5).
FENCE_AFTER = TIMINGS.lease_duration - TIMINGS.fence_margin
SAMPLE_PERIOD = 0.1
DRIFT_WRITER = "test-drift"
START_WITHIN = 60.0  # processes starting on two busy cores


def replica_flags(
    interval: float, restart_grace: float = 30.0, default_timing: bool = False
) -> tuple[str, ...]:
    """The replicas' flags; with `default_timing`, no timing flag (the shipped defaults for the fake
    provider, which fences: DEFAULT_TIMINGS)."""
    timing = (
        ()
        if default_timing
        else (
            f"--lease-duration={format_duration(LEASE)}",
            f"--renew-interval={format_duration(RENEW)}",
            f"--settle-delay={format_duration(SETTLE)}",
        )
    )
    return (
        *timing,
        f"--interval={format_duration(interval)}",
        f"--restart-grace={format_duration(restart_grace)}",
        "--concurrency=4",
    )


def identity(ordinal: int) -> str:
    return f"{seed.STATEFULSET}-{ordinal}"


# ---- readings -----------------------------------------------------------------------------------------


def replica_entries(audit: Iterable[AuditEntry]) -> list[AuditEntry]:
    """The audit without the test's own drift writes."""
    return [e for e in audit if e.writer != DRIFT_WRITER]


def overlaps(audit: Sequence[AuditEntry]) -> list[tuple[AuditEntry, AuditEntry]]:
    """Two replicas' successful writes to one zone at overlapping times (the safety invariant: none)."""
    return overlapping_writes(replica_entries(audit))


def fenced(audit: Iterable[AuditEntry]) -> list[AuditEntry]:
    """Writes the provider refused because the zone's fence had moved on."""
    return [e for e in audit if e.outcome == "fenced"]


def writes_ok(audit: Iterable[AuditEntry]) -> list[AuditEntry]:
    return [e for e in replica_entries(audit) if e.outcome == "ok"]


def handoff_gaps(
    audit: Iterable[AuditEntry], zones: Iterable[str], old: str, after: float
) -> dict[str, float]:
    """zone -> seconds from `old`'s last successful write to it until the first successful write (fence or
    apply) by another replica that started after Unix time `after`; zones lacking either are left out.
    Negative would mean the new owner wrote before the old one stopped."""
    entries = writes_ok(audit)
    out: dict[str, float] = {}
    for zone in zones:
        mine = [e.end_wall for e in entries if e.zone == zone and e.writer == old]
        theirs = [
            e.start_wall for e in entries if e.zone == zone and e.writer != old and e.start_wall >= after
        ]
        if mine and theirs:
            out[zone] = min(theirs) - max(mine)
    return out


def first_writes(
    audit: Iterable[AuditEntry], zones: Collection[str], after: float, excluded: Collection[str] = ()
) -> dict[str, AuditEntry]:
    """zone -> the first successful write (fence or apply) to it that started after `after`, by a replica
    not in `excluded`."""
    out: dict[str, AuditEntry] = {}
    for entry in writes_ok(audit):
        if entry.zone in zones and entry.writer not in excluded and entry.start_wall >= after:
            seen = out.get(entry.zone)
            if seen is None or entry.start_wall < seen.start_wall:
                out[entry.zone] = entry
    return out


class Generations:
    """Follows the published assignment's generation in a thread (a failed read is a missing sample)."""

    def __init__(self, cluster: Cluster, period: float = 0.05) -> None:
        self.cluster = cluster
        self.period = period
        self.seen: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="generations", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                assignment = self.cluster.assignment()
            except Exception:  # the API server may be paused or gone: a missing sample
                assignment = None
            if assignment is not None:
                self.seen.append((time.time(), assignment.generation))
            self._stop.wait(self.period)

    def __enter__(self) -> Generations:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def values(self) -> list[int]:
        return [g for _, g in self.seen]


def replica_generations(samples: Iterable[observe.Sample]) -> dict[str, list[int]]:
    """identity -> the generations its /shards reported over time (0, before it read one, left out)."""
    out: dict[str, list[int]] = {}
    for sample in samples:
        for ident, view in sample.views.items():
            if view.generation:
                out.setdefault(ident, []).append(view.generation)
    return out


# ---- the harness ---------------------------------------------------------------------------------------


@dataclass
class Harness:
    cluster: Cluster
    zones: list[str]
    per_zone: int
    faults: RemoteFaults
    sampler: observe.Sampler
    http: httpx.Client = field(default_factory=lambda: httpx.Client(timeout=10.0))

    @classmethod
    def start(
        cls,
        run_dir: Path,
        *,
        zones: int,
        replicas: int,
        interval: float = 10.0,
        restart_grace: float = 30.0,
        per_zone: int = 1,
        latency: float = 0.005,
        default_timing: bool = False,
        provider: str = "fake",
        webhook_fence: bool = False,
        keep_api_state: bool = False,  # the API server may be restarted (Cluster.stop_apiserver)
    ) -> Harness:
        """API server, fake provider with `zones` zones, a Service and a DNSEndpoint with `per_zone`
        records per zone, `replicas` replicas ready and settled on one generation owning every zone.
        `provider="webhook"`: the replicas speak the fake's webhook face (with the fence extension when
        `webhook_fence`)."""
        spec = ClusterSpec(
            latency=latency,
            provider_concurrency=None,
            replica_flags=replica_flags(interval, restart_grace, default_timing),
            termination_grace=4 * LEASE,
            start_timeout=START_WITHIN,
            provider=provider,
            webhook_fence=webhook_fence,
            keep_api_state=keep_api_state,
        )
        cluster = Cluster(run_dir, spec)
        sampler: observe.Sampler | None = None
        try:
            cluster.start()
            names = zone_names(zones)
            cluster.seed_objects(names, per_zone)
            cluster.open_zones(zones)
            assert cluster.launcher.infra is not None
            faults = RemoteFaults(cluster.launcher.infra.api_url)
            sampler = observe.Sampler(lambda: {r.identity: r.url for r in cluster.live()}, SAMPLE_PERIOD)
            harness = cls(cluster, names, per_zone, faults, sampler)
            sampler.start()
            cluster.scale(replicas)
            cluster.wait_ready()
            harness.wait_owned(within=START_WITHIN, what="start")
            return harness
        except BaseException:
            if sampler is not None:
                sampler.stop()
            cluster.stop()
            raise

    def stop(self) -> None:
        try:
            self.sampler.stop()
        finally:
            try:
                self.cluster.stop()
            finally:
                self.http.close()

    # ---- replicas ----

    def live(self) -> list[str]:
        return [r.identity for r in self.cluster.live()]

    def replica(self, ident: str) -> Replica:
        return next(r for r in self.cluster.live() if r.identity == ident)

    def ordinal(self, ident: str) -> int:
        return int(ident.rsplit("-", 1)[1])

    def latest(self) -> observe.Sample:
        sample = self.sampler.latest()
        assert sample is not None, "no /shards sample yet"
        return sample

    def fresh_sample(self, after: float | None = None, within: float = 5.0) -> observe.Sample:
        """The first sample taken after `after` (default: now)."""
        t = time.time() if after is None else after
        sample = self.sampler.wait_for(lambda s: True, within, t)
        assert sample is not None, "the sampler stopped"
        return sample

    def wait_owned(
        self,
        *,
        within: float,
        expected: Collection[str] | None = None,
        after: float = 0.0,
        min_generation: int = 0,
        what: str = "",
    ) -> observe.Sample:
        """The first sample after `after` in which each zone runs at exactly one of `expected` (default:
        the live replicas), all on one generation of at least `min_generation`, and that generation is the
        published one listing exactly them."""
        deadline = time.monotonic() + within
        seen = 0.0
        while True:
            sample = self.sampler.latest()
            if sample is not None and sample.t > seen and sample.t >= after:
                seen = sample.t
                members = list(expected) if expected is not None else self.live()
                if observe.full_ownership(self.zones, members, min_generation)(sample):
                    assignment = self.cluster.assignment()
                    if (
                        assignment is not None
                        and assignment.identities == set(members)
                        and assignment.generation == observe.generation(sample)
                    ):
                        return sample
            for replica in self.cluster.replicas.values():
                if not replica.alive() and replica.ordinal < self.cluster.desired:
                    tail = replica.child.tail(30)
                    raise AssertionError(
                        f"{replica.identity} exited with {replica.child.returncode}:\n{tail}"
                    )
            if time.monotonic() >= deadline:
                raise AssertionError(f"{what}: zones not owned once within {within:.0f}s: {self.describe()}")
            time.sleep(SAMPLE_PERIOD / 2)

    def describe(self) -> str:
        sample = self.sampler.latest()
        if sample is None:
            return "no sample"
        holders = sample.holders()
        unowned = [z for z in self.zones if z not in holders]
        twice = {z: sorted(ids) for z, ids in holders.items() if len(ids) > 1}
        views = {
            i: (v.generation, v.coordinator, len(v.active), dict(v.member_states))
            for i, v in sorted(sample.views.items())
        }
        assignment = self.cluster.assignment()
        published = None if assignment is None else (assignment.generation, sorted(assignment.identities))
        return (
            f"live {self.live()}, published {published}, {len(unowned)} unowned {unowned[:3]}, "
            f"twice {twice}, views (generation, coordinator, zones, members) {views}"
        )

    def coordinator(self) -> str:
        """The coordinator every answering replica names (fails when they disagree)."""
        names = self.fresh_sample().coordinators()
        assert len(names) == 1, f"replicas disagree on the coordinator: {names}"
        return names.pop()

    # ---- changes that keep flowing ----

    def set_service_address(self, index: int, address: str) -> None:
        """Point Service `web-<index>` at a new address (its record `web.<zone>` follows)."""
        name = seed.service(index, self.zones[index])["metadata"]["name"]
        body = {"spec": {"externalIPs": [address]}}
        self.cluster.kube.patch(SERVICES, name, body, namespace=seed.NAMESPACE, request_timeout=10)

    def set_app_addresses(self, index: int, addresses: Sequence[str]) -> None:
        """Point DNSEndpoint `app-<index>`'s records at new addresses (one per record)."""
        body = seed.dns_endpoint(index, self.zones[index], self.per_zone)
        for ep, address in zip(body["spec"]["endpoints"], addresses, strict=True):
            ep["targets"] = [address]
        self.cluster.kube.patch(
            DNS_ENDPOINTS,
            body["metadata"]["name"],
            {"spec": body["spec"]},
            namespace=seed.NAMESPACE,
            request_timeout=10,
        )

    def drift(self, zone: str) -> None:
        """Delete `web.<zone>` from the provider behind the replicas' back (see `drift`)."""
        assert drift(self.http, self.cluster.provider_url, zone), f"web.{zone} is not in the provider"

    # ---- records ----

    def desired(self) -> dict[str, set[Record]]:
        """zone -> the records the Services and DNSEndpoints in the API ask for now."""
        return desired_by_zone(self.cluster.kube, self.zones)

    def record_problems(self, zones: Iterable[str] | None = None) -> list[str]:
        """Zones whose records differ from what the objects ask for, and how."""
        desired = self.desired()
        problems = []
        for zone in zones if zones is not None else self.zones:
            have = actual_records(self.cluster.admin.records(zone))
            want = desired[zone]
            assert want, f"no object asks for a record in {zone}: the comparison would prove nothing"
            if have != want:
                problems.append(f"{zone}: missing {sorted(want - have)}, unexpected {sorted(have - want)}")
        return problems

    def wait_records(self, within: float, zones: Iterable[str] | None = None) -> float:
        """Wait until the zones hold exactly the desired records; returns the seconds it took."""
        started = time.monotonic()
        chosen = list(zones) if zones is not None else self.zones
        problems: list[str] = []
        while time.monotonic() - started < within:
            problems = self.record_problems(chosen)
            if not problems:
                return time.monotonic() - started
            time.sleep(0.2)
        raise AssertionError(f"records not as desired within {within:.0f}s: {problems[:5]}")

    def fence_problems(self, owners: dict[str, str]) -> list[str]:
        """Zones whose provider fence is not held by their active owner."""
        out = []
        for zone, owner in owners.items():
            fence = self.cluster.admin.fence(zone)
            if fence is None or fence.identity != owner:
                out.append(f"{zone}: fence {fence}, owner {owner}")
        return out


def drift(http: httpx.Client, provider_url: str, zone: str) -> bool:
    """Delete `web.<zone>` from the provider behind the replicas' back (an unfenced write, audited as
    DRIFT_WRITER): its owner must put it back at its next reconcile. False when it is gone already."""
    path = f"{provider_url}/v1/zones/{quote(zone, safe='')}"
    resp = http.get(path + "/records")
    resp.raise_for_status()
    wanted = f"web.{zone}"
    records = [Endpoint.from_json(r) for r in resp.json()["records"] if r["dnsName"] == wanted]
    if not records:
        return False
    body = {"changes": Changes(delete=records).to_json(), "fence": None, "writer": DRIFT_WRITER}
    http.post(path + "/changes", json=body).raise_for_status()
    return True


class Drifter:
    """Drift from a thread: every `period` seconds the next of `zones` (round-robin) loses its `web.<zone>`
    record, unless its owner has not put it back since the last round, so owners keep having something to
    write. `drifted` logs (Unix time, zone)."""

    def __init__(self, harness: Harness, zones: Sequence[str], period: float) -> None:
        self.provider_url = harness.cluster.provider_url
        self.zones = list(zones)
        self.period = period
        self.drifted: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="drifter", daemon=True)

    def _run(self) -> None:
        turn = 0
        with httpx.Client(timeout=10.0) as http:
            while not self._stop.wait(self.period):
                zone = self.zones[turn % len(self.zones)]
                turn += 1
                if drift(http, self.provider_url, zone):
                    self.drifted.append((time.time(), zone))

    def since(self, t: float) -> set[str]:
        """Zones drifted at or after Unix time `t`."""
        return {zone for at, zone in self.drifted if at >= t}

    def __enter__(self) -> Drifter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


class Churn:
    """Keeps changes flowing from a thread: every `period` seconds one change to the objects of `indexes`
    (round-robin Service addresses, or with `rng` a random Service or DNSEndpoint of them). A change the API
    refuses (paused) is skipped; the records wanted are read back from the API at the end anyway."""

    def __init__(
        self,
        harness: Harness,
        indexes: Sequence[int],
        period: float,
        rng: random.Random | None = None,
        first_address: int = 100_000,
    ) -> None:
        self.harness = harness
        self.indexes = list(indexes)
        self.period = period
        self.rng = rng
        self.made = 0
        self.refused = 0
        self._next_address = first_address
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="churn", daemon=True)

    def _address(self) -> str:
        self._next_address += 1
        return seed.address(self._next_address)

    def change(self, turn: int) -> None:
        h = self.harness
        if self.rng is None:
            h.set_service_address(self.indexes[turn % len(self.indexes)], self._address())
            return
        index = self.rng.choice(self.indexes)
        if self.rng.random() < 0.5:
            h.set_service_address(index, self._address())
        else:
            h.set_app_addresses(index, [self._address() for _ in range(h.per_zone)])

    def _run(self) -> None:
        turn = 0
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.change(turn)
                self.made += 1
            except Exception:  # paused or cut: the API said no, or did not answer in time
                self.refused += 1
            turn += 1
            self._stop.wait(max(0.0, self.period - (time.monotonic() - started)))

    def __enter__(self) -> Churn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def wait_for(cond: Callable[[], bool], within: float, what: str, poll: float = 0.05) -> float:
    """tests.waits.eventually_sync, timed, and failing with what was awaited; returns the seconds taken."""
    started = time.monotonic()
    try:
        eventually_sync(cond, within=within, poll=poll)
    except TimeoutError:
        raise AssertionError(f"not within {within:.1f}s: {what}") from None
    return time.monotonic() - started
