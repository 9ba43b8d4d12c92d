"""PATCH semantics: RFC 7386 merge patch, RFC 6902 JSON patch, and the strategic-merge approximation."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shardsync.local.apiserver.patch import PatchError, apply_patch, merge_patch, strategic_merge_patch


@pytest.mark.parametrize(
    ("target", "patch", "result"),
    [  # The examples of RFC 7386, appendix A.
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        (["a", "b"], ["c", "d"], ["c", "d"]),
        ({"a": "b"}, ["c"], ["c"]),
        ({"a": "foo"}, None, None),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ],
)
def test_merge_patch_rfc7386_examples(target: Any, patch: Any, result: Any) -> None:
    assert merge_patch(target, patch) == result


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3),
    max_leaves=8,
)


@given(
    st.dictionaries(st.text(max_size=2), json_values, max_size=4),
    st.dictionaries(st.text(max_size=2), json_values, max_size=4),
)
def test_merge_patch_never_mutates_and_is_idempotent(target: dict[str, Any], patch: dict[str, Any]) -> None:
    before = copy.deepcopy(target)
    once = merge_patch(target, patch)
    assert target == before
    assert merge_patch(once, patch) == once


def test_json_patch_operations_and_errors() -> None:
    obj: dict[str, Any] = {"metadata": {"name": "x", "resourceVersion": "5"}, "spec": {"items": [1, 2]}}
    ops = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "5"},
        {"op": "add", "path": "/spec/items/-", "value": 3},
        {"op": "replace", "path": "/metadata/name", "value": "y"},
        {"op": "remove", "path": "/spec/items/0"},
    ]
    assert apply_patch("json", obj, ops) == {
        "metadata": {"name": "y", "resourceVersion": "5"},
        "spec": {"items": [2, 3]},
    }
    assert obj["spec"]["items"] == [1, 2]
    with pytest.raises(PatchError) as failed:
        apply_patch("json", obj, [{"op": "test", "path": "/metadata/resourceVersion", "value": "4"}])
    assert failed.value.code == 422
    with pytest.raises(PatchError) as malformed:
        apply_patch("json", obj, [{"op": "explode", "path": "/a"}])
    assert malformed.value.code == 400
    with pytest.raises(PatchError) as not_a_list:
        apply_patch("json", obj, {"op": "add"})
    assert not_a_list.value.code == 400


def test_strategic_merge_merges_lists_by_key() -> None:
    svc = {"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443, "targetPort": 8443}]}}
    patched = strategic_merge_patch(svc, {"spec": {"ports": [{"port": 443, "targetPort": 9443}]}})
    assert patched["spec"]["ports"] == [{"port": 80, "targetPort": 8080}, {"port": 443, "targetPort": 9443}]
    deleted = strategic_merge_patch(svc, {"spec": {"ports": [{"port": 80, "$patch": "delete"}]}})
    assert deleted["spec"]["ports"] == [{"port": 443, "targetPort": 8443}]


def test_strategic_merge_directives() -> None:
    obj = {
        "metadata": {"finalizers": ["a", "b"], "labels": {"x": "1", "y": "2"}},
        "spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"}]},
    }
    out = strategic_merge_patch(
        obj,
        {
            "metadata": {
                "finalizers": ["c"],
                "$deleteFromPrimitiveList/finalizers": ["a"],
                "labels": {"$patch": "replace", "z": "3"},
            },
            "spec": {
                "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
                "containers": [{"name": "a", "image": "9"}],
            },
        },
    )
    assert out["metadata"]["finalizers"] == ["b", "c"]
    assert out["metadata"]["labels"] == {"z": "3"}
    assert out["spec"]["containers"] == [{"name": "b", "image": "2"}, {"name": "a", "image": "9"}]
    retained = strategic_merge_patch({"spec": {"a": 1, "b": 2}}, {"spec": {"$retainKeys": ["a"], "a": 5}})
    assert retained == {"spec": {"a": 5}}


def test_strategic_merge_is_merge_patch_for_maps_and_null_deletes() -> None:
    obj = {"metadata": {"annotations": {"a": "1", "b": "2"}}, "data": {"k": "v"}}
    patch = {"metadata": {"annotations": {"a": None, "c": "3"}}, "data": {"k2": "v2"}}
    assert strategic_merge_patch(obj, patch) == merge_patch(obj, patch)


def test_merge_patch_body_must_be_an_object() -> None:
    with pytest.raises(PatchError) as exc:
        apply_patch("merge", {"a": 1}, [1])
    assert exc.value.code == 400
