"""The source flags of `shardsync run`, parsed from a command line as external-dns spells them.

Names, types and defaults are external-dns v0.22.0's (pkg/apis/externaldns/types.go); each row names the
external-dns flag it mirrors and the value the kind's options get.
"""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from shardsync.flags import FlagGroup
from shardsync.records.domain_filter import DomainFilter
from shardsync.replica.config import Settings, configure, settings_from_args
from shardsync.replica.wiring import managed_types
from shardsync.sources import ingress, service
from shardsync.sources.filters import RecordTypeFilter

FAKE = ["--fake-zone", "example.com"]


def parse(argv: list[str], env: dict[str, str] | None = None) -> Settings:
    env = env if env is not None else {"POD_NAME": "shardsync-0"}
    parser = argparse.ArgumentParser()
    configure(parser, env)
    return settings_from_args(parser.parse_args([*argv, *FAKE]), env)


def option(settings: Settings, group: FlagGroup[Any], name: str) -> Any:
    return getattr(settings.options(group), name)


@pytest.mark.parametrize(
    ("group", "name", "default"),
    [
        (service.FLAGS, "publish_internal", False),  # --publish-internal-services
        (service.FLAGS, "expose_internal_ipv6", False),  # --expose-internal-ipv6 (false since v0.19)
        (service.FLAGS, "exclude_unschedulable", True),  # --exclude-unschedulable
        (service.FLAGS, "service_types", ()),  # --service-type-filter (all types)
        (service.FLAGS, "publish_host_ip", False),  # --publish-host-ip
        (service.FLAGS, "always_publish_not_ready_addresses", False),  # --always-publish-not-ready-addresses
        (ingress.FLAGS, "ignore_ingress_tls_spec", False),  # --ignore-ingress-tls-spec
        (ingress.FLAGS, "ignore_ingress_rules_spec", False),  # --ignore-ingress-rules-spec
    ],
)
def test_defaults_are_external_dns_defaults(group: FlagGroup[Any], name: str, default: Any) -> None:
    assert option(parse([]), group, name) == default


@pytest.mark.parametrize(
    ("argv", "group", "name", "want"),
    [
        (["--expose-internal-ipv6"], service.FLAGS, "expose_internal_ipv6", True),
        (["--exclude-unschedulable=false"], service.FLAGS, "exclude_unschedulable", False),
        (
            ["--service-type-filter=NodePort", "--service-type-filter=LoadBalancer"],
            service.FLAGS,
            "service_types",
            ("NodePort", "LoadBalancer"),
        ),
        (["--publish-host-ip"], service.FLAGS, "publish_host_ip", True),
        (
            ["--always-publish-not-ready-addresses=true"],
            service.FLAGS,
            "always_publish_not_ready_addresses",
            True,
        ),
        (["--ignore-ingress-tls-spec"], ingress.FLAGS, "ignore_ingress_tls_spec", True),
        (["--ignore-ingress-rules-spec"], ingress.FLAGS, "ignore_ingress_rules_spec", True),
    ],
)
def test_flags_fill_the_kinds_options(argv: list[str], group: FlagGroup[Any], name: str, want: Any) -> None:
    assert option(parse(argv), group, name) == want


def test_service_type_filter_from_external_dns_environment() -> None:
    env = {"POD_NAME": "p", "EXTERNAL_DNS_SERVICE_TYPE_FILTER": "ClusterIP,ExternalName"}
    assert option(parse([], env), service.FLAGS, "service_types") == ("ClusterIP", "ExternalName")


def test_unsupported_service_type_is_refused_naming_the_flag() -> None:
    with pytest.raises(ValueError, match="--service-type-filter"):
        parse(["--service-type-filter=Headless"])


# --- core flags that filter what the sources give ----------------------------------------------------------


def test_regex_domain_flags_reach_the_domain_filter() -> None:
    """external-dns --regex-domain-filter overrides --domain-filter; --regex-domain-exclusion wins."""
    s = parse(
        [
            "--domain-filter=other.org",
            r"--regex-domain-filter=\.example\.com$",
            "--regex-domain-exclusion=^tmp",
        ]
    )
    assert (s.regex_domain_filter, s.regex_domain_exclusion) == (r"\.example\.com$", "^tmp")
    domains = DomainFilter.parse(
        s.domain_filter, s.exclude_domains, s.regex_domain_filter, s.regex_domain_exclusion
    )
    assert domains.match("www.example.com")
    assert not domains.match("tmp1.example.com")
    assert not domains.match("www.other.org")


def test_bad_regular_expression_is_refused_at_start_up() -> None:
    with pytest.raises(SystemExit):
        parse(["--regex-domain-filter=(unclosed"])


def test_exclude_record_types_leaves_them_out_of_sources_and_registry() -> None:
    """external-dns plan.IsManagedRecord: a type is managed when --managed-record-types names it and
    --exclude-record-types does not (both for the source's endpoints and for the records in the zone)."""
    s = parse(["--managed-record-types=A", "--managed-record-types=AAAA", "--exclude-record-types=aaaa"])
    assert s.exclude_record_types == ("AAAA",)
    assert managed_types(s) == ("A",)
    types = RecordTypeFilter.parse(s.managed_record_types, s.exclude_record_types)
    assert (types.match("A"), types.match("AAAA")) == (True, False)
    assert parse([]).exclude_record_types == ()
