"""The timings every sharding loop derives from the flags."""

from __future__ import annotations

import pytest

from shardsync.sharding.timings import Timings


def test_timings_from_the_defaults_and_from_short_test_settings() -> None:
    default = Timings.derive(15, 5.0, 2.0, 30.0)
    assert default.lease_duration == 15
    assert (default.fence_margin, default.renew_deadline, default.request_timeout) == (3.0, 10.0, 5.0)
    # the margin absorbs clock-rate differences (milliseconds over any lease): capped, not grown with it
    assert default.acquire_margin == pytest.approx(0.5)
    assert Timings.derive(3, 1.0).acquire_margin == pytest.approx(0.45)
    assert default.drain_timeout == 9.5
    short = Timings.derive(2.5, 0.5, 0.3)
    assert short.lease_duration == 3  # leases carry whole seconds: rounded up once, used everywhere
    assert short.renew_interval + short.fence_margin < short.lease_duration
    # A renew interval close to the lease still leaves room for an ordinary renewal before the fence.
    tight = Timings.derive(15, 12.0)
    assert tight.renew_interval < tight.lease_duration - tight.fence_margin
    with pytest.raises(ValueError):
        Timings.derive(3, 3.0)


def test_fenced_providers_default_to_short_leases_and_unfenced_ones_keep_the_long_ones() -> None:
    fenced = Timings.resolve(True)
    assert (fenced.lease_duration, fenced.renew_interval, fenced.settle) == (3, 1.0, 0.5)
    # lease 3 s + acquire margin + settle leaves room for the 5 s failover
    assert fenced.lease_duration + fenced.acquire_margin + fenced.settle < 5.0
    unfenced = Timings.resolve(False)
    assert (unfenced.lease_duration, unfenced.renew_interval, unfenced.settle) == (15, 5.0, 2.0)
    # a flag the operator sets wins; a lease set alone renews at a third of it
    assert Timings.resolve(True, lease_duration=30).renew_interval == 10.0
    assert Timings.resolve(False, renew_interval=1.0).lease_duration == 15
    assert Timings.resolve(True, settle=0.0).settle == 0.0
    with pytest.raises(ValueError):
        Timings.resolve(True, renew_interval=3.0)
