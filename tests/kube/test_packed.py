"""shardsync.kube.packed: the informer cache kept as compact JSON."""

from __future__ import annotations

import tracemalloc

import orjson
import pytest

from shardsync.kube.packed import PackedCache

POD = {
    "metadata": {"name": "a", "namespace": "default", "labels": {"app": "x"}},
    "status": {"podIP": "10.0.0.1"},
}


def test_a_packed_cache_reads_back_what_was_stored_and_holds_only_its_json() -> None:
    cache = PackedCache()
    cache["default/a"] = POD
    assert cache["default/a"] == POD and cache.get("default/a") == POD
    assert cache.get("default/b") is None and cache.get("default/b", 1) == 1
    assert "default/a" in cache and "default/b" not in cache
    assert list(cache) == ["default/a"] and len(cache) == 1 and dict(cache.items()) == {"default/a": POD}
    assert cache.packed_bytes() == len(orjson.dumps(POD))


def test_each_read_is_a_fresh_object_so_a_reader_cannot_change_the_cache() -> None:
    cache = PackedCache()
    cache["k"] = POD
    first = cache["k"]
    first["metadata"]["labels"]["app"] = "changed"
    assert cache["k"] == POD and cache["k"] is not cache["k"]


def test_pop_and_delete() -> None:
    cache = PackedCache()
    cache["k"] = POD
    assert cache.pop("k") == POD and "k" not in cache
    assert cache.pop("k", None) is None
    with pytest.raises(KeyError):
        cache.pop("k")
    cache["k"] = POD
    del cache["k"]
    assert len(cache) == 0


def test_the_json_is_held_at_its_own_size_not_in_orjsons_4_kib_buffer() -> None:
    size = len(orjson.dumps(POD))
    tracemalloc.start()
    try:
        cache = PackedCache()
        before = tracemalloc.get_traced_memory()[0]
        for i in range(200):
            cache[f"k{i}"] = POD
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 200 * (
        size + 150
    )  # the bytes, their header and the dict's share; 4 KiB each without the copy
