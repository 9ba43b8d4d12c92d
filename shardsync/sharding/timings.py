"""The timing parameters of the sharding loops, derived once (shardsync.replica, from the flags) so every
loop agrees on them.

Leases carry whole seconds (`leaseDurationSeconds` is an integer), so the duration is rounded up once here
and every rule (self-fencing, expiry, the coordinator's renew deadline) works from the value actually
written, never from the flag's fraction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from shardsync.sharding.assignment import DEFAULT_RESTART_GRACE, DEFAULT_SETTLE, PublisherConfig

DEFAULT_RENEW_INTERVAL = 5.0  # --renew-interval


@dataclass(frozen=True, slots=True)
class Timings:
    lease_duration: int  # seconds, as written into every Lease
    renew_interval: float  # between two renewals of a lease we hold (and between two election rounds)
    settle: float  # the coordinator's quiet period before publishing
    restart_grace: float  # how long a restarting member's zones stay parked for it
    fence_margin: float  # rule 5: stop writing this long before any observer may deem our lease expired
    acquire_margin: float  # rule 4: a silent peer counts as gone this long after its lease lapsed
    renew_deadline: float  # the coordinator stops publishing when it could not renew for this long
    request_timeout: float  # one lease or assignment request; a hung call must not outlive a renewal
    drain_timeout: float  # how long a leaving replica waits for the coordinator to move its zones

    @classmethod
    def derive(
        cls,
        lease_duration: float,
        renew_interval: float,
        settle: float = DEFAULT_SETTLE,
        restart_grace: float = DEFAULT_RESTART_GRACE,
    ) -> Timings:
        duration = max(1, math.ceil(lease_duration))
        if not 0 < renew_interval < duration:
            raise ValueError("renew interval must be positive and shorter than the lease duration")
        # A fifth of the lease (3 s of 15), but never so much that an ordinary renewal comes too late.
        fence_margin = min(0.2 * duration, (duration - renew_interval) / 2)
        return cls(
            lease_duration=duration,
            renew_interval=renew_interval,
            settle=settle,
            restart_grace=restart_grace,
            fence_margin=fence_margin,
            acquire_margin=0.15 * duration,
            renew_deadline=duration * 2 / 3,
            request_timeout=max(1.0, min(2 * renew_interval, duration / 3)),
            # Moving zones takes settle + a few API round trips; the rest of the stop (reads, release,
            # delete) must still fit in the replica's bound of twice the lease duration.
            drain_timeout=settle + duration / 2,
        )

    def publisher_config(self) -> PublisherConfig:
        return PublisherConfig(
            settle=self.settle, max_delay=max(10.0, 5 * self.settle), restart_grace=self.restart_grace
        )
