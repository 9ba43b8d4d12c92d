"""Tunes Python's cyclic garbage collector for a replica: what is alive at start-up is never scanned again,
and young collections run less often.

A full collection walks every container object the collector tracks. At start-up that is ~150,000 objects
of modules, classes and flag tables that live as long as the process; while a replica lists a large
cluster the heap grows by a quarter again and again, and each growth step costs a full collection
(measured on the memory_at_scale bench, one replica, full profile: 18 full collections, 1.7 s of the 21 s
of CPU to first sync). `gc.freeze()` moves the start-up objects out of the collector's view (the CPython
documentation's advice for long-lived processes), and a young threshold of YOUNG allocations instead of 700
lets more short-lived objects (a decoded page, a translation's temporaries) die before they are promoted.
"""

from __future__ import annotations

import gc

YOUNG = 5000  # allocations between young collections (CPython's default: 700)


def tune() -> None:
    """Apply the settings once the modules are imported (the replica's start)."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG, middle, old)
