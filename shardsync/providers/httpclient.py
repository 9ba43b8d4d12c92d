"""What the providers' HTTP clients share: the header that names the caller, transport failures (httpx's, and
the TLS errors it lets through) as UnreachableError (the worker retries those with backoff, as it
does any provider error), and a 429's Retry-After (seconds or an HTTP date) for the provider budget
(shardsync.providers.budget)."""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from email.utils import parsedate_to_datetime
from typing import Protocol

import httpx

from shardsync.providers.base import UnreachableError

# Who is calling, for servers that care (the fake provider keys its limits and audit on it); others ignore it.
CLIENT_HEADER = "X-Shardsync-Client"


@contextmanager
def transport_errors(what: str, timeout: float) -> Iterator[None]:
    """Raise httpx's transport failures inside the block as UnreachableError about `what` (the request)."""
    try:
        yield
    except httpx.TimeoutException as exc:
        raise UnreachableError(f"{what}: no answer within {timeout:g}s") from exc
    except httpx.TransportError as exc:
        raise UnreachableError(f"{what}: {type(exc).__name__}: {exc}") from exc
    except ssl.SSLError as exc:
        # A TLS alert arriving after the handshake (a server that wants a client certificate, under TLS 1.3)
        # can reach us as ssl.SSLError, not wrapped by httpx: the connection failed all the same.
        raise UnreachableError(f"{what}: {type(exc).__name__}: {exc}") from exc


class Answer(Protocol):
    """An HTTP answer of any client library (httpx's, requests'): its headers, looked up without regard to
    case."""

    @property
    def headers(self) -> Mapping[str, str]: ...


def retry_after(resp: Answer, now: float | None = None) -> float | None:
    """The seconds a 429 (or 503) answer asks us to wait (its Retry-After header), None without one."""
    value = resp.headers.get("Retry-After", "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, when - (time.time() if now is None else now))
