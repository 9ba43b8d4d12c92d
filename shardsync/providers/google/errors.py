"""The google provider's errors: apart from api.py, so that importing the provider table (every `shardsync`
command) does not import the Cloud DNS client library."""

from __future__ import annotations

import re

from shardsync.providers.base import ProviderError, ThrottledError

# Where Cloud DNS says a change failed: "Precondition not met for 'entity.change.deletions[0]'", "The
# 'entity.change.additions[3]' resource named 'x. (A)' already exists."
_FIELD = re.compile(r"entity\.change\.(additions|deletions)\[(\d+)\]")


class GoogleThrottledError(ThrottledError):
    """Cloud DNS answered "slow down": HTTP 429, or 403 with reason rateLimitExceeded."""


class ChangeRefusedError(ProviderError):
    """Cloud DNS refused a change for its content, and applied none of it: a deletion that does not match
    the current record set (412 conditionNotMet, or 404 when there is none), an addition of one that
    exists (409 alreadyExists), a limit exceeded (403 quotaExceeded), a bad record (400).

    `status` is the HTTP status, `reason` Cloud DNS's error reason, and `at` the part of the change it
    names, as ("deletions", 0), when the message names one."""

    def __init__(self, message: str, status: int, reason: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        found = _FIELD.search(message)
        self.at: tuple[str, int] | None = (found.group(1), int(found.group(2))) if found else None
