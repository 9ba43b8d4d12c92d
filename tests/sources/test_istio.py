"""What the Istio kinds share (sources.istio) and how their translators decide what to translate again: the
index of what feeds each Gateway's targets, the VirtualServices' index of Gateways with its memo of
targets, the records kept on an unresolved reference, the slim copies, and the kinds of one watcher
(`sources.kind.chosen`)."""

from __future__ import annotations

import copy
from typing import Any

from shardsync.sources import istio, projections
from shardsync.sources.ingress import INGRESSES
from shardsync.sources.istio import GATEWAYS, gateway_targets
from shardsync.sources.istio_feeds import GatewayFeeds, RefIndex
from shardsync.sources.istio_gateway import gateway_endpoints
from shardsync.sources.istio_virtualservice import VirtualServiceTranslator, binds, virtualservice_endpoints
from shardsync.sources.kind import SourceContext, chosen
from shardsync.sources.options import SourceOptions
from shardsync.sources.service import SERVICES
from shardsync.sources.table import SOURCES

from .fake_kube import FakeKube
from .istio_objects import HOSTNAME, INGRESS, TARGET, gateway, lb_ingress, lb_service, virtualservice
from .objects import ALPHA

A, B = {"istio": "a"}, {"istio": "b"}


def test_a_service_event_names_the_gateways_whose_selector_picks_it_before_or_after() -> None:
    services: dict[str, dict[str, Any]] = {}
    feeds = GatewayFeeds(lambda: services)
    feeds.register("ns/a", gateway("a", "ns", selector=A))
    feeds.register("ns/ab", gateway("ab", "ns", selector={}))  # an empty selector picks every Service
    feeds.register("ns/b", gateway("b", "ns", selector=B))
    feeds.register("ns/fixed", gateway("fixed", "ns", selector=A, annotations={TARGET: "192.0.2.9"}))
    feeds.register("ns/ing", gateway("ing", "ns", selector=A, annotations={INGRESS: "other/edge"}))
    svc = lb_service("igw", selector={**A, "app": "x"}, ips=["192.0.2.1"])

    def event(old: dict[str, Any] | None, new: dict[str, Any] | None) -> set[str]:
        if new is None:
            services.pop("default/igw")
        else:
            services["default/igw"] = new
        return feeds.service_changed("default/igw", old, new)

    assert event(None, svc) == {"ns/a", "ns/ab"}
    moved = copy.deepcopy(svc)
    moved["status"]["loadBalancer"]["ingress"] = [{"ip": "192.0.2.2"}]
    assert event(svc, moved) == {"ns/a", "ns/ab"}
    relabelled = copy.deepcopy(moved)
    relabelled["metadata"]["labels"] = {"team": "x"}  # not read: nothing to translate
    assert event(moved, relabelled) == set()
    now_b = copy.deepcopy(relabelled)
    now_b["spec"]["selector"] = B
    assert event(relabelled, now_b) == {"ns/a", "ns/ab", "ns/b"}  # it left one, joined another
    assert list(feeds.select(B)) == ["default/igw"] and list(feeds.select(A)) == []
    assert event(now_b, None) == {"ns/ab", "ns/b"}
    assert list(feeds.select(B)) == []
    # Ingresses: only the Gateway naming it, and only when its load balancer changed.
    edge = lb_ingress("edge", "other", ips=["192.0.2.3"])
    assert feeds.ingress_changed("other/edge", None, edge) == {"ns/ing"}
    assert feeds.ingress_changed("other/edge", edge, copy.deepcopy(edge)) == set()
    assert feeds.ingress_changed("ns/edge", None, lb_ingress("edge", "ns")) == set()
    feeds.unregister("ns/ing")
    feeds.unregister("ns/a")
    assert feeds.ingress_changed("other/edge", edge, None) == set()
    assert event(None, svc) == {"ns/ab"}


def test_select_looks_only_at_the_services_holding_a_selected_label() -> None:
    services = {
        f"ns/s{i}": lb_service(f"s{i}", "ns", selector={"app": f"a{i}"}, ips=["192.0.2.1"]) for i in range(50)
    }
    services["ns/igw"] = lb_service("igw", "ns", selector={**A, "app": "igw"}, ips=["192.0.2.7"])
    feeds = GatewayFeeds(lambda: services)
    feeds.register("ns/gw", gateway("gw", "ns", selector={**A, "app": "igw"}))  # the cache is read once here
    assert set(feeds.select({**A, "app": "igw"})) == {"ns/igw"}
    services["ns/igw2"] = lb_service("igw2", "ns", selector=A, ips=["192.0.2.8"])
    feeds.service_changed("ns/igw2", None, services["ns/igw2"])
    assert set(feeds.select(A)) == {"ns/igw", "ns/igw2"}
    assert set(feeds.select({"app": "s3"})) == set(services)  # no registered selector holds it: every one
    gw = gateway("gw", "ns", selector=A)
    assert sorted(gateway_targets(gw, services, {}, feeds.select).values) == ["192.0.2.7", "192.0.2.8"]
    assert sorted(gateway_targets(gw, services, {}).values) == ["192.0.2.7", "192.0.2.8"]  # the same, without
    feeds.unregister("ns/gw")
    assert set(feeds.select(A)) == set(services)


def test_ref_index_both_ways() -> None:
    idx = RefIndex()
    idx.register("v/1", {"g/a", "g/b"})
    idx.register("v/2", {"g/b"})
    assert idx.owners({"g/b"}) == {"v/1", "v/2"} and idx.owners({"g/c"}) == set()
    idx.register("v/1", {"g/c"})  # named elsewhere now
    assert idx.owners({"g/a", "g/b"}) == {"v/2"} and idx.owners({"g/c"}) == {"v/1"}
    idx.unregister("v/2")
    idx.register("v/3", ())
    assert idx.owners({"g/b"}) == set() and len(idx) == 1


def test_targets_come_from_one_place_in_order() -> None:
    services = {"ns/igw": lb_service("igw", "ns", ips=["192.0.2.1"], hostnames=["lb.example.net"])}
    ingresses = {"ns/edge": lb_ingress("edge", "ns", hostnames=["ing.example.net"])}
    assert gateway_targets(gateway(), services, ingresses).values == ("192.0.2.1", "lb.example.net")
    named = gateway(annotations={INGRESS: "ns/edge"})
    assert gateway_targets(named, services, ingresses).values == ("ing.example.net",)
    both = gateway(annotations={INGRESS: "ns/edge", ALPHA + "target": "t.example.net."})  # old prefix too
    assert gateway_targets(both, services, ingresses).values == ("t.example.net",)
    # an entry with both an ip and a hostname gives its ip only, as external-dns reads it
    mixed = {
        "ns/igw": {
            **services["ns/igw"],
            "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.4", "hostname": "x.example.net"}]}},
        }
    }
    assert gateway_targets(gateway(), mixed, {}).values == ("192.0.2.4",)


def test_virtualservices_are_translated_again_through_their_gateways_with_the_targets_memo() -> None:
    services = {"default/igw": lb_service("igw", selector=A, ips=["192.0.2.1"])}
    gateways = {"default/edge": gateway("edge", hosts=[["*"]], selector=A)}
    caches = {SERVICES: services, GATEWAYS: gateways, INGRESSES: {}}
    context: SourceContext[None] = SourceContext(None, lambda r: caches[r], FakeKube(), lambda: True)
    tr = VirtualServiceTranslator(context)
    for key, gw in gateways.items():
        tr.related(GATEWAYS, key, None, gw)
    shop = virtualservice("shop", gateways=["edge"], hosts=["shop.ex.com"])
    blog = virtualservice("blog", gateways=["default/elsewhere", "mesh"], hosts=["blog.ex.com"])
    first = tr.translate("default/shop", shop)
    assert first is not None and [e.targets for e in first.endpoints] == [("192.0.2.1",)]
    tr.translate("default/blog", blog)
    # The Service moves: the memo of edge's targets goes, and only shop is named.
    moved = copy.deepcopy(services["default/igw"])
    moved["status"]["loadBalancer"]["ingress"] = [{"ip": "192.0.2.2"}]
    services["default/igw"] = moved
    assert set(tr.related(SERVICES, "default/igw", caches[SERVICES]["default/igw"], moved)) == set()  # same
    assert set(
        tr.related(SERVICES, "default/igw", lb_service("igw", selector=A, ips=["192.0.2.1"]), moved)
    ) == {"default/shop"}
    again = tr.translate("default/shop", shop)
    assert again is not None and [e.targets for e in again.endpoints] == [("192.0.2.2",)]
    # A Gateway's status (not read) changes nothing; a Gateway appearing names the VirtualServices naming it.
    edge = gateways["default/edge"]
    assert set(tr.related(GATEWAYS, "default/edge", edge, {**edge, "status": {"x": 1}})) == set()
    assert set(tr.related(GATEWAYS, "default/elsewhere", None, gateway("elsewhere"))) == {"default/blog"}
    tr.translate("default/blog", None)
    assert set(tr.related(GATEWAYS, "default/elsewhere", gateway("elsewhere"), None)) == set()


def test_template_names_of_a_virtualservice_take_the_gateways_targets_not_its_own_annotation() -> None:
    # external-dns's endpointsFromTemplate reads targetsFromVirtualService only: a VirtualService with a
    # `target` annotation and no hosts gets its template names pointed at its Gateways.
    vs = virtualservice("vs1", gateways=["edge"], annotations={TARGET: "own.example.net"})
    gateways = {"default/edge": gateway("edge", hosts=[["*"]], annotations={TARGET: "gw.example.net"})}
    common = SourceOptions(fqdn_template=("{{.Name}}.ex.com",))
    result = virtualservice_endpoints(vs, gateways, {}, {}, common)
    assert [(e.dns_name, e.targets) for e in result.endpoints] == [("vs1.ex.com", ("gw.example.net",))]


def test_a_server_host_admits_its_own_name_only_or_names_under_its_wildcard() -> None:
    vs = virtualservice("vs", "apps")
    assert not binds(vs, gateway(hosts=[["b.foo.bar"]]), "a.foo.bar")
    assert not binds(vs, gateway(hosts=[["foo.bar"]]), "xfoo.bar")
    assert binds(vs, gateway(hosts=[["apps/foo.bar"]]), "foo.bar")
    assert not binds(vs, gateway(hosts=[["a/b/foo.bar"]]), "foo.bar")  # not namespace/host: skipped


def test_an_unresolved_reference_keeps_the_last_good_records_until_resolved() -> None:
    kept = istio.KeptOnError()
    good = gateway_endpoints(gateway(hosts=[["a.ex.com"]], annotations={TARGET: "192.0.2.1"}), {}, {})
    assert kept.settle("k", good) is good
    broken = gateway_endpoints(gateway(hosts=[["a.ex.com"]], annotations={INGRESS: "gone"}), {}, {})
    assert broken.endpoints == [] and [p.reason for p in broken.problems] == [istio.UNRESOLVED]
    held = kept.settle("k", broken)
    assert held.endpoints == good.endpoints and held.problems == broken.problems
    empty = gateway_endpoints(gateway(hosts=[["a.ex.com"]]), {}, {})  # no targets, no error: nothing kept
    assert kept.settle("k", empty).endpoints == [] and kept.settle("k", broken).endpoints == []
    kept.settle("k", good)
    kept.drop("k")
    assert kept.settle("k", broken).endpoints == []


def noisy(obj: dict[str, Any]) -> dict[str, Any]:
    """As an API server sends it: bookkeeping, status, routes — what no translation reads."""
    out = copy.deepcopy(obj)
    meta = out["metadata"]
    meta["managedFields"] = [{"manager": "istioctl", "fieldsV1": {"f:spec": {}}}]
    meta["resourceVersion"] = "7"
    meta.setdefault("annotations", {})[projections.LAST_APPLIED] = "{" + "x" * 500 + "}"
    out.setdefault("status", {}).update(
        conditions=[{"type": "Reconciled", "status": "True"}], observedGeneration=3
    )
    out["spec"]["http"] = [{"route": [{"destination": {"host": "web"}}]}] * 20
    for server in out["spec"].get("servers", []):
        server["port"] = {"number": 443, "name": "https", "protocol": "HTTPS"}
        server["tls"] = {"mode": "SIMPLE", "credentialName": "cert"}
    return out


def test_slim_copies_translate_as_the_full_objects_and_keep_what_is_read() -> None:
    services = {
        "default/igw": projections.service(
            noisy({**lb_service("igw", selector=A, ips=["192.0.2.1"]), "spec": {"selector": A}})
        )
    }
    gw = noisy(
        gateway(
            "edge", hosts=[["a.ex.com", "ns/b.ex.com"], ["*"]], selector=A, annotations={HOSTNAME: "c.ex.com"}
        )
    )
    vs = noisy(virtualservice("shop", gateways=["edge"], hosts=["a.ex.com"], export_to="*"))
    slim_gw, slim_vs = istio.slim_gateway(gw), istio.slim_virtualservice(vs)
    full_gw = gateway_endpoints(gw, services, {})
    assert (
        len(full_gw.endpoints) == 3
        and gateway_endpoints(slim_gw, services, {}).endpoints == full_gw.endpoints
    )
    full = virtualservice_endpoints(vs, {"default/edge": gw}, services, {})
    slim = virtualservice_endpoints(slim_vs, {"default/edge": slim_gw}, services, {})
    assert full.endpoints and slim.endpoints == full.endpoints
    for obj in (slim_gw, slim_vs):
        assert "status" not in obj and "managedFields" not in obj["metadata"] and "http" not in obj["spec"]
        assert projections.LAST_APPLIED not in obj["metadata"]["annotations"]
    assert slim_gw["spec"]["servers"] == [{"hosts": ["a.ex.com", "ns/b.ex.com"]}, {"hosts": ["*"]}]
    assert slim_vs["spec"] == {"hosts": ["a.ex.com"], "gateways": ["edge"], "exportTo": ["*"]}


def test_a_kinds_own_objects_another_chosen_kind_reads_are_not_evicted() -> None:
    kinds = chosen(
        [SOURCES[n] for n in ("service", "ingress", "crd", "istio-gateway", "istio-virtualservice")]
    )
    evictable = {k.name: k.evictable for k in kinds}
    # Services and Ingresses give Istio Gateways their targets; the VirtualServices read the Gateways.
    assert evictable == {
        "service": False,
        "ingress": False,
        "crd": True,
        "istio-gateway": False,
        "istio-virtualservice": True,
    }
    alone = chosen([SOURCES["service"], SOURCES["istio-gateway"]])
    assert [k.evictable for k in alone] == [False, True]
    assert chosen([SOURCES["service"]])[0] is SOURCES["service"]


def test_a_gateway_translated_again_does_not_read_the_services_cache_again() -> None:
    reads: list[int] = []
    services = {"ns/igw": lb_service("igw", "ns", selector=A, ips=["192.0.2.7"])}

    def cache() -> dict[str, Any]:
        reads.append(1)
        return services

    feeds = GatewayFeeds(cache)
    feeds.register("ns/gw", gateway("gw", "ns", selector=A))
    feeds.register("ns/gw", gateway("gw", "ns", selector=A, annotations={HOSTNAME: "x.ex.com"}))
    feeds.register("ns/other", gateway("other", "ns", selector=A))
    assert len(reads) == 1 and set(feeds.select(A)) == {"ns/igw"}
    feeds.register("ns/gw", gateway("gw", "ns", selector=B))  # a new label: read once
    assert len(reads) == 2
