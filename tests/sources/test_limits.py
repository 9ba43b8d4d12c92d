"""Per-object limits (sources.limits): an annotation over the size limit is not read, an object's endpoints
and targets beyond the limits are dropped, each with a problem naming the flag, and the rest of the object is
published; in the watcher, for any kind, with an `ObjectLimitExceeded` Warning Event."""

from __future__ import annotations

from typing import Any

import pytest

from shardsync.kube.objects import ObjectRef
from shardsync.local.apiserver import ApiServer
from shardsync.records.endpoint import Endpoint
from shardsync.sources.limits import REASON, ObjectLimits, cap_endpoints, trim_annotations
from shardsync.sources.options import SourceOptions
from shardsync.sources.watcher import WatchOptions

from .watching import HOSTNAME, blocking, service, until, watching

REF = ObjectRef("Service", "default", "web", resource_kind="service")


def test_an_annotation_over_the_limit_is_left_out_of_a_copy_and_the_others_kept() -> None:
    obj: dict[str, Any] = {
        "metadata": {"name": "web", "annotations": {"big": "é" * 60, "small": "x" * 100, "odd": 5}}
    }
    trimmed, [problem] = trim_annotations(obj, REF, 100)
    assert trimmed["metadata"]["annotations"] == {"small": "x" * 100, "odd": 5}
    assert obj["metadata"]["annotations"]["big"] == "é" * 60  # the cached object is not touched
    assert (
        problem.reason == REASON
        and "120 bytes" in problem.message
        and "--max-annotation-bytes=100" in problem.message
    )
    assert trim_annotations(obj, REF, 0) == (obj, [])  # 0: no limit
    assert trim_annotations({"metadata": "junk"}, REF, 10) == ({"metadata": "junk"}, [])


def test_endpoints_and_targets_beyond_the_limits_are_dropped_the_first_kept() -> None:
    eps = [Endpoint.new(f"n{i}.ex.com", "A", [f"192.0.2.{j}" for j in range(1, 4)]) for i in range(10)]
    kept, [problem] = cap_endpoints(eps, REF, ObjectLimits(endpoints=4, targets=0))
    assert kept == eps[:4] and "6 of 10 endpoints dropped" in problem.message
    kept, [problem] = cap_endpoints(eps, REF, ObjectLimits(endpoints=0, targets=10))
    assert kept == eps[:3] and "--max-targets-per-object=10" in problem.message
    assert cap_endpoints(eps, REF, ObjectLimits(endpoints=0, targets=0)) == (eps, [])


@pytest.mark.anyio
async def test_the_watcher_applies_the_limits_and_posts_events(apiserver: ApiServer) -> None:
    common = SourceOptions(max_annotation_bytes=64, max_endpoints_per_object=2)
    async with watching(apiserver, WatchOptions(common=common)) as h:
        annotations = {HOSTNAME: "a.ex.com,b.ex.com,c.ex.com", "note": "z" * 65}
        web = service("web", annotations, externalIPs=["192.0.2.1"])
        await blocking(h.core.create_namespaced_service, "default", web)
        await h.settle({("a.ex.com", "A"): ("192.0.2.1",), ("b.ex.com", "A"): ("192.0.2.1",)})

        async def both() -> bool:
            body = await blocking(h.core.list_namespaced_event, "default")
            messages = [e.message for e in body.items if e.reason == REASON]
            return any("[note]" in m for m in messages) and any("1 of 3 endpoints" in m for m in messages)

        await until(both)
