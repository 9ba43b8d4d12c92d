"""The service source's options and flags (external-dns's names and defaults), read by sources.service and,
for `--expose-internal-ipv6` and `--exclude-unschedulable`, by the node kind (sources.node), which shares
the group as external-dns's two sources share the flags."""

from __future__ import annotations

from dataclasses import dataclass

from shardsync.flags import ConfigError, FlagGroup, mirrored

SERVICE_TYPES = frozenset({"ClusterIP", "NodePort", "LoadBalancer", "ExternalName"})


@dataclass(frozen=True, slots=True)
class ServiceOptions:
    """The service source's options, named after external-dns's flags (`FLAGS`); the defaults are
    external-dns's."""

    # --publish-internal-services: ClusterIP Services publish their cluster IP for `hostname` too.
    publish_internal: bool = False
    # --publish-host-ip: headless Services publish each pod's status.hostIP instead of its own IP.
    publish_host_ip: bool = False
    # --always-publish-not-ready-addresses: as if every headless Service set publishNotReadyAddresses.
    always_publish_not_ready_addresses: bool = False
    # --expose-internal-ipv6: Nodes (the node kind), NodePort Services and headless `endpoints-type:
    # NodeExternalIP` add the nodes' IPv6 InternalIPs to their ExternalIPs.
    expose_internal_ipv6: bool = False
    # --exclude-unschedulable: the node kind and NodePort Services leave out nodes with spec.unschedulable.
    exclude_unschedulable: bool = True
    # --service-type-filter (repeatable): only Services of these types; empty means all.
    service_types: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = set(self.service_types) - SERVICE_TYPES - {""}
        if unknown:
            raise ConfigError(
                f"--service-type-filter: unsupported service type {', '.join(sorted(unknown))} "
                f"(supported: {', '.join(sorted(SERVICE_TYPES))})"
            )

    def service_type_selected(self, service_type: str) -> bool:
        """--service-type-filter; as in external-dns, an empty entry switches the filter off."""
        if not self.service_types or "" in self.service_types:
            return True
        return service_type in self.service_types


FLAGS = FlagGroup(
    "service",
    "service and node sources (--source=service, --source=node)",
    ServiceOptions,
    (
        mirrored(
            "publish_internal",
            "publish ClusterIP services too",
            switch=True,
            flag="publish-internal-services",
        ),
        mirrored(
            "expose_internal_ipv6",
            "nodes, NodePort and NodeExternalIP services also publish the nodes' internal IPv6 addresses",
            switch=True,
        ),
        mirrored(
            "exclude_unschedulable",
            "the node source and NodePort services leave out unschedulable nodes",
            switch=True,
        ),
        mirrored(
            "service_types",
            "only read services of these types: ClusterIP, NodePort, LoadBalancer, ExternalName "
            "(repeatable; default: all)",
            repeat=True,
            flag="service-type-filter",
        ),
        mirrored(
            "publish_host_ip", "headless services publish each pod's host IP instead of its own", switch=True
        ),
        mirrored(
            "always_publish_not_ready_addresses",
            "headless services also publish not-ready addresses, as if publishNotReadyAddresses were set",
            switch=True,
        ),
    ),
)
