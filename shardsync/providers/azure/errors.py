"""The azure provider's errors: apart from api.py, so that importing the provider table (every `shardsync`
command) does not import the Azure SDK."""

from __future__ import annotations

from shardsync.providers.base import ProviderError, ThrottledError


class AzureThrottledError(ThrottledError):
    """Azure Resource Manager answered 429: a token bucket of the subscription (or Microsoft.Network's
    five-minute limit) is spent until Retry-After."""


class PreconditionFailedError(ProviderError):
    """A conditional write was refused (412): the record set is no longer the one its etag named, or one
    exists where `If-None-Match: *` asked for none."""


class WriteRefusedError(ProviderError):
    """Azure refused one record set for its content (400, 409): the rest of the change goes on."""


class ZoneChangedError(ProviderError):
    """A record set changed at Azure since the zone was read (its write's condition failed): the writes of
    the change before it were applied; the zone is read again and planned anew."""
