"""Per-object limits, so one object cannot take a replica down: the size of an annotation read, the number
of endpoints one object may publish and the number of targets over all of them.

`--max-annotation-bytes`: an annotation whose value is longer (UTF-8 bytes) is not read at all; the object
is translated without it. `--max-endpoints-per-object` and `--max-targets-per-object`: an object asking
for more keeps its first endpoints (in the translator's order, sorted by name and type) up to the limits and
drops the rest. Each cut is a problem of the object (a Warning Event `ObjectLimitExceeded` and the invalid
endpoints metric); the object's other records are still published. 0 turns a limit off.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from shardsync.kube.objects import Obj, ObjectRef
from shardsync.records.endpoint import Endpoint
from shardsync.sources.result import Problem

REASON = "ObjectLimitExceeded"

DEFAULT_MAX_ANNOTATION_BYTES = 32768
DEFAULT_MAX_ENDPOINTS = 1000
DEFAULT_MAX_TARGETS = 5000


@dataclass(frozen=True, slots=True)
class ObjectLimits:
    """The three limits (0: no limit)."""

    annotation_bytes: int = DEFAULT_MAX_ANNOTATION_BYTES
    endpoints: int = DEFAULT_MAX_ENDPOINTS
    targets: int = DEFAULT_MAX_TARGETS


def _size(value: str) -> int:
    return len(value.encode("utf-8", "surrogatepass"))


def trim_annotations(obj: Obj, ref: ObjectRef, limit: int) -> tuple[Obj, list[Problem]]:
    """`obj` without its annotations longer than `limit` bytes (a shallow copy, only when one is cut)."""
    metadata = obj.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    if limit <= 0 or not isinstance(annotations, dict):
        return obj, []
    # A character is at most 4 UTF-8 bytes: short values are let through without encoding them.
    too_big = [
        k for k, v in annotations.items() if isinstance(v, str) and len(v) > limit // 4 and _size(v) > limit
    ]
    if not too_big:
        return obj, []
    assert isinstance(metadata, dict)
    kept = {k: v for k, v in annotations.items() if k not in too_big}
    problems = [
        Problem(
            ref,
            f"metadata.annotations[{str(k)[:253]}]",
            f"ignored: {_size(annotations[k])} bytes, more than --max-annotation-bytes={limit}",
            reason=REASON,
        )
        for k in too_big
    ]
    return {**obj, "metadata": {**metadata, "annotations": kept}}, problems


def cap_endpoints(
    endpoints: Sequence[Endpoint], ref: ObjectRef, limits: ObjectLimits
) -> tuple[list[Endpoint], list[Problem]]:
    """The first endpoints within both limits, and one problem per limit exceeded."""
    kept: list[Endpoint] = []
    targets = 0
    over_endpoints = over_targets = 0
    for ep in endpoints:
        if limits.endpoints > 0 and len(kept) >= limits.endpoints:
            over_endpoints += 1
            continue
        if limits.targets > 0 and targets + len(ep.targets) > limits.targets:
            over_targets += 1
            continue
        kept.append(ep)
        targets += len(ep.targets)
    problems: list[Problem] = []
    if over_endpoints:
        problems.append(
            Problem(
                ref,
                "endpoints",
                f"{over_endpoints} of {len(endpoints)} endpoints dropped: more than "
                f"--max-endpoints-per-object={limits.endpoints}",
                reason=REASON,
            )
        )
    if over_targets:
        problems.append(
            Problem(
                ref,
                "targets",
                f"{over_targets} endpoints dropped: their targets would pass "
                f"--max-targets-per-object={limits.targets}",
                reason=REASON,
            )
        )
    return kept, problems
