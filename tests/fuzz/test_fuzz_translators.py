"""Fuzzing every translator of the source table (a kind added to the table is fuzzed too, with its own shape
from tests/fuzz/objects.py or the generic one), through the gate every kind passes (per-object limits and
the namespace policy): for any object, however odd, translation returns endpoints that validate and
problems (each a Warning Event in the watcher), never an exception.

The Nodes cache holds hostile Nodes too (what the pod kind's host-network Pods and the service kind's
NodePorts read). What this cannot prove: the other related caches (EndpointSlices, Pods) are empty here,
so the headless paths of the service kind see no addresses; tests/sources cover those with real objects.
The Istio kinds, whose targets come from other objects, are fuzzed a second time with hostile Services,
Ingresses and Gateways in their caches, and with their translators told of those as related events."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shardsync.kube.objects import ObjectRef, object_key
from shardsync.sources.gate import ObjectGate
from shardsync.sources.ingress import INGRESSES
from shardsync.sources.istio import GATEWAYS
from shardsync.sources.kind import SourceContext
from shardsync.sources.limits import ObjectLimits
from shardsync.sources.namespace_policy import NamespacePolicy
from shardsync.sources.options import SourceOptions
from shardsync.sources.result import Problem, SourceResult
from shardsync.sources.service import SERVICES
from shardsync.sources.table import SOURCES
from tests.fuzz.objects import SHAPES, generic, names_value, nodes
from tests.fuzz.support import count, fuzzing
from tests.sources.fake_kube import FakeKube

pytestmark = pytest.mark.fuzz

ANNOTATION = "shardsync.io/allowed-domains"
LIMITS = ObjectLimits(annotation_bytes=32768, endpoints=50, targets=500)


@pytest.mark.parametrize("name", list(SOURCES))
def test_every_translator_survives_hostile_objects(name: str) -> None:
    kind = SOURCES[name]

    @fuzzing("translators")
    @given(obj=SHAPES.get(name, generic), allowed=st.none() | names_value, related=nodes)
    def run(obj: dict[str, Any], allowed: str | None, related: dict[str, Any]) -> None:
        count(f"translator {name}")
        context = SourceContext(
            options=kind.default_options(),
            cache=lambda resource: related if resource.plural == "nodes" else {},
            kube=FakeKube(),
            may_write=lambda: False,
            common=SourceOptions(),
        )
        translator = kind.start(context)
        policy = NamespacePolicy(FakeKube(), ANNOTATION)
        policy.set_namespace("default", {} if allowed is None else {ANNOTATION: allowed})
        gate = ObjectGate(LIMITS, policy)
        key = object_key(obj)
        ref = ObjectRef.of(obj, kind.resource, kind.resource_kind)
        seen, problems = gate.before(obj, ref)
        result = translator.translate(key, seen)
        assert result is None or isinstance(result, SourceResult)
        endpoints = [] if result is None else result.endpoints
        for ep in endpoints:
            ep.validate()
        kept, refused = gate.after(f"{name}/{key}", ref, endpoints)
        assert len(kept) <= LIMITS.endpoints
        assert sum(len(ep.targets) for ep in kept) <= LIMITS.targets
        for problem in [*problems, *(result.problems if result else []), *refused]:
            assert isinstance(problem, Problem) and str(problem)
        translator.translate(key, None)  # the object deleted

    run()


related_objects = st.fixed_dictionaries(
    {
        "services": st.lists(SHAPES["service"], max_size=3),
        "ingresses": st.lists(SHAPES["ingress"], max_size=2),
        "gateways": st.lists(SHAPES["istio-gateway"], max_size=2),
    }
)


@pytest.mark.parametrize("name", ["istio-gateway", "istio-virtualservice"])
def test_istio_translators_survive_hostile_related_objects(name: str) -> None:
    kind = SOURCES[name]

    @fuzzing("translators")
    @given(obj=SHAPES[name], related=related_objects, template=st.booleans())
    def run(obj: dict[str, Any], related: dict[str, list[dict[str, Any]]], template: bool) -> None:
        count(f"translator {name} with related objects")
        # every Service and Ingress under its own key; the Gateways under the one key a VirtualService names
        caches: dict[Any, dict[str, Any]] = {
            SERVICES: {f"default/s{i}": s for i, s in enumerate(related["services"])},
            INGRESSES: {f"default/obj{'' if i == 0 else i}": x for i, x in enumerate(related["ingresses"])},
            GATEWAYS: {f"default/obj{'' if i == 0 else i}": g for i, g in enumerate(related["gateways"])},
        }
        common = SourceOptions(
            fqdn_template=("{{.Name}}.ex.com",) if template else (), combine_fqdn_annotation=template
        )
        context = SourceContext(None, lambda r: caches[r], FakeKube(), lambda: False, common=common)
        translator = kind.start(context)
        for resource, cache in caches.items():
            for key, other in cache.items():
                translator.related(resource, key, None, other)
                translator.related(resource, key, other, obj)  # an object of another shape: never a crash
        result = translator.translate(object_key(obj), obj)
        assert result is not None
        for ep in result.endpoints:
            ep.validate()
        for problem in result.problems:
            assert isinstance(problem, Problem) and str(problem)
        if kind.names is not None:  # what a sharded replica asks of every object it lists
            kind.names(obj, SourceOptions())
        translator.translate(object_key(obj), None)

    run()
