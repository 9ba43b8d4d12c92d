"""What the providers' HTTP clients share: the header that names the caller, and transport failures as
UnreachableError (the worker retries those with backoff, as it does any provider error)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

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
