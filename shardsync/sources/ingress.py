"""Ingress → desired endpoints, as external-dns's ingress source computes them (pure; plain-dict objects).

Names come from spec.rules[].host (unless `--ignore-ingress-rules-spec`), spec.tls[].hosts (unless
`--ignore-ingress-tls-spec`) and the `hostname` annotation (unless `--ignore-hostname-annotation`); the
`ingress-hostname-source` annotation keeps only the spec's names (`defined-hosts-only`) or only the
annotation's (`annotation-only`). The `--fqdn-template` names are used when those give no endpoint, or
added with `--combine-fqdn-annotation` (shardsync.sources.options). Targets are the `target` annotation,
else every status.loadBalancer.ingress ip and hostname. `--ingress-class` keeps Ingresses whose
spec.ingressClassName, or when that is empty the legacy `kubernetes.io/ingress.class` annotation, is one
of the given classes. Every endpoint carries `resource=ingress/<ns>/<name>` and `shardsync/created`.
`KIND` is the source kind `--source=ingress`, with its flags (`FLAGS`, filling `IngressOptions`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shardsync.flags import FlagGroup, mirrored
from shardsync.kube.objects import ObjectRef, Resource, get, get_list, get_str, get_str_list, get_str_map
from shardsync.sources import annotations as ann
from shardsync.sources import projections
from shardsync.sources.kind import SourceContext, SourceKind, Translator
from shardsync.sources.options import SourceOptions
from shardsync.sources.result import EndpointSet, Problem, SourceResult

INGRESSES = Resource("networking.k8s.io", "v1", "ingresses", "Ingress")

INGRESS_CLASS_ANNOTATION = "kubernetes.io/ingress.class"

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class IngressOptions:
    """The ingress source's options, named after external-dns's flags (`FLAGS`); the defaults are
    external-dns's."""

    # --ingress-class (repeatable): only Ingresses of these classes; empty means all.
    ingress_class_names: tuple[str, ...] = ()
    # --ignore-ingress-tls-spec / --ignore-ingress-rules-spec: Ingress hosts not taken from there.
    ignore_ingress_tls_spec: bool = False
    ignore_ingress_rules_spec: bool = False


FLAGS = FlagGroup(
    "ingress",
    "ingress source (--source=ingress)",
    IngressOptions,
    (
        mirrored(
            "ingress_class_names",
            "only read ingresses of these classes (repeatable)",
            repeat=True,
            flag="ingress-class",
        ),
        mirrored("ignore_ingress_tls_spec", "do not take names from ingresses' spec.tls", switch=True),
        mirrored("ignore_ingress_rules_spec", "do not take names from ingresses' spec.rules", switch=True),
    ),
)


def ingress_class_selected(ing: Obj, opts: IngressOptions) -> bool:
    """external-dns's --ingress-class filter: spec.ingressClassName first, the legacy annotation second."""
    if not opts.ingress_class_names:
        return True
    class_name = get_str(ing, "spec", "ingressClassName")
    if class_name:
        return class_name in opts.ingress_class_names
    legacy = get_str_map(ing, "metadata", "annotations").get(INGRESS_CLASS_ANNOTATION)
    return legacy is not None and legacy in opts.ingress_class_names


def ingress_endpoints(
    ing: Obj, opts: IngressOptions | None = None, common: SourceOptions | None = None
) -> SourceResult:
    """An Ingress's desired endpoints and problems (empty when the class or controller filter skips it)."""
    opts = opts or IngressOptions()
    common = common or SourceOptions()
    parsed = ann.parse(get_str_map(ing, "metadata", "annotations"))
    if not ingress_class_selected(ing, opts) or parsed.controller_mismatch:
        return SourceResult()
    ref = ObjectRef.of(ing, INGRESSES, "ingress")
    out = EndpointSet(
        ref,
        created=get_str(ing, "metadata", "creationTimestamp"),
        ttl=parsed.ttl,
        set_identifier=parsed.set_identifier,
        provider_specific=parsed.provider_specific,
    )
    targets: list[str] = list(parsed.targets)
    if not targets:
        for lb in get_list(ing, "status", "loadBalancer", "ingress"):
            targets += [get_str(lb, "ip"), get_str(lb, "hostname")]

    defined: list[tuple[str, str]] = []  # (name, field)
    if not opts.ignore_ingress_rules_spec:
        for i, rule in enumerate(get_list(ing, "spec", "rules")):
            host = get_str(rule, "host")
            if host:
                defined.append((host, f"spec.rules[{i}].host"))
    if not opts.ignore_ingress_tls_spec:
        for i, tls in enumerate(get_list(ing, "spec", "tls")):
            for j, host in enumerate(get_str_list(tls, "hosts")):
                if host:
                    defined.append((host, f"spec.tls[{i}].hosts[{j}]"))
    from_annotation: list[tuple[str, str]] = []
    if not common.ignore_hostname_annotation:
        from_annotation = [(h, parsed.field(ann.HOSTNAME)) for h in parsed.hostnames]

    problems = [Problem(ref, p.field, p.message) for p in parsed.problems]
    source = parsed.hostname_source
    if source is None:
        names = defined + from_annotation
    elif source.lower() == ann.HOSTNAME_SOURCE_DEFINED_HOSTS_ONLY:
        names = defined
    elif source.lower() == ann.HOSTNAME_SOURCE_ANNOTATION_ONLY:
        names = from_annotation
    else:
        # external-dns publishes nothing for an unknown value; say why.
        names = []
        problems.append(
            Problem(
                ref,
                parsed.field(ann.INGRESS_HOSTNAME_SOURCE),
                f"{source!r} is not one of defined-hosts-only, annotation-only; no records published",
            )
        )
    for name, field_path in names:
        out.add_targets(name, targets, field_path)
    template = common.template
    if template is not None and (common.combine_fqdn_annotation or out.empty):
        for name in template.names(ing, INGRESSES.kind):
            out.add_targets(name, targets, "metadata (--fqdn-template)")
    return out.result(problems)


def ingress_names(ing: Obj, common: SourceOptions) -> list[str] | None:
    """Every name an Ingress's records may have (`SourceKind.names`): its rules' and TLS hosts and its
    hostname annotation, whichever the flags and annotations choose; None with --fqdn-template."""
    if common.template is not None:
        return None
    names = [get_str(rule, "host") for rule in get_list(ing, "spec", "rules")]
    names += [host for tls in get_list(ing, "spec", "tls") for host in get_str_list(tls, "hosts")]
    names += ann.hostnames_of(get(ing, "metadata", "annotations"))
    return [name for name in names if name]


class IngressTranslator(Translator):
    """The ingress kind in one watcher: `ingress_endpoints` with the kind's and the shared options."""

    def __init__(self, context: SourceContext[IngressOptions]) -> None:
        self.options, self.common = context.options, context.common

    def translate(self, key: str, obj: Obj | None) -> SourceResult | None:
        return None if obj is None else ingress_endpoints(obj, self.options, self.common)


KIND = SourceKind(
    "ingress",
    INGRESSES,
    IngressTranslator,
    flags=FLAGS,
    evictable=True,
    names=ingress_names,
    projections={INGRESSES: projections.without_bookkeeping},
)
