"""Member leases and the rules about them: liveness as the observer sees it (rule 1), self-fencing (rule 5).

Pure: nothing here reads a clock or calls the API. `MemberLease` converts a member's Lease (as a dict in
Kubernetes JSON form) to and from a typed value; `LivenessTracker` turns the stream of leases an observer sees
into member states, timing everything on the observer's own monotonic clock; `may_write` is the fence a
replica puts in front of every provider write.

Annotations on a member Lease (all strings, as Kubernetes requires):
  shardsync.io/weight               decimal integer 1..100, default 1
  shardsync.io/draining             "true" while the replica leaves for good (absent or "false" otherwise)
  shardsync.io/restarting           "true" while the replica restarts and wants its zones parked for it
  shardsync.io/observed-generation  the last assignment generation the replica has fully released for
A malformed annotation never raises: it is listed in `MemberLease.problems` and its default is used. The
defaults are the safe ones: weight 1, not draining, not restarting, and no observed generation, so no peer
acquires a zone on the strength of an acknowledgement that cannot be read.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from shardsync.sharding.clock import microtime
from shardsync.sharding.ring import weight_error
from shardsync.sharding.states import MemberState

LABEL_NAME = "app.kubernetes.io/name"
LABEL_INSTANCE = "app.kubernetes.io/instance"
APP_NAME = "shardsync"

ANNOTATION_WEIGHT = "shardsync.io/weight"
ANNOTATION_DRAINING = "shardsync.io/draining"
ANNOTATION_RESTARTING = "shardsync.io/restarting"
ANNOTATION_OBSERVED_GENERATION = "shardsync.io/observed-generation"
_OWN_ANNOTATIONS = (
    ANNOTATION_WEIGHT,
    ANNOTATION_DRAINING,
    ANNOTATION_RESTARTING,
    ANNOTATION_OBSERVED_GENERATION,
)

DEFAULT_LEASE_DURATION = 15


class MalformedLease(ValueError):
    """An object that is not a readable member Lease of this instance (wrong name, no metadata or spec)."""


def labels(instance: str) -> dict[str, str]:
    """The labels every shardsync object of `instance` carries."""
    return {LABEL_NAME: APP_NAME, LABEL_INSTANCE: instance}


def label_selector(instance: str) -> str:
    """The label selector that lists/watches the objects of `instance`."""
    return ",".join(f"{k}={v}" for k, v in labels(instance).items())


def member_prefix(instance: str) -> str:
    return f"{instance}-member-"


def member_lease_name(instance: str, identity: str) -> str:
    """`<instance>-member-<identity>`, the name of a replica's member Lease."""
    if not identity:
        raise ValueError("empty identity")
    return member_prefix(instance) + identity


def identity_from_name(instance: str, name: str) -> str | None:
    """The identity in a member Lease name of `instance`, or None when `name` is not one."""
    prefix = member_prefix(instance)
    if name.startswith(prefix) and len(name) > len(prefix):
        return name[len(prefix) :]
    return None


@dataclass(frozen=True, slots=True)
class MemberLease:
    """One replica's member Lease. `renew_time`/`acquire_time` are kept as the holder wrote them (MicroTime
    text): they are compared for change, never with local time.

    The holder writes `replace(lease.renewed(wall), ...)`: e.g. `observed_generation=g` to acknowledge,
    `draining=True` or `restarting=True` on SIGTERM, with `resource_version` kept so a replace is refused
    if the object changed meanwhile."""

    instance: str
    identity: str
    holder: str  # "" when nobody holds it
    lease_duration: int = DEFAULT_LEASE_DURATION
    renew_time: str | None = None
    acquire_time: str | None = None
    weight: int = 1
    draining: bool = False
    restarting: bool = False
    observed_generation: int | None = None
    resource_version: str | None = None
    problems: tuple[str, ...] = ()
    # Labels and annotations that are not ours, kept so that a read-modify-write does not drop them.
    other_labels: Mapping[str, str] = field(default_factory=dict, hash=False)
    other_annotations: Mapping[str, str] = field(default_factory=dict, hash=False)

    @property
    def name(self) -> str:
        return member_lease_name(self.instance, self.identity)

    @classmethod
    def new(
        cls, instance: str, identity: str, wall: datetime, lease_duration: int = DEFAULT_LEASE_DURATION
    ) -> MemberLease:
        """A freshly acquired lease for `identity`, as its replica creates it at start-up."""
        stamp = microtime(wall)
        return cls(
            instance=instance,
            identity=identity,
            holder=identity,
            lease_duration=lease_duration,
            renew_time=stamp,
            acquire_time=stamp,
        )

    def renewed(self, wall: datetime) -> MemberLease:
        """The record the holder writes to renew (or take back) its lease at wall time `wall`."""
        stamp = microtime(wall)
        acquire = self.acquire_time if self.holder == self.identity and self.acquire_time else stamp
        return replace(self, holder=self.identity, renew_time=stamp, acquire_time=acquire, problems=())

    @classmethod
    def from_object(cls, obj: Mapping[str, Any], instance: str) -> MemberLease:
        """Read a Lease dict (Kubernetes JSON form). Raises MalformedLease only when the object is not a
        member lease of `instance` at all; bad annotations end up in `problems`."""
        metadata = obj.get("metadata")
        if not isinstance(metadata, Mapping) or not isinstance(metadata.get("name"), str):
            raise MalformedLease("lease has no metadata.name")
        name = metadata["name"]
        identity = identity_from_name(instance, name)
        if identity is None:
            raise MalformedLease(f"{name!r} is not a member lease of instance {instance!r}")
        spec = obj.get("spec") or {}
        if not isinstance(spec, Mapping):
            raise MalformedLease(f"{name}: spec is not an object")
        problems: list[str] = []

        holder = spec.get("holderIdentity") or ""
        if not isinstance(holder, str):
            problems.append(f"holderIdentity {holder!r} is not a string")
            holder = ""
        if holder and holder != identity:
            problems.append(f"held by {holder!r}, not by {identity!r}")
        duration = spec.get("leaseDurationSeconds")
        if isinstance(duration, bool) or not isinstance(duration, int) or duration <= 0:
            problems.append(f"leaseDurationSeconds {duration!r} is not a positive integer")
            duration = DEFAULT_LEASE_DURATION

        all_labels = _str_map(metadata.get("labels"))
        if all_labels.get(LABEL_INSTANCE) != instance:
            problems.append(f"label {LABEL_INSTANCE} is not {instance!r}")
        annotations = _str_map(metadata.get("annotations"))
        weight = _parse_weight(annotations.get(ANNOTATION_WEIGHT), problems)
        draining = _parse_flag(ANNOTATION_DRAINING, annotations.get(ANNOTATION_DRAINING), problems)
        restarting = _parse_flag(ANNOTATION_RESTARTING, annotations.get(ANNOTATION_RESTARTING), problems)
        observed = _parse_generation(annotations.get(ANNOTATION_OBSERVED_GENERATION), problems)
        rv = metadata.get("resourceVersion")
        return cls(
            instance=instance,
            identity=identity,
            holder=holder,
            lease_duration=duration,
            renew_time=_optional_str(spec.get("renewTime")),
            acquire_time=_optional_str(spec.get("acquireTime")),
            weight=weight,
            draining=draining,
            restarting=restarting,
            observed_generation=observed,
            resource_version=rv if isinstance(rv, str) else None,
            problems=tuple(problems),
            other_labels={k: v for k, v in all_labels.items() if k not in (LABEL_NAME, LABEL_INSTANCE)},
            other_annotations={k: v for k, v in annotations.items() if k not in _OWN_ANNOTATIONS},
        )

    def to_object(self) -> dict[str, Any]:
        """The Lease as a dict in Kubernetes JSON form, with resourceVersion when known (so a replace is
        refused if someone else wrote in between)."""
        annotations = dict(self.other_annotations)
        annotations[ANNOTATION_WEIGHT] = str(self.weight)
        if self.draining:
            annotations[ANNOTATION_DRAINING] = "true"
        if self.restarting:
            annotations[ANNOTATION_RESTARTING] = "true"
        if self.observed_generation is not None:
            annotations[ANNOTATION_OBSERVED_GENERATION] = str(self.observed_generation)
        metadata: dict[str, Any] = {
            "name": self.name,
            "labels": {**self.other_labels, **labels(self.instance)},
            "annotations": annotations,
        }
        if self.resource_version is not None:
            metadata["resourceVersion"] = self.resource_version
        spec: dict[str, Any] = {"holderIdentity": self.holder, "leaseDurationSeconds": self.lease_duration}
        if self.acquire_time is not None:
            spec["acquireTime"] = self.acquire_time
        if self.renew_time is not None:
            spec["renewTime"] = self.renew_time
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": spec}

    def record(self) -> tuple[object, ...]:
        """The fields whose change proves the holder wrote (client-go compares the same record).

        Not resourceVersion: it also moves when anyone else edits the object (`kubectl annotate` of a
        weight), which says nothing about the holder being alive. The holder refreshes renewTime on every
        write it makes, acknowledgements included (`renewed`)."""
        return (self.holder, self.renew_time, self.acquire_time, self.lease_duration)


def _str_map(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, str)}


def _optional_str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _parse_weight(text: str | None, problems: list[str]) -> int:
    if text is None:
        return 1
    try:
        weight = int(text.strip())
    except ValueError:
        problems.append(f"{ANNOTATION_WEIGHT}={text!r} is not an integer; using 1")
        return 1
    problem = weight_error(weight)
    if problem is not None:
        problems.append(f"{ANNOTATION_WEIGHT}: {problem}; using 1")
        return 1
    return weight


def _parse_flag(key: str, text: str | None, problems: list[str]) -> bool:
    if text is None:
        return False
    value = text.strip().lower()
    if value in ("true", "false"):
        return value == "true"
    problems.append(f'{key}={text!r} is not "true" or "false"; using false')
    return False


def _parse_generation(text: str | None, problems: list[str]) -> int | None:
    if text is None:
        return None
    try:
        generation = int(text.strip())
    except ValueError:
        generation = -1
    if generation < 0:
        problems.append(f"{ANNOTATION_OBSERVED_GENERATION}={text!r} is not a generation; treated as none")
        return None
    return generation


@dataclass(frozen=True, slots=True)
class MemberStatus:
    """A member as one observer sees it. `last_change` is the observer's monotonic time at which it last saw
    the lease record change (or first saw the lease); `as_of` is the instant the status is judged at: the
    observer's clock, but never later than the moment its view of the leases was last known complete."""

    identity: str
    state: MemberState
    weight: int
    observed_generation: int | None
    lease_duration: float
    last_change: float
    as_of: float
    held: bool
    draining: bool
    restarting: bool
    problems: tuple[str, ...] = ()
    renew_time: str | None = None  # as its holder wrote it: compared for equality, never with our clock

    @property
    def live(self) -> bool:
        """Rule 1: held, and its record changed within leaseDuration, on the observer's clock."""
        return self.held and self.as_of < self.last_change + self.lease_duration

    def expired(self, margin: float = 0.0) -> bool:
        """Surely gone: released, or no change seen for leaseDuration + margin. Between `live` and this there
        is an uncertain window of `margin` in which nobody may take its zones."""
        return not self.held or self.as_of >= self.expires_at(margin)

    def expires_at(self, margin: float = 0.0) -> float:
        """When `expired(margin)` becomes true if no further change is seen (and the view stays current)."""
        return self.last_change + self.lease_duration + margin


def member_state(lease: MemberLease, live: bool) -> MemberState:
    """A restarting member stays `restarting` even once its lease lapses (its zones are parked, not lost);
    a draining or ready member whose lease lapsed is `expired`."""
    if lease.restarting and not lease.draining:
        return MemberState.RESTARTING
    if not live:
        return MemberState.EXPIRED
    if lease.draining:
        return MemberState.DRAINING
    return MemberState.READY


class LivenessTracker:
    """Remembers, per member, the lease last seen and when (observer's monotonic time) its record changed.

    As in client-go, a lease seen for the first time counts as just renewed: a newly started observer (a new
    coordinator after failover) gives every member a full lease duration before calling it expired, rather
    than trusting a renewTime written by another machine's clock.

    Silence only means expiry if the view was current (rule 5: no acting on a stale view). Statuses are
    therefore judged at `view_time(now)`: `now`, but no later than the last instant the view is known to
    have been complete (`synced_at`). A full list (`resync`) proves that; so does the watch delivering this
    replica's own renewal (call `mark_synced` with the time that renewal was sent: events arrive in order,
    so everything written before it has been seen). Until the first proof nothing expires, and a watch that
    silently stalls freezes every member as it was instead of expiring them all.
    """

    def __init__(self, grace: float = 0.0) -> None:
        self._seen: dict[str, tuple[MemberLease, float]] = {}
        self.synced_at: float | None = None
        # Post-outage grace: after the view was stale for longer than `grace` (an API outage, a stalled
        # watch), an expiry counts only if it persists `grace` after the view became current again, so
        # peers get one renew interval to show they are alive rather than being judged on the gap.
        self.grace = grace
        self.current_since: float | None = None

    def mark_synced(self, at: float, gap: bool | None = None) -> None:
        """The view is known to hold every change made before monotonic time `at`. `gap` says whether it
        may have missed renewals just before (an outage): by default, when it was last known current more
        than two grace periods earlier; an observer that proved its view only now and then (peer_view.py's
        few watches) says so from whether the API answered meanwhile."""
        stale = self.synced_at is None or at - self.synced_at > 2 * self.grace if gap is None else gap
        if self.grace > 0 and stale and math.isfinite(at):
            self.current_since = at
        self.synced_at = at if self.synced_at is None else max(self.synced_at, at)

    def view_time(self, now: float) -> float:
        """The instant statuses are judged at: `now`, capped at `synced_at` (minus infinity before any)."""
        return -math.inf if self.synced_at is None else min(now, self.synced_at)

    def observe(self, lease: MemberLease, now: float) -> bool:
        """Record `lease` as seen at `now`; True when its record changed (a renewal, or a first sighting)."""
        previous = self._seen.get(lease.identity)
        if previous is not None and previous[0].record() == lease.record():
            self._seen[lease.identity] = (lease, previous[1])
            return False
        self._seen[lease.identity] = (lease, now)
        return True

    def forget(self, identity: str) -> None:
        """The lease was deleted: the member is gone (it deletes its lease only after releasing its zones)."""
        self._seen.pop(identity, None)

    def resync(self, leases: Iterable[MemberLease], now: float, gap: bool | None = None) -> None:
        """A full list taken at `now` (pass the time the request was sent): observe each lease, forget members
        no longer listed, and mark the view current (`gap`: see `mark_synced`)."""
        listed = set()
        for lease in leases:
            listed.add(lease.identity)
            self.observe(lease, now)
        for identity in set(self._seen) - listed:
            self.forget(identity)
        self.mark_synced(now, gap)

    def lease(self, identity: str) -> MemberLease | None:
        seen = self._seen.get(identity)
        return seen[0] if seen else None

    def status(
        self, identity: str, now: float, read_at: Mapping[str, float] | None = None
    ) -> MemberStatus | None:
        """`identity`'s status at `now`, judged at `view_time(now)`; or, with `read_at` (an observer that
        proves each member's Lease current on its own, by reading it), at `now` capped at `read_at[identity]`
        (minus infinity when it has not been read)."""
        seen = self._seen.get(identity)
        if seen is None:
            return None
        lease, changed = seen
        if self.current_since is not None:
            # judged as if last seen no earlier than `grace` before the view's current period + the lease
            changed = max(changed, self.current_since + self.grace - lease.lease_duration)
        as_of = self.view_time(now) if read_at is None else min(now, read_at.get(identity, -math.inf))
        held = bool(lease.holder)
        live = held and as_of < changed + lease.lease_duration
        return MemberStatus(
            identity=lease.identity,
            state=member_state(lease, live),
            weight=lease.weight,
            observed_generation=lease.observed_generation,
            lease_duration=float(lease.lease_duration),
            last_change=changed,
            as_of=as_of,
            held=held,
            draining=lease.draining,
            restarting=lease.restarting,
            problems=lease.problems,
            renew_time=lease.renew_time,
        )

    def statuses(self, now: float, read_at: Mapping[str, float] | None = None) -> dict[str, MemberStatus]:
        """Every known member's status at `now` (see `status`), by identity (sorted)."""
        result = {}
        for identity in sorted(self._seen):
            status = self.status(identity, now, read_at)
            if status is not None:
                result[identity] = status
        return result


def may_write(last_renewed: float | None, now: float, lease_duration: float, margin: float) -> bool:
    """Rule 5, self-fencing: may this replica write to its zones at `now`?

    `last_renewed` is the monotonic time at which the last *successful* renew request was sent (sent, not
    answered: the API server wrote renewTime after that instant, so every observer's lease timer started
    later still). Writes stop `margin` before any observer can deem the lease expired, covering clock-rate
    differences and a write already on the wire. When this turns true again after being false, the caller
    re-reads the assignment from the API before writing, never acting on the view it had while fenced.
    """
    if last_renewed is None:
        return False
    return now < write_deadline(last_renewed, lease_duration, margin)


def write_deadline(last_renewed: float, lease_duration: float, margin: float) -> float:
    """The monotonic instant at which `may_write` turns false unless a renewal succeeds first (use it to
    cancel an in-flight provider write, e.g. with anyio.move_on_at)."""
    return last_renewed + lease_duration - margin
