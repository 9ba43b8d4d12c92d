"""deploy/: every object valid against the Kubernetes schemas (offline), and what the StatefulSet, Services,
PDB, the rfc2136 example and the monitoring component promise, checked against the code they configure."""

from __future__ import annotations

import copy
import importlib
import pkgutil
import re
from pathlib import Path

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
from prometheus_client import REGISTRY

import shardsync
import shardsync.ownership.metrics  # registers the ownership metrics
import shardsync.replica.wiring
from shardsync import providers
from shardsync.manifests import CRD_FILE, crd_text, load_crd
from shardsync.providers import rfc2136 as rfc2136_provider
from shardsync.replica.config import timings_of
from shardsync.replica.server import parse_address
from shardsync.sharding.assignment import configmap_name
from tests.deploy import manifests as m
from tests.deploy.kustomize import Obj

# The oldest Kubernetes these manifests are meant for, the kubectl here, and the newest schemas shipped.
VERSIONS = ("1.28", "1.32", kubernetes_validate.latest_version())
# Prometheus Operator kinds: no schema in kubernetes-validate; checked field by field below instead.
OPERATOR_KINDS = {"ServiceMonitor", "PrometheusRule"}
POD_ENV = {"POD_NAME": "shardsync-1", "POD_NAMESPACE": m.NAMESPACE}


@pytest.fixture(scope="module")
def base() -> list[Obj]:
    return m.rendered(m.BASE)


@pytest.fixture(scope="module")
def rfc2136() -> list[Obj]:
    return m.rendered(m.RFC2136)


@pytest.fixture(scope="module")
def monitoring() -> list[Obj]:
    return m.rendered(m.MONITORING)


# -- schemas --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("path", m.KUSTOMIZATIONS, ids=lambda p: str(p.relative_to(m.DEPLOY)))
def test_every_object_validates_against_the_kubernetes_schemas(path: Path, version: str) -> None:
    without_schema = []
    for obj in m.rendered(path):
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            without_schema.append(obj["kind"])
    assert set(without_schema) <= OPERATOR_KINDS


def test_the_validator_refuses_a_misspelt_field(base: list[Obj]) -> None:
    broken = copy.deepcopy(m.statefulset(base))
    broken["spec"]["podManagmentPolicy"] = broken["spec"].pop("podManagementPolicy")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, "1.32", strict=True)


def test_the_deployed_crd_is_the_package_crd() -> None:
    assert (m.BASE / CRD_FILE).read_text(encoding="utf-8") == crd_text(), (
        f"deploy/base/{CRD_FILE} differs from shardsync/manifests/{CRD_FILE}: copy the package's file"
    )


def test_the_base_installs_the_crd(base: list[Obj]) -> None:
    crd = load_crd()
    assert m.find(base, "CustomResourceDefinition", crd["metadata"]["name"]) == crd


# -- the StatefulSet --------------------------------------------------------------------------------------


def test_statefulset_runs_three_parallel_replicas_behind_the_headless_service(base: list[Obj]) -> None:
    spec = m.statefulset(base)["spec"]
    assert spec["replicas"] == 3
    assert spec["podManagementPolicy"] == "Parallel"
    headless = m.find(base, "Service", spec["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()


def test_identity_and_namespace_come_from_the_downward_api(base: list[Obj]) -> None:
    env = m.env_values(m.container(base))
    assert env["POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["POD_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    settings = m.settings_for(m.container(base)["args"], POD_ENV)
    assert settings.identity == "shardsync-1"
    assert settings.lease_namespace == m.NAMESPACE


def test_args_are_external_dns_style_and_name_the_objects_rbac_allows(base: list[Obj]) -> None:
    args = m.container(base)["args"]
    settings = m.settings_for(args, POD_ENV)
    assert settings.sources == ("service", "ingress", "crd")
    assert settings.registry == "txt"
    assert settings.txt_owner_id == "shardsync"
    assert settings.sharding
    role = m.find(base, "Role", "shardsync")
    names = {r["resources"][0]: r.get("resourceNames") for r in role["rules"] if r.get("resourceNames")}
    assert names == {"configmaps": [configmap_name(settings.instance)], "statefulsets": [m.STATEFULSET]}


def test_probes_and_port_are_the_metrics_address(base: list[Obj]) -> None:
    c = m.container(base)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    settings = m.settings_for(c["args"], POD_ENV)
    assert ports == {"http": parse_address(settings.metrics_address)[1]} == {"http": 7979}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}


def test_termination_grace_outlasts_a_graceful_stop(base: list[Obj]) -> None:
    settings = m.settings_for(m.container(base)["args"], POD_ENV)
    # replica.Replica.run bounds the ownership layer's stop (drain or restart) by this, then exits. The
    # lease depends on whether the provider fences its writes (learned at start): the longer one bounds.
    stop_bound = max(5.0, *(timings_of(settings, fenced).lease_duration * 2 for fenced in (True, False)))
    assert m.pod_spec(base)["terminationGracePeriodSeconds"] >= stop_bound + 15


def test_security_context_is_external_dns_charts(base: list[Obj]) -> None:
    pod = m.pod_spec(base)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = m.container(base)["securityContext"]
    assert sc == {
        "privileged": False,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "capabilities": {"drop": ["ALL"]},
    }
    namespace = m.find(base, "Namespace", m.NAMESPACE)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_only_tmp_is_writable(base: list[Obj]) -> None:
    mounts = m.container(base)["volumeMounts"]
    volumes = {v["name"]: v for v in m.pod_spec(base)["volumes"]}
    assert [(v["mountPath"], "emptyDir" in volumes[v["name"]]) for v in mounts] == [("/tmp", True)]


def test_no_service_links_inject_shardsync_variables(base: list[Obj]) -> None:
    # A Service named shardsync-* would otherwise put SHARDSYNC_* variables, the flags' own prefix, in
    # every pod of the namespace.
    assert m.pod_spec(base)["enableServiceLinks"] is False
    assert any(s["metadata"]["name"].startswith("shardsync") for s in base if s["kind"] == "Service")


def test_resources_and_topology_spread(base: list[Obj]) -> None:
    c = m.container(base)
    assert {"cpu", "memory"} <= set(c["resources"]["requests"])
    assert "memory" in c["resources"]["limits"]
    spread = m.pod_spec(base)["topologySpreadConstraints"]
    selector = m.statefulset(base)["spec"]["selector"]
    assert {s["topologyKey"] for s in spread} == {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}
    assert all(s["labelSelector"] == selector for s in spread)


def test_image_tag_is_the_package_version(base: list[Obj], rfc2136: list[Obj]) -> None:
    assert m.container(base)["image"] == f"shardsync:{shardsync.__version__}"
    assert m.container(rfc2136)["image"].endswith(f"/shardsync:{shardsync.__version__}")


# -- Services, PDB, RBAC subjects -------------------------------------------------------------------------


def test_services_and_pdb_select_the_pods(base: list[Obj]) -> None:
    pod_labels = m.statefulset(base)["spec"]["template"]["metadata"]["labels"]
    for service in (m.find(base, "Service", "shardsync"), m.find(base, "Service", "shardsync-metrics")):
        assert service["spec"]["selector"].items() <= pod_labels.items()
        assert [(p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [(7979, "http")]
    pdb = m.find(base, "PodDisruptionBudget", "shardsync")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()


def test_bindings_bind_the_pods_service_account(base: list[Obj]) -> None:
    account = m.pod_spec(base)["serviceAccountName"]
    m.find(base, "ServiceAccount", account)
    for kind, role in (("RoleBinding", "Role"), ("ClusterRoleBinding", "ClusterRole")):
        binding = m.find(base, kind, "shardsync")
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": role,
            "name": "shardsync",
        }
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": m.NAMESPACE}]


@pytest.mark.parametrize("path", m.KUSTOMIZATIONS, ids=lambda p: str(p.relative_to(m.DEPLOY)))
def test_everything_namespaced_is_in_the_controller_namespace(path: Path) -> None:
    cluster_scoped = {"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"}
    for obj in m.rendered(path):
        assert obj["metadata"].get("namespace") == (None if obj["kind"] in cluster_scoped else m.NAMESPACE)


# -- the rfc2136 example ----------------------------------------------------------------------------------


def test_rfc2136_secret_comes_from_a_secret_never_from_args(rfc2136: list[Obj]) -> None:
    c = m.container(rfc2136)
    assert not [a for a in c["args"] if a.startswith("--rfc2136-tsig-secret=")]
    ref = m.env_values(c)["SHARDSYNC_RFC2136_TSIG_SECRET"]
    assert ref == {"secretKeyRef": {"name": "shardsync-rfc2136", "key": "tsig-secret"}}
    settings = m.settings_for(c["args"], {**POD_ENV, "SHARDSYNC_RFC2136_TSIG_SECRET": "c2VjcmV0"})
    assert settings.provider == "rfc2136"
    assert settings.options(rfc2136_provider.FLAGS).secret() == "c2VjcmV0"
    assert "c2VjcmV0" not in repr(settings)


def test_rfc2136_example_changes_only_the_provider(base: list[Obj], rfc2136: list[Obj]) -> None:
    base_args, example_args = m.container(base)["args"], m.container(rfc2136)["args"]
    assert [a for a in example_args if a not in m.provider_args(example_args)] == [
        a for a in base_args if a not in m.provider_args(base_args)
    ]
    assert m.provider_args(base_args)[0] == "--provider=fake"
    assert m.provider_args(example_args)[0] == "--provider=rfc2136"
    strip = {"StatefulSet"}
    assert [o for o in base if o["kind"] not in strip] == [o for o in rfc2136 if o["kind"] not in strip]


def test_aws_example_changes_only_the_provider_and_the_service_accounts_role(base: list[Obj]) -> None:
    aws = m.rendered(m.AWS)
    base_args, example_args = m.container(base)["args"], m.container(aws)["args"]
    assert [a for a in example_args if a not in m.provider_args(example_args)] == [
        a for a in base_args if a not in m.provider_args(base_args)
    ]
    assert m.provider_args(example_args)[0] == "--provider=aws"
    settings = m.settings_for(example_args, POD_ENV)
    assert settings.provider == "aws"
    account = m.find(aws, "ServiceAccount", "shardsync")
    assert "eks.amazonaws.com/role-arn" in account["metadata"]["annotations"]
    strip = {"StatefulSet", "ServiceAccount"}
    assert [o for o in base if o["kind"] not in strip] == [o for o in aws if o["kind"] not in strip]


# -- the monitoring component -----------------------------------------------------------------------------


def _metric_names() -> set[str]:
    """Every sample name shardsync exposes (counters as `_total`, histograms as `_bucket/_sum/_count`),
    and each histogram's own name. Every provider module is imported first: a provider's client module,
    which registers its metrics, is loaded only when `--provider` names it."""
    for module in pkgutil.walk_packages(providers.__path__, "shardsync.providers."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    names: set[str] = set()
    for family in REGISTRY.collect():
        suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}.get(
            family.type, ("",)
        )
        names.update(family.name + s for s in suffixes)
        if family.type == "histogram":
            names.add(family.name)
    return names


def test_servicemonitor_scrapes_the_metrics_service(monitoring: list[Obj]) -> None:
    monitor = m.find(monitoring, "ServiceMonitor", "shardsync")
    selected = [
        s
        for s in monitoring
        if s["kind"] == "Service"
        and monitor["spec"]["selector"]["matchLabels"].items() <= s["metadata"]["labels"].items()
    ]
    assert [s["metadata"]["name"] for s in selected] == ["shardsync-metrics"]
    ports = {p["name"] for p in selected[0]["spec"]["ports"]}
    assert [(e["port"], e["path"]) for e in monitor["spec"]["endpoints"]] == [("http", "/metrics")]
    assert "http" in ports


def test_alerts_use_metrics_the_code_exports(monitoring: list[Obj]) -> None:
    rule = m.find(monitoring, "PrometheusRule", "shardsync")
    exported = _metric_names()
    used = set()
    for group in rule["spec"]["groups"]:
        for alert in group["rules"]:
            used.update(re.findall(r"\b(?:shardsync|external_dns)_[a-z_]+", alert["expr"]))
    assert used, "no metric found in the alert expressions"
    assert used <= exported, f"alerts name metrics the code does not export: {sorted(used - exported)}"


def test_readme_names_only_exported_metrics_and_existing_deploy_paths() -> None:
    readme = (m.ROOT / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"\b(?:shardsync|external_dns)_[a-z_]+[a-z]", readme))
    assert named, "the README names no metric"
    assert named <= _metric_names(), (
        f"README names metrics the code does not export: {sorted(named - _metric_names())}"
    )
    paths = set(re.findall(r"(?<![\w/])deploy/[\w./-]*\w", readme))
    assert {p for p in paths if not (m.ROOT / p).exists()} == set()
