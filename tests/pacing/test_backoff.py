"""Backoff grows, is capped, is jittered and resets."""

from __future__ import annotations

import random

from shardsync.pacing.backoff import Backoff


def test_grows_and_is_capped() -> None:
    b = Backoff(initial=1.0, maximum=8.0, rng=random.Random(1))
    delays = [b.next() for _ in range(8)]
    ceilings = [1, 2, 4, 8, 8, 8, 8, 8]
    assert all(c / 2 <= d <= c for d, c in zip(delays, ceilings, strict=True))
    b.reset()
    assert b.next() <= 1.0


def test_jitter_differs_between_replicas() -> None:
    a = Backoff(rng=random.Random(1))
    b = Backoff(rng=random.Random(2))
    assert [a.next() for _ in range(3)] != [b.next() for _ in range(3)]
