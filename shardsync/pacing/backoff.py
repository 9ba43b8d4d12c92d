"""Bounded exponential backoff with jitter, the one retry rhythm every loop in shardsync uses."""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(slots=True)
class Backoff:
    """Delays of initial·factor^n, capped at `maximum`, each drawn from [delay/2, delay] ("equal jitter").

    Jitter spreads out replicas that failed together (an API server restart) so they do not retry in step;
    the lower half-bound keeps a retry from firing almost at once.
    """

    initial: float = 0.2
    maximum: float = 30.0
    factor: float = 2.0
    rng: random.Random = field(default_factory=random.Random)
    attempts: int = 0

    def next(self) -> float:
        delay = min(self.maximum, self.initial * self.factor**self.attempts)
        self.attempts += 1
        return self.rng.uniform(delay / 2, delay)

    def reset(self) -> None:
        self.attempts = 0
