"""The Cloud DNS API through the official client library (`google-cloud-dns`, JSON REST v1 over HTTP): the
few calls the provider makes, blocking, with errors mapped to base.py's.

Credentials come from the standard chain (application default credentials: `GOOGLE_APPLICATION_CREDENTIALS`,
workload identity or the metadata server on GKE and GCE, gcloud's user credentials); the project from
`--google-project`, else from the environment and the credentials as the library finds it (on GCP, the
metadata server), as external-dns detects it. `--google-api-endpoint` points the library elsewhere (the
tests' loopback fake). Each call is one HTTP request, bounded by the library's timeout (60 s); a listing
is read one page per call, so the provider budget paces every page. The library does not retry:
throttling (HTTP 429, or 403 with reason rateLimitExceeded) raises `GoogleThrottledError` with the wait the
answer named (a Retry-After header, else a RetryInfo detail; None when neither), which the provider budget
and the worker take as back-off. Every call is counted in
`shardsync_google_api_calls_total{operation,result}`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import google.auth.exceptions
from google.api_core import exceptions as google_errors
from google.api_core.client_info import ClientInfo
from google.auth.credentials import Credentials
from google.cloud.dns import Client
from prometheus_client import Counter

from shardsync import __version__
from shardsync.flags import ConfigError
from shardsync.providers.base import ProviderError, UnreachableError
from shardsync.providers.google.errors import ChangeRefusedError, GoogleThrottledError
from shardsync.providers.google.records import RRset
from shardsync.providers.httpclient import retry_after

CALLS = Counter(
    "shardsync_google_api_calls_total",
    "Cloud DNS API calls by operation and result (ok, throttled, refused, error)",
    ["operation", "result"],
)

DEFAULT_ENDPOINT = "https://dns.googleapis.com"
# 403 reasons that mean "too many requests", not "not allowed" (Google's standard error reasons)
RATE_REASONS = frozenset({"rateLimitExceeded", "userRateLimitExceeded"})
# Answers to a change that refuse its content (nothing of it applied): a bad record (400), a record set
# not as the change says (404, 409, 412: naming the part of the change), a limit exceeded (403 quotaExceeded;
# any other 403 is about the credentials, not the change)
REFUSING = frozenset({400, 403, 404, 409, 412})
_RETRY_DELAY = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")

Page = tuple[list[dict[str, Any]], str | None]  # the page's items, and the token of the next (None: last)
T = TypeVar("T")


class CloudDnsApi:
    """The calls the provider makes, each blocking (run them in worker threads)."""

    def __init__(
        self,
        *,
        project: str = "",
        endpoint: str = DEFAULT_ENDPOINT,
        identity: str = "",
        credentials: Credentials | None = None,
    ) -> None:
        # The identity in the user agent: Cloud Audit Logs (and the tests' fake) tell replicas apart.
        agent = f"shardsync/{__version__}" + (f" ({identity})" if identity else "")
        try:
            self._client = Client(
                project=project or None,
                credentials=credentials,
                client_info=ClientInfo(user_agent=agent),  # type: ignore[no-untyped-call]
                client_options={"api_endpoint": endpoint},
            )
        except google.auth.exceptions.DefaultCredentialsError as exc:
            raise ConfigError(
                "--provider=google: no Google credentials found (workload identity, the metadata server, "
                f"GOOGLE_APPLICATION_CREDENTIALS or gcloud's): {exc}"
            ) from None
        except OSError as exc:  # the library's "Project was not passed and could not be determined"
            raise ConfigError(f"--google-project is not set and no project was found: {exc}") from None
        self.project = str(self._client.project)

    def zones_page(self, token: str | None) -> Page:
        """One page of managedZones.list (the raw JSON of each managed zone)."""
        return self._page("managedZones.list", self._client.list_zones(page_token=token), "managedZones")

    def rrsets_page(self, zone: str, token: str | None, name: str = "", rtype: str = "") -> Page:
        """One page of resourceRecordSets.list of the managed zone named `zone`; with `name` (absolute) and
        `rtype`, only that record set."""
        iterator = self._client.zone(zone).list_resource_record_sets(page_token=token)
        if name:
            # the API's own filters; the library's method does not take them, its iterator sends them
            iterator.extra_params = {"name": name, "type": rtype}
        return self._page("resourceRecordSets.list", iterator, "rrsets")

    def change(self, zone: str, additions: Iterable[RRset], deletions: Iterable[RRset]) -> None:
        """changes.create: the deletions, then the additions, applied whole or not at all."""
        managed = self._client.zone(zone)
        change = managed.changes()
        for rrset in deletions:
            change.delete_record_set(self._record_set(managed, rrset))
        for rrset in additions:
            change.add_record_set(self._record_set(managed, rrset))
        self._call("changes.create", change.create)

    @staticmethod
    def _record_set(managed: Any, rrset: RRset) -> Any:
        return managed.resource_record_set(rrset["name"], rrset["type"], rrset["ttl"], list(rrset["rrdatas"]))

    def _page(self, operation: str, iterator: Any, key: str) -> Page:
        page = self._call(operation, lambda: next(iterator.pages, None))
        if page is None:
            return [], None
        token = iterator.next_page_token
        return list(page.raw_page.get(key, ())), str(token) if token else None

    def _call(self, operation: str, fn: Callable[[], T]) -> T:
        try:
            answer = fn()
        except google_errors.GoogleAPICallError as exc:
            raise _mapped(operation, exc) from None
        except google.auth.exceptions.GoogleAuthError as exc:
            CALLS.labels(operation, "error").inc()
            raise ProviderError(f"Cloud DNS {operation}: credentials: {exc}") from None
        except OSError as exc:  # the HTTP library's connection failures and timeouts
            CALLS.labels(operation, "error").inc()
            raise UnreachableError(f"Cloud DNS {operation}: {type(exc).__name__}: {exc}") from None
        CALLS.labels(operation, "ok").inc()
        return answer


def _mapped(operation: str, exc: google_errors.GoogleAPICallError) -> ProviderError:
    status = int(exc.code or 0)
    reasons = [str(e.get("reason", "")) for e in exc.errors if isinstance(e, Mapping)]
    reason = reasons[0] if reasons else str(exc.reason or "")
    text = f"Cloud DNS {operation}: {status} {reason or '-'}: {exc.message}"
    if status == 429 or (status == 403 and RATE_REASONS.intersection(reasons)):
        CALLS.labels(operation, "throttled").inc()
        return GoogleThrottledError(text, retry_after=_wait_named(exc))
    if operation == "changes.create" and status in REFUSING:
        refused = ChangeRefusedError(text, status, reason)
        # a 404 that names no part of the change is about the managed zone itself (deleted meanwhile)
        if (status != 404 or refused.at is not None) and (status != 403 or reason == "quotaExceeded"):
            CALLS.labels(operation, "refused").inc()
            return refused
    CALLS.labels(operation, "error").inc()
    return ProviderError(text)


def _wait_named(exc: google_errors.GoogleAPICallError) -> float | None:
    """The seconds a throttling answer asks us to wait: its Retry-After, else its RetryInfo's retryDelay."""
    response = exc.response
    if response is not None and getattr(response, "headers", None) is not None:
        waited = retry_after(response)
        if waited is not None:
            return waited
    for detail in exc.details:
        if isinstance(detail, Mapping) and str(detail.get("@type", "")).endswith("google.rpc.RetryInfo"):
            found = _RETRY_DELAY.match(str(detail.get("retryDelay", "")))
            if found:
                return float(found.group(1))
    return None
