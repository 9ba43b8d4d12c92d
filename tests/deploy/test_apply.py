"""deploy/ through kubectl, where kubectl is installed: `kubectl kustomize` renders what our Python renderer
renders, and `kubectl apply -k` (the README's command, plus `--validate=false`: the embedded API server
serves no OpenAPI) creates every object on the embedded API server, read back with the official client."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import dynamic

from shardsync.local.apiserver import ApiServer
from tests.deploy import manifests as m
from tests.deploy.kustomize import Obj, render

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


def kubectl(*args: str, kubeconfig: Path | None = None) -> str:
    assert KUBECTL is not None
    command = [KUBECTL, *(["--kubeconfig", str(kubeconfig)] if kubeconfig else []), *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=m.ROOT)
    assert done.returncode == 0, f"{' '.join(command)}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _env_sorted(objects: list[Obj]) -> list[Obj]:
    """Strategic merge order of new env entries differs (kustomize prepends, ours appends); order aside,
    the objects must be equal."""
    for obj in objects:
        pod = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
        for c in pod.get("containers") or []:
            if "env" in c:
                c["env"] = sorted(c["env"], key=lambda e: e["name"])
    return objects


def _kustomize(path: Path) -> list[Obj]:
    return [d for d in yaml.safe_load_all(kubectl("kustomize", str(path))) if d is not None]


@pytest.mark.parametrize("path", m.KUSTOMIZATIONS, ids=lambda p: str(p.relative_to(m.DEPLOY)))
def test_python_renderer_matches_kubectl_kustomize(path: Path) -> None:
    assert _env_sorted(render(path)) == _env_sorted(_kustomize(path))


def test_an_overlay_moving_the_namespace_renders_alike(tmp_path: Path) -> None:
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump({"namespace": "dns", "resources": [os.path.relpath(m.RFC2136, overlay)]})
    )
    ours = render(overlay)
    assert _env_sorted(ours) == _env_sorted(_kustomize(overlay))
    binding = m.find(ours, "ClusterRoleBinding", "shardsync")
    assert binding["subjects"][0]["namespace"] == "dns"
    assert m.find(ours, "Namespace", "dns")


def _contains(actual: Any, expected: Any, where: str = "") -> list[str]:
    """Where `actual` lacks or changes something `expected` has (servers add fields; they must not drop)."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{where}: {actual!r} is not a mapping"]
        return [p for k, v in expected.items() for p in _contains(actual.get(k), v, f"{where}.{k}")]
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{where}: {actual!r} != {expected!r}"]
        return [
            p
            for i, (a, e) in enumerate(zip(actual, expected, strict=True))
            for p in _contains(a, e, f"{where}[{i}]")
        ]
    return [] if actual == expected else [f"{where}: {actual!r} != {expected!r}"]


def _operator_crds(api: k8s.ApiClient) -> None:
    """Stand-ins for the Prometheus Operator's CRDs (the embedded server does not check schemas)."""
    ext = k8s.ApiextensionsV1Api(api)
    for kind, plural in (("ServiceMonitor", "servicemonitors"), ("PrometheusRule", "prometheusrules")):
        body: Any = {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.monitoring.coreos.com"},
            "spec": {
                "group": "monitoring.coreos.com",
                "scope": "Namespaced",
                "names": {
                    "kind": kind,
                    "plural": plural,
                    "singular": kind.lower(),
                    "listKind": kind + "List",
                },
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "schema": {
                            "openAPIV3Schema": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            }
                        },
                    }
                ],
            },
        }
        ext.create_custom_resource_definition(body)


@pytest.mark.parametrize("path", m.KUSTOMIZATIONS, ids=lambda p: str(p.relative_to(m.DEPLOY)))
def test_kubectl_apply_creates_every_object(path: Path, apiserver: ApiServer) -> None:
    api = apiserver.api_client()
    if path == m.MONITORING:
        _operator_crds(api)
    relative = path.relative_to(m.ROOT)
    out = kubectl("apply", "--validate=false", "-k", str(relative), kubeconfig=apiserver.kubeconfig)
    expected = render(path)
    assert out.count(" created") == len(expected), out
    dyn = dynamic.DynamicClient(api)  # type: ignore[no-untyped-call]
    for obj in expected:
        meta = obj["metadata"]
        resource = dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        stored = resource.get(name=meta["name"], namespace=meta.get("namespace")).to_dict()
        stored, wanted = _env_sorted([stored, obj])
        problems = _contains(stored, wanted, f"{obj['kind']}/{meta['name']}")
        assert not problems, problems
    # Applying again changes nothing that matters (kubectl may re-send a PDB selector it cannot diff).
    again = kubectl("apply", "--validate=false", "-k", str(relative), kubeconfig=apiserver.kubeconfig)
    assert " created" not in again, again


def test_kubectl_scale_is_what_replicas_read(apiserver: ApiServer) -> None:
    """The README's scale command reaches the StatefulSet the replicas read on SIGTERM (drain vs restart)."""
    kubectl("apply", "--validate=false", "-k", "deploy/base", kubeconfig=apiserver.kubeconfig)
    kubectl(
        "-n",
        m.NAMESPACE,
        "scale",
        "statefulset",
        m.STATEFULSET,
        "--replicas=5",
        kubeconfig=apiserver.kubeconfig,
    )
    sts = k8s.AppsV1Api(apiserver.api_client()).read_namespaced_stateful_set(m.STATEFULSET, m.NAMESPACE)
    assert sts.spec.replicas == 5
