"""The aws provider's errors and the key a listing page starts at: apart from api.py, so that importing the
provider table (every `shardsync` command) does not import boto3, which costs about half a second."""

from __future__ import annotations

from shardsync.providers.base import ProviderError, ThrottledError

Start = tuple[str, str, str]  # (name, type, set identifier) where the next listing page starts


class AwsThrottledError(ThrottledError):
    """Route53 kept throttling after the retries (Throttling, PriorRequestNotComplete, HTTP 429)."""


class InvalidChangeBatchError(ProviderError):
    """Route53 refused a change batch for its content (InvalidChangeBatch, InvalidInput); nothing of it was
    applied. The message is Route53's, naming the RRsets at fault."""
