"""How the pdns provider fences its writes (design §2 rule 8): the HTTP API's PATCH is atomic but has no
condition, so the API alone cannot refuse a stale owner. Two ways, one interface:

- `ServerFence` (`--pdns-rfc2136-fence=HOST:PORT`): the zone's fence record lives in the zone on the same
  PowerDNS server, reached over RFC 2136 (`dnsupdate=yes`). `acquire` is the rfc2136 provider's own
  compare-and-swap of the fence TXT `_shardsync-fence.<zone>`, and before each PATCH `check` sends one
  UPDATE whose only content is the prerequisite "the fence holds exactly this token": the server refuses a
  replica whose token was replaced (NXRRSET → FencedError) before its PATCH is sent. What it cannot
  close: the time between a check that passed and the PATCH landing (one API round trip, at most
  `--pdns-timeout`, plus however long the server holds the request). A PATCH that left before the new
  owner took the fence can still land after it; the new owner then finds that write at its next read of
  the zone and plans it back.
- `LeaseTimed` (no fence flag): no fence at the server. Tokens are kept in this process only, so a token
  this process has seen replaced is refused, and safety rests on the lease protocol alone (release first,
  acquire second, self-fencing), as external-dns's leader election does: the sharding loops use the
  conservative timings of a provider that does not fence.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from shardsync.providers.base import FencedError, FenceToken
from shardsync.records.endpoint import normalize_name

if TYPE_CHECKING:
    from shardsync.providers.rfc2136.provider import Rfc2136Provider


class Fence(Protocol):
    describe: str  # for the startup log line

    def reserved(self, zone: str) -> tuple[str, ...]:
        """Names of the zone the fence keeps for itself: never listed, never written through the API."""
        ...

    async def acquire(self, zone: str, token: FenceToken) -> None: ...

    async def check(self, zone: str, token: FenceToken) -> None:
        """FencedError unless `token` still holds the zone; called before each fenced PATCH."""
        ...

    async def close(self) -> None: ...


class ServerFence:
    """The fence record at the server, kept by the rfc2136 provider's fence code (`keeper`)."""

    def __init__(self, keeper: Rfc2136Provider) -> None:
        self.keeper = keeper
        self.describe = f"RFC 2136 compare-and-swap, checked before each PATCH: {keeper.host}:{keeper.port}"

    def reserved(self, zone: str) -> tuple[str, ...]:
        return (self.keeper.fence_name(zone),)

    async def acquire(self, zone: str, token: FenceToken) -> None:
        await self.keeper.acquire_fence(zone, token)

    async def check(self, zone: str, token: FenceToken) -> None:
        await self.keeper.check_fence(zone, token)

    async def close(self) -> None:
        await self.keeper.close()


class LeaseTimed:
    """No fence at the server: the newest token per zone, in this process only."""

    describe = "none: lease-timed (no --pdns-rfc2136-fence)"

    def __init__(self) -> None:
        self._held: dict[str, FenceToken] = {}

    def reserved(self, zone: str) -> tuple[str, ...]:
        return ()

    async def acquire(self, zone: str, token: FenceToken) -> None:
        zone = normalize_name(zone)
        held = self._held.get(zone)
        if held is not None and held != token and held.generation >= token.generation:
            raise FencedError(
                f"zone {zone}: this process holds {held.to_text()}, not older than {token.to_text()}"
            )
        self._held[zone] = token

    async def check(self, zone: str, token: FenceToken) -> None:
        zone = normalize_name(zone)
        held = self._held.get(zone)
        if held != token:
            shown = held.to_text() if held is not None else "no token"
            raise FencedError(f"zone {zone}: this process holds {shown}, not {token.to_text()}")

    async def close(self) -> None:
        return None
