"""The namespace → domain policy (sources.namespace_policy): the annotation's syntax, the filter, and the
policy in the generic watcher against the embedded API server, for the service and crd kinds alike: names
outside the namespace's domains are dropped with a Warning Event, an annotation change re-translates the
namespace's objects, and a namespace without the annotation publishes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from shardsync.kube.objects import ObjectRef
from shardsync.local.apiserver import ApiServer
from shardsync.manifests import load_crd
from shardsync.records.endpoint import Endpoint
from shardsync.sources.namespace_policy import REASON, NamespacePolicy, parse_allowed
from shardsync.sources.watcher import WatchOptions
from tests.waits import eventually

from .fake_kube import FakeKube
from .watching import (
    GROUP,
    HOSTNAME,
    PLURAL,
    VERSION,
    ZONE,
    Harness,
    blocking,
    metric,
    service,
    until,
    watching,
)

ANNOTATION = "shardsync.io/allowed-domains"


def test_a_domain_admits_itself_and_below_a_wildcard_only_below() -> None:
    allowed = parse_allowed(" team-a.ex.com , *.apps.ex.com,, ")
    assert allowed is not None
    assert allowed.match("team-a.ex.com") and allowed.match("x.team-a.ex.com")
    assert allowed.match("y.apps.ex.com") and allowed.match("*.apps.ex.com")
    assert not allowed.match("apps.ex.com")
    assert not allowed.match("team-b.ex.com") and not allowed.match("xteam-a.ex.com")
    for nothing in (None, "", " , ", "*.", "."):
        assert parse_allowed(nothing) is None


def test_the_filter_keeps_allowed_names_and_remembers_the_refused_until_the_object_is_gone() -> None:
    policy = NamespacePolicy(FakeKube(), ANNOTATION)
    policy.set_namespace("team-a", {ANNOTATION: "a.ex.com"})
    ref = ObjectRef("Service", "team-a", "web", resource_kind="service")
    ok, bad = Endpoint.new("y.a.ex.com", "A", ["192.0.2.1"]), Endpoint.new("x.b.ex.com", "A", ["192.0.2.1"])
    kept, problems = policy.filter("service/team-a/web", ref, [ok, bad])
    assert kept == [ok]
    [problem] = problems
    assert problem.reason == REASON and "x.b.ex.com A not published" in problem.message
    assert "allowed: a.ex.com" in problem.message
    assert policy.refused("x.b.ex.com", "A") and not policy.refused("y.a.ex.com", "A")
    assert metric("shardsync_namespace_policy_refused_endpoints") >= 1
    policy.filter("service/team-a/web", None, [])
    assert not policy.refused("x.b.ex.com", "A")
    # A namespace the policy has not seen, or without the annotation, publishes nothing.
    other = ObjectRef("Service", "team-b", "web", resource_kind="service")
    kept, [problem] = policy.filter("service/team-b/web", other, [ok])
    assert kept == [] and "no allowed-domains annotation" in problem.message
    policy.set_namespace("team-a", {})  # the annotation removed: nothing more
    kept, [problem] = policy.filter("service/team-a/web", ref, [ok])
    assert kept == [] and policy.refused("y.a.ex.com", "A")
    # A cluster-scoped object (a Node, the node source) is the cluster admin's: no namespace restricts it.
    node = ObjectRef("Node", "", "n1.b.ex.com", resource_kind="node")
    assert policy.filter("node/n1.b.ex.com", node, [bad]) == ([bad], [])


def namespace(name: str, allowed: str | None) -> dict[str, Any]:
    annotations = {} if allowed is None else {ANNOTATION: allowed}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "annotations": annotations}}


async def warnings(h: Harness, ns: str, reason: str = REASON) -> list[str]:
    body = await blocking(h.core.list_namespaced_event, ns)
    return [e.message for e in body.items if e.reason == reason]


@pytest.mark.anyio
async def test_the_policy_filters_every_kind_and_follows_the_namespace_annotation(
    apiserver: ApiServer,
) -> None:
    api = apiserver.api_client()
    core = client.CoreV1Api(api)
    await blocking(core.create_namespace, namespace("team-a", "*.a.ex.com"))
    await blocking(core.create_namespace, namespace("team-c", None))
    await blocking(client.ApiextensionsV1Api(api).create_custom_resource_definition, load_crd())
    options = WatchOptions(sources=("service", "crd"))
    async with watching(apiserver, options, policy_annotation=ANNOTATION) as h:
        svc = service(
            "web", {HOSTNAME: "y.a.ex.com,x.b.ex.com"}, namespace="team-a", externalIPs=["192.0.2.1"]
        )
        await blocking(h.core.create_namespaced_service, "team-a", svc)
        endpoint = {"dnsName": "z.b.ex.com", "recordType": "A", "targets": ["192.0.2.9"]}
        also = {"dnsName": "d.a.ex.com", "recordType": "A", "targets": ["192.0.2.8"]}
        dnsep = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "DNSEndpoint",
            "metadata": {"name": "ep", "namespace": "team-a"},
            "spec": {"endpoints": [endpoint, also]},
        }
        await blocking(h.custom.create_namespaced_custom_object, GROUP, VERSION, "team-a", PLURAL, dnsep)
        await blocking(
            h.core.create_namespaced_service,
            "team-c",
            service("c", {HOSTNAME: "c.a.ex.com"}, namespace="team-c", externalIPs=["192.0.2.3"]),
        )
        await h.settle({("y.a.ex.com", "A"): ("192.0.2.1",), ("d.a.ex.com", "A"): ("192.0.2.8",)}, ZONE)

        async def refused_both() -> bool:
            messages = await warnings(h, "team-a")
            return any("x.b.ex.com" in m for m in messages) and any("z.b.ex.com" in m for m in messages)

        async def refused_c() -> bool:
            return any("no allowed-domains annotation" in m for m in await warnings(h, "team-c"))

        await until(refused_both)
        await until(refused_c)

        # The admin widens team-a's domains and gives team-c some: their objects are translated again.
        patch = {"metadata": {"annotations": {ANNOTATION: "a.ex.com,b.ex.com"}}}
        await blocking(h.core.patch_namespace, "team-a", patch)
        await blocking(
            h.core.patch_namespace, "team-c", {"metadata": {"annotations": {ANNOTATION: "ex.com"}}}
        )
        await h.settle(
            {
                ("y.a.ex.com", "A"): ("192.0.2.1",),
                ("x.b.ex.com", "A"): ("192.0.2.1",),
                ("z.b.ex.com", "A"): ("192.0.2.9",),
                ("d.a.ex.com", "A"): ("192.0.2.8",),
                ("c.a.ex.com", "A"): ("192.0.2.3",),
            }
        )
        # A deleted namespace annotation takes the names away again.
        await blocking(h.core.patch_namespace, "team-c", {"metadata": {"annotations": {ANNOTATION: None}}})
        await eventually(lambda: ("c.a.ex.com", "A") not in h.records())
    api.close()
