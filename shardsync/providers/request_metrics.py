"""The two metrics of a provider that talks to its own DNS server (pdns, rfc2136), named alike for each:
`shardsync_<provider>_requests_total{operation,result}` and
`shardsync_<provider>_request_duration_seconds{operation}`, in buckets from 1 ms (a loopback server) to 30 s
(a whole zone transfer). The cloud providers count their API calls as `shardsync_<provider>_api_calls_total`
in their api.py.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


def request_metrics(provider: str, requests_help: str, duration_help: str) -> tuple[Counter, Histogram]:
    """The provider's request counter (by operation and result) and duration histogram (by operation)."""
    requests = Counter(f"shardsync_{provider}_requests_total", requests_help, ["operation", "result"])
    duration = Histogram(
        f"shardsync_{provider}_request_duration_seconds",
        duration_help,
        ["operation"],
        buckets=DURATION_BUCKETS,
    )
    return requests, duration
