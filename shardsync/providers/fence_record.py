"""The zone fence as a TXT record, for the providers that keep it as one in the zone (aws, azure, cloudflare,
google, rfc2136, and pdns through rfc2136).

The fence (design §2 rule 8) is the TXT record `_shardsync-fence.<zone>` (base.fence_record_name) holding
one `FenceToken` as a quoted string, TTL 60 s. Each provider writes it in its own API's shape and swaps it
by a compare-and-swap of its own; what the record holds is here, and `acquire_by_swap`, the rule of taking
it: read it, return when it holds the token alone, refuse when another writer's token of the same or a newer
generation is there, else swap what was read for the token, reading again when the swap lost a race.
`refused_by_fence` is the one log line and error of a write the fence refused.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

from shardsync.logs import KVLogger
from shardsync.providers.base import FencedError, FenceToken

FENCE_TTL = 60
FENCE_CAS_ATTEMPTS = 3

Read = TypeVar("Read")


class FenceMoved(Exception):
    """The fence's compare-and-swap lost: the fence changed between its read and the write (the message,
    when there is one, is the API's answer)."""


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


async def acquire_by_swap(
    log: KVLogger,
    provider: str,
    zone: str,
    token: FenceToken,
    read: Callable[[], Awaitable[tuple[Read, FenceToken | None, bool]]],
    swap: Callable[[Read], Awaitable[None]],
) -> None:
    """Make `token` the zone's fence (module docstring). `read()` gives the fence as read, the token it holds
    and whether it holds that one alone; `swap(what was read)` replaces it by `token` in one conditional
    write and raises FenceMoved when the condition failed."""
    for attempt in range(FENCE_CAS_ATTEMPTS):
        current, holder, alone = await read()
        if holder == token and alone:
            return
        if holder is not None and holder != token and holder.generation >= token.generation:
            raise FencedError(
                f"zone {zone}: fence held by {holder.identity} at generation {holder.generation}; "
                f"{token.identity} at generation {token.generation} may not take it"
            )
        try:
            await swap(current)
        except FenceMoved as exc:
            log.info(
                f"{provider} fence moved while acquiring; reading again",
                zone=zone,
                attempt=attempt + 1,
                error=str(exc) or "-",
            )
            continue
        log.info(
            f"{provider} fence acquired",
            zone=zone,
            identity=token.identity,
            generation=token.generation,
            previous=holder.to_text() if holder else "-",
        )
        return
    raise FencedError(f"zone {zone}: the fence kept changing; gave up after {FENCE_CAS_ATTEMPTS} attempts")


def refused_by_fence(
    log: KVLogger,
    provider: str,
    zone: str,
    fence: FenceToken,
    applied: int,
    total: int,
    error: Exception | None = None,
    *,
    answer: str = "",
    unit: str = "batch(es)",
) -> FencedError:
    """A write the zone's fence refused, logged: the FencedError to raise (the worker drops the zone).
    `applied` of the call's `total` requests (`unit`: batches, or rfc2136's UPDATE messages) had been written
    before; `error` is the API's refusal, `answer` the server's answer code when that is all it says."""
    extra = {"answer": answer} if answer else {}
    log.warning(
        f"{provider} write refused by the fence",
        zone=zone,
        identity=fence.identity,
        generation=fence.generation,
        **extra,
        batches_applied=applied,
        batches=total,
    )
    said = f" (server answered {answer})" if answer else ""
    why = f": {error}" if error is not None else ""
    return FencedError(
        f"zone {zone}: the fence no longer holds {fence.to_text()}{said}; "
        f"{applied} of {total} {unit} were applied before{why}"
    )
