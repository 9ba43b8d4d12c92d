"""Who this replica is in the sharding protocol and where its objects live: the one small value every loop of
the member side and the coordinator side takes (built once by shardsync.replica.wiring from the flags; nothing
in sharding/ reads Settings)."""

from __future__ import annotations

from dataclasses import dataclass, field

from shardsync.kube.client import Kube
from shardsync.sharding.clock import Clock, SystemClock
from shardsync.sharding.timings import Timings


@dataclass(frozen=True, slots=True)
class Site:
    kube: Kube
    namespace: str  # of the member leases, the coordinator lease and the assignment ConfigMap
    instance: str  # shared by the replicas of one deployment; prefixes their objects
    identity: str  # this replica (its member lease is `<instance>-member-<identity>`)
    timings: Timings
    weight: int = 1  # this replica's share of zones relative to the others
    clock: Clock = field(default_factory=SystemClock)
