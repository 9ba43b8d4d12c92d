"""Fixtures of the multi-process tests: `start_cluster(**options)` starts a Harness (see harness.py) in the
test's temporary folder; every cluster a test started is stopped, all its processes with it, at teardown
(each one even when stopping another failed)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from tests.multiprocess.harness import Harness

StartCluster = Callable[..., Harness]


@pytest.fixture
def start_cluster(tmp_path: Path) -> Iterator[StartCluster]:
    with ExitStack() as stack:
        count = 0

        def start(**options: Any) -> Harness:
            nonlocal count
            harness = Harness.start(tmp_path / f"cluster-{count}", **options)
            count += 1
            stack.callback(harness.stop)
            return harness

        yield start
