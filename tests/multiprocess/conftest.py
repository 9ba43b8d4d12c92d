"""Fixtures of the multi-process tests: `start_cluster(**options)` starts a Harness (see harness.py) in the
test's temporary folder; every cluster a test started is stopped, all its processes with it, at teardown."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.multiprocess.harness import Harness

StartCluster = Callable[..., Harness]


@pytest.fixture
def start_cluster(tmp_path: Path) -> Iterator[StartCluster]:
    started: list[Harness] = []

    def start(**options: Any) -> Harness:
        harness = Harness.start(tmp_path / f"cluster-{len(started)}", **options)
        started.append(harness)
        return harness

    try:
        yield start
    finally:
        for harness in reversed(started):
            harness.stop()
