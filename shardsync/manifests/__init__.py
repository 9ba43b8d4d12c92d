"""Kubernetes manifests shipped inside the package (the DNSEndpoint CRD), so `shardsync local`, the tests and
a user without the source tree can install them: `load_crd()` returns the CRD as a dict."""

from __future__ import annotations

from importlib import resources
from typing import Any

import yaml

CRD_FILE = "dnsendpoints.crd.yaml"
CRD_NAME = "dnsendpoints.externaldns.k8s.io"


def crd_text() -> str:
    """The DNSEndpoint CRD manifest as shipped (YAML), e.g. for `kubectl apply -f -`."""
    return resources.files(__name__).joinpath(CRD_FILE).read_text(encoding="utf-8")


def load_crd() -> dict[str, Any]:
    """The DNSEndpoint CRD as a dict, ready to create (`kube.create(CUSTOM_RESOURCE_DEFINITIONS, ...)`)."""
    data = yaml.safe_load(crd_text())
    if not isinstance(data, dict):  # a packaging mistake, not a user error
        raise ValueError(f"{CRD_FILE} does not hold one object")
    return data
