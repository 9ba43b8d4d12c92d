"""`--fqdn-template`: the part of Go's text/template shardsync renders, and what it refuses.

Rows naming an external-dns test mirror kubernetes-sigs/external-dns v0.22.0
(source/template/engine_test.go TestExecFQDN).
"""

from __future__ import annotations

from typing import Any

import pytest

from shardsync.flags import ConfigError
from shardsync.sources.fqdn import FqdnTemplate

OBJ: dict[str, Any] = {
    "metadata": {
        "name": "test",
        "namespace": "default",
        "labels": {"environment": "production", "department": "FINANCE"},
        "annotations": {
            "dns.company.com/zone": "company.org",
            "alb.ingress.kubernetes.io/scheme": "internal",
        },
    },
    "spec": {"type": "LoadBalancer", "clusterIP": "10.0.0.1"},
}


def names(template: str, obj: dict[str, Any] | None = None) -> list[str]:
    parsed = FqdnTemplate.parse([template])
    assert parsed is not None
    return parsed.names(obj or OBJ, "Service")


@pytest.mark.parametrize(
    ("template", "obj", "want"),
    [
        # "simple template"
        (
            "{{ .Name }}.example.com, {{ .Namespace }}.example.org",
            None,
            ["default.example.org", "test.example.com"],
        ),
        # "multiple hostnames"
        ("{{.Name}}.example.com, {{.Name}}.example.org", None, ["test.example.com", "test.example.org"]),
        # "trim spaces"
        ("  {{ trim .Name}}.example.com. ", None, ["test.example.com"]),
        # "trim prefix"
        (
            '{{ trimPrefix .Name "the-" }}.example.com',
            {"metadata": {"name": "the-test"}},
            ["test.example.com"],
        ),
        # "trim suffix"
        ('{{ trimSuffix .Name "-v2" }}.example.com', {"metadata": {"name": "test-v2"}}, ["test.example.com"]),
        # "replace dash"
        (
            '{{ replace "-" "." .Name }}.example.com',
            {"metadata": {"name": "test-v2"}},
            ["test.v2.example.com"],
        ),
        # "annotations and labels"
        (
            "{{.Labels.environment }}.example.com, "
            '{{ index .ObjectMeta.Annotations "alb.ingress.kubernetes.io/scheme" }}.'
            '{{ .Labels.environment }}.{{ index .ObjectMeta.Annotations "dns.company.com/zone" }}',
            None,
            ["internal.production.company.org", "production.example.com"],
        ),
        # "labels to lowercase"
        ("{{ toLower .Labels.department }}.example.org", None, ["finance.example.org"]),
        # "ignore trailing comma output"
        ("{{ .Name }}.example.com,", None, ["test.example.com"]),
        # "result only contains unique values"
        (
            "{{ .Name }}.example.com,{{ .Name }}.example.com,{{ .Name }}.example.com",
            None,
            ["test.example.com"],
        ),
        # Go's field names map to the JSON names; a pipeline passes its value last; blank trimming
        (
            "{{ .Spec.Type | toLower }}-{{ .Kind | toLower }}.example.com",
            None,
            ["loadbalancer-service.example.com"],
        ),
        ("x-  {{- .Name -}}  .example.com", None, ["x-test.example.com"]),
        # a missing map key prints Go's `<no value>`, which is no valid name (reported as such downstream)
        ("{{ .Labels.missing }}.example.com", None, ["<no value>.example.com"]),
    ],
)
def test_names(template: str, obj: dict[str, Any] | None, want: list[str]) -> None:
    assert names(template, obj) == want


def test_several_flag_values_join_with_a_comma() -> None:
    parsed = FqdnTemplate.parse(["{{.Name}}.a.example", "{{.Name}}.b.example"])
    assert parsed is not None and parsed.names(OBJ, "Service") == ["test.a.example", "test.b.example"]


@pytest.mark.parametrize("blank", [[], [""], ["  "]])
def test_blank_is_not_configured(blank: list[str]) -> None:
    assert FqdnTemplate.parse(blank) is None


@pytest.mark.parametrize(
    ("template", "why"),
    [
        # "generate multiple hostnames with if condition", "ignore empty template output"
        ('{{ if eq .Name "other" }}{{ .Name }}.example.com{{ end }}', "'if' is not supported"),
        # "configmap with multiple entries"
        ('{{ range $entry := (index .Data "entries" | fromJson) }}{{ end }}', "'range' is not supported"),
        # "contains label with empty value"
        ('{{ hasKey .Labels "x" }}', "'hasKey' is not supported"),
        ("{{ $x }}", "variables"),
        ('{{ printf "%s" .Name }}', "'printf' is not supported"),
        ("{{ .Name ", "unclosed"),
        ("{{ trimPrefix .Name }}", "takes 2 arguments"),
    ],
)
def test_unsupported_templates_are_refused_at_start_up(template: str, why: str) -> None:
    with pytest.raises(ConfigError, match="--fqdn-template") as caught:
        FqdnTemplate.parse([template])
    assert why in str(caught.value)
    assert "\n" not in str(caught.value)
