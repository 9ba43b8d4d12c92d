"""URL paths of the REST API and what they name."""

from __future__ import annotations

import pytest

from shardsync.local.apiserver.routing import DiscoveryRoute, ResourceRoute, parse


@pytest.mark.parametrize(
    ("path", "route"),
    [
        ("/version", DiscoveryRoute("version")),
        ("/api", DiscoveryRoute("api")),
        ("/api/v1", DiscoveryRoute("resources", "", "v1")),
        ("/apis", DiscoveryRoute("apis")),
        ("/apis/apps", DiscoveryRoute("group", "apps")),
        ("/apis/apps/v1", DiscoveryRoute("resources", "apps", "v1")),
        ("/openapi/v2", DiscoveryRoute("openapi")),
        ("/api/v1/namespaces", ResourceRoute("", "v1", "namespaces")),
        ("/api/v1/namespaces/ns1", ResourceRoute("", "v1", "namespaces", None, "ns1")),
        ("/api/v1/namespaces/ns1/status", ResourceRoute("", "v1", "namespaces", None, "ns1", "status")),
        ("/api/v1/namespaces/ns1/configmaps", ResourceRoute("", "v1", "configmaps", "ns1")),
        (
            "/api/v1/namespaces/ns1/services/s/status",
            ResourceRoute("", "v1", "services", "ns1", "s", "status"),
        ),
        ("/api/v1/configmaps", ResourceRoute("", "v1", "configmaps")),
        (
            "/apis/apps/v1/namespaces/d/statefulsets/w/scale",
            ResourceRoute("apps", "v1", "statefulsets", "d", "w", "scale"),
        ),
        (
            "/apis/coordination.k8s.io/v1/watch/namespaces/d/leases",
            ResourceRoute("coordination.k8s.io", "v1", "leases", "d", watch_prefix=True),
        ),
        ("/api/v1/nodes/n1?x=y", ResourceRoute("", "v1", "nodes", None, "n1")),
    ],
)
def test_parse(path: str, route: object) -> None:
    assert parse(path) == route


@pytest.mark.parametrize("path", ["/", "/foo", "/api/v1/namespaces/a/b/c/d/e"])
def test_unknown_paths(path: str) -> None:
    assert parse(path) is None
