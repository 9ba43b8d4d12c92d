"""Rule 6's question — leaving for good or restarting? — from a pod name and its StatefulSet."""

from __future__ import annotations

from typing import Any

import pytest

from shardsync.kube.client import Kube
from shardsync.kube.objects import STATEFULSETS
from shardsync.local.apiserver import ApiServer
from shardsync.sharding.departure import departure, judge, statefulset_ordinal

pytestmark = pytest.mark.anyio


def sts(replicas: Any = 3, deleting: bool = False) -> dict[str, object]:
    metadata: dict[str, object] = {"name": "dns"}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": metadata, "spec": {"replicas": replicas}}


@pytest.mark.parametrize(
    ("identity", "expected"),
    [
        ("dns-0", ("dns", 0)),
        ("my-dns-12", ("my-dns", 12)),
        ("dns", None),
        ("dns-", None),
        ("dns-01", None),  # StatefulSets never pad ordinals
        ("-3", None),
        ("host.example", None),
    ],
)
def test_ordinal_from_the_pod_name(identity: str, expected: tuple[str, int] | None) -> None:
    assert statefulset_ordinal(identity) == expected


@pytest.mark.parametrize(
    ("identity", "statefulset", "leaving"),
    [
        ("dns-1", sts(3), False),  # rolling update, eviction: restart
        ("dns-2", sts(3), False),
        ("dns-3", sts(3), True),  # scaled down below it
        ("dns-0", sts(0), True),
        ("dns-1", sts(3, deleting=True), True),
        ("dns-1", None, True),  # no StatefulSet
        ("laptop", sts(3), True),  # not in a StatefulSet at all
        ("dns-0", sts("three"), False),  # unreadable count: the default, 1
        ("dns-1", {"metadata": {}}, True),  # no spec: 1 replica
    ],
)
def test_judge(identity: str, statefulset: dict[str, object] | None, leaving: bool) -> None:
    verdict = judge(identity, statefulset)
    assert verdict.leaving is leaving, verdict.reason


async def test_reads_the_statefulset_and_assumes_a_restart_when_the_api_is_down(apiserver: ApiServer) -> None:
    kube = Kube(apiserver.api_client(user_agent="shardsync/test (dns-1)"))
    try:
        assert (await departure(kube, "default", "dns-1")).leaving  # not found
        body = {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "dns"},
            "spec": {
                "replicas": 2,
                "serviceName": "dns",
                "selector": {"matchLabels": {"app": "dns"}},
                "template": {"metadata": {"labels": {"app": "dns"}}, "spec": {"containers": []}},
            },
        }
        await kube.create(STATEFULSETS, body, namespace="default")
        assert not (await departure(kube, "default", "dns-1")).leaving
        assert (await departure(kube, "default", "dns-2")).leaving
        apiserver.faults.refuse(user_agent="(dns-1)")
        verdict = await departure(kube, "default", "dns-1", seconds=1.0)
        assert not verdict.leaving and "unreadable" in verdict.reason
    finally:
        kube.api_client.close()  # type: ignore[no-untyped-call]
