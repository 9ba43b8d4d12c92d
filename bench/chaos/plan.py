"""The fault sequence of a chaos run: a pure function of the seed, the fault count and the lease duration.

Kinds (what the executor does with each, in executor.py):
- `kill`: kill -9 of a replica (by rank among the live ones), started again after `seconds`;
- `kill-coordinator`: the same for the replica every other one names coordinator;
- `stop`: SIGSTOP of a replica for `seconds`, then SIGCONT (a frozen process waking up with old leases);
- `scale`: the StatefulSet to `replicas` (spec.replicas first, then start or SIGTERM the ordinals);
- `rolling-restart`: every replica in turn, highest ordinal first: SIGTERM, exit, start, ready;
- `api-pause`: the API server answers nobody for `seconds` (503 or hang);
- `api-cut`: one replica is cut off from the API server for `seconds` (503, hang or dropped connection);
- `provider-outage`: the DNS provider's server process is frozen for `seconds` (SIGSTOP/SIGCONT);
- `provider-latency`: every provider call takes `latency` seconds for `seconds`;
- `provider-errors`: for `seconds`, a share `ratio` of provider calls is throttled and a share `zones` of
  the zones fails every call.

Durations scale with the lease duration where the protocol's reaction does (a stop or a cut shorter or
longer than a lease); the API pause is the issue's 10 s. The weights favour the cheap, frequent faults of a
real cluster (kills, cuts, provider trouble) over the slow ones (rolling restarts, 10 s pauses), so 200
faults fit in about half an hour.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

WEIGHTS: dict[str, int] = {
    "kill": 4,
    "kill-coordinator": 3,
    "stop": 3,
    "scale": 3,
    "rolling-restart": 1,
    "api-pause": 1,
    "api-cut": 3,
    "provider-outage": 2,
    "provider-latency": 2,
    "provider-errors": 2,
}
KINDS = tuple(WEIGHTS)
API_PAUSE_SECONDS = 10.0
PAUSE_MODES = ("503", "hang")
CUT_MODES = ("503", "hang", "drop")


@dataclass(frozen=True, slots=True)
class Fault:
    index: int
    kind: str
    rank: int = 0  # which live replica, by ordinal rank modulo their number
    seconds: float = 0.0  # how long the fault lasts (a killed replica's absence, a stop, a pause, a cut)
    replicas: int = 0  # the scale target
    mode: str = ""  # how the API server refuses (pause, cut)
    latency: float = 0.0  # provider-latency: seconds per call
    ratio: float = 0.0  # provider-errors: share of calls throttled
    zones: float = 0.0  # provider-errors: share of zones failing every call
    draw: int = 0  # provider-errors: seed of the throttling draws and of the zones chosen
    gap: float = 0.0  # quiet seconds after the cluster recovered, before the next fault

    def describe(self) -> str:
        extra = {
            "kill": f"rank {self.rank}, back after {self.seconds:.1f}s",
            "kill-coordinator": f"back after {self.seconds:.1f}s",
            "stop": f"rank {self.rank}, {self.seconds:.1f}s",
            "scale": f"to {self.replicas}",
            "rolling-restart": "all replicas",
            "api-pause": f"{self.seconds:.1f}s, {self.mode}",
            "api-cut": f"rank {self.rank}, {self.seconds:.1f}s, {self.mode}",
            "provider-outage": f"{self.seconds:.1f}s",
            "provider-latency": f"{self.latency:.2f}s per call for {self.seconds:.1f}s",
            "provider-errors": f"{self.ratio:.0%} throttled, {self.zones:.0%} of zones failing, "
            f"{self.seconds:.1f}s",
        }[self.kind]
        return f"#{self.index} {self.kind} ({extra})"


def plan(
    seed: int,
    count: int,
    lease: float,
    *,
    start_replicas: int = 3,
    replica_counts: tuple[int, ...] = (2, 3, 4),
) -> list[Fault]:
    """`count` faults drawn from `random.Random(seed)`: the same list for the same arguments."""
    rng = random.Random(seed)
    kinds, weights = list(WEIGHTS), list(WEIGHTS.values())
    replicas = start_replicas
    faults = []
    for index in range(count):
        kind = rng.choices(kinds, weights)[0]
        rank = rng.randrange(1000)
        gap = round(rng.uniform(0.2, 1.5), 2)
        fault = Fault(index, kind, rank=rank, gap=gap)
        if kind in ("kill", "kill-coordinator"):
            fault = _with(fault, seconds=rng.uniform(0.0, lease))
        elif kind == "stop":
            fault = _with(fault, seconds=rng.uniform(0.5, 2 * lease))
        elif kind == "scale":
            target = rng.choice([n for n in replica_counts if n != replicas])
            fault = _with(fault, replicas=target)
            replicas = target
        elif kind == "api-pause":
            fault = _with(fault, seconds=API_PAUSE_SECONDS, mode=rng.choice(PAUSE_MODES))
        elif kind == "api-cut":
            fault = _with(fault, seconds=rng.uniform(lease / 2, 2 * lease), mode=rng.choice(CUT_MODES))
        elif kind == "provider-outage":
            fault = _with(fault, seconds=rng.uniform(1.0, 2 * lease))
        elif kind == "provider-latency":
            fault = _with(fault, seconds=rng.uniform(2.0, 6.0), latency=round(rng.uniform(0.2, 1.0), 2))
        elif kind == "provider-errors":
            fault = _with(
                fault,
                seconds=rng.uniform(2.0, 6.0),
                ratio=round(rng.uniform(0.2, 0.7), 2),
                zones=round(rng.uniform(0.1, 0.3), 2),
                draw=rng.randrange(1 << 30),
            )
        faults.append(fault)
    return faults


def _with(fault: Fault, **changes: float | int | str) -> Fault:
    rounded = {k: round(v, 2) if isinstance(v, float) else v for k, v in changes.items()}
    return replace(fault, **rounded)  # type: ignore[arg-type]
