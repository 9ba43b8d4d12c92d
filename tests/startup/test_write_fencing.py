"""A replica's start learns whether the provider fences its writes, bounded, and takes its timings from the
answer (replica.command.timings_at_start): short leases for a fenced provider, the conservative ones for a
webhook server without the fence extension or one that does not answer in time, with one line saying which.
In process, against the fake provider's webhook face; the real replicas are tests/multiprocess's."""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Iterator

import httpx
import pytest

from shardsync.providers.fake.provider import FakeProvider
from shardsync.providers.fake.server import FakeServer
from shardsync.providers.fake.store import FakeStore
from shardsync.providers.webhook.client import WebhookProvider
from shardsync.replica.command import timings_at_start
from shardsync.replica.config import Settings, configure, settings_from_args
from shardsync.sharding.timings import FENCED, UNFENCED

WEBHOOK = ["--provider=webhook"]


def settings(argv: list[str]) -> Settings:
    env = {"POD_NAME": "shardsync-0"}
    parser = argparse.ArgumentParser()
    configure(parser, env)
    return settings_from_args(parser.parse_args(argv), env)


@pytest.fixture(params=[False, True], ids=["plain", "fence-extension"])
def webhook_server(request: pytest.FixtureRequest) -> Iterator[FakeServer]:
    store = FakeStore()
    store.seed(3, 1)
    with FakeServer(store, host="127.0.0.1", port=0, webhook_fence=request.param) as srv:
        yield srv


def fencing_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "fenc" in r.getMessage().lower()]


@pytest.mark.anyio
async def test_the_timings_follow_the_webhook_servers_answer(
    webhook_server: FakeServer, caplog: pytest.LogCaptureFixture
) -> None:
    provider = WebhookProvider(webhook_server.url, identity="shardsync-0", timeout=5)
    try:
        with caplog.at_level(logging.INFO):
            timings = await timings_at_start(settings(WEBHOOK), provider)
    finally:
        await provider.close()
    fenced = webhook_server.webhook_fence
    expected = FENCED if fenced else UNFENCED
    assert (timings.lease_duration, timings.renew_interval, timings.settle) == (
        expected.lease_duration,
        expected.renew_interval,
        expected.settle,
    )
    lines = fencing_lines(caplog)
    said = [line for line in lines if line.startswith("writes")]
    assert len(said) == 1, lines  # once, at start
    assert said[0].startswith("writes fenced" if fenced else "writes are lease-timed, not fenced"), said
    started = next(r for r in caplog.records if r.getMessage().startswith("writes"))
    figures = getattr(started, "kv", {})
    assert figures["lease"] == ("3s" if fenced else "15s")
    assert figures["crash_handoff_after"] == ("3.5s" if fenced else "15.5s")  # lease + acquire margin
    assert len(lines) <= 2, lines  # that line and the negotiation's


@pytest.mark.anyio
async def test_flags_win_over_the_defaults_either_way(webhook_server: FakeServer) -> None:
    provider = WebhookProvider(webhook_server.url, timeout=5)
    try:
        timings = await timings_at_start(settings([*WEBHOOK, "--lease-duration=9s"]), provider)
    finally:
        await provider.close()
    assert (timings.lease_duration, timings.renew_interval) == (9, 3.0)


@pytest.mark.anyio
async def test_a_webhook_that_does_not_answer_in_time_gets_the_conservative_timings(
    caplog: pytest.LogCaptureFixture,
) -> None:
    asked: list[float] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        asked.append(time.monotonic())
        raise httpx.ConnectError("connection refused", request=request)

    provider = WebhookProvider("http://127.0.0.1:9", transport=httpx.MockTransport(refuse))
    started = time.monotonic()
    try:
        with caplog.at_level(logging.INFO):
            timings = await timings_at_start(settings(WEBHOOK), provider, bound=1.0)
    finally:
        await provider.close()
    took = time.monotonic() - started
    assert 1.0 <= took < 3.0  # cut at the bound
    assert len(asked) >= 3  # asked again with backoff, not once
    assert timings.lease_duration == UNFENCED.lease_duration
    lines = fencing_lines(caplog)
    assert len(lines) == 1 and "did not say within 1s" in lines[0], lines
    warning = next(r for r in caplog.records if "did not say" in r.getMessage())
    assert warning.levelno == logging.WARNING and "connection refused" in getattr(warning, "kv", {})["error"]


@pytest.mark.anyio
async def test_a_provider_that_always_fences_is_not_asked(caplog: pytest.LogCaptureFixture) -> None:
    store = FakeStore()
    with caplog.at_level(logging.INFO):
        timings = await timings_at_start(settings(["--fake-zone=example.com"]), FakeProvider(store))
    assert timings.lease_duration == FENCED.lease_duration
    assert fencing_lines(caplog) == ["writes fenced: the provider refuses a stale owner's write"]
    assert store.audit() == []
