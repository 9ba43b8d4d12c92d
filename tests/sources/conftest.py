"""Fixtures of the source tests: the embedded API server the watcher tests run against."""

from __future__ import annotations

import pytest

from shardsync.local.apiserver import ApiServer
from tests.conftest import MakeApiServer


@pytest.fixture
def apiserver(make_apiserver: MakeApiServer) -> ApiServer:
    """The embedded API server, sending BOOKMARKs often. Cancelling a watch (Kube.watch closes the response
    from the event loop) waits until the reader thread's current read returns, that is until the server
    sends something; frequent bookmarks keep each test's teardown short."""
    server: ApiServer = make_apiserver(bookmark_interval=0.2)
    return server
