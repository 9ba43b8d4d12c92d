"""The delete guard of the namespace → domain policy: no mass delete on a policy typo.

When the policy (sources.namespace_policy) refuses names that records of ours hold, the next sync of their
zone would delete them like any record no object asks for. That is right for one name, and wrong when an
admin's typo (`exmple.com`) or turning the policy on before annotating the namespaces would empty a zone.
So before a zone's changes are written, the deletes of names the policy refuses are counted: more than
`max_fraction` of the zone's records owned by us (RRsets, ownership TXT records left out) and none of them
is made this sync — the rest of the plan is. A Warning Event `PolicyDeleteRefused` goes to the objects that
published those records, the refusal is logged when it starts and stops, and a metric counts the refused
deletes. `max_fraction` 1 turns the guard off; ordinary deletes (an object removed) never count.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from prometheus_client import Counter

from shardsync.kube.events import EventRecorder
from shardsync.logs import get_logger
from shardsync.records.endpoint import OWNER_LABEL, RESOURCE_LABEL, Changes, Endpoint
from shardsync.sources.namespace_policy import NamespacePolicy
from shardsync.sources.table import event_ref

log = get_logger(__name__)

REASON = "PolicyDeleteRefused"
MAX_EVENTS = 20  # objects told per refused sync: a refusal is about a typo, not about each object

REFUSED_DELETES = Counter(
    "shardsync_namespace_policy_refused_deletes_total",
    "Deletes the namespace → domain policy would have caused that the delete guard refused",
)


@dataclass(eq=False)
class DeleteGuard:
    """`guard(zone, changes, current)` → the changes to write (see the module docstring)."""

    refused: Callable[[str, str], bool]  # (name, type) refused by the namespace policy now
    max_fraction: float
    owner_id: str
    events: EventRecorder | None = None
    _refusing: set[str] = field(default_factory=set, init=False)  # zones refused at their last sync

    @classmethod
    def of(
        cls, policy: NamespacePolicy | None, max_fraction: float, owner_id: str, events: EventRecorder | None
    ) -> DeleteGuard | None:
        """The guard of `policy` (None when the policy is off: nothing to guard)."""
        return None if policy is None else cls(policy.refused, max_fraction, owner_id, events)

    def __call__(self, zone: str, changes: Changes, current: Sequence[Endpoint]) -> Changes:
        by_policy = [ep for ep in changes.delete if self.refused(ep.dns_name, ep.record_type)]
        owned = sum(1 for ep in current if self._ours(ep))
        if not by_policy or self.max_fraction >= 1.0 or len(by_policy) <= self.max_fraction * owned:
            if zone in self._refusing:
                self._refusing.discard(zone)
                log.info("namespace policy deletes allowed again", zone=zone)
            return changes
        REFUSED_DELETES.inc(len(by_policy))
        message = (
            f"the namespace policy would delete {len(by_policy)} of the {owned} records this controller owns "
            f"in zone {zone}, more than --namespace-domains-max-delete={self.max_fraction:g}; none deleted "
            "(check the namespaces' allowed-domains annotations)"
        )
        if zone not in self._refusing:
            self._refusing.add(zone)
            log.warning("namespace policy deletes refused", zone=zone, deletes=len(by_policy), owned=owned)
        self._tell(by_policy, message)
        dropped = {ep.key for ep in by_policy}
        return replace(changes, delete=[ep for ep in changes.delete if ep.key not in dropped])

    def _ours(self, ep: Endpoint) -> bool:
        return not self.owner_id or ep.labels.get(OWNER_LABEL) == self.owner_id

    def _tell(self, records: list[Endpoint], message: str) -> None:
        if self.events is None:
            return
        resources = dict.fromkeys(ep.labels.get(RESOURCE_LABEL, "") for ep in records)
        for resource in list(resources)[:MAX_EVENTS]:
            ref = event_ref(resource)
            if ref is not None:
                self.events.record(ref, REASON, message)
