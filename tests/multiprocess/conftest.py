"""Fixtures of the multi-process tests: `start_cluster(**options)` starts a Harness (see harness.py) in the
test's temporary folder; every cluster a test started is stopped, all its processes with it, at teardown
(each one even when stopping another failed). `cluster` is a bare one: API server and fake provider
started, nothing seeded, no replica."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from bench.cluster import Cluster, ClusterSpec
from tests.multiprocess.harness import START_WITHIN, Harness, replica_flags

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


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    spec = ClusterSpec(
        latency=0.005,
        provider_concurrency=None,
        replica_flags=replica_flags(interval=10.0),
        termination_grace=12.0,
        start_timeout=START_WITHIN,
    )
    cluster = Cluster(tmp_path / "cluster", spec)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
