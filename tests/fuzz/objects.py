"""Hostile source objects, by kind: the shapes each translator reads, filled with odd values and, anywhere,
garbage of the wrong type. `SHAPES` names the kinds with a shape of their own; any other kind of the source
table (a kind added later) is fuzzed with `generic`: metadata, annotations and a garbage spec and status."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from shardsync.sources.annotations import PREFIXES
from tests.fuzz.support import domain, ip, junk, maybe, target, targets, text

ANNOTATION_NAMES = (
    "hostname",
    "internal-hostname",
    "target",
    "ttl",
    "controller",
    "set-identifier",
    "access",
    "endpoints-type",
    "ingress-hostname-source",
    "alias",
    "record-type",
    "ingress",
)
annotation_key = st.one_of(
    st.builds(lambda p, n: p + n, st.sampled_from(PREFIXES), st.sampled_from(ANNOTATION_NAMES)),
    st.text(max_size=20),
)
names_value = st.lists(domain, max_size=5).map(",".join)
annotation_value = st.one_of(
    names_value,
    text,
    st.sampled_from(["1", "-5", "1h", "99999999999999999999", "NaN", "dns-controller", "true", "ptr"]),
    junk,
)
annotation_map = st.dictionaries(annotation_key, annotation_value, max_size=6)


def metadata() -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries(
        {"name": st.just("obj"), "namespace": st.just("default")},
        optional={
            "annotations": maybe(annotation_map),
            "labels": maybe(st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=3)),
            "uid": maybe(st.text(max_size=10)),
            "creationTimestamp": maybe(st.sampled_from(["2024-01-01T00:00:00Z", "yesterday", ""])),
            "generation": maybe(st.integers()),
        },
    )


lb_ingress = st.lists(
    st.fixed_dictionaries({}, optional={"ip": maybe(ip), "hostname": maybe(domain)}), max_size=4
)
status = st.fixed_dictionaries(
    {}, optional={"loadBalancer": maybe(st.fixed_dictionaries({}, optional={"ingress": maybe(lb_ingress)}))}
)

service = st.fixed_dictionaries(
    {
        "apiVersion": st.just("v1"),
        "kind": st.just("Service"),
        "metadata": metadata(),
        "spec": maybe(
            st.fixed_dictionaries(
                {},
                optional={
                    "type": maybe(
                        st.sampled_from(["LoadBalancer", "NodePort", "ClusterIP", "ExternalName", "x"])
                    ),
                    "clusterIP": maybe(st.one_of(ip, st.just("None"))),
                    "externalIPs": maybe(targets),
                    "externalName": maybe(domain),
                    "ports": maybe(
                        st.lists(
                            st.fixed_dictionaries(
                                {},
                                optional={
                                    "port": maybe(st.integers()),
                                    "nodePort": maybe(st.integers()),
                                    "protocol": maybe(st.sampled_from(["TCP", "UDP", ""])),
                                    "name": maybe(st.text(max_size=10)),
                                },
                            ),
                            max_size=3,
                        )
                    ),
                    "externalTrafficPolicy": maybe(st.sampled_from(["Local", "Cluster"])),
                    "publishNotReadyAddresses": maybe(st.booleans()),
                    "selector": maybe(st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2)),
                },
            )
        ),
        "status": maybe(status),
    }
)

ingress = st.fixed_dictionaries(
    {
        "apiVersion": st.just("networking.k8s.io/v1"),
        "kind": st.just("Ingress"),
        "metadata": metadata(),
        "spec": maybe(
            st.fixed_dictionaries(
                {},
                optional={
                    "rules": maybe(
                        st.lists(st.fixed_dictionaries({}, optional={"host": maybe(domain)}), max_size=4)
                    ),
                    "tls": maybe(
                        st.lists(
                            st.fixed_dictionaries(
                                {}, optional={"hosts": maybe(st.lists(domain, max_size=3))}
                            ),
                            max_size=3,
                        )
                    ),
                    "ingressClassName": maybe(st.text(max_size=10)),
                },
            )
        ),
        "status": maybe(status),
    }
)

dns_endpoint = st.fixed_dictionaries(
    {},
    optional={
        "dnsName": maybe(domain),
        "recordType": maybe(
            st.sampled_from(["A", "AAAA", "CNAME", "TXT", "SRV", "MX", "NS", "PTR", "a", "BOGUS"])
        ),
        "targets": maybe(targets),
        "recordTTL": maybe(st.integers()),
        "setIdentifier": maybe(st.text(max_size=20)),
        "labels": maybe(st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=3)),
        "providerSpecific": maybe(
            st.lists(
                st.fixed_dictionaries({"name": maybe(st.text(max_size=10)), "value": maybe(target)}),
                max_size=3,
            )
        ),
    },
)
crd = st.fixed_dictionaries(
    {
        "apiVersion": st.just("externaldns.k8s.io/v1alpha1"),
        "kind": st.just("DNSEndpoint"),
        "metadata": metadata(),
        "spec": maybe(
            st.fixed_dictionaries({}, optional={"endpoints": maybe(st.lists(dns_endpoint, max_size=5))})
        ),
        "status": maybe(junk),
    }
)

# Istio: hosts as `host`, `namespace/host`, `./host`, `*`, more slashes, or garbage.
istio_host = st.one_of(
    domain,
    st.builds(lambda ns, host: f"{ns}/{host}", st.sampled_from(["ns", ".", "*", "", "a/b"]), domain),
    st.sampled_from(["*", "ns/*", "./*", "/", "a/b/c"]),
    junk,
)
istio_gateway = st.fixed_dictionaries(
    {
        "apiVersion": st.just("networking.istio.io/v1"),
        "kind": st.just("Gateway"),
        "metadata": metadata(),
        "spec": maybe(
            st.fixed_dictionaries(
                {},
                optional={
                    "servers": maybe(
                        st.lists(
                            st.fixed_dictionaries(
                                {}, optional={"hosts": maybe(st.lists(istio_host, max_size=4))}
                            ),
                            max_size=3,
                        )
                    ),
                    "selector": maybe(
                        st.dictionaries(st.text(max_size=5), st.text(max_size=5) | junk, max_size=2)
                    ),
                },
            )
        ),
        "status": maybe(junk),
    }
)
istio_virtualservice = st.fixed_dictionaries(
    {
        "apiVersion": st.just("networking.istio.io/v1"),
        "kind": st.just("VirtualService"),
        "metadata": metadata(),
        "spec": maybe(
            st.fixed_dictionaries(
                {},
                optional={
                    "hosts": maybe(st.lists(istio_host, max_size=4)),
                    "gateways": maybe(
                        st.lists(
                            st.sampled_from(["obj", "default/obj", "mesh", "", "a/b/c", "x/y"]) | junk,
                            max_size=3,
                        )
                    ),
                    "exportTo": maybe(
                        st.lists(st.sampled_from(["*", ".", "default", "other"]) | junk, max_size=2)
                    ),
                },
            )
        ),
        "status": maybe(junk),
    }
)

generic = st.fixed_dictionaries({"metadata": metadata(), "spec": junk, "status": junk})

node_address = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "type": maybe(st.sampled_from(["ExternalIP", "InternalIP", "Hostname", "x"])),
            "address": maybe(st.one_of(ip, domain, text)),
        },
    ),
    junk,
)
node = st.fixed_dictionaries(
    {
        "apiVersion": st.just("v1"),
        "kind": st.just("Node"),
        "metadata": metadata(),
        "spec": maybe(st.fixed_dictionaries({}, optional={"unschedulable": maybe(st.booleans())})),
        "status": maybe(
            st.fixed_dictionaries({}, optional={"addresses": maybe(st.lists(node_address, max_size=4))})
        ),
    }
)
NODE_NAMES = ("n1", "n2")
pod = st.fixed_dictionaries(
    {
        "apiVersion": st.just("v1"),
        "kind": st.just("Pod"),
        "metadata": metadata(),
        "spec": maybe(
            st.fixed_dictionaries(
                {},
                optional={
                    "hostNetwork": maybe(st.booleans()),
                    "nodeName": maybe(st.sampled_from([*NODE_NAMES, "gone"])),
                },
            )
        ),
        "status": maybe(
            st.fixed_dictionaries(
                {},
                optional={
                    "podIP": maybe(st.one_of(ip, text)),
                    "podIPs": maybe(
                        st.lists(st.fixed_dictionaries({}, optional={"ip": maybe(ip)}), max_size=3)
                    ),
                },
            )
        ),
    }
)
# The Nodes a translation may read (the pod kind's host-network Pods, the service kind's NodePorts).
nodes = st.dictionaries(st.sampled_from(NODE_NAMES), node, max_size=2)

SHAPES: dict[str, st.SearchStrategy[Any]] = {
    "service": service,
    "ingress": ingress,
    "crd": crd,
    "istio-gateway": istio_gateway,
    "istio-virtualservice": istio_virtualservice,
    "node": node,
    "pod": pod,
}
