"""shardsync.kube.library: the Kubernetes client is imported without google-auth (and its `cryptography`
bindings, ~10 MiB of resident memory per replica) though google-auth is installed; google-auth stays
importable for the Google provider; a kubeconfig on the dropped `gcp` auth-provider is one clear line."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from shardsync.kube.client import KubeconfigError, load_api_client
from shardsync.kube.library import gcp_auth_provider_error

_PROBE = """
import json, sys
import shardsync.replica.command  # the replica's whole import graph
loaded = {name: name in sys.modules for name in ("kubernetes", "google.auth", "cryptography")}
import google.auth
loaded["google.auth importable"] = google.auth.default is not None
print(json.dumps(loaded))
"""


def test_the_replica_imports_the_kubernetes_client_without_google_auth() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(out.stdout) == {
        "kubernetes": True,
        "google.auth": False,
        "cryptography": False,
        "google.auth importable": True,
    }


def _kubeconfig(tmp_path: Path, auth: Mapping[str, object], current: str = "gke") -> Path:
    path = tmp_path / "config"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": current,
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
        "contexts": [
            {"name": "gke", "context": {"cluster": "c", "user": "gcp-user"}},
            {"name": "plain", "context": {"cluster": "c", "user": "token-user"}},
        ],
        "users": [{"name": "gcp-user", "user": auth}, {"name": "token-user", "user": {"token": "t"}}],
    }
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


def test_a_kubeconfig_on_the_gcp_auth_provider_is_refused_in_one_line(tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path, {"auth-provider": {"name": "gcp", "config": {}}})
    with pytest.raises(KubeconfigError) as caught:
        load_api_client(str(path))
    message = str(caught.value)
    assert "\n" not in message
    assert "user gcp-user uses the gcp auth-provider" in message and "gke-gcloud-auth-plugin" in message


def test_other_users_and_unreadable_files_are_not_named_gcp(tmp_path: Path) -> None:
    gcp = {"auth-provider": {"name": "gcp", "config": {}}}
    assert gcp_auth_provider_error(str(_kubeconfig(tmp_path, gcp, current="plain"))) == ""
    exec_plugin = {
        "exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "gke-gcloud-auth-plugin"}
    }
    assert gcp_auth_provider_error(str(_kubeconfig(tmp_path, exec_plugin))) == ""
    assert gcp_auth_provider_error(str(tmp_path / "missing")) == ""
    (tmp_path / "list").write_text("- just\n- a list\n")
    assert gcp_auth_provider_error(str(tmp_path / "list")) == ""
    # the current context's user on a token still loads
    assert load_api_client(str(_kubeconfig(tmp_path, gcp, current="plain"))).configuration.host
