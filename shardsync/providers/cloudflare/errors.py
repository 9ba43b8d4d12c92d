"""The cloudflare provider's errors: apart from api.py, so that importing the provider table (every
`shardsync` command) does not import the Cloudflare SDK."""

from __future__ import annotations

from shardsync.providers.base import PartlyAppliedError as PartlyAppliedError  # its home is base.py
from shardsync.providers.base import ProviderError, ThrottledError


class CloudflareThrottledError(ThrottledError):
    """Cloudflare answered 429: the user's 1,200 requests per five minutes are spent, and every call is
    refused until the block ends (Retry-After, in seconds)."""


class BatchFailedError(ProviderError):
    """Cloudflare refused a `dns_records/batch` request (a 4xx other than 429); nothing of it was applied.
    The message is Cloudflare's, with its error codes."""
