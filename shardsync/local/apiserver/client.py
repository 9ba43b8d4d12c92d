"""A configured official `kubernetes` client for a server URL, optionally with its own User-Agent (the
identity fault injection can refuse)."""

from __future__ import annotations

from shardsync.kube.library import k8s


def api_client(url: str, user_agent: str | None = None) -> k8s.ApiClient:
    config = k8s.Configuration()
    config.host = url
    api = k8s.ApiClient(config)
    if user_agent is not None:
        api.user_agent = user_agent
    return api
