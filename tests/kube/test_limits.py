"""`--kube-api-qps`, `--kube-api-burst` and `--request-timeout`: client-go's token bucket and client timeout
on every Kubernetes API call of `shardsync run` (shardsync.kube.limits)."""

from __future__ import annotations

import time

import pytest

from shardsync.kube.client import BlockingKube, KubeError, load_api_client
from shardsync.kube.limits import (
    DEFAULT_STATUS_QPS,
    REQUEST_TIMEOUT,
    ClientLimits,
    as_pair,
    is_status,
    plural,
)
from shardsync.kube.objects import LEASES
from shardsync.local.apiserver import ApiServer
from shardsync.pacing.token_bucket import Throttled, TokenBucket
from tests.replica.test_config import FAKE, parse


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


def test_bucket_starts_full_then_refills_at_qps_and_queues_in_order() -> None:
    clock = Clock()
    bucket = TokenBucket(5, 10, clock=clock, sleep=clock.sleep)
    assert [bucket.reserve() for _ in range(10)] == [0.0] * 10  # the burst
    assert [round(bucket.reserve(), 3) for _ in range(3)] == [0.2, 0.4, 0.6]  # then one each 1/qps s
    clock.now = 10.0  # idle: refilled, but never beyond the burst
    assert [bucket.reserve() for _ in range(10)] == [0.0] * 10
    assert round(bucket.reserve(), 3) == 0.2


def test_a_call_with_a_deadline_never_waits_past_it() -> None:
    clock = Clock()
    bucket = TokenBucket(1, 1, clock=clock, sleep=clock.sleep)
    bucket.wait()
    with pytest.raises(Throttled):
        bucket.wait(max_wait=0.5)  # the next token is a second away
    bucket.wait(max_wait=2.0)  # nothing was taken by the refused call: this one waits one second
    assert clock.slept == [1.0]


def test_coordination_has_a_bucket_of_its_own() -> None:
    """Source reads and Events never delay a lease renewal (client-go's separate leader-election client)."""
    assert plural("/apis/coordination.k8s.io/v1/namespaces/dns/leases/shardsync-0") == "leases"
    assert plural("/api/v1/namespaces/dns/configmaps/shardsync") == "configmaps"
    assert plural("/api/v1/services") == "services"
    assert plural("/api/v1/nodes/leases") == "nodes"  # an object's name is not its resource
    assert plural("/apis/apps/v1/namespaces/dns/statefulsets/shardsync") == "statefulsets"
    limits = ClientLimits(qps=0.001, burst=1)
    limits.throttle("/api/v1/namespaces/dns/events")
    with pytest.raises(Throttled):
        limits.throttle("/api/v1/services", (1.0, 1.0))
    limits.throttle("/apis/coordination.k8s.io/v1/namespaces/dns/leases/x", (1.0, 1.0))  # not waiting


def test_status_writes_have_a_bucket_of_their_own() -> None:
    """DNSEndpoint statuses do not wait behind the lists (1,000 took 75 s in the shared 5/s bucket): their
    own bucket, 50/s with a burst of 100 by default; lists and Events never take its tokens."""
    status = "/apis/externaldns.k8s.io/v1alpha1/namespaces/dns/dnsendpoints/app/status"
    assert is_status(status) and not is_status("/api/v1/namespaces/dns/services/status")  # a name
    limits = ClientLimits(qps=0.001, burst=1, status_qps=DEFAULT_STATUS_QPS)
    assert limits.bucket_of(status) is limits.status and limits.status is not None
    assert (limits.status.qps, limits.status.burst) == (50.0, 100)
    limits.throttle("/apis/externaldns.k8s.io/v1alpha1/dnsendpoints")  # the shared bucket's one token
    with pytest.raises(Throttled):
        limits.throttle("/api/v1/services", (1.0, 1.0))
    for _ in range(100):  # the whole burst, none of it waiting for the shared bucket
        limits.throttle(status, (1.0, 0.0))
    with pytest.raises(Throttled):  # and then 50 a second
        limits.throttle(status, (1.0, 0.0))
    assert ClientLimits(qps=5, burst=10).bucket_of(status) is None  # 0: no client-side limit


def test_timeouts() -> None:
    assert ClientLimits().timeout(None) == REQUEST_TIMEOUT == (5.0, 30.0)  # external-dns's 30s
    assert ClientLimits(request_timeout=0).timeout(None) == (5.0, None)  # 0: no timeout
    assert ClientLimits(request_timeout=2).timeout(None) == (2, 2)
    assert ClientLimits(request_timeout=2).timeout((5.0, 8.0)) == (2, 2)  # bounds a call's own
    assert ClientLimits(request_timeout=0).timeout((5.0, 8.0)) == (5.0, 8.0)
    assert ClientLimits().timeout(as_pair(3)) == (3, 3)


def test_every_call_is_throttled(apiserver: ApiServer) -> None:
    kube = BlockingKube(load_api_client(str(apiserver.kubeconfig)), ClientLimits(qps=20, burst=2))
    started = time.monotonic()
    for _ in range(8):
        kube.get(LEASES, "none", namespace="default")
    assert time.monotonic() - started >= (8 - 2) / 20 - 0.02
    # a call with its own short deadline fails rather than wait past it (client-go's Wait(ctx))
    slow = BlockingKube(load_api_client(str(apiserver.kubeconfig)), ClientLimits(qps=0.5, burst=1))
    slow.get(LEASES, "none", namespace="default")
    with pytest.raises(KubeError) as info:
        slow.get(LEASES, "none", namespace="default", request_timeout=0.5)
    assert info.value.status == 429


def test_request_timeout_reaches_the_socket(apiserver: ApiServer) -> None:
    kube = BlockingKube(load_api_client(str(apiserver.kubeconfig)), ClientLimits(request_timeout=0.5))
    apiserver.faults.pause(mode="hang")
    try:
        started = time.monotonic()
        with pytest.raises(KubeError) as info:
            kube.get(LEASES, "none", namespace="default")
        assert info.value.status == 0 and time.monotonic() - started < 5
    finally:
        apiserver.faults.resume()


def test_flags() -> None:
    s = parse(FAKE)
    assert (s.kube_api_qps, s.kube_api_burst, s.request_timeout) == (5, 10, 30.0)  # external-dns's
    assert s.kube_api_status_qps == 50.0
    s = parse(["--kube-api-qps=50", "--kube-api-burst=100", "--request-timeout=0s", *FAKE])
    assert (s.kube_api_qps, s.kube_api_burst, s.request_timeout) == (50, 100, 0.0)
    assert parse(["--kube-api-status-qps=0", *FAKE]).kube_api_status_qps == 0.0
    for flag, message in (
        ("--kube-api-qps=0", "--kube-api-qps must be greater than 0"),
        ("--kube-api-burst=-1", "--kube-api-burst must be greater than 0"),
        ("--kube-api-status-qps=-1", "--kube-api-status-qps must not be negative"),
    ):
        with pytest.raises(ValueError, match=message):
            parse([flag, *FAKE])
    with pytest.raises(SystemExit):  # a negative duration is no duration
        parse(["--request-timeout=-1s", *FAKE])
