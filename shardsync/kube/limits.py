"""Client-side limits of shardsync's Kubernetes client: external-dns's `--kube-api-qps`, `--kube-api-burst`
and `--request-timeout`, with client-go's meaning.

`TokenBucket` (shardsync.pacing.token_bucket) is client-go's default rate limiter: it starts
full with `burst` tokens and refills at `qps` per second; a request takes a token, or waits its turn for
the next one (waiters queue in order). Every request of a `Kube`/`BlockingKube` built with `ClientLimits`
goes through it, watches included, as in client-go. A call that carries its own deadline (lease renewals,
the assignment) never waits longer than that deadline for a token: like client-go's `Wait(ctx)`, it fails
at once instead (KubeError 429), and its caller's own retry takes over.

shardsync's own coordination (the member and coordinator Leases, the assignment ConfigMap, the StatefulSet
read when a replica leaves: nothing external-dns ever calls) has a bucket of its own with the same qps and
burst, as client-go controllers give leader election a client of its own: a burst of source reads or
Events never delays a lease renewal.

Writes to a status subresource (DNSEndpoint `status.observedGeneration`, sources.status) have a bucket of
their own too, `--kube-api-status-qps` (default 50 a second, burst twice that: kube-scheduler's client
limits; 0: none, the API server's own flow control is then the only limit), as kube-controller-manager
gives each controller a client with limits of its own. In the shared bucket, the 1,000 statuses a replica
finds lagging at start-up took 75 s at 5 a second, behind the lists; external-dns (whose clients all share
its one limiter) writes them one by one, each interval.

`ClientLimits.timeout` turns a call's timeout into urllib3's (connect, read) pair: a call without one gets
`--request-timeout` (default 30s, 0 = none), one with its own keeps it but never exceeds a non-zero
`--request-timeout` (client-go's client timeout bounds every request). A watch keeps its own read timeout
(the server ends it first), as external-dns does for its watches.
"""

from __future__ import annotations

from shardsync.pacing.token_bucket import TokenBucket

Timeout = float | tuple[float, float]
Pair = tuple[float, float | None]

CONNECT_TIMEOUT = 5.0
DEFAULT_REQUEST_TIMEOUT = 30.0  # external-dns's --request-timeout
DEFAULT_QPS = 5  # client-go's rest.DefaultQPS, external-dns's --kube-api-qps
DEFAULT_BURST = 10  # client-go's rest.DefaultBurst, external-dns's --kube-api-burst
DEFAULT_STATUS_QPS = 50.0  # --kube-api-status-qps: kube-scheduler's client QPS (its burst is 100)
REQUEST_TIMEOUT = (CONNECT_TIMEOUT, DEFAULT_REQUEST_TIMEOUT)


def as_pair(timeout: Timeout | None) -> tuple[float, float] | None:
    """A call's `request_timeout` as a (connect, read) pair; None when the call sets none."""
    if timeout is None or isinstance(timeout, tuple):
        return timeout
    return (timeout, timeout)


STATUS_LIMIT = "client rate limit of status writes (--kube-api-status-qps)"
COORDINATION = frozenset({"leases", "configmaps", "statefulsets"})


def _resource_parts(path: str) -> list[str]:
    """`<plural>[/<name>[/<subresource>]]` of a REST path, split."""
    parts = path.strip("/").split("/")
    at = 2 if parts[0] == "api" else 3
    if len(parts) > at + 1 and parts[at] == "namespaces":
        at += 2
    return parts[at:]


def plural(path: str) -> str:
    """The resource of a REST path (`/api/v1/namespaces/ns/configmaps/x` → `configmaps`)."""
    parts = _resource_parts(path)
    return parts[0] if parts else ""


def is_status(path: str) -> bool:
    """Whether a REST path names an object's status subresource (`.../<plural>/<name>/status`)."""
    return _resource_parts(path)[2:3] == ["status"]


class ClientLimits:
    """The rate limiter and request timeout of one client; the default is neither throttled nor changed
    from shardsync's own timeouts (tests and tools build clients without flags)."""

    def __init__(
        self,
        qps: float = 0,
        burst: int = 0,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        status_qps: float = 0,
    ) -> None:
        self.bucket = TokenBucket(qps, burst) if qps > 0 else None
        self.coordination = TokenBucket(qps, burst) if qps > 0 else None
        self.status = (
            TokenBucket(status_qps, max(1, round(2 * status_qps)), what=STATUS_LIMIT)
            if status_qps > 0
            else None
        )
        self.request_timeout = request_timeout

    def bucket_of(self, path: str) -> TokenBucket | None:
        """The bucket a request to `path` takes its token from (None: not throttled)."""
        if is_status(path):
            return self.status
        return self.coordination if plural(path) in COORDINATION else self.bucket

    def throttle(self, path: str, timeout: tuple[float, float | None] | None = None) -> None:
        """Wait for a token of the path's bucket (at most the call's own read timeout, when it has one)."""
        bucket = self.bucket_of(path)
        if bucket is not None:
            bucket.wait(timeout[1] if timeout is not None else None)

    def timeout(self, own: tuple[float, float] | None) -> Pair:
        """The (connect, read) timeout of a call (see the module docstring); read None is no timeout."""
        limit = self.request_timeout
        if own is None:
            return (min(CONNECT_TIMEOUT, limit), limit) if limit > 0 else (CONNECT_TIMEOUT, None)
        return own if limit <= 0 else (min(own[0], limit), min(own[1], limit))
