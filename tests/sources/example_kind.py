"""A test-only source kind written the way a real one is: this one module, plus one line in a copy of the
source table (tests/sources/test_new_kind.py), and the generic watcher runs it.

`--source=dnsrecord` reads DNSRecords (`example.test/v1`, a CRD: the kind waits until it is served), each
`spec: {hostname, nodeName}`, and publishes an A record for `hostname` with the ExternalIPs of the Node it
names. A Node change re-translates exactly the DNSRecords attached to that Node (as a Gateway change must
re-translate exactly the routes attached to it), through the index this kind keeps in its translator. Its
flag `--dnsrecord-ttl` fills its own options value.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from shardsync.flags import Flag, FlagGroup
from shardsync.kube.objects import ObjectRef, Resource, get_list, get_str
from shardsync.sources.kind import CrdNotice, SourceContext, SourceKind, Translator
from shardsync.sources.result import EndpointSet, SourceResult

DNS_RECORDS = Resource("example.test", "v1", "dnsrecords", "DNSRecord")
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class DnsRecordOptions:
    ttl: int = 0


FLAGS = FlagGroup(
    "dnsrecord",
    "dnsrecord source (--source=dnsrecord)",
    DnsRecordOptions,
    (Flag("ttl", "TTL of the records", kind=int, flag="dnsrecord-ttl"),),
)


def dnsrecord_endpoints(obj: Obj, node: Obj | None, options: DnsRecordOptions) -> SourceResult:
    ref = ObjectRef.of(obj, DNS_RECORDS, "dnsrecord")
    out = EndpointSet(ref, created=get_str(obj, "metadata", "creationTimestamp"), ttl=options.ttl)
    node_name = get_str(obj, "spec", "nodeName")
    if node is None:
        out.problem("spec.nodeName", f"node {node_name!r} not found")
        return out.result()
    addresses = get_list(node, "status", "addresses")
    targets = [get_str(a, "address") for a in addresses if get_str(a, "type") == "ExternalIP"]
    out.add_targets(get_str(obj, "spec", "hostname"), targets, "spec.hostname")
    return out.result()


class DnsRecordTranslator(Translator):
    def __init__(self, context: SourceContext[DnsRecordOptions]) -> None:
        self.context = context
        self.attached: defaultdict[str, set[str]] = defaultdict(set)  # node name → DNSRecord keys
        self.node_of: dict[str, str] = {}

    def translate(self, key: str, obj: Obj | None) -> SourceResult | None:
        old = self.node_of.pop(key, None)
        if old is not None:
            self.attached[old].discard(key)
        if obj is None:
            return None
        node_name = get_str(obj, "spec", "nodeName")
        self.node_of[key] = node_name
        self.attached[node_name].add(key)
        node = self.context.cache(NODES).get(node_name)
        return dnsrecord_endpoints(obj, node, self.context.options)

    def related(self, resource: Resource, key: str, old: Obj | None, new: Obj | None) -> Iterable[str]:
        return set(self.attached.get(key, ()))


KIND = SourceKind(
    "dnsrecord",
    DNS_RECORDS,
    DnsRecordTranslator,
    related=(NODES,),
    flags=FLAGS,
    crd=CrdNotice("DNSRecord CRD", ("dnsrecords.example.test",), "tests/sources/example_kind.py"),
)
