"""URL paths of the Kubernetes REST API turned into what they name: a discovery document or a resource
(group, version, plural, namespace, name, subresource)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote

DiscoveryKind = Literal["version", "api", "apis", "group", "resources", "health", "openapi"]


@dataclass(frozen=True)
class DiscoveryRoute:
    kind: DiscoveryKind
    group: str = ""
    version: str = ""


@dataclass(frozen=True)
class ResourceRoute:
    group: str
    version: str
    plural: str
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None
    # The deprecated /watch/ path prefix: a watch whatever the query says.
    watch_prefix: bool = False


_NAMESPACE_SUBRESOURCES = ("status", "finalize")
_HEALTH = ("healthz", "livez", "readyz")


def parse(path: str) -> DiscoveryRoute | ResourceRoute | None:
    """Parses the path part of a request URL; None when it names nothing this API serves."""
    parts = [unquote(p) for p in path.split("?", 1)[0].split("/") if p]
    if not parts:
        return None
    head = parts[0]
    if head == "version" and len(parts) == 1:
        return DiscoveryRoute("version")
    if head in _HEALTH:
        return DiscoveryRoute("health")
    if head == "openapi":
        return DiscoveryRoute("openapi")
    if head == "api":
        if len(parts) == 1:
            return DiscoveryRoute("api")
        group, version, rest = "", parts[1], parts[2:]
    elif head == "apis":
        if len(parts) == 1:
            return DiscoveryRoute("apis")
        if len(parts) == 2:
            return DiscoveryRoute("group", parts[1])
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    if not rest:
        return DiscoveryRoute("resources", group, version)
    watch = rest[0] == "watch"
    if watch:
        rest = rest[1:]
    namespace = None
    if (
        len(rest) >= 3
        and rest[0] == "namespaces"
        and not (len(rest) == 3 and rest[2] in _NAMESPACE_SUBRESOURCES)
    ):
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        return None
    return ResourceRoute(
        group,
        version,
        rest[0],
        namespace,
        rest[1] if len(rest) > 1 else None,
        rest[2] if len(rest) > 2 else None,
        watch,
    )
