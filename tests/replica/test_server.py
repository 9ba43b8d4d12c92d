"""The status endpoints answer from state computed on the event loop."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest
from anyio.from_thread import BlockingPortal
from prometheus_client import Counter

from shardsync.replica.server import StatusEndpoints, StatusServer, parse_address

pytestmark = pytest.mark.anyio

PROBE = Counter("shardsync_test_probe_total", "A counter that only this test increments")


def test_parse_address() -> None:
    assert parse_address(":7979") == ("", 7979)
    assert parse_address("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_address("[::1]:80") == ("::1", 80)
    with pytest.raises(ValueError):
        parse_address("7979x")


async def get(url: str) -> httpx.Response:
    return await anyio.to_thread.run_sync(lambda: httpx.get(url, timeout=5))


async def test_endpoints_reflect_live_state() -> None:
    state: dict[str, Any] = {"ready": False, "generation": 1, "notes": []}

    def shards() -> dict[str, Any]:
        return {"generation": state["generation"], "zones": []}

    async with BlockingPortal() as portal:
        endpoints = StatusEndpoints(
            ready=lambda: (state["ready"], "" if state["ready"] else "caches not synced"),
            shards=shards,
            notes=lambda: state["notes"],
        )
        server = StatusServer("127.0.0.1:0", endpoints, portal)
        server.start()
        try:
            base = f"http://127.0.0.1:{server.port}"
            assert (await get(base + "/healthz")).status_code == 200
            r = await get(base + "/readyz")
            assert r.status_code == 503 and "caches not synced" in r.text
            state["notes"] = ["x.example.test not installed: the x source waits for it"]
            r = await get(base + "/readyz")
            assert (r.status_code, r.text) == (503, "caches not synced; " + state["notes"][0] + "\n")
            state["ready"] = True
            r = await get(base + "/readyz")  # a condition that holds nothing up, said all the same
            assert (r.status_code, r.text) == (
                200,
                "ok; x.example.test not installed: the x source waits for it\n",
            )
            state["notes"] = []
            assert (await get(base + "/readyz")).text == "ok\n"
            state["generation"] = 7
            assert (await get(base + "/shards")).json() == {"generation": 7, "zones": []}
            PROBE.inc(3)
            metrics = (await get(base + "/metrics")).text
            assert "shardsync_test_probe_total 3.0" in metrics
            # No `_created` twin series, so every HELP line appears once.
            assert "_created" not in metrics
            helps = [line.split()[2] for line in metrics.splitlines() if line.startswith("# HELP ")]
            assert len(helps) == len(set(helps))
            assert (await get(base + "/nope")).status_code == 404
        finally:
            server.stop()
