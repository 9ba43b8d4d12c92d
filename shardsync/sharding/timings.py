"""The timing parameters of the sharding loops, derived once (shardsync.replica.command, from the flags and
the provider) so every loop agrees on them, and their defaults, which depend on whether the provider fences
its writes.

A provider that fences every write at the DNS server (fake, rfc2136, aws, a webhook server with the fence
extension) makes a wrong takeover cost churn, not corruption, so its replicas use short leases (3 s, renewed
every second, settle 0.5 s): a crashed replica's zones move within about five seconds. A provider that
cannot fence (a webhook server without the extension, or one that did not answer at start) rests on the
lease protocol alone and keeps the conservative client-go-like timing (15 s / 5 s / 2 s). A flag the
operator sets wins either way; `resolve` is the one place that decides. Replicas of one deployment may run
different timings (one learned its webhook's fencing, another timed out asking): each judges a peer by the
leaseDurationSeconds in the peer's own Lease, so that stays safe.

Leases carry whole seconds (`leaseDurationSeconds` is an integer), so the duration is rounded up once here
and every rule (self-fencing, expiry, the coordinator's renew deadline) works from the value actually
written, never from the flag's fraction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from shardsync.sharding.publisher import DEFAULT_RESTART_GRACE, DEFAULT_SETTLE, PublisherConfig


@dataclass(frozen=True, slots=True)
class TimingDefaults:
    """The defaults of --lease-duration, --renew-interval and --settle-delay for one kind of provider."""

    lease_duration: float
    renew_interval: float
    settle: float


FENCED = TimingDefaults(lease_duration=3.0, renew_interval=1.0, settle=0.5)
# Rule 4's margin on a silent peer's lease. It absorbs clock-rate differences between replicas (parts per
# million: milliseconds over any lease), so it need not grow with the lease; the self-fence margin before it
# (a fifth of the lease) is what keeps a stale owner's last write clear of its successor's first. Capped, a
# crashed replica's zones move lease + 0.5 s after its last renewal with an unfenced provider, not + 2.25 s.
ACQUIRE_MARGIN_CAP = 0.5
UNFENCED = TimingDefaults(lease_duration=15.0, renew_interval=5.0, settle=DEFAULT_SETTLE)


def defaults_for(fences: bool) -> TimingDefaults:
    return FENCED if fences else UNFENCED


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
            acquire_margin=min(0.15 * duration, ACQUIRE_MARGIN_CAP),
            renew_deadline=duration * 2 / 3,
            request_timeout=max(1.0, min(2 * renew_interval, duration / 3)),
            # Moving zones takes settle + a few API round trips; the rest of the stop (reads, release,
            # delete) must still fit in the replica's bound of twice the lease duration.
            drain_timeout=settle + duration / 2,
        )

    @classmethod
    def resolve(
        cls,
        fences: bool,
        lease_duration: float | None = None,
        renew_interval: float | None = None,
        settle: float | None = None,
        restart_grace: float = DEFAULT_RESTART_GRACE,
    ) -> Timings:
        """The timings from the flags, each unset one (None) taking the default for the provider's kind.
        A lease set alone keeps the default ratio (renew a third of it), so `--lease-duration=30s` on a
        fenced provider does not renew every second for nothing."""
        base = defaults_for(fences)
        lease = base.lease_duration if lease_duration is None else lease_duration
        if renew_interval is None:
            renew_interval = base.renew_interval if lease_duration is None else lease / 3
        return cls.derive(lease, renew_interval, base.settle if settle is None else settle, restart_grace)

    @property
    def crash_handoff(self) -> float:
        """About how long after a crashed replica's last renewal its zones are taken over: its lease runs
        out, the coordinator publishes at once (a crash waits for no settle delay: rule 2), and the new
        owners add the acquire margin (plus round trips)."""
        return self.lease_duration + self.acquire_margin

    def publisher_config(self) -> PublisherConfig:
        # A member that has not acknowledged within a lease duration is stuck (or about to be seen gone):
        # the next generation goes out without the certificate rather than wait on it.
        return PublisherConfig(
            settle=self.settle,
            max_delay=max(10.0, 5 * self.settle),
            restart_grace=self.restart_grace,
            ack_wait=float(self.lease_duration),
        )
