"""shardsync.kube.slim_json: objects decoded to the fields a projection reads project exactly as whole ones
do, on generated Pods and Services of any shape (odd types and nulls included), in list pages and watch events
alike; what the decoder cannot fit is decoded whole; an informer on the embedded API server uses it."""

from __future__ import annotations

from typing import Any

import anyio
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardsync.kube import slim_json
from shardsync.kube.client import Kube, load_api_client
from shardsync.kube.informer import Informer
from shardsync.kube.objects import get, get_str_map, object_key
from shardsync.local.apiserver import ApiServer
from shardsync.sources import projections
from shardsync.sources.annotations import hostnames_of
from shardsync.sources.options import SourceOptions
from shardsync.sources.pod import PodOptions, pod_names
from shardsync.sources.service import PODS
from tests.waits import eventually

DECODER = slim_json.decoder_for(projections.pod)

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=6))
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
strings = st.sampled_from(["web-0", "default", "node-1", "Running", "10.0.0.1", "True", "False", "Ready"])
value = st.one_of(strings, json_value)  # mostly what an API server sends, sometimes anything
labels = st.one_of(st.dictionaries(st.sampled_from(["app", "tier", "x"]), strings, max_size=3), json_value)
annotation_maps = st.one_of(
    st.dictionaries(
        st.sampled_from(
            [
                "external-dns.alpha.kubernetes.io/target",
                "external-dns.alpha.kubernetes.io/hostname",
                "kubectl.kubernetes.io/last-applied-configuration",
                "prometheus.io/scrape",
            ]
        ),
        strings,
        max_size=4,
    ),
    json_value,
)


def some_of(*, extra: bool = True, **fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Objects with any subset of `fields`, plus keys no projection reads (`extra`: one the API does not
    define either; ObjectMeta has none such)."""
    unread = {"managedFields": json_value, **({"extra": json_value} if extra else {})}
    return st.fixed_dictionaries({}, optional={**fields, **unread})


conditions = st.lists(
    st.one_of(
        some_of(type=st.one_of(st.sampled_from(["Ready", "Initialized"]), value), status=value),
        json_leaf,
    ),
    max_size=4,
)
pods = st.one_of(
    some_of(
        metadata=st.one_of(
            some_of(
                name=value,
                namespace=value,
                resourceVersion=value,
                labels=labels,
                annotations=annotation_maps,
                deletionTimestamp=value,
                uid=value,
                creationTimestamp=value,
            ),
            json_value,
        ),
        spec=st.one_of(
            some_of(hostname=value, nodeName=value, hostNetwork=value, containers=json_value), json_value
        ),
        status=st.one_of(
            some_of(
                phase=value,
                hostIP=value,
                podIP=value,
                conditions=st.one_of(conditions, json_value),
                podIPs=json_value,
            ),
            json_value,
        ),
    ),
    json_value,
)


def outcome(read: Any, obj: Any) -> tuple[str, Any]:
    """What `read(obj)` returns, or the type of what it raises: an odd object must fail alike both ways."""
    try:
        return "value", read(obj)
    except Exception as exc:
        return "raised", type(exc)


def pod_reads(item: Any) -> list[tuple[str, Any]]:
    """What an informer of Pods reads of a listed object: its key, what admission reads, the slim copy."""
    return [
        outcome(object_key, item),
        outcome(lambda o: get_str_map(o, "metadata", "labels"), item),
        outcome(projections.pod, item),
    ]


def pod_source_reads(item: Any) -> list[tuple[str, Any]]:
    """What an informer of Pods for the pod kind reads: its key, the names that place it, the slim copy."""
    names = pod_names(PodOptions(pod_source_domain="pods.ex.com", ignore_non_host_network_pods=True))
    return [
        outcome(object_key, item),
        outcome(lambda o: names(o, SourceOptions()), item),
        outcome(projections.pod_source, item),
    ]


def service_reads(item: Any) -> list[tuple[str, Any]]:
    """What an informer of Services reads of a listed object: its key, the names that place it, the copy."""
    return [
        outcome(object_key, item),
        outcome(lambda o: hostnames_of(get(o, "metadata", "annotations"), internal=True), item),
        outcome(projections.service, item),
    ]


services = st.one_of(
    some_of(
        apiVersion=value,
        kind=value,
        metadata=st.one_of(
            some_of(
                extra=False,
                **{
                    name: value
                    for name in ("name", "namespace", "resourceVersion", "uid", "creationTimestamp")
                },
                labels=labels,
                annotations=annotation_maps,
                ownerReferences=json_value,
                finalizers=json_value,
            ),
            st.one_of(json_leaf, st.lists(json_value, max_size=2)),  # an object has only ObjectMeta's keys
        ),
        spec=st.one_of(
            some_of(
                type=st.one_of(st.sampled_from(["LoadBalancer", "NodePort", "ClusterIP"]), value),
                clusterIP=value,
                clusterIPs=json_value,
                externalIPs=json_value,
                selector=labels,
                ports=json_value,
                sessionAffinity=value,
            ),
            json_value,
        ),
        status=st.one_of(some_of(loadBalancer=json_value, conditions=json_value), json_value),
    ),
    json_value,
)
CASES = {
    "pods": (projections.pod, pods, pod_reads),
    "pods for the pod kind": (projections.pod_source, pods, pod_source_reads),
    "services": (projections.service, services, service_reads),
}


def decoder(kind: str) -> slim_json.SlimDecoder:
    found = slim_json.decoder_for(CASES[kind][0])
    assert found is not None
    return found


@pytest.mark.parametrize("kind", CASES)
@settings(max_examples=300, deadline=None)
@given(data=st.data(), meta=st.fixed_dictionaries({}, optional={"resourceVersion": value, "continue": value}))
def test_a_page_decoded_slim_reads_as_the_whole_page(
    kind: str, data: st.DataObject, meta: dict[str, Any]
) -> None:
    _, objects, reads = CASES[kind]
    items = data.draw(st.lists(objects, max_size=4))
    body = orjson.dumps({"kind": "List", "apiVersion": "v1", "metadata": meta, "items": items})
    whole, slim = orjson.loads(body), decoder(kind).page(body)
    assert slim.get("metadata") == whole["metadata"]
    assert [reads(i) for i in slim["items"]] == [reads(i) for i in whole["items"]]


@pytest.mark.parametrize("kind", CASES)
@settings(max_examples=200, deadline=None)
@given(data=st.data(), etype=st.sampled_from(["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]))
def test_an_event_decoded_slim_reads_as_the_whole_event(kind: str, data: st.DataObject, etype: str) -> None:
    _, objects, reads = CASES[kind]
    line = orjson.dumps({"type": etype, "object": data.draw(objects)}).decode()  # a watch stream's lines: str
    whole, slim = orjson.loads(line), decoder(kind).event(line)
    assert slim["type"] == etype
    assert reads(slim["object"]) == reads(whole["object"])


def test_what_the_fields_do_not_fit_is_decoded_whole() -> None:
    assert DECODER is not None
    error = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired", "metadata": {}}}
    assert DECODER.event(orjson.dumps(error)) == error  # a Status is no Pod: its code and reason stay
    for odd in ({"object": {"metadata": {}, "x": 1}}, {"type": "ADDED", "x": 1}):  # no type, no object
        assert DECODER.event(orjson.dumps(odd)) == odd  # whole: the informer's error path sees it as sent
    odd_page = {"metadata": {}, "items": [{"metadata": ["not", "an", "object"], "spec": {"containers": []}}]}
    assert DECODER.page(orjson.dumps(odd_page)) == odd_page  # decoded whole, containers and all
    assert DECODER.page(b'{"metadata": {"resourceVersion": "3"}}') == {"metadata": {"resourceVersion": "3"}}
    with pytest.raises(orjson.JSONDecodeError):  # not JSON at all: the error a whole decode raises
        DECODER.page(b'{"items": [')


def test_only_a_registered_projection_has_a_decoder() -> None:
    assert DECODER is not None and slim_json.decoder_for(projections.service) is not None
    assert slim_json.decoder_for(projections.node) is None  # kept whole until it says what it reads
    assert slim_json.decoder_for(None) is None


def big_pod(name: str, phase: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {"app": "web"},
            "annotations": {"external-dns.alpha.kubernetes.io/target": "t.example", "other": "x" * 500},
        },
        "spec": {"nodeName": "n1", "hostname": name, "containers": [{"name": "c", "image": "i" * 300}]},
        "status": {"phase": phase, "hostIP": "10.0.0.1", "conditions": [{"type": "Ready", "status": "True"}]},
    }


@pytest.mark.anyio
async def test_an_informer_of_pods_keeps_what_projecting_the_whole_pod_keeps(
    apiserver: ApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the official client and the embedded API server: a list page and a watch event are decoded
    slim (counted), and the cache holds what projecting the whole object as the server returns it gives."""
    assert DECODER is not None
    kube = Kube(load_api_client(str(apiserver.kubeconfig)))
    used: list[str] = []
    page, event = DECODER.page, DECODER.event

    def counted_page(data: bytes) -> Any:
        used.append("page")
        return page(data)

    def counted_event(line: str) -> Any:
        used.append("event")
        return event(line)

    monkeypatch.setattr(DECODER, "page", counted_page)
    monkeypatch.setattr(DECODER, "event", counted_event)
    await kube.create(PODS, big_pod("web-0", "Pending"), namespace="default")
    informer = Informer(kube, PODS, namespace="default", project=projections.pod, packed=True)
    async with anyio.create_task_group() as tg:
        tg.start_soon(informer.run)
        with anyio.fail_after(5):
            await informer.synced.wait()
        listed = await kube.get(PODS, "web-0", namespace="default")
        assert listed is not None and informer.cache["default/web-0"] == projections.pod(listed)
        await kube.patch(
            PODS, "web-0", {"status": {"phase": "Running"}}, namespace="default", subresource="status"
        )
        await eventually(lambda: informer.cache["default/web-0"]["status"]["phase"] == "Running")
        watched = await kube.get(PODS, "web-0", namespace="default")
        assert watched is not None and informer.cache["default/web-0"] == projections.pod(watched)
        tg.cancel_scope.cancel()
    assert "page" in used and "event" in used
