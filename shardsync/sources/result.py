"""What a source returns for one object: desired endpoints plus the problems met on the way.

Translation is pure and never raises on bad input: anything wrong with an object becomes a `Problem`
naming the object and the field, which the caller turns into a Kubernetes Event and a metric. This module
also holds the shared pieces of the sources: the A/AAAA/CNAME choice for a target, and `EndpointSet`,
which merges, labels and validates one object's endpoints.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from shardsync.kube.objects import ObjectRef
from shardsync.records.endpoint import (
    CREATED_LABEL,
    RESOURCE_LABEL,
    Endpoint,
    InvalidEndpoint,
    canonical_target,
    normalize_name,
)

# The Event reason of a problem found in a source object, unless the problem names its own.
INVALID_REASON = "InvalidEndpoint"

# --- results -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Problem:
    """Something about an object that produced no endpoint or a different one than asked for."""

    ref: ObjectRef
    field: str  # where in the object, e.g. `metadata.annotations[external-dns.kubernetes.io/ttl]`
    message: str
    reason: str = INVALID_REASON  # the reason of the Warning Event posted about it

    def __str__(self) -> str:
        return f"{self.ref.resource} {self.field}: {self.message}"


@dataclass(slots=True)
class SourceResult:
    """One object's desired endpoints (valid, labelled, sorted by key) and its problems."""

    endpoints: list[Endpoint] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


# What a translator answers when the object's inputs are still being read (a sharded replica reads back
# the Pods a Service gained by a new selector first): its endpoints stay as they were, and it is
# translated again once they are in (compared by identity).
NOT_YET = SourceResult()


# --- building endpoints --------------------------------------------------------------------------------


def suitable_type(target: str) -> str:
    """external-dns's SuitableType: A for an IPv4 address, AAAA for IPv6, CNAME for anything else."""
    try:
        ip = ipaddress.ip_address(target)
    except ValueError:
        return "CNAME"
    return "A" if ip.version == 4 else "AAAA"


class EndpointSet:
    """Collects one object's endpoints: targets of the same RRset merge, then each is labelled and validated.

    An endpoint that fails `Endpoint.validate()` is dropped and reported as a problem on the field that
    named it, so one bad hostname never hides the object's other records.
    """

    def __init__(
        self,
        ref: ObjectRef,
        created: str,
        ttl: int = 0,
        set_identifier: str = "",
        provider_specific: Iterable[tuple[str, str]] = (),
    ) -> None:
        self.ref = ref
        self.ttl = ttl
        self.set_identifier = set_identifier
        self.provider_specific = tuple(provider_specific)
        self.labels = {RESOURCE_LABEL: ref.resource}
        if created:
            self.labels[CREATED_LABEL] = created
        self.problems: list[Problem] = []
        self._targets: dict[tuple[str, str], dict[str, None]] = {}  # ordered sets
        self._fields: dict[tuple[str, str], str] = {}

    @property
    def empty(self) -> bool:
        """No RRset has been added yet."""
        return not self._targets

    def problem(self, field_path: str, message: str) -> None:
        self.problems.append(Problem(self.ref, field_path, message))

    def add(self, name: str, record_type: str, targets: Iterable[str], field_path: str) -> None:
        """Add targets to the RRset (name, type); an RRset with no target at all is not created."""
        wanted = [canonical_target(record_type, t) for t in targets if t]
        if not wanted:
            return
        key = (normalize_name(name), record_type)
        self._targets.setdefault(key, {}).update(dict.fromkeys(wanted))
        self._fields.setdefault(key, field_path)

    def add_targets(self, name: str, targets: Iterable[str], field_path: str) -> None:
        """external-dns's EndpointsForHostname: targets split into A, AAAA and CNAME RRsets."""
        for target in targets:
            self.add(name, suitable_type(target), [target], field_path)

    def result(self, extra_problems: Iterable[Problem] = ()) -> SourceResult:
        out = SourceResult(problems=[*extra_problems, *self.problems])
        labels = dict(self.labels)  # one dict for all the object's endpoints (never changed in place)
        for (name, record_type), targets in sorted(self._targets.items()):
            ep = Endpoint.new(
                dns_name=name,
                record_type=record_type,
                targets=targets,
                ttl=self.ttl,
                set_identifier=self.set_identifier,
                provider_specific=self.provider_specific,
            )
            ep = replace(ep, labels=labels)
            try:
                ep.validate()
            except InvalidEndpoint as exc:
                out.problems.append(Problem(self.ref, self._fields[(name, record_type)], f"dropped: {exc}"))
                continue
            out.endpoints.append(ep)
        return out
