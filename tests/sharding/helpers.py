"""Small builders shared by the sharding tests."""

from __future__ import annotations

from shardsync.sharding.membership import MemberStatus
from shardsync.sharding.states import MemberState


def status(
    identity: str,
    state: MemberState = MemberState.READY,
    *,
    weight: int = 1,
    acked: int | None = None,
    last_change: float = 1000.0,
    as_of: float | None = None,
    lease_duration: float = 15.0,
    held: bool = True,
) -> MemberStatus:
    """A member as an observer sees it; `last_change` and `as_of` (default: `last_change`) are on the
    observer's monotonic clock."""
    return MemberStatus(
        identity=identity,
        state=state,
        weight=weight,
        observed_generation=acked,
        lease_duration=lease_duration,
        last_change=last_change,
        as_of=last_change if as_of is None else as_of,
        held=held,
        draining=state is MemberState.DRAINING,
        restarting=state is MemberState.RESTARTING,
    )


def ready(*identities: str, now: float = 1000.0) -> dict[str, MemberStatus]:
    return {i: status(i, last_change=now) for i in identities}
