"""Leaving for good or only restarting? (design §2 rule 6)

A replica stopping on SIGTERM drains (its zones move away) when it is leaving for good, and otherwise keeps
its member lease marked `restarting` so the coordinator parks its zones for it. It is leaving for good when
its StatefulSet wants fewer replicas than its ordinal (a scale-down), when the StatefulSet is gone or being
deleted, or when it is not in a StatefulSet at all (no `-<ordinal>` suffix, or no such StatefulSet). When
the StatefulSet cannot be read, restarting is the safer guess: parked zones move anyway once the grace runs
out, while a wrong drain would move every zone away and back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from shardsync.kube.client import Kube, KubeError
from shardsync.kube.objects import STATEFULSETS

_ORDINAL = re.compile(r"^(?P<set>.+)-(?P<ordinal>0|[1-9][0-9]*)$")


@dataclass(frozen=True, slots=True)
class Departure:
    leaving: bool  # True: drain; False: restart
    reason: str


def statefulset_ordinal(identity: str) -> tuple[str, int] | None:
    """`web-3` → ("web", 3): the StatefulSet and ordinal a pod name implies, or None without a suffix."""
    match = _ORDINAL.match(identity)
    if match is None:
        return None
    return match["set"], int(match["ordinal"])


def judge(identity: str, statefulset: dict[str, object] | None) -> Departure:
    """Pure: the departure of `identity` given its StatefulSet as read (None: not found)."""
    parsed = statefulset_ordinal(identity)
    if parsed is None:
        return Departure(True, "not in a StatefulSet (no ordinal suffix)")
    name, ordinal = parsed
    if statefulset is None:
        return Departure(True, f"StatefulSet {name} not found")
    metadata = statefulset.get("metadata")
    if isinstance(metadata, dict) and metadata.get("deletionTimestamp"):
        return Departure(True, f"StatefulSet {name} is being deleted")
    spec = statefulset.get("spec")
    replicas = spec.get("replicas", 1) if isinstance(spec, dict) else 1
    if isinstance(replicas, bool) or not isinstance(replicas, int):
        replicas = 1
    if ordinal >= replicas:
        return Departure(True, f"ordinal {ordinal} >= {replicas} desired replicas of {name}")
    return Departure(False, f"ordinal {ordinal} < {replicas} desired replicas of {name}: restarting")


async def departure(kube: Kube, namespace: str, identity: str, seconds: float = 5.0) -> Departure:
    """Read the StatefulSet (apps/v1) and judge; an unreadable API means restarting (see the docstring)."""
    parsed = statefulset_ordinal(identity)
    if parsed is None:
        return judge(identity, None)
    try:
        body = await kube.get(STATEFULSETS, parsed[0], namespace=namespace, request_timeout=seconds)
    except KubeError as exc:
        return Departure(False, f"StatefulSet {parsed[0]} unreadable ({exc}): assuming a restart")
    return judge(identity, body)
