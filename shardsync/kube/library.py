"""The official Kubernetes client library, imported once, here, without its legacy `gcp` auth-provider.

The library's kubeconfig loader imports google-auth at import time whenever it is installed, for the `gcp`
auth-provider that client-go (and so external-dns) dropped in Kubernetes 1.26 in favour of the
gke-gcloud-auth-plugin exec plugin, which still works. google-auth is installed with `--provider=google`'s
SDK, and its import pulls in `cryptography`'s native bindings: about 10 MiB of every replica's resident
memory, whichever provider it runs. So the loader is imported with google-auth hidden from it (it then
takes google-auth to be absent); google-auth stays importable for the Google provider afterwards. A
kubeconfig naming the `gcp` auth-provider is refused with one line (`gcp_auth_provider_error`).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import yaml

_HIDDEN = "google.auth"
_hide = _HIDDEN not in sys.modules  # already imported: nothing to save
if _hide:
    sys.modules[_HIDDEN] = None  # type: ignore[assignment]  # an import of it raises ImportError
try:
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config
    from kubernetes.watch.watch import iter_resp_lines
finally:
    if _hide:
        del sys.modules[_HIDDEN]

__all__ = ["gcp_auth_provider_error", "iter_resp_lines", "k8s", "k8s_config"]


def gcp_auth_provider_error(kubeconfig: str) -> str:
    """One sentence if the current user of the kubeconfig at `kubeconfig` (the first of a KUBECONFIG-style
    list) authenticates with the `gcp` auth-provider, else "" (also when it cannot be read)."""
    try:
        with open(os.path.expanduser(kubeconfig.split(os.pathsep)[0]), encoding="utf-8") as f:
            config = yaml.safe_load(f)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return ""
    if not isinstance(config, dict):
        return ""
    contexts = [c for c in _entries(config, "contexts") if c.get("name") == config.get("current-context")]
    user_name = (contexts[0].get("context") or {}).get("user") if contexts else None
    for user in _entries(config, "users"):
        provider = (user.get("user") or {}).get("auth-provider") or {}
        if user.get("name") == user_name and isinstance(provider, dict) and provider.get("name") == "gcp":
            return (
                f"user {user_name} uses the gcp auth-provider, which client-go removed in Kubernetes 1.26; "
                "use gke-gcloud-auth-plugin (`gcloud container clusters get-credentials` writes it)"
            )
    return ""


def _entries(config: dict[str, Any], key: str) -> list[dict[str, Any]]:
    value = config.get(key)
    return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []
