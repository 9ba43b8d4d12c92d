"""What every kind's objects pass through around their translation, whatever the kind: the per-object limits
(sources.limits) and, when it is on, the namespace → domain policy (sources.namespace_policy).

The watcher calls `before` with the object it is about to translate and `after` with the endpoints the
translation gave; both return what is left and the problems met, which the watcher reports like any
translator's (log line, metric, Warning Event with the problem's reason). A kind added to the source table
(Gateway routes, say) passes through the gate with no line of its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from shardsync.kube.objects import Obj, ObjectRef
from shardsync.records.endpoint import Endpoint
from shardsync.sources.limits import ObjectLimits, cap_endpoints, trim_annotations
from shardsync.sources.namespace_policy import NamespacePolicy
from shardsync.sources.result import Problem


class ObjectGate:
    """The limits and the optional namespace policy, as one step before and one after translation."""

    def __init__(self, limits: ObjectLimits, policy: NamespacePolicy | None = None) -> None:
        self.limits = limits
        self.policy = policy

    def before(self, obj: Obj, ref: ObjectRef) -> tuple[Obj, list[Problem]]:
        """The object as the translator should see it: annotations over the size limit removed."""
        return trim_annotations(obj, ref, self.limits.annotation_bytes)

    def after(
        self, desired_key: str, ref: ObjectRef | None, endpoints: Sequence[Endpoint]
    ) -> tuple[list[Endpoint], list[Problem]]:
        """The endpoints kept: within the limits, then within the namespace's domains. `ref` None: the
        object is gone (or filtered out)."""
        problems: list[Problem] = []
        kept = list(endpoints)
        if ref is not None:
            kept, problems = cap_endpoints(kept, ref, self.limits)
        if self.policy is not None:
            kept, refused = self.policy.filter(desired_key, ref, kept)
            problems += refused
        return kept, problems
