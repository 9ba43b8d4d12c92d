"""deploy/ as the tests see it: where each kustomization is, its rendered objects, and lookups into them."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from shardsync.providers.table import PROVIDERS
from shardsync.replica import config
from tests.deploy.kustomize import Obj, render

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
BASE = DEPLOY / "base"
RFC2136 = DEPLOY / "examples" / "rfc2136"
AWS = DEPLOY / "examples" / "aws"
MONITORING = DEPLOY / "examples" / "monitoring"
KUSTOMIZATIONS = (BASE, RFC2136, AWS, MONITORING)

NAMESPACE = "shardsync"
STATEFULSET = "shardsync"


def find(objects: list[Obj], kind: str, name: str) -> Obj:
    hits = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(hits) == 1, f"{kind}/{name}: {len(hits)} found"
    return hits[0]


def statefulset(objects: list[Obj]) -> Obj:
    return find(objects, "StatefulSet", STATEFULSET)


def pod_spec(objects: list[Obj]) -> Obj:
    spec: Obj = statefulset(objects)["spec"]["template"]["spec"]
    return spec


def container(objects: list[Obj]) -> Obj:
    containers = pod_spec(objects)["containers"]
    assert len(containers) == 1
    only: Obj = containers[0]
    return only


def rendered(path: Path) -> list[Obj]:
    return render(path)


def env_values(c: Obj) -> dict[str, Any]:
    """The container's env as name → value or valueFrom."""
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env") or []}


def settings_for(args: list[str], env: Mapping[str, str]) -> config.Settings:
    """What `shardsync <args>` would run with, in a pod whose environment is `env`."""
    assert args[0] == "run", args
    parser = argparse.ArgumentParser(allow_abbrev=False)  # as `shardsync run`: full flag names only
    config.configure(parser, env)
    return config.settings_from_args(parser.parse_args(args[1:]), env)


def provider_args(args: list[str]) -> list[str]:
    """The args that choose and configure the DNS provider."""
    prefixes = ("--provider", *(f"--{p}" for p in PROVIDERS))
    return [a for a in args if a.startswith(prefixes)]
