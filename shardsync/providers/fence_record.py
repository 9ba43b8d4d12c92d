"""The zone fence as a TXT record, for the cloud providers that keep it as one (aws, google).

The fence (design §2 rule 8) is the TXT record `_shardsync-fence.<zone>` (base.fence_record_name) holding
one `FenceToken` as a quoted string, TTL 60 s. Each provider writes it in its own API's shape and swaps it
by a compare-and-swap of its own; what the record holds is here.
"""

from __future__ import annotations

from collections.abc import Iterable

from shardsync.providers.base import FenceToken

FENCE_TTL = 60


def fence_value(token: FenceToken) -> str:
    """The TXT value holding `token`."""
    return f'"{token.to_text()}"'


def token_in(values: Iterable[str]) -> FenceToken | None:
    """The token a listed fence record holds (the newest, should it hold several); None when it holds none
    or one that cannot be read."""
    try:
        return max((FenceToken.from_text(v) for v in values), default=None)
    except ValueError:
        return None
