"""Errors the fake provider injects on purpose: which ones (`Faults`) and the state they run with.

- `Faults.throttle_next` throttles the next N gated calls, `Faults.throttle_ratio` each gated call with
  that probability, drawn from a generator seeded with `Faults.seed` so that a run can be replayed. The
  gate asks `InjectedFaults.throttle()` first, before its own limits (see limits.py).
- `Faults.fail_zones` makes every records/apply call on those zones fail (InjectedError).
- `Faults.fail_records` makes every apply touching one of those names fail whole, with BatchRejectedError
  (as a provider that validates a batch before committing it would), so the worker isolates the bad record
  by splitting the batch.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from shardsync.providers.base import BatchRejectedError, ProviderError
from shardsync.records.endpoint import Changes, normalize_name


class InjectedError(ProviderError):
    """A failure injected on purpose through `Faults.fail_zones`."""


class InjectedRecordError(BatchRejectedError):
    """A record named in `Faults.fail_records` was in the batch: the whole batch was refused."""


@dataclass(frozen=True, slots=True)
class Faults:
    """Errors injected on purpose."""

    throttle_next: int = 0  # the next N gated calls are throttled
    throttle_ratio: float = 0.0  # each gated call is throttled with this probability
    fail_records: frozenset[str] = frozenset()  # an apply touching one of these names fails
    fail_zones: frozenset[str] = frozenset()  # every records/apply call on these zones fails
    seed: int = 0  # of the random draws behind throttle_ratio, so a run can be replayed

    def __post_init__(self) -> None:
        if self.throttle_next < 0 or not 0.0 <= self.throttle_ratio <= 1.0:
            raise ValueError("throttle_next must be >= 0 and throttle_ratio within 0..1")

    def to_json(self) -> dict[str, Any]:
        return {
            "throttleNext": self.throttle_next,
            "throttleRatio": self.throttle_ratio,
            "failRecords": sorted(self.fail_records),
            "failZones": sorted(self.fail_zones),
            "seed": self.seed,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Faults:
        """Parse the admin API's JSON form; absent fields take their defaults. Raises ValueError."""
        unknown = set(data) - {"throttleNext", "throttleRatio", "failRecords", "failZones", "seed"}
        if unknown:
            raise ValueError(f"unknown faults: {sorted(unknown)}")
        try:
            return cls(
                throttle_next=int(data.get("throttleNext", 0)),
                throttle_ratio=float(data.get("throttleRatio", 0.0)),
                fail_records=frozenset(normalize_name(str(n)) for n in data.get("failRecords", ())),
                fail_zones=frozenset(normalize_name(str(z)) for z in data.get("failZones", ())),
                seed=int(data.get("seed", 0)),
            )
        except TypeError as exc:
            raise ValueError(f"bad faults: {exc}") from exc


class InjectedFaults:
    """The faults in force: what is left of `throttle_next`, the seeded draws, and the checks. Thread-safe."""

    def __init__(self, faults: Faults | None = None) -> None:
        self._lock = threading.Lock()
        self._faults = Faults()
        self._throttle_left = 0
        self._rng = random.Random(0)
        self.set(faults or Faults())

    def set(self, faults: Faults) -> None:
        """Put `faults` in force, starting its countdown and its random draws afresh."""
        with self._lock:
            self._faults = faults
            self._throttle_left = faults.throttle_next
            self._rng = random.Random(faults.seed)

    @property
    def current(self) -> Faults:
        """The faults in force, `throttle_next` counting the forced throttles still to come."""
        with self._lock:
            return replace(self._faults, throttle_next=self._throttle_left)

    def throttle(self) -> str | None:
        """Why this call is throttled on purpose, or None; a forced throttle is used up."""
        with self._lock:
            if self._throttle_left > 0:
                self._throttle_left -= 1
                return "throttled (injected)"
            ratio = self._faults.throttle_ratio
            if ratio and self._rng.random() < ratio:
                return "throttled (injected at random)"
            return None

    def check_zone(self, zone: str) -> None:
        # No lock: `set` replaces `_faults` in one assignment, and this check runs on every store call.
        if zone in self._faults.fail_zones:
            raise InjectedError(f"zone {zone}: injected failure")

    def failing_zones(self) -> frozenset[str]:
        return frozenset(self._faults.fail_zones)

    def check_records(self, changes: Changes) -> None:
        bad = self._faults.fail_records
        if not bad:
            return
        for ep in (*changes.create, *changes.update_old, *changes.update_new, *changes.delete):
            if ep.dns_name in bad:
                raise InjectedRecordError(f"record {ep.dns_name}: injected failure")
