"""shardsync.replica.collector: the garbage collector's settings for a replica."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from shardsync.replica import collector


@pytest.fixture
def restored() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def test_start_up_objects_leave_the_collectors_view_and_young_collections_come_less_often(
    restored: None,
) -> None:
    alive_at_start: list[object] = [object()]  # a container the collector tracks, alive at start-up
    assert any(o is alive_at_start for o in gc.get_objects())
    collector.tune()
    assert gc.get_freeze_count() > 0 and gc.is_tracked(alive_at_start)
    assert not any(o is alive_at_start for o in gc.get_objects())  # frozen: no collection scans it
    assert gc.get_threshold()[0] == collector.YOUNG > 700
