"""Shared fixtures: the embedded Kubernetes API server, in this process or as a child process.

`apiserver` is an in-process server (shardsync.local.apiserver.ApiServer) with `.url`, `.kubeconfig`,
`.api_client(user_agent=None)`, `.faults` (pause/resume/refuse/allow/clear), `.stop()`, `.start()` and
`.restart()` (same port, same objects). `apiserver_process` is the same surface over a child process
(`python -m shardsync apiserver`), with `.faults` driven over the admin endpoint and `.kill()` for a crash.
`make_apiserver(process=False, **options)` starts more, with options such as `window`, `bookmark_interval`
and `data_dir`. Every server a test starts is stopped at teardown.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from shardsync.local.apiserver import ApiServer, ApiServerProcess
from tests.fuzz import support as fuzz_support
from tests.processes import Processes, processes

MakeApiServer = Callable[..., Any]


# Tests that start DNS servers, real processes or a fresh venv; everything else is the fast layer.
SLOW_MARKERS = frozenset({"bind", "knot", "pdns", "multiprocess", "image"})


def pytest_configure(config: pytest.Config) -> None:
    """`pytest -m fuzz` (any marker expression naming fuzz) runs the fuzz tests at full size."""
    expression = config.getoption("markexpr", "") or ""
    fuzz_support.full = "fuzz" in expression and "not fuzz" not in expression


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The examples each fuzz area ran (issue 16 asks for the counts)."""
    if fuzz_support.counts:
        terminalreporter.section("fuzz examples")
        for area, n in sorted(fuzz_support.counts.items()):
            terminalreporter.write_line(f"{area}: {n}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the fast layer, so it is one command: `pytest -m fast`."""
    for item in items:
        if not SLOW_MARKERS & {mark.name for mark in item.iter_markers()}:
            item.add_marker(pytest.mark.fast)


@pytest.fixture
def anyio_backend() -> str:
    """Every async test runs on asyncio, the backend shardsync runs on (`anyio.run`'s default)."""
    return "asyncio"


@pytest.fixture
def make_apiserver(tmp_path: Path) -> Iterator[MakeApiServer]:
    started: list[ApiServer | ApiServerProcess] = []
    counter = itertools.count()

    def make(process: bool = False, **options: Any) -> ApiServer | ApiServerProcess:
        kubeconfig = tmp_path / f"kubeconfig-{next(counter)}"
        server: ApiServer | ApiServerProcess
        if process:
            server = ApiServerProcess(kubeconfig, **options)
        else:
            server = ApiServer(kubeconfig_path=kubeconfig, **options)
        started.append(server)
        return server.start()

    try:
        yield make
    finally:
        for server in reversed(started):
            server.stop()


@pytest.fixture
def apiserver(make_apiserver: MakeApiServer) -> ApiServer:
    server: ApiServer = make_apiserver()
    return server


@pytest.fixture
def apiserver_process(make_apiserver: MakeApiServer) -> ApiServerProcess:
    server: ApiServerProcess = make_apiserver(process=True)
    return server


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Processes]:
    """The processes a test starts (replicas, fake providers): every one is stopped when the test ends."""
    with processes(tmp_path) as group:
        yield group
