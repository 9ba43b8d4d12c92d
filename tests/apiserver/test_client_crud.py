"""CRUD semantics through the unchanged official kubernetes client: resourceVersion, create rules,
conflicts, /status, patches, deletes with preconditions and finalizers, and Status errors."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from shardsync.local.apiserver import ApiServer
from tests.kubeclient import as_dict, meta, name_of, present, raw_body, version_of


def lease(name: str, holder: str = "a", labels: dict[str, str] | None = None) -> client.V1Lease:
    return client.V1Lease(
        metadata=client.V1ObjectMeta(name=name, labels=labels),
        spec=client.V1LeaseSpec(holder_identity=holder, lease_duration_seconds=15),
    )


def status_of(exc: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(present(exc.body))
    return body


@pytest.fixture
def leases(apiserver: ApiServer) -> client.CoordinationV1Api:
    return client.CoordinationV1Api(apiserver.api_client())


@pytest.fixture
def core(apiserver: ApiServer) -> client.CoreV1Api:
    return client.CoreV1Api(apiserver.api_client())


def ports(svc: client.V1Service) -> list[client.V1ServicePort]:
    return present(present(svc.spec).ports)


def lb_ingress(svc: client.V1Service) -> list[client.V1LoadBalancerIngress]:
    return present(present(present(svc.status).load_balancer).ingress)


def test_one_global_resource_version_and_noop_updates(
    leases: client.CoordinationV1Api, core: client.CoreV1Api
) -> None:
    a = leases.create_namespaced_lease("default", lease("a"))
    cm = core.create_namespaced_config_map(
        "default", raw_body(client.V1ConfigMap, {"metadata": {"name": "c"}, "data": {"k": "v"}})
    )
    assert int(version_of(cm)) == int(version_of(a)) + 1
    listed = leases.list_namespaced_lease("default")
    assert version_of(listed) == version_of(cm)
    same = leases.replace_namespaced_lease("a", "default", a)
    assert version_of(same) == version_of(a)
    assert version_of(core.list_namespace()) == version_of(cm)


def test_create_fills_metadata_and_refuses_duplicates_and_nameless(core: client.CoreV1Api) -> None:
    made = core.create_namespaced_config_map(
        "default", raw_body(client.V1ConfigMap, {"metadata": {"generateName": "gen-"}})
    )
    assert name_of(made).startswith("gen-") and len(name_of(made)) == 9
    assert meta(made).uid and meta(made).creation_timestamp and meta(made).resource_version
    with pytest.raises(ApiException) as dup:
        core.create_namespaced_config_map(
            "default", raw_body(client.V1ConfigMap, {"metadata": {"name": name_of(made)}})
        )
    assert dup.value.status == 409
    assert status_of(dup.value)["reason"] == "AlreadyExists"
    with pytest.raises(ApiException) as nameless:
        core.create_namespaced_config_map("default", raw_body(client.V1ConfigMap, {"metadata": {}}))
    body = status_of(nameless.value)
    assert (nameless.value.status, body["reason"], body["code"]) == (422, "Invalid", 422)
    assert body["kind"] == "Status" and body["status"] == "Failure"
    assert "name or generateName is required" in body["message"]


def test_replace_with_stale_resource_version_conflicts(leases: client.CoordinationV1Api) -> None:
    first = leases.create_namespaced_lease("default", lease("l"))
    fresh = leases.read_namespaced_lease("l", "default")
    present(fresh.spec).holder_identity = "b"
    leases.replace_namespaced_lease("l", "default", fresh)
    present(first.spec).holder_identity = "c"
    with pytest.raises(ApiException) as exc:
        leases.replace_namespaced_lease("l", "default", first)
    body = status_of(exc.value)
    assert (exc.value.status, body["reason"]) == (409, "Conflict")
    assert "the object has been modified" in body["message"]
    assert present(leases.read_namespaced_lease("l", "default").spec).holder_identity == "b"


def test_not_found_is_a_status(leases: client.CoordinationV1Api) -> None:
    with pytest.raises(ApiException) as exc:
        leases.read_namespaced_lease("missing", "default")
    body = status_of(exc.value)
    assert (exc.value.status, body["reason"], body["details"]["name"]) == (404, "NotFound", "missing")
    assert body["message"] == 'leases.coordination.k8s.io "missing" not found'


def test_status_subresource_changes_only_status(core: client.CoreV1Api) -> None:
    svc = core.create_namespaced_service(
        "default",
        client.V1Service(
            metadata=client.V1ObjectMeta(name="web"),
            spec=client.V1ServiceSpec(type="LoadBalancer", ports=[client.V1ServicePort(port=80)]),
        ),
    )
    assert present(svc.spec).cluster_ip and ports(svc)[0].node_port and ports(svc)[0].target_port == 80
    svc.status = client.V1ServiceStatus(
        load_balancer=client.V1LoadBalancerStatus(ingress=[client.V1LoadBalancerIngress(ip="192.0.2.1")])
    )
    ports(svc)[0].port = 81
    updated = core.replace_namespaced_service_status("web", "default", svc)
    assert lb_ingress(updated)[0].ip == "192.0.2.1"
    assert ports(updated)[0].port == 80
    updated.status = client.V1ServiceStatus(load_balancer=client.V1LoadBalancerStatus(ingress=[]))
    meta(updated).labels = {"x": "y"}
    main = core.replace_namespaced_service("web", "default", updated)
    assert lb_ingress(main)[0].ip == "192.0.2.1" and meta(main).labels == {"x": "y"}
    patched = core.patch_namespaced_service_status(
        "web", "default", {"status": {"loadBalancer": {"ingress": [{"hostname": "lb.example"}]}}}
    )
    assert lb_ingress(patched)[0].hostname == "lb.example"


def test_patch_kinds_and_resource_version_precondition(leases: client.CoordinationV1Api) -> None:
    made = leases.create_namespaced_lease("default", lease("p"))
    strategic = leases.patch_namespaced_lease("p", "default", {"metadata": {"annotations": {"a": "1"}}})
    assert meta(strategic).annotations == {"a": "1"}
    json_patched = leases.patch_namespaced_lease(
        "p", "default", [{"op": "replace", "path": "/spec/holderIdentity", "value": "z"}]
    )
    assert present(json_patched.spec).holder_identity == "z"
    merged = leases.patch_namespaced_lease(
        "p",
        "default",
        {"metadata": {"annotations": {"a": None}}},
        _content_type="application/merge-patch+json",
    )
    assert not meta(merged).annotations
    with pytest.raises(ApiException) as stale:
        leases.patch_namespaced_lease(
            "p",
            "default",
            {"metadata": {"resourceVersion": version_of(made), "labels": {"x": "y"}}},
        )
    assert stale.value.status == 409
    current = version_of(merged)
    ok = leases.patch_namespaced_lease(
        "p", "default", {"metadata": {"resourceVersion": current, "labels": {"x": "y"}}}
    )
    assert meta(ok).labels == {"x": "y"}
    with pytest.raises(ApiException) as failed_test:
        leases.patch_namespaced_lease(
            "p", "default", [{"op": "test", "path": "/spec/holderIdentity", "value": "q"}]
        )
    assert failed_test.value.status == 422
    with pytest.raises(ApiException) as missing:
        leases.patch_namespaced_lease("nope", "default", {"metadata": {"labels": {"a": "b"}}})
    assert missing.value.status == 404


def test_unsupported_patch_and_body_media_types_get_415(leases: client.CoordinationV1Api) -> None:
    leases.create_namespaced_lease("default", lease("m"))
    with pytest.raises(ApiException) as apply:
        leases.patch_namespaced_lease(
            "m",
            "default",
            {"metadata": {"labels": {"a": "b"}}},
            _content_type="application/apply-patch+yaml",
            field_manager="t",
        )
    assert apply.value.status == 415 and status_of(apply.value)["reason"] == "UnsupportedMediaType"


def test_delete_with_preconditions_and_finalizers(core: client.CoreV1Api) -> None:
    cm = core.create_namespaced_config_map(
        "default", raw_body(client.V1ConfigMap, {"metadata": {"name": "d", "finalizers": ["example.com/x"]}})
    )
    with pytest.raises(ApiException) as wrong_uid:
        core.delete_namespaced_config_map(
            "d",
            "default",
            body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="not-the-uid")),
        )
    assert wrong_uid.value.status == 409
    with pytest.raises(ApiException) as wrong_rv:
        core.delete_namespaced_config_map(
            "d",
            "default",
            body=client.V1DeleteOptions(preconditions=client.V1Preconditions(resource_version="1")),
        )
    assert wrong_rv.value.status == 409
    kept = as_dict(
        core.delete_namespaced_config_map(
            "d",
            "default",
            body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=meta(cm).uid)),
        )
    )
    assert kept["metadata"]["deletionTimestamp"]
    held = core.read_namespaced_config_map("d", "default")
    assert meta(held).deletion_timestamp is not None
    core.patch_namespaced_config_map(
        "d", "default", {"metadata": {"finalizers": None}}, _content_type="application/merge-patch+json"
    )
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_config_map("d", "default")
    assert gone.value.status == 404


def test_delete_returns_status_or_object_like_the_real_server(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", raw_body(client.V1ConfigMap, {"metadata": {"name": "s"}}))
    status = as_dict(core.delete_namespaced_config_map("s", "default"))
    assert status["kind"] == "Status" and status["status"] == "Success"
    core.create_namespaced_pod(
        "default",
        raw_body(client.V1Pod, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}),
    )
    pod = core.delete_namespaced_pod("p", "default")
    assert isinstance(pod, client.V1Pod) and name_of(pod) == "p"
    core.create_namespaced_config_map(
        "default", raw_body(client.V1ConfigMap, {"metadata": {"name": "c1", "labels": {"g": "1"}}})
    )
    core.create_namespaced_config_map(
        "default", raw_body(client.V1ConfigMap, {"metadata": {"name": "c2", "labels": {"g": "2"}}})
    )
    core.delete_collection_namespaced_config_map("default", label_selector="g=1")
    assert [name_of(c) for c in core.list_namespaced_config_map("default").items] == ["c2"]


def test_list_label_selectors_all_operators(leases: client.CoordinationV1Api) -> None:
    for name, labels in {
        "a": {"env": "prod", "tier": "web"},
        "b": {"env": "dev"},
        "c": {"tier": "db"},
    }.items():
        leases.create_namespaced_lease("default", lease(name, labels=labels))

    def names(selector: str) -> list[str]:
        return [name_of(x) for x in leases.list_namespaced_lease("default", label_selector=selector).items]

    assert names("env=prod") == ["a"]
    assert names("env!=prod") == ["b", "c"]
    assert names("env in (prod,dev)") == ["a", "b"]
    assert names("env notin (prod)") == ["b", "c"]
    assert names("tier") == ["a", "c"]
    assert names("!tier") == ["b"]
    assert names("env=prod,tier=web") == ["a"]
    with pytest.raises(ApiException) as bad:
        names("env in prod")
    assert bad.value.status == 400


def test_list_field_selectors_and_all_namespaces(
    apiserver: ApiServer, leases: client.CoordinationV1Api, core: client.CoreV1Api
) -> None:
    core.create_namespace(raw_body(client.V1Namespace, {"metadata": {"name": "other"}}))
    leases.create_namespaced_lease("default", lease("x"))
    leases.create_namespaced_lease("other", lease("x"))
    leases.create_namespaced_lease("other", lease("y"))
    everywhere = leases.list_lease_for_all_namespaces(field_selector="metadata.name=x")
    assert sorted(present(meta(i).namespace) for i in everywhere.items) == ["default", "other"]
    only_other = leases.list_lease_for_all_namespaces(
        field_selector="metadata.namespace=other,metadata.name!=x"
    )
    assert [name_of(i) for i in only_other.items] == ["y"]
    with pytest.raises(ApiException) as bad:
        leases.list_namespaced_lease("default", field_selector="spec.holderIdentity=a")
    assert bad.value.status == 400 and "field label not supported" in status_of(bad.value)["message"]


def test_list_pagination(core: client.CoreV1Api) -> None:
    for i in range(5):
        core.create_namespaced_config_map(
            "default", raw_body(client.V1ConfigMap, {"metadata": {"name": f"cm{i}"}})
        )
    page = core.list_namespaced_config_map("default", limit=2)
    seen = [name_of(c) for c in page.items]
    assert present(page.metadata).remaining_item_count == 3
    while present(page.metadata)._continue:
        page = core.list_namespaced_config_map("default", limit=2, _continue=present(page.metadata)._continue)
        seen += [name_of(c) for c in page.items]
    assert seen == [f"cm{i}" for i in range(5)]


def test_namespace_must_exist(leases: client.CoordinationV1Api) -> None:
    with pytest.raises(ApiException) as exc:
        leases.create_namespaced_lease("nowhere", lease("a"))
    assert exc.value.status == 404 and status_of(exc.value)["details"]["kind"] == "namespaces"


def test_secret_string_data_and_statefulset_scale(apiserver: ApiServer, core: client.CoreV1Api) -> None:
    secret = core.create_namespaced_secret(
        "default", raw_body(client.V1Secret, {"metadata": {"name": "s"}, "stringData": {"k": "v"}})
    )
    assert secret.data == {"k": "dg=="} and secret.type == "Opaque"
    apps = client.AppsV1Api(apiserver.api_client())
    apps.create_namespaced_stateful_set(
        "default",
        raw_body(
            client.V1StatefulSet,
            {
                "metadata": {"name": "web"},
                "spec": {
                    "replicas": 2,
                    "selector": {"matchLabels": {"app": "web"}},
                    "serviceName": "web",
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {"containers": [{"name": "c"}]},
                    },
                },
            },
        ),
    )
    scale = apps.read_namespaced_stateful_set_scale("web", "default")
    assert (present(scale.spec).replicas, present(scale.status).selector) == (2, "app=web")
    patched = apps.patch_namespaced_stateful_set_scale("web", "default", {"spec": {"replicas": 4}})
    assert present(patched.spec).replicas == 4
    sts = apps.read_namespaced_stateful_set("web", "default")
    assert present(sts.spec).replicas == 4 and meta(sts).generation == 2
    scale = apps.read_namespaced_stateful_set_scale("web", "default")
    present(scale.spec).replicas = 1
    apps.replace_namespaced_stateful_set_scale("web", "default", scale)
    present(scale.spec).replicas = 3
    with pytest.raises(ApiException) as stale:
        apps.replace_namespaced_stateful_set_scale("web", "default", scale)
    assert stale.value.status == 409
    assert present(apps.read_namespaced_stateful_set("web", "default").spec).replicas == 1


def test_every_builtin_resource_round_trips_through_its_typed_api(apiserver: ApiServer) -> None:
    api = apiserver.api_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    net, disc = client.NetworkingV1Api(api), client.DiscoveryV1Api(api)
    coord = client.CoordinationV1Api(api)
    meta = {"metadata": {"name": "r1", "labels": {"kind": "test"}}}
    cases: list[tuple[Any, Any, Any, Any, dict[str, Any]]] = [
        (core.create_namespace, core.read_namespace, core.list_namespace, core.delete_namespace, {}),
        (core.create_node, core.read_node, core.list_node, core.delete_node, {}),
        (
            core.create_namespaced_config_map,
            core.read_namespaced_config_map,
            core.list_namespaced_config_map,
            core.delete_namespaced_config_map,
            {"data": {"a": "b"}},
        ),
        (
            core.create_namespaced_secret,
            core.read_namespaced_secret,
            core.list_namespaced_secret,
            core.delete_namespaced_secret,
            {"data": {"a": "Yg=="}},
        ),
        (
            core.create_namespaced_service,
            core.read_namespaced_service,
            core.list_namespaced_service,
            core.delete_namespaced_service,
            {"spec": {"clusterIP": "None", "ports": [{"port": 53}]}},
        ),
        (
            core.create_namespaced_pod,
            core.read_namespaced_pod,
            core.list_namespaced_pod,
            core.delete_namespaced_pod,
            {"spec": {"containers": [{"name": "c", "image": "i"}]}},
        ),
        (
            core.create_namespaced_event,
            core.read_namespaced_event,
            core.list_namespaced_event,
            core.delete_namespaced_event,
            {"involvedObject": {"kind": "Pod", "name": "p"}, "reason": "Test"},
        ),
        (
            disc.create_namespaced_endpoint_slice,
            disc.read_namespaced_endpoint_slice,
            disc.list_namespaced_endpoint_slice,
            disc.delete_namespaced_endpoint_slice,
            {"addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"]}]},
        ),
        (
            coord.create_namespaced_lease,
            coord.read_namespaced_lease,
            coord.list_namespaced_lease,
            coord.delete_namespaced_lease,
            {"spec": {"holderIdentity": "h"}},
        ),
        (
            net.create_namespaced_ingress,
            net.read_namespaced_ingress,
            net.list_namespaced_ingress,
            net.delete_namespaced_ingress,
            {"spec": {"rules": [{"host": "a.example.org"}]}},
        ),
        (
            apps.create_namespaced_stateful_set,
            apps.read_namespaced_stateful_set,
            apps.list_namespaced_stateful_set,
            apps.delete_namespaced_stateful_set,
            {
                "spec": {
                    "selector": {"matchLabels": {"a": "b"}},
                    "serviceName": "s",
                    "template": {"metadata": {"labels": {"a": "b"}}},
                }
            },
        ),
    ]
    for create, read, list_, delete, body in cases:
        ns_args: tuple[str, ...] = ("default",) if "namespaced" in create.__name__ else ()
        made = create(*ns_args, {**meta, **body})
        assert made.metadata.name == "r1", create.__name__
        assert read("r1", *ns_args).metadata.uid == made.metadata.uid
        assert [i.metadata.name for i in list_(*ns_args, label_selector="kind=test").items] == ["r1"]
        delete("r1", *ns_args)
        with pytest.raises(ApiException) as gone:
            read("r1", *ns_args)
        assert gone.value.status == 404, create.__name__
