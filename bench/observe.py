"""Watching a running cluster from outside: who actively owns which zone over time, and what the provider's
audit says was written when.

`Sampler` polls every live replica's `/shards` in a background thread and keeps a timeline of `Sample`s.
A zone counts as actively owned by a replica only when that replica itself reports it (`owner` is itself
and `state` is `active`): only the owner knows whether it runs the zone. The functions below are pure
readings of a timeline or an audit, so the scenarios stay short and the rules are tested without
processes. Sampled times have the sampler's resolution (its period plus one round of polls); times
taken from the audit are exact to the provider's clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from bench.audit import overlapping_writes
from shardsync.providers.fake.audit import AuditEntry
from shardsync.sharding.states import ZoneState


@dataclass(frozen=True, slots=True)
class View:
    """One replica's /shards answer, reduced to what the bench reads."""

    identity: str
    generation: int
    coordinator: str
    active: frozenset[str]  # zones it reports running itself
    parked: frozenset[str]  # zones it reports parked for a restarting owner (run by no one, by design)
    owners: Mapping[str, str | None]  # zone -> owner, as its view of the assignment says
    member_states: Mapping[str, str]  # identity -> state, as it sees the member leases


def reduce(doc: Mapping[str, Any]) -> View:
    me = str(doc.get("self") or "")
    active: set[str] = set()
    parked: set[str] = set()
    owners: dict[str, str | None] = {}
    for row in doc.get("zones") or []:
        zone = str(row.get("zone"))
        owner = row.get("owner")
        owners[zone] = None if owner is None else str(owner)
        if owner == me and row.get("state") == ZoneState.ACTIVE:
            active.add(zone)
        elif row.get("state") == "parked":
            parked.add(zone)
    states = {str(m.get("identity")): str(m.get("state")) for m in doc.get("members") or []}
    return View(
        identity=me,
        generation=int(doc.get("generation") or 0),
        coordinator=str(doc.get("coordinator") or ""),
        active=frozenset(active),
        parked=frozenset(parked),
        owners=owners,
        member_states=states,
    )


@dataclass(frozen=True, slots=True)
class Sample:
    t: float  # Unix time once every answer of this round was in
    views: Mapping[str, View]  # by identity: the replicas that answered

    def holders(self) -> dict[str, set[str]]:
        """zone -> replicas that report running it."""
        out: dict[str, set[str]] = {}
        for identity, view in self.views.items():
            for zone in view.active:
                out.setdefault(zone, set()).add(identity)
        return out

    def owner_map(self) -> dict[str, str]:
        """zone -> the replica running it (one of them, should there be two)."""
        return {zone: min(ids) for zone, ids in self.holders().items()}

    def coordinators(self) -> set[str]:
        return {v.coordinator for v in self.views.values()}


class Sampler:
    """Polls /shards of the replicas `targets()` names (identity -> base URL) every `period` seconds."""

    def __init__(self, targets: Callable[[], Mapping[str, str]], period: float = 0.25) -> None:
        self.targets = targets
        self.period = period
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._http = httpx.Client(timeout=max(1.0, period * 4))

    def poll(self) -> Sample:
        views: dict[str, View] = {}
        for identity, url in self.targets().items():
            try:
                resp = self._http.get(url + "/shards")
            except httpx.HTTPError:
                continue
            if resp.status_code == 200:
                views[identity] = reduce(orjson.loads(resp.content))
        return Sample(time.time(), views)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            sample = self.poll()
            with self._lock:
                self.samples.append(sample)
            self._stop.wait(max(0.0, self.period - (time.monotonic() - started)))

    def start(self) -> Sampler:
        self._thread = threading.Thread(target=self._run, name="bench-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.close()

    def latest(self) -> Sample | None:
        with self._lock:
            return self.samples[-1] if self.samples else None

    def since(self, t: float) -> list[Sample]:
        with self._lock:
            return [s for s in self.samples if s.t >= t]

    def wait_for(
        self, condition: Callable[[Sample], bool], within: float, after: float = 0.0
    ) -> Sample | None:
        """The first sample taken at or after Unix time `after` that satisfies `condition`, waiting up to
        `within` seconds; None on time-out."""
        deadline = time.monotonic() + within
        seen = 0
        while time.monotonic() < deadline:
            with self._lock:
                fresh = self.samples[seen:]
                seen = len(self.samples)
            for sample in fresh:
                if sample.t >= after and condition(sample):
                    return sample
            time.sleep(min(self.period / 2, 0.05))
        return None

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def poll_once(targets: Mapping[str, str]) -> Sample:
    """One round of /shards answers from `targets` (identity -> base URL)."""
    sampler = Sampler(lambda: targets)
    try:
        return sampler.poll()
    finally:
        sampler.close()


# ---- readings of samples --------------------------------------------------------------------------------


def fully_owned(sample: Sample, zones: Collection[str], expected: Collection[str]) -> bool:
    """Every zone runs at exactly one replica, that replica is one of `expected`, every expected replica
    answered, and each agrees with the others' generation."""
    if not set(expected) <= set(sample.views) or not zones:
        return False
    generations = {sample.views[i].generation for i in expected}
    if len(generations) != 1:
        return False
    holders = sample.holders()
    wanted = set(expected)
    for zone in zones:
        ids = holders.get(zone)
        if ids is None or len(ids) != 1 or not ids <= wanted:
            return False
    return True


def full_ownership(
    zones: Collection[str], expected: Collection[str], min_generation: int = 0
) -> Callable[[Sample], bool]:
    """A condition for `Sampler.wait_for`: `fully_owned` under a generation of at least `min_generation`."""

    def check(sample: Sample) -> bool:
        if not fully_owned(sample, zones, expected):
            return False
        return all(sample.views[i].generation >= min_generation for i in expected)

    return check


def generation(sample: Sample) -> int:
    """The newest generation any replica of the sample works under."""
    return max((v.generation for v in sample.views.values()), default=0)


def unowned_spans(samples: Sequence[Sample], zones: Iterable[str]) -> dict[str, list[tuple[float, float]]]:
    """zone -> [(start, end)] of runs of consecutive samples in which no replica ran it. A run still open
    at the last sample ends there."""
    zones = list(zones)
    open_since: dict[str, float] = {}
    spans: dict[str, list[tuple[float, float]]] = {z: [] for z in zones}
    for sample in samples:
        holders = sample.holders()
        for zone in zones:
            if zone in holders:
                start = open_since.pop(zone, None)
                if start is not None:
                    spans[zone].append((start, sample.t))
            else:
                open_since.setdefault(zone, sample.t)
    if samples:
        for zone, start in open_since.items():
            spans[zone].append((start, samples[-1].t))
    return spans


def longest_unowned(spans: Mapping[str, list[tuple[float, float]]]) -> tuple[float, str | None]:
    """(seconds, zone) of the longest unowned span, (0.0, None) when no zone was ever unowned."""
    best, which = 0.0, None
    for zone, runs in spans.items():
        for start, end in runs:
            if end - start > best:
                best, which = end - start, zone
    return best, which


def moved(before: Mapping[str, str], after: Mapping[str, str]) -> set[str]:
    """Zones whose runner differs between two owner maps (a zone missing on one side counts as moved)."""
    return {z for z in set(before) | set(after) if before.get(z) != after.get(z)}


def load(owner_map: Mapping[str, str], members: Collection[str]) -> tuple[int, float]:
    """(max, mean) zones per member over `members` (members running nothing count as 0)."""
    counts = dict.fromkeys(members, 0)
    for owner in owner_map.values():
        counts[owner] = counts.get(owner, 0) + 1
    if not counts:
        return 0, 0.0
    return max(counts.values()), sum(counts.values()) / len(counts)


def timeline(samples: Sequence[Sample], zones: Collection[str], t0: float) -> list[dict[str, Any]]:
    """For plots and the JSON: per sample, seconds since `t0`, zones run per replica, zones parked for a
    restarting owner (run by no one by design: they wait for it, they do not move) and zones run by no
    replica otherwise (unowned)."""
    zone_set = set(zones)
    rows = []
    for sample in samples:
        holders = sample.holders()
        owned = {identity: len(view.active & zone_set) for identity, view in sorted(sample.views.items())}
        parked_anywhere = set().union(*(view.parked for view in sample.views.values())) & zone_set
        idle = [z for z in zone_set if z not in holders]
        parked = sum(1 for z in idle if z in parked_anywhere)
        rows.append(
            {"t": round(sample.t - t0, 3), "owned": owned, "parked": parked, "unowned": len(idle) - parked}
        )
    return rows


# ---- readings of the provider's audit --------------------------------------------------------------------


def first_apply(audit: Iterable[AuditEntry], after: float = 0.0) -> dict[str, AuditEntry]:
    """zone -> its first successful apply that started at or after Unix time `after`."""
    out: dict[str, AuditEntry] = {}
    for entry in audit:
        if entry.op == "apply" and entry.outcome == "ok" and entry.start_wall >= after:
            seen = out.get(entry.zone)
            if seen is None or entry.end_wall < seen.end_wall:
                out[entry.zone] = entry
    return out


def first_fence(
    audit: Iterable[AuditEntry], zones: Collection[str], after: float, excluded: Collection[str] = ()
) -> dict[str, AuditEntry]:
    """zone -> the first fence a writer other than `excluded` took on it at or after `after` (a new
    owner's first write)."""
    out: dict[str, AuditEntry] = {}
    for entry in audit:
        if (
            entry.op == "fence"
            and entry.outcome == "ok"
            and entry.zone in zones
            and entry.writer not in excluded
            and entry.start_wall >= after
        ):
            seen = out.get(entry.zone)
            if seen is None or entry.end_wall < seen.end_wall:
                out[entry.zone] = entry
    return out


def safety(audit: Sequence[AuditEntry]) -> dict[str, int]:
    """The safety figures of one scenario: overlapping successful writes by two writers to one zone (must
    be 0), writes refused by a zone's fence, and writes in all."""
    return {
        "overlapping_writes": len(overlapping_writes(audit)),
        "fenced_writes": sum(1 for e in audit if e.outcome == "fenced"),
        "writes": len(audit),
    }
