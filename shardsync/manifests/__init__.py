"""Kubernetes manifests shipped inside the package (the DNSEndpoint CRD; minimal Gateway API and Istio CRDs
for tests and `shardsync local`), so `shardsync local`, the tests and a user without the source tree can
install them: `load_crd()` returns the DNSEndpoint CRD as a dict, `load_gateway_crds()` the Gateway API
CRDs, `load_istio_crds()` Istio's Gateway and VirtualService CRDs."""

from __future__ import annotations

from importlib import resources
from typing import Any

import yaml

CRD_FILE = "dnsendpoints.crd.yaml"
CRD_NAME = "dnsendpoints.externaldns.k8s.io"
GATEWAY_CRDS_FILE = "gateway-api.crds.yaml"
ISTIO_CRDS_FILE = "istio.crds.yaml"


def crd_text() -> str:
    """The DNSEndpoint CRD manifest as shipped (YAML), e.g. for `kubectl apply -f -`."""
    return resources.files(__name__).joinpath(CRD_FILE).read_text(encoding="utf-8")


def load_crd() -> dict[str, Any]:
    """The DNSEndpoint CRD as a dict, ready to create (`kube.create(CUSTOM_RESOURCE_DEFINITIONS, ...)`)."""
    data = yaml.safe_load(crd_text())
    if not isinstance(data, dict):  # a packaging mistake, not a user error
        raise ValueError(f"{CRD_FILE} does not hold one object")
    return data


def load_gateway_crds() -> list[dict[str, Any]]:
    """The minimal Gateway API CRDs (Gateway, HTTPRoute, GRPCRoute, TLSRoute, TCPRoute, UDPRoute)."""
    return _load_all(GATEWAY_CRDS_FILE)


def load_istio_crds() -> list[dict[str, Any]]:
    """The minimal Istio CRDs (networking.istio.io Gateway and VirtualService)."""
    return _load_all(ISTIO_CRDS_FILE)


def _load_all(name: str) -> list[dict[str, Any]]:
    text = resources.files(__name__).joinpath(name).read_text(encoding="utf-8")
    docs = [d for d in yaml.safe_load_all(text) if d]
    if not all(isinstance(d, dict) for d in docs):  # a packaging mistake, not a user error
        raise ValueError(f"{name} holds something other than objects")
    return docs
