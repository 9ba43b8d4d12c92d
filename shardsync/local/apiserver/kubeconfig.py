"""An ordinary kubeconfig for the embedded server: one cluster with a plain http server URL, no users."""

from __future__ import annotations

from pathlib import Path

_TEMPLATE = """apiVersion: v1
kind: Config
clusters:
- name: {name}
  cluster:
    server: {url}
contexts:
- name: {name}
  context:
    cluster: {name}
    namespace: {namespace}
current-context: {name}
preferences: {{}}
"""


def render(url: str, name: str = "shardsync", namespace: str = "default") -> str:
    return _TEMPLATE.format(url=url, name=name, namespace=namespace)


def write(path: Path, url: str, name: str = "shardsync", namespace: str = "default") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(render(url, name, namespace))
    tmp.replace(path)
    return path
