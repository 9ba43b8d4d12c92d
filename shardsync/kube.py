"""The kubernetes client behind anyio worker threads.

The official client is blocking, so every call runs in a worker thread and the event loop never waits on a
socket. Bodies go in and come out as plain dicts in Kubernetes JSON form (`_preload_content=False` plus
orjson): model deserialisation costs more than the request itself at our rates, and dicts are what the
sources and the sharding code already speak. Errors come out as one exception type, `KubeError`, whose
`status` is the HTTP code (0 when the API server could not be reached).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Callable
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
import orjson
import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.watch.watch import iter_resp_lines

from shardsync import __version__

# (connect, read) seconds for ordinary calls; a watch sets its own read timeout.
REQUEST_TIMEOUT = (5.0, 30.0)


class KubeError(Exception):
    """A Kubernetes API call failed. `status` is the HTTP code, 0 if the server was unreachable."""

    def __init__(self, status: int, reason: str, body: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {reason}")
        self.status = status
        self.reason = reason
        self.body = body or {}

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def expired(self) -> bool:
        return self.status == 410


def _translate(exc: BaseException) -> KubeError:
    if isinstance(exc, k8s.ApiException):
        body: dict[str, Any] = {}
        if exc.body:
            try:
                body = orjson.loads(exc.body)
            except orjson.JSONDecodeError:
                body = {}
        return KubeError(int(exc.status or 0), str(body.get("reason") or exc.reason), body)
    return KubeError(0, f"{type(exc).__name__}: {exc}")


_TRANSIENT = (k8s.ApiException, urllib3.exceptions.HTTPError, OSError)


def load_api_client(kubeconfig: str = "", user_agent: str = "") -> k8s.ApiClient:
    """An ApiClient for `kubeconfig`, else the in-cluster service account, else ~/.kube/config."""
    configuration = k8s.Configuration()
    if kubeconfig:
        k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig, client_configuration=configuration
        )
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    else:
        k8s_config.load_kube_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    # Enough pooled connections for the watches plus concurrent short calls of one replica.
    configuration.connection_pool_maxsize = 32
    api = k8s.ApiClient(configuration)
    api.user_agent = user_agent or f"shardsync/{__version__}"
    return api


class Kube:
    """Typed access to the API groups shardsync uses, every call awaited off the event loop."""

    def __init__(self, api_client: k8s.ApiClient) -> None:
        self.api_client = api_client
        self.core = k8s.CoreV1Api(api_client)
        self.coordination = k8s.CoordinationV1Api(api_client)
        self.custom = k8s.CustomObjectsApi(api_client)
        self.apps = k8s.AppsV1Api(api_client)
        self.networking = k8s.NetworkingV1Api(api_client)
        self.discovery = k8s.DiscoveryV1Api(api_client)
        # Short calls get their own thread budget, so long watches can never starve lease renewals.
        self._calls = anyio.CapacityLimiter(16)

    @classmethod
    def connect(cls, kubeconfig: str = "", identity: str = "") -> Kube:
        agent = f"shardsync/{__version__} ({identity})" if identity else ""
        return cls(load_api_client(kubeconfig, agent))

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Run one client method in a thread and return the response body as a dict."""
        kwargs.setdefault("_request_timeout", REQUEST_TIMEOUT)
        kwargs["_preload_content"] = False

        def blocking() -> dict[str, Any]:
            try:
                resp = fn(*args, **kwargs)
                data = resp.data
            except _TRANSIENT as exc:
                raise _translate(exc) from exc
            if not data:
                return {}
            parsed: dict[str, Any] = orjson.loads(data)
            return parsed

        return await anyio.to_thread.run_sync(blocking, limiter=self._calls)

    async def read(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        """`call` for a read of one object: None when it does not exist (404), KubeError otherwise."""
        try:
            return await self.call(fn, *args, **kwargs)
        except KubeError as exc:
            if exc.not_found:
                return None
            raise

    async def watch(
        self,
        fn: Callable[..., Any],
        *args: Any,
        resource_version: str,
        handle: Callable[[str, dict[str, Any]], None],
        timeout_seconds: int = 60,
        **kwargs: Any,
    ) -> None:
        """Call `handle(type, object)` on the event loop for each event, until the server ends the watch.

        BOOKMARK events are passed on too (they carry the newest resourceVersion). An ERROR event raises
        KubeError with its code: 410 means "relist". The blocking read runs in a thread of its own; a
        cancelled caller closes the response, which unblocks that thread at once.
        """
        holder: dict[str, Any] = {}
        closed = threading.Event()
        kwargs.update(
            watch=True,
            resource_version=resource_version,
            timeout_seconds=timeout_seconds,
            allow_watch_bookmarks=True,
            _preload_content=False,
            _request_timeout=(REQUEST_TIMEOUT[0], timeout_seconds + 15),
        )

        def reader() -> None:
            try:
                resp = fn(*args, **kwargs)
                holder["resp"] = resp
                for line in iter_resp_lines(resp):  # type: ignore[no-untyped-call]
                    if closed.is_set():
                        return
                    if not line:
                        continue
                    event = orjson.loads(line)
                    etype, obj = event["type"], event["object"]
                    if etype == "ERROR":
                        raise KubeError(int(obj.get("code") or 0), str(obj.get("reason") or ""), obj)
                    anyio.from_thread.run_sync(handle, etype, obj)
            except _TRANSIENT as exc:
                if not closed.is_set():
                    raise _translate(exc) from exc

        try:
            await anyio.to_thread.run_sync(reader, abandon_on_cancel=True)
        finally:
            closed.set()
            resp = holder.get("resp")
            if resp is not None:
                _abort(resp)


def _abort(resp: Any) -> None:
    """Stop a streaming response now, from another thread than the one reading it.

    `close()` alone waits for the reader's current recv() to return, which on a quiet watch is the
    server's next bookmark (up to a minute) — with the event loop frozen meanwhile. Shutting the socket
    down first makes that recv() return at once.
    """
    conn = getattr(resp, "connection", None)
    sock = getattr(conn, "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(Exception):
        resp.close()
