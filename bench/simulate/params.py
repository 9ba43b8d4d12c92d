"""The simulation's inputs: the protocol timings (derived from the flags as shardsync derives them), the pod
life cycle around them, and the matrices `python -m bench.simulate` runs.

`Timing` mirrors `shardsync.sharding.timings.Timings.derive` (which is not imported: it is moving, and it
pulls in the CLI settings); tests/bench/test_simulate.py pins the derived margins to the shipped values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shardsync.sharding.publisher import PublisherConfig
from shardsync.sharding.timings import FENCED

INSTANCE = "shardsync"

JOIN = "join"
LEAVE = "leave"
CRASH = "crash"
ROLLING_RESTART = "rolling-restart"
CRASH_COORDINATOR = "crash-coordinator"
EVENTS = (JOIN, LEAVE, CRASH, ROLLING_RESTART)  # the default matrix
ALL_EVENTS = (*EVENTS, CRASH_COORDINATOR)


def identity(ordinal: int) -> str:
    """A StatefulSet pod name, which is what a replica's identity is."""
    return f"{INSTANCE}-{ordinal}"


@dataclass(frozen=True, slots=True)
class Timing:
    """The shipped defaults for a provider that fences its writes (shardsync.sharding.timings.FENCED:
    `--lease-duration 3s --renew-interval 1s --settle-delay 500ms`, `--restart-grace 30s`), and what a pod
    restart costs around the protocol."""

    lease_duration: int = int(FENCED.lease_duration)
    renew_interval: float = FENCED.renew_interval
    settle: float = FENCED.settle
    restart_grace: float = 30.0
    # From a restarting replica's exit to its new process starting (pod deleted, recreated, Python started).
    restart_downtime: float = 5.0
    # The StatefulSet waits for Ready before the next pod; the readiness probe runs every 5 s
    # (deploy/base/statefulset.yaml), so Ready follows the start by a uniform 0-5 s.
    readiness_period: float = 5.0

    def __post_init__(self) -> None:
        if not 0 < self.renew_interval < self.lease_duration:
            raise ValueError("renew interval must be positive and shorter than the lease duration")

    @property
    def fence_margin(self) -> float:
        return min(0.2 * self.lease_duration, (self.lease_duration - self.renew_interval) / 2)

    @property
    def acquire_margin(self) -> float:
        return 0.15 * self.lease_duration

    @property
    def renew_deadline(self) -> float:
        return self.lease_duration * 2 / 3

    @property
    def drain_timeout(self) -> float:
        return self.settle + self.lease_duration / 2

    @property
    def max_delay(self) -> float:
        return max(10.0, 5 * self.settle)

    def publisher_config(self) -> PublisherConfig:
        return PublisherConfig(
            settle=self.settle,
            max_delay=self.max_delay,
            restart_grace=self.restart_grace,
            ack_wait=float(self.lease_duration),
        )

    @property
    def steady_window(self) -> float:
        """Where steady-state rates are counted: a whole number of renew intervals (every replica renews
        exactly once per interval, so the rate is exact)."""
        return 6 * self.renew_interval

    @property
    def horizon(self) -> float:
        """How long a join, leave or crash is followed: twice the lease, the longest publish delay and a few
        renewals (a crash settles within lease + margin + settle + 2 renew intervals)."""
        return max(60.0, 2 * self.lease_duration + self.max_delay + 4 * self.renew_interval)

    def to_json(self) -> dict[str, Any]:
        return {
            "lease_duration": self.lease_duration,
            "renew_interval": self.renew_interval,
            "settle": self.settle,
            "restart_grace": self.restart_grace,
            "fence_margin": self.fence_margin,
            "acquire_margin": self.acquire_margin,
            "renew_deadline": self.renew_deadline,
            "max_delay": self.max_delay,
            "drain_timeout": self.drain_timeout,
            "restart_downtime": self.restart_downtime,
            "readiness_period": self.readiness_period,
            "steady_window": self.steady_window,
            "horizon": self.horizon,
        }


@dataclass(frozen=True, slots=True)
class Matrix:
    replicas: tuple[int, ...]
    zones: tuple[int, ...]
    events: tuple[str, ...]

    def rows(self) -> list[tuple[int, int, str]]:
        return [(n, z, e) for n in self.replicas for z in self.zones for e in self.events]

    def to_json(self) -> dict[str, Any]:
        return {"replicas": list(self.replicas), "zones": list(self.zones), "events": list(self.events)}


FULL = Matrix((10, 100, 1000), (10_000, 100_000, 1_000_000), EVENTS)
QUICK = Matrix((4, 10), (1_000,), EVENTS)


def parse_count(text: str) -> int:
    """`1000`, `10_000`, `10k` or `1M` as an integer."""
    t = text.strip().replace("_", "")
    scale = 1
    if t[-1:] in ("k", "K"):
        scale, t = 1_000, t[:-1]
    elif t[-1:] in ("m", "M"):
        scale, t = 1_000_000, t[:-1]
    value = int(t) * scale
    if value < 1:
        raise ValueError(f"{text!r} is not a positive count")
    return value
