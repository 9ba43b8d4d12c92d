"""The knobs that change how the sources translate objects, named after external-dns's flags."""

from __future__ import annotations

from dataclasses import dataclass

SERVICE_TYPES = frozenset({"ClusterIP", "NodePort", "LoadBalancer", "ExternalName"})


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """One replica's source settings; the defaults are external-dns's defaults."""

    # --publish-internal-services: ClusterIP Services publish their cluster IP for `hostname` too.
    publish_internal: bool = False
    # --publish-host-ip: headless Services publish each pod's status.hostIP instead of its own IP.
    publish_host_ip: bool = False
    # --always-publish-not-ready-addresses: as if every headless Service set publishNotReadyAddresses.
    always_publish_not_ready_addresses: bool = False
    # --expose-internal-ipv6: headless `endpoints-type: NodeExternalIP` adds the nodes' IPv6 InternalIPs.
    expose_internal_ipv6: bool = False
    # --ignore-hostname-annotation: the `hostname`/`internal-hostname` annotations are not read.
    ignore_hostname_annotation: bool = False
    # --ignore-ingress-tls-spec / --ignore-ingress-rules-spec: Ingress hosts not taken from there.
    ignore_ingress_tls_spec: bool = False
    ignore_ingress_rules_spec: bool = False
    # --ingress-class (repeatable): only Ingresses of these classes; empty means all.
    ingress_class_names: frozenset[str] = frozenset()
    # --service-type-filter (repeatable): only Services of these types; empty means all.
    service_types: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        unknown = self.service_types - SERVICE_TYPES - {""}
        if unknown:
            raise ValueError(
                f"unsupported service type filter {sorted(unknown)}; supported: {sorted(SERVICE_TYPES)}"
            )

    def service_type_selected(self, service_type: str) -> bool:
        """--service-type-filter; as in external-dns, an empty entry switches the filter off."""
        if not self.service_types or "" in self.service_types:
            return True
        return service_type in self.service_types
