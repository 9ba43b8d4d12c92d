"""Coordinator election on the Lease `<instance>-coordinator`, with client-go's leader-election semantics.

Pure: `decide()` says, from the lease last observed, when we observed it change (our monotonic clock) and
now, whether to create, take over, renew or wait, and gives the exact record to write; `release()` gives the
record that hands the lease back on a graceful stop (client-go's ReleaseOnCancel). `Election` keeps the little
state an I/O loop needs between calls. The I/O side writes with the observed resourceVersion (create when
there is none), so of two replicas that both decide to take over, the API server accepts one and answers
409 Conflict to the other: that, not timing, is what keeps two coordinators from both winning.

As in client-go: a lease held by someone else is free once it has not changed for its leaseDurationSeconds on
*our* clock since we saw it change (renewTime written by another machine is never compared with our time);
an empty holderIdentity means free at once; a takeover counts one more leaseTransition and stamps
acquireTime, a renewal keeps both; a holder that cannot renew within `renew_deadline` stops acting as leader
(`Election.is_leader`) before anyone else may take over.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from shardsync.sharding.clock import microtime
from shardsync.sharding.membership import (
    DEFAULT_LEASE_DURATION,
    LABEL_INSTANCE,
    LABEL_NAME,
    MalformedLease,
    labels,
    may_write,
)

DEFAULT_RENEW_DEADLINE = 10.0


def coordinator_lease_name(instance: str) -> str:
    return f"{instance}-coordinator"


@dataclass(frozen=True, slots=True)
class CoordinatorLease:
    """The coordinator Lease's leader-election record, plus the resourceVersion it was read at."""

    instance: str
    holder: str  # "" when free
    lease_duration: int
    acquire_time: str | None = None
    renew_time: str | None = None
    transitions: int = 0
    resource_version: str | None = None
    other_labels: Mapping[str, str] = field(default_factory=dict, hash=False)

    @property
    def name(self) -> str:
        return coordinator_lease_name(self.instance)

    def record(self) -> tuple[object, ...]:
        """What client-go compares to decide the lease changed."""
        return (self.holder, self.lease_duration, self.acquire_time, self.renew_time, self.transitions)

    @classmethod
    def from_object(cls, obj: Mapping[str, Any], instance: str) -> CoordinatorLease:
        """Read the Lease dict (Kubernetes JSON form); MalformedLease when it is not our coordinator lease.

        Odd field values are read the way client-go reads them (missing duration: 0, i.e. already expired;
        missing transitions: 0), so a damaged lease can always be taken over rather than wedging election.
        """
        metadata = obj.get("metadata")
        if not isinstance(metadata, Mapping) or metadata.get("name") != coordinator_lease_name(instance):
            raise MalformedLease(f"not the coordinator lease of instance {instance!r}")
        spec = obj.get("spec") or {}
        if not isinstance(spec, Mapping):
            raise MalformedLease("coordinator lease spec is not an object")
        holder = spec.get("holderIdentity")
        duration = spec.get("leaseDurationSeconds")
        transitions = spec.get("leaseTransitions")
        rv = metadata.get("resourceVersion")
        raw_labels = metadata.get("labels")
        other = {
            str(k): v
            for k, v in (raw_labels.items() if isinstance(raw_labels, Mapping) else ())
            if isinstance(v, str) and k not in (LABEL_NAME, LABEL_INSTANCE)
        }
        return cls(
            instance=instance,
            holder=holder if isinstance(holder, str) else "",
            lease_duration=_int_at_least(duration, 1) or 0,
            acquire_time=_optional_str(spec.get("acquireTime")),
            renew_time=_optional_str(spec.get("renewTime")),
            transitions=_int_at_least(transitions, 0) or 0,
            resource_version=rv if isinstance(rv, str) else None,
            other_labels=other,
        )

    def to_object(self) -> dict[str, Any]:
        metadata: dict[str, Any] = {
            "name": self.name,
            "labels": {**self.other_labels, **labels(self.instance)},
        }
        if self.resource_version is not None:
            metadata["resourceVersion"] = self.resource_version
        spec: dict[str, Any] = {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.lease_duration,
            "leaseTransitions": self.transitions,
        }
        if self.acquire_time is not None:
            spec["acquireTime"] = self.acquire_time
        if self.renew_time is not None:
            spec["renewTime"] = self.renew_time
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": spec}


def _int_at_least(value: object, minimum: int) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= minimum:
        return value
    return None


def _optional_str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


class Action(StrEnum):
    CREATE = "create"  # no lease yet: create it (fails with 409 AlreadyExists if someone was quicker)
    ACQUIRE = "acquire"  # free or expired: replace it, with the observed resourceVersion
    RENEW = "renew"  # ours: replace it, with the observed resourceVersion
    WAIT = "wait"  # held by someone else and not expired on our clock


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    write: CoordinatorLease | None  # the object to create/replace; None for WAIT
    holder: str  # the holder as observed ("" when none)
    expires_at: float | None = None  # WAIT: when the holder's lease lapses on our clock if unchanged


def decide(
    identity: str,
    instance: str,
    observed: CoordinatorLease | None,
    observed_at: float | None,
    now: float,
    wall: datetime,
    lease_duration: int = DEFAULT_LEASE_DURATION,
) -> Decision:
    """client-go's tryAcquireOrRenew as a pure decision.

    `observed` is the lease as last read (None: it does not exist), `observed_at` the monotonic time we saw
    its record change; `wall` only stamps acquireTime/renewTime in what we write.
    """
    stamp = microtime(wall)
    if observed is None:
        created = CoordinatorLease(instance, identity, lease_duration, stamp, stamp, 0)
        return Decision(Action.CREATE, created, "")
    if observed.holder == identity:
        renewed = replace(observed, lease_duration=lease_duration, renew_time=stamp)
        if renewed.acquire_time is None:
            renewed = replace(renewed, acquire_time=stamp)
        return Decision(Action.RENEW, renewed, identity)
    if observed.holder:
        seen = observed_at if observed_at is not None else now
        expires = seen + observed.lease_duration
        if now < expires:
            return Decision(Action.WAIT, None, observed.holder, expires)
    taken = replace(
        observed,
        holder=identity,
        lease_duration=lease_duration,
        acquire_time=stamp,
        renew_time=stamp,
        transitions=observed.transitions + 1,
    )
    return Decision(Action.ACQUIRE, taken, observed.holder)


def release(identity: str, observed: CoordinatorLease, wall: datetime) -> CoordinatorLease | None:
    """The record that gives the lease up on a graceful stop, or None when it is not ours to give.

    As client-go's ReleaseOnCancel: holder cleared, leaseDurationSeconds 1, both times stamped now,
    leaseTransitions kept; written with the observed resourceVersion, so it cannot clobber a successor.
    """
    if observed.holder != identity:
        return None
    stamp = microtime(wall)
    return replace(observed, holder="", lease_duration=1, acquire_time=stamp, renew_time=stamp)


@dataclass(eq=False)
class Election:
    """The state one candidate keeps between rounds: the lease last seen, when its record changed on our
    clock, and when our last successful write was sent.

    Round: `observe(lease_or_None, now)` after every GET/watch event; `decide(now, wall)`; write
    `decision.write`; on success `written(returned_lease, sent_at, now)`; on 409 re-read and observe.
    """

    instance: str
    identity: str
    lease_duration: int = DEFAULT_LEASE_DURATION
    renew_deadline: float = DEFAULT_RENEW_DEADLINE
    observed: CoordinatorLease | None = field(default=None, init=False)
    observed_at: float | None = field(default=None, init=False)
    last_renewed: float | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if not 0 < self.renew_deadline < self.lease_duration:
            raise ValueError("renew_deadline must be positive and shorter than lease_duration")

    def observe(self, lease: CoordinatorLease | None, now: float) -> None:
        """Record the lease as read at `now` (None: it does not exist)."""
        if lease is None:
            self.observed, self.observed_at = None, None
            return
        if self.observed is None or self.observed.record() != lease.record():
            self.observed_at = now
        self.observed = lease

    def decide(self, now: float, wall: datetime) -> Decision:
        return decide(
            self.identity, self.instance, self.observed, self.observed_at, now, wall, self.lease_duration
        )

    def written(self, lease: CoordinatorLease, sent_at: float, now: float) -> None:
        """Our create/replace succeeded; `lease` is what the server returned, `sent_at` when we sent it."""
        self.observe(lease, now)
        if lease.holder == self.identity:
            self.last_renewed = sent_at

    def is_leader(self, now: float) -> bool:
        """We hold the lease and renewed it within `renew_deadline` (counted from when the renewal was sent),
        so nobody can have taken it over: the coordinator publishes only while this is true."""
        if self.observed is None or self.observed.holder != self.identity:
            return False
        margin = self.lease_duration - self.renew_deadline
        return may_write(self.last_renewed, now, self.lease_duration, margin)

    @property
    def leader(self) -> str:
        """The holder as last observed ("" when none)."""
        return self.observed.holder if self.observed is not None else ""

    def release(self, wall: datetime) -> CoordinatorLease | None:
        """The record to write on a graceful stop, or None when we do not hold the lease."""
        if self.observed is None:
            return None
        return release(self.identity, self.observed, wall)
