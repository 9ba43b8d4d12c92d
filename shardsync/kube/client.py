"""The one Kubernetes access layer: resources named by value, bodies as plain dicts, the client behind it.

Every caller names what it reads or writes with a `Resource` (group, version, plural, kind, namespaced) and
calls a verb: get, list, watch, create, replace, patch (merge, strategic or JSON patch; of a subresource,
such as status, with `subresource="status"`), delete. `Kube` awaits each call in a worker thread (the
official client is blocking), so the event loop never waits on a socket; `BlockingKube` is the same surface
for short-lived commands and tools that have no event loop (`shardsync shards`, seeding, the bench). Bodies
go in and come out as Kubernetes JSON dicts (`_preload_content=False` plus orjson): model deserialisation
costs more than the request itself at our rates. Errors come out as one exception type, `KubeError`, whose
`status` is the HTTP code (0 when the API server could not be reached).

Nothing else in shardsync imports the client's generated API classes: swapping the client (an async one,
say) is a change of this module.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
import orjson
import urllib3

from shardsync import __version__
from shardsync.kube.health import ApiHealth
from shardsync.kube.library import gcp_auth_provider_error, iter_resp_lines, k8s, k8s_config
from shardsync.kube.limits import REQUEST_TIMEOUT, ClientLimits, Pair, Timeout, as_pair
from shardsync.kube.objects import Obj, Resource
from shardsync.pacing.token_bucket import Throttled

P = ParamSpec("P")
R = TypeVar("R")
PatchType = Literal["merge", "strategic", "json"]
Decode = Callable[[Any], Any]  # a response body or watch line (bytes or str) to its JSON value
_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
}


class KubeError(Exception):
    """A Kubernetes API call failed. `status` is the HTTP code, 0 if the server was unreachable."""

    def __init__(self, status: int, reason: str, body: Obj | None = None) -> None:
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

    @property
    def message(self) -> str:
        """The server's own words (a Status object's `message`), else the reason."""
        return str(self.body.get("message") or self.reason)


def _translate(exc: BaseException) -> KubeError:
    if isinstance(exc, k8s.ApiException):
        body: Obj = {}
        if exc.body:
            try:
                parsed = orjson.loads(exc.body)
            except orjson.JSONDecodeError:
                parsed = None
            body = parsed if isinstance(parsed, dict) else {}
        return KubeError(int(exc.status or 0), str(body.get("reason") or exc.reason), body)
    return KubeError(0, f"{type(exc).__name__}: {exc}")


_TRANSIENT = (k8s.ApiException, urllib3.exceptions.HTTPError, OSError)


class KubeconfigError(Exception):
    """No client could be configured: the message names the file (or its absence) and what to do."""


def load_api_client(kubeconfig: str = "", user_agent: str = "") -> k8s.ApiClient:
    """An ApiClient for `kubeconfig`, else the in-cluster service account, else ~/.kube/config;
    KubeconfigError (one sentence) when none loads. No urllib3 retries: every caller has its own backoff."""
    configuration = k8s.Configuration()
    try:
        _load_configuration(kubeconfig, configuration)
    except Exception as exc:
        if isinstance(exc, KubeconfigError):
            raise
        where = f"--kubeconfig={kubeconfig}" if kubeconfig else "the default kubeconfig"
        if not kubeconfig and os.environ.get("KUBERNETES_SERVICE_HOST"):
            raise KubeconfigError(f"in a cluster but no service account ({exc}); set --kubeconfig") from exc
        reason = str(exc).splitlines()[0] if isinstance(exc, k8s_config.ConfigException) else ""
        reason = reason or gcp_auth_provider_error(kubeconfig or k8s_config.KUBE_CONFIG_DEFAULT_LOCATION)
        reason = reason or "not a YAML mapping of clusters, contexts and users"
        raise KubeconfigError(
            f"{where}: not a usable kubeconfig ({reason}); check it with `kubectl config view`"
        ) from exc
    configuration.retries = False
    # Enough pooled connections for the watches plus concurrent short calls of one replica.
    configuration.connection_pool_maxsize = 32
    api = k8s.ApiClient(configuration)
    api.user_agent = user_agent or f"shardsync/{__version__}"
    return api


def _load_configuration(kubeconfig: str, configuration: k8s.Configuration) -> None:
    if kubeconfig:
        if not os.path.isfile(kubeconfig):
            where = f"--kubeconfig={kubeconfig}: no such file"
            raise KubeconfigError(f"{where}; give a kubeconfig's path, or leave the flag out in a cluster")
        k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig, client_configuration=configuration
        )
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    else:
        default = os.path.expanduser(os.environ.get("KUBECONFIG", "~/.kube/config").split(os.pathsep)[0])
        if not os.path.isfile(default):
            raise KubeconfigError(f"no kubeconfig: not in a cluster and no {default}; set --kubeconfig")
        k8s_config.load_kube_config(client_configuration=configuration)  # type: ignore[no-untyped-call]


def kubeconfig_namespace(kubeconfig: str = "") -> str:
    """The namespace of the kubeconfig's current context ("default" when it names none or there is none)."""
    try:
        _, active = k8s_config.list_kube_config_contexts(config_file=kubeconfig or None)  # type: ignore[no-untyped-call]
    except Exception:  # in-cluster, or no kubeconfig: the caller loads a client another way
        return "default"
    namespace = (active or {}).get("context", {}).get("namespace")
    return namespace if isinstance(namespace, str) and namespace else "default"


def _query(
    label_selector: str = "", field_selector: str = "", limit: int | None = None, continue_token: str = ""
) -> list[tuple[str, Any]]:
    query: list[tuple[str, Any]] = []
    if continue_token:
        query.append(("continue", continue_token))
    if label_selector:
        query.append(("labelSelector", label_selector))
    if field_selector:
        query.append(("fieldSelector", field_selector))
    if limit is not None:
        query.append(("limit", limit))
    return query


class _Transport:
    """Blocking HTTP requests through the client's ApiClient (auth, TLS, proxies, token refresh)."""

    def __init__(self, api_client: k8s.ApiClient, limits: ClientLimits | None = None) -> None:
        self.api_client = api_client
        self.health = ApiHealth()
        self.limits = limits or ClientLimits()  # --kube-api-qps/--kube-api-burst, --request-timeout

    def open(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, Any]] | None = None,
        body: Any = None,
        content_type: str = "",
        timeout: Pair = REQUEST_TIMEOUT,
    ) -> Any:
        """Send one request and return the raw urllib3 response; ApiException on a non-2xx answer."""
        try:
            self.limits.throttle(path, timeout)
        except Throttled as exc:
            raise KubeError(429, str(exc)) from None
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        request = self.api_client.param_serialize(
            method,
            path,
            query_params=query or None,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            response = self.api_client.call_api(*request, _request_timeout=timeout)
        except _TRANSIENT as exc:
            error = _translate(exc)
            self.health.failed(error.status, error.reason)
            raise
        if not 200 <= response.status <= 299:
            response.read()  # type: ignore[no-untyped-call]
            self.health.failed(response.status, str(response.reason))
            raise k8s.ApiException(http_resp=response)
        self.health.succeeded()
        return response.response

    def request(self, method: str, path: str, decode: Decode | None = None, **kwargs: Any) -> Obj:
        """`open` and parse the answer (with `decode`, else whole); KubeError on any failure."""
        kwargs["timeout"] = self.limits.timeout(kwargs.get("timeout"))
        try:
            data = self.open(method, path, **kwargs).data
        except _TRANSIENT as exc:
            raise _translate(exc) from exc
        if not data:
            return {}
        parsed = (decode or orjson.loads)(data)
        return parsed if isinstance(parsed, dict) else {}


def _patch_content_type(patch_type: PatchType, body: Any) -> str:
    if patch_type == "json" and not isinstance(body, list):
        raise ValueError("a JSON patch is a list of operations")
    return _PATCH_CONTENT_TYPES[patch_type]


class BlockingKube:
    """The verbs, blocking the calling thread: for commands and tools without an event loop, and the body
    of every `Kube` call (which runs them in a worker thread)."""

    def __init__(self, api_client: k8s.ApiClient, limits: ClientLimits | None = None) -> None:
        self.api_client = api_client
        self.transport = _Transport(api_client, limits)

    @classmethod
    def connect(cls, kubeconfig: str = "", user_agent: str = "") -> BlockingKube:
        return cls(load_api_client(kubeconfig, user_agent))

    def close(self) -> None:
        """Close the pooled connections (the client's thread pool, if it started one)."""
        self.api_client.close()  # type: ignore[no-untyped-call]

    def get(
        self, resource: Resource, name: str, *, namespace: str = "", request_timeout: Timeout | None = None
    ) -> Obj | None:
        """One object; None when it does not exist (404), KubeError on any other failure."""
        try:
            return self.transport.request(
                "GET", resource.path(namespace, name), timeout=as_pair(request_timeout)
            )
        except KubeError as exc:
            if exc.not_found:
                return None
            raise

    def list(
        self,
        resource: Resource,
        *,
        namespace: str = "",
        label_selector: str = "",
        field_selector: str = "",
        limit: int | None = None,
        continue_token: str = "",
        request_timeout: Timeout | None = None,
        decode: Decode | None = None,  # the body's parser, else orjson (shardsync.kube.slim_json)
    ) -> Obj:
        """A list body (`items`, `metadata.resourceVersion`); every namespace when `namespace` is "".
        With `limit`, one page: `metadata.continue` (when not "") asks for the next as `continue_token`."""
        return self.transport.request(
            "GET",
            resource.path(namespace),
            decode,
            query=_query(label_selector, field_selector, limit, continue_token),
            timeout=as_pair(request_timeout),
        )

    def create(
        self, resource: Resource, body: Obj, *, namespace: str = "", request_timeout: Timeout | None = None
    ) -> Obj:
        return self._write("POST", resource.path(namespace), body, request_timeout)

    def replace(
        self,
        resource: Resource,
        name: str,
        body: Obj,
        *,
        namespace: str = "",
        request_timeout: Timeout | None = None,
    ) -> Obj:
        """PUT: conditional on the body's metadata.resourceVersion when it has one (409 when stale)."""
        return self._write("PUT", resource.path(namespace, name), body, request_timeout)

    def patch(
        self,
        resource: Resource,
        name: str,
        body: Any,
        *,
        namespace: str = "",
        patch_type: PatchType = "merge",
        subresource: str = "",
        request_timeout: Timeout | None = None,
    ) -> Obj:
        """A merge, strategic-merge or JSON patch (a list of operations) of an object or a subresource."""
        path = resource.path(namespace, name, subresource)
        return self._write("PATCH", path, body, request_timeout, _patch_content_type(patch_type, body))

    def delete(
        self, resource: Resource, name: str, *, namespace: str = "", request_timeout: Timeout | None = None
    ) -> None:
        """Delete one object; KubeError (404 included) when it fails."""
        self._write("DELETE", resource.path(namespace, name), None, request_timeout)

    def _write(
        self, method: str, path: str, body: Any, request_timeout: Timeout | None, content_type: str = ""
    ) -> Obj:
        return self.transport.request(
            method, path, body=body, content_type=content_type, timeout=as_pair(request_timeout)
        )


def _threaded(
    verb: Callable[Concatenate[BlockingKube, P], R],
) -> Callable[Concatenate[Kube, P], Awaitable[R]]:
    """`verb` of BlockingKube as a coroutine method of Kube, run in a worker thread."""

    async def call(self: Kube, /, *args: P.args, **kwargs: P.kwargs) -> R:
        bound = functools.partial(verb, self._blocking, *args, **kwargs)
        return await anyio.to_thread.run_sync(bound, limiter=self._calls)

    call.__name__, call.__qualname__, call.__doc__ = verb.__name__, f"Kube.{verb.__name__}", verb.__doc__
    return call


class Kube:
    """Async access to the API: BlockingKube's verbs, each awaited in a worker thread, and `watch`."""

    _health: ApiHealth | None = None

    def __init__(self, api_client: k8s.ApiClient, limits: ClientLimits | None = None) -> None:
        self.api_client = api_client
        self._blocking = BlockingKube(api_client, limits)
        self._health = self._blocking.transport.health
        # Short calls get their own thread budget, so long watches can never starve lease renewals.
        self._calls = anyio.CapacityLimiter(16)

    @classmethod
    def connect(cls, kubeconfig: str = "", identity: str = "", limits: ClientLimits | None = None) -> Kube:
        agent = f"shardsync/{__version__} ({identity})" if identity else ""
        return cls(load_api_client(kubeconfig, agent), limits)

    @property
    def health(self) -> ApiHealth:
        """Whether the API server answers (shardsync.kube.health); test doubles get one of their own."""
        if self._health is None:
            self._health = ApiHealth()
        return self._health

    get = _threaded(BlockingKube.get)
    list = _threaded(BlockingKube.list)
    create = _threaded(BlockingKube.create)
    replace = _threaded(BlockingKube.replace)
    patch = _threaded(BlockingKube.patch)
    delete = _threaded(BlockingKube.delete)

    async def watch(
        self,
        resource: Resource,
        *,
        namespace: str = "",
        resource_version: str,
        handle: Callable[[str, Obj], None],
        label_selector: str = "",
        field_selector: str = "",
        timeout_seconds: int = 60,
        decode: Decode | None = None,  # each event line's parser, else orjson (shardsync.kube.slim_json)
    ) -> None:
        """Call `handle(type, object)` on the event loop for each event, until the server ends the watch.

        BOOKMARK events are passed on too (they carry the newest resourceVersion). An ERROR event raises
        KubeError with its code: 410 means "relist". The blocking read runs in a thread of its own; a
        cancelled caller closes the response, which unblocks that thread at once.
        """
        holder: dict[str, Any] = {}
        closed = threading.Event()
        query = [
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("timeoutSeconds", timeout_seconds),
            ("allowWatchBookmarks", "true"),
            *_query(label_selector, field_selector),
        ]
        transport = self._blocking.transport

        def reader() -> None:
            try:
                resp = transport.open(
                    "GET",
                    resource.path(namespace),
                    query=query,
                    timeout=(REQUEST_TIMEOUT[0], timeout_seconds + 15),
                )
                holder["resp"] = resp
                for etype, obj in _events(resp, decode or orjson.loads):
                    if closed.is_set():
                        return
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


def _events(resp: Any, decode: Decode) -> Iterator[tuple[str, Obj]]:
    """The (type, object) events of a watch stream; an ERROR event raises KubeError with its code."""
    for line in iter_resp_lines(resp):  # type: ignore[no-untyped-call]
        if not line:
            continue
        event = decode(line)
        etype, obj = event["type"], event["object"]
        if etype == "ERROR":
            raise KubeError(int(obj.get("code") or 0), str(obj.get("reason") or ""), obj)
        yield etype, obj


def _abort(resp: Any) -> None:
    """Stop a streaming response now, from another thread than the one reading it. `close()` alone waits
    for the reader's current recv() to return, which on a quiet watch is the server's next bookmark (up
    to a minute), with the event loop frozen meanwhile; shutting the socket down first returns it at once."""
    conn = getattr(resp, "connection", None)
    sock = getattr(conn, "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(Exception):
        resp.close()
