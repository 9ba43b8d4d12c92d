"""CustomResourceDefinitions through the official client: registration, custom objects with /status and
generation, cluster scope, and discovery (including what the real server refuses or does not serve)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from shardsync.local.apiserver import ApiServer
from tests.kubeclient import Watch, as_dict, present, raw_body, version_of

GROUP, VERSION, PLURAL = "externaldns.k8s.io", "v1alpha1", "dnsendpoints"


def dnsendpoint_crd() -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "plural": PLURAL,
                "singular": "dnsendpoint",
                "kind": "DNSEndpoint",
                "listKind": "DNSEndpointList",
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }


def endpoint(name: str, target: str = "192.0.2.1") -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "DNSEndpoint",
        "metadata": {"name": name},
        "spec": {"endpoints": [{"dnsName": f"{name}.example.org", "recordType": "A", "targets": [target]}]},
    }


@pytest.fixture
def custom(apiserver: ApiServer) -> client.CustomObjectsApi:
    ext = client.ApiextensionsV1Api(apiserver.api_client())
    crd = ext.create_custom_resource_definition(
        raw_body(client.V1CustomResourceDefinition, dnsendpoint_crd())
    )
    assert any(
        c.type == "Established" and c.status == "True" for c in present(present(crd.status).conditions)
    )
    return client.CustomObjectsApi(apiserver.api_client())


def test_dnsendpoints_crud_status_and_generation(custom: client.CustomObjectsApi) -> None:
    made = as_dict(custom.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, endpoint("a")))
    assert made["metadata"]["generation"] == 1 and made["metadata"]["uid"]
    made["status"] = {"observedGeneration": 1}
    with_status = as_dict(
        custom.replace_namespaced_custom_object_status(GROUP, VERSION, "default", PLURAL, "a", made)
    )
    assert with_status["status"] == {"observedGeneration": 1} and with_status["metadata"]["generation"] == 1
    labelled = as_dict(
        custom.patch_namespaced_custom_object(
            GROUP, VERSION, "default", PLURAL, "a", {"metadata": {"labels": {"x": "y"}}, "status": {"no": 1}}
        )
    )
    assert labelled["metadata"]["generation"] == 1 and labelled["status"] == {"observedGeneration": 1}
    spec = as_dict(
        custom.patch_namespaced_custom_object(
            GROUP, VERSION, "default", PLURAL, "a", {"spec": {"endpoints": []}}
        )
    )
    assert spec["metadata"]["generation"] == 2
    status = as_dict(
        custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, "default", PLURAL, "a", {"status": {"observedGeneration": 2}}
        )
    )
    assert status["status"] == {"observedGeneration": 2} and status["metadata"]["generation"] == 2
    listed = as_dict(custom.list_cluster_custom_object(GROUP, VERSION, PLURAL, label_selector="x=y"))
    assert [i["metadata"]["name"] for i in listed["items"]] == ["a"] and listed["kind"] == "DNSEndpointList"
    stale = dict(made)
    with pytest.raises(ApiException) as conflict:
        custom.replace_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "a", stale)
    assert conflict.value.status == 409
    deleted = as_dict(custom.delete_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "a"))
    assert deleted["metadata"]["name"] == "a"


def test_strategic_merge_is_refused_for_custom_resources(
    apiserver: ApiServer, custom: client.CustomObjectsApi
) -> None:
    custom.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, endpoint("s"))
    with pytest.raises(ApiException) as exc:
        custom.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            "default",
            PLURAL,
            "s",
            {"spec": {}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert exc.value.status == 415


def test_cluster_scoped_crd_and_deletion_unregisters(apiserver: ApiServer) -> None:
    ext = client.ApiextensionsV1Api(apiserver.api_client())
    crd = dnsendpoint_crd()
    crd["metadata"]["name"] = "zones.example.com"
    crd["spec"].update(group="example.com", scope="Cluster", names={"plural": "zones", "kind": "Zone"})
    crd["spec"]["versions"][0]["name"] = "v1"
    ext.create_custom_resource_definition(raw_body(client.V1CustomResourceDefinition, crd))
    custom = client.CustomObjectsApi(apiserver.api_client())
    custom.create_cluster_custom_object(
        "example.com", "v1", "zones", {"metadata": {"name": "z1"}, "spec": {}}
    )
    assert as_dict(custom.get_cluster_custom_object("example.com", "v1", "zones", "z1"))["kind"] == "Zone"
    ext.delete_custom_resource_definition("zones.example.com")
    with pytest.raises(ApiException) as gone:
        custom.list_cluster_custom_object("example.com", "v1", "zones")
    assert gone.value.status == 404


def test_invalid_crd_is_refused(apiserver: ApiServer) -> None:
    ext = client.ApiextensionsV1Api(apiserver.api_client())
    bad = dnsendpoint_crd()
    bad["metadata"]["name"] = "wrong.name.io"
    with pytest.raises(ApiException) as exc:
        ext.create_custom_resource_definition(raw_body(client.V1CustomResourceDefinition, bad))
    assert exc.value.status == 422 and json.loads(present(exc.value.body))["reason"] == "Invalid"


def test_discovery_documents(apiserver: ApiServer, custom: client.CustomObjectsApi) -> None:
    api = apiserver.api_client()
    assert client.VersionApi(api).get_code().git_version.startswith("v1.32")
    assert client.CoreApi(api).get_api_versions().versions == ["v1"]
    groups = {g.name: g for g in client.ApisApi(api).get_api_versions().groups}
    assert {
        "apps",
        "coordination.k8s.io",
        "discovery.k8s.io",
        "networking.k8s.io",
        "apiextensions.k8s.io",
        GROUP,
    } <= set(groups)
    assert present(groups[GROUP].preferred_version).group_version == f"{GROUP}/{VERSION}"
    core = {r.name: r for r in client.CoreV1Api(api).get_api_resources().resources}
    assert core["configmaps"].namespaced and not core["nodes"].namespaced and "services/status" in core
    apps = {r.name: r for r in client.AppsV1Api(api).get_api_resources().resources}
    assert apps["statefulsets/scale"].kind == "Scale"
    ext = {r.name: r for r in client.CustomObjectsApi(api).get_api_resources(GROUP, VERSION).resources}
    assert ext[PLURAL].kind == "DNSEndpoint" and "dnsendpoints/status" in ext
    leases = client.CoordinationApi(api).get_api_group()
    assert present(leases.preferred_version).version == "v1"


def _raw(
    url: str, method: str = "GET", data: bytes | None = None, headers: dict[str, str] | None = None
) -> int:
    req = urllib.request.Request(url, method=method, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_unsupported_parts_answer_like_the_real_server(apiserver: ApiServer) -> None:
    assert _raw(f"{apiserver.url}/openapi/v2") == 404
    assert _raw(f"{apiserver.url}/openapi/v3") == 404
    protobuf = {"Content-Type": "application/vnd.kubernetes.protobuf"}
    assert _raw(f"{apiserver.url}/api/v1/namespaces/default/configmaps", "POST", b"k8s\x00", protobuf) == 415
    assert (
        _raw(
            f"{apiserver.url}/api/v1/namespaces/default/configmaps",
            headers={"Accept": "application/vnd.kubernetes.protobuf"},
        )
        == 406
    )
    assert (
        _raw(
            f"{apiserver.url}/api/v1/namespaces/default/configmaps",
            headers={"Accept": "application/vnd.kubernetes.protobuf, application/json"},
        )
        == 200
    )
    assert _raw(f"{apiserver.url}/api/v1/nope") == 404
    assert _raw(f"{apiserver.url}/healthz") == 200


def test_one_crd_is_listed_and_watched_by_name(apiserver: ApiServer) -> None:
    """What a kind waiting for its CRD does (sources.served): list and watch customresourcedefinitions with
    fieldSelector metadata.name=<crd>, which RBAC authorizes by resourceNames; the watch sees that CRD's
    creation, Established, and no other CRD."""
    ext = client.ApiextensionsV1Api(apiserver.api_client())
    name = f"{PLURAL}.{GROUP}"
    listed = ext.list_custom_resource_definition(field_selector=f"metadata.name={name}")
    assert listed.items == []
    other = dnsendpoint_crd()
    other["metadata"]["name"] = "zones.example.com"
    other["spec"].update(group="example.com", names={"plural": "zones", "kind": "Zone"})
    watch = Watch()
    events = watch.stream(
        ext.list_custom_resource_definition,
        field_selector=f"metadata.name={name}",
        resource_version=version_of(listed),
        timeout_seconds=5,
    )
    ext.create_custom_resource_definition(raw_body(client.V1CustomResourceDefinition, other))
    ext.create_custom_resource_definition(raw_body(client.V1CustomResourceDefinition, dnsendpoint_crd()))
    event = next(events)
    watch.stop()
    crd = event["raw_object"]
    assert event["type"] == "ADDED" and crd["metadata"]["name"] == name
    assert any(c["type"] == "Established" and c["status"] == "True" for c in crd["status"]["conditions"])
