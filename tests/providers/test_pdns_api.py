"""The pdns provider's HTTP client (api.py) on loopback sockets, without PowerDNS: every call is bounded as
a whole, answers map to the provider errors, and the TLS flags do what external-dns's do.

The hung and dripping servers are real TCP servers (one that accepts and never answers, one that answers a
byte at a time); the TLS server is a real HTTPS server with certificates made here. The status mapping
uses httpx's MockTransport, a double of PowerDNS's answers: tests/providers/test_pdns.py gets the real
401, 404 and 422 from a real pdns_server.
"""

from __future__ import annotations

import datetime
import http.server
import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from shardsync.providers.base import BatchRejectedError, ProviderError, ThrottledError, UnreachableError
from shardsync.providers.pdns import PdnsOptions, build
from shardsync.providers.pdns.api import PdnsApi
from shardsync.providers.pdns.fencing import LeaseTimed
from shardsync.providers.pdns.provider import PdnsProvider
from shardsync.providers.pdns.tls import tls_context
from shardsync.records.endpoint import Changes, Endpoint

pytestmark = pytest.mark.anyio

TIMEOUT = 0.5
SLACK = 2.0  # a loaded machine's scheduling, on top of the bound


class SilentServer:
    """Accepts TCP connections on loopback and never answers (or drips `drip` bytes' worth of a reply, one
    byte every `every` seconds, after a valid header): a hung PowerDNS API."""

    def __init__(self, drip: int = 0, every: float = 0.1) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.drip, self.every = drip, every
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        self.sock.settimeout(0.05)
        held: list[socket.socket] = []
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            held.append(conn)
            if self.drip:
                threading.Thread(target=self._drip, args=(conn,), daemon=True).start()
        for conn in held:
            conn.close()

    def _drip(self, conn: socket.socket) -> None:
        try:
            conn.recv(65536)
            conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {self.drip}\r\n\r\n".encode())
            for _ in range(self.drip):
                if self._stop.wait(self.every):
                    return
                conn.sendall(b" ")
        except OSError:
            return

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()


@pytest.fixture
def silent() -> Iterator[SilentServer]:
    server = SilentServer()
    yield server
    server.close()


def provider_at(url: str, **kw: Any) -> PdnsProvider:
    return PdnsProvider(PdnsApi(url, "localhost", "key", timeout=TIMEOUT, **kw), LeaseTimed())


@pytest.mark.parametrize("call", ["zones", "records", "apply"])
async def test_a_hung_api_call_times_out_and_is_reported(silent: SilentServer, call: str) -> None:
    provider = provider_at(silent.url)
    provider._ids = {"example.com": "example.com."}  # as a listing before the hang would have left it
    started = time.monotonic()
    with pytest.raises(UnreachableError, match=r"within 0\.5s"):
        if call == "zones":
            await provider.zones()
        elif call == "records":
            await provider.records("example.com")
        else:
            await provider.apply(
                "example.com", Changes(create=[Endpoint.new("w.example.com", "A", ["192.0.2.1"])])
            )
    assert TIMEOUT <= time.monotonic() - started < TIMEOUT + SLACK
    assert silent.accepted >= 1
    await provider.close()


async def test_an_answer_dripping_a_byte_at_a_time_is_bounded_as_a_whole() -> None:
    # httpx's own timeouts bound each read; a byte every 0.1 s never trips them. The call's bound does.
    server = SilentServer(drip=100, every=0.1)
    try:
        provider = provider_at(server.url)
        started = time.monotonic()
        with pytest.raises(UnreachableError, match="no complete answer"):
            await provider.zones()
        assert time.monotonic() - started < TIMEOUT + SLACK
        await provider.close()
    finally:
        server.close()


async def test_a_refused_connection_is_unreachable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        provider = provider_at(f"http://127.0.0.1:{port}")
        with pytest.raises(UnreachableError, match="ConnectError"):
            await provider.zones()
        await provider.close()


def answering(status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> httpx.MockTransport:
    return httpx.MockTransport(lambda request: httpx.Response(status, content=body, headers=headers))


@pytest.mark.parametrize(
    ("status", "body", "error", "message"),
    [
        (
            422,
            b'{"error": "RRset w.example.com. IN CNAME: Conflicts with pre-existing RRset"}',
            BatchRejectedError,
            "Conflicts",
        ),
        (400, b'{"error": "bad JSON"}', BatchRejectedError, "bad JSON"),
        (401, b"Unauthorized", ProviderError, "--pdns-api-key"),
        (404, b'{"error": "Could not find domain"}', ProviderError, "Could not find domain"),
        (500, b"oops", ProviderError, "500 oops"),
    ],
)
async def test_patch_answers_map_to_provider_errors(
    status: int, body: bytes, error: type[Exception], message: str
) -> None:
    api = PdnsApi("http://pdns:8081", "localhost", "key", transport=answering(status, body))
    with pytest.raises(error, match=message) as caught:
        await api.patch("example.com.", [])
    if error is ProviderError:
        assert not isinstance(caught.value, BatchRejectedError)
    await api.close()


async def test_a_429_is_throttled_with_its_retry_after() -> None:
    api = PdnsApi(
        "http://pdns:8081", "localhost", "key", transport=answering(429, b"slow down", {"Retry-After": "3"})
    )
    with pytest.raises(ThrottledError) as caught:
        await api.zones()
    assert caught.value.retry_after == 3.0
    await api.close()


async def test_requests_carry_the_key_and_keep_a_path_prefix() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=[])

    api = PdnsApi(
        "https://proxy.example/pdns/", "my server", "s3cret", transport=httpx.MockTransport(handler)
    )
    assert await api.zones() == []
    assert str(seen[0].url) == "https://proxy.example/pdns/api/v1/servers/my%20server/zones"
    assert seen[0].headers["X-API-Key"] == "s3cret"
    await api.close()


async def test_a_non_json_answer_is_a_provider_error() -> None:
    api = PdnsApi("http://pdns:8081", "localhost", "key", transport=answering(200, b"<html>"))
    with pytest.raises(ProviderError, match="not JSON"):
        await api.zones()
    await api.close()


# -- TLS ----------------------------------------------------------------------------------------------------


def _cert(
    subject: str, issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None, *, ca: bool, server: bool
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    issuer_name, issuer_key = issuer if issuer is not None else (name, key)
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False
        )
    return builder.sign(issuer_key, hashes.SHA256()), key


def _write(path: Path, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> tuple[str, str]:
    cert_path, key_path = path.with_suffix(".crt"), path.with_suffix(".key")
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return str(cert_path), str(key_path)


class _Zones(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"[]"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture
def tls_files(tmp_path: Path) -> dict[str, str]:
    ca, ca_key = _cert("test CA", None, ca=True, server=False)
    issuer = (ca.subject, ca_key)
    server, server_key = _cert("127.0.0.1", issuer, ca=False, server=True)
    client, client_key = _cert("shardsync", issuer, ca=False, server=False)
    files = {"ca": _write(tmp_path / "ca", ca, ca_key)[0]}
    files["server"], files["server_key"] = _write(tmp_path / "server", server, server_key)
    files["client"], files["client_key"] = _write(tmp_path / "client", client, client_key)
    return files


@pytest.fixture
def https_url(tls_files: dict[str, str]) -> Iterator[str]:
    """An HTTPS server on loopback that answers the zone list and requires a client certificate."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tls_files["server"], tls_files["server_key"])
    context.load_verify_locations(tls_files["ca"])
    context.verify_mode = ssl.CERT_REQUIRED
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Zones)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


async def zones_with(url: str, **flags: Any) -> list[str]:
    provider = build(PdnsOptions(server=url, api_key="k", timeout=5.0, **flags), "shardsync-0")
    try:
        return await provider.zones()
    finally:
        await provider.close()


async def test_tls_with_the_ca_and_a_client_certificate(https_url: str, tls_files: dict[str, str]) -> None:
    client = {"tls_client_cert": tls_files["client"], "tls_client_cert_key": tls_files["client_key"]}
    assert await zones_with(https_url, tls_ca=tls_files["ca"], **client) == []
    # --pdns-skip-tls-verify: the server's certificate is not checked (the client's is still sent)
    assert await zones_with(https_url, skip_tls_verify=True, **client) == []


async def test_tls_refuses_a_server_the_ca_did_not_sign(https_url: str, tls_files: dict[str, str]) -> None:
    client = {"tls_client_cert": tls_files["client"], "tls_client_cert_key": tls_files["client_key"]}
    with pytest.raises(UnreachableError, match=r"CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
        await zones_with(https_url, **client)  # the system's CAs only


async def test_tls_without_the_client_certificate_the_server_wants_fails(
    https_url: str, tls_files: dict[str, str]
) -> None:
    with pytest.raises(UnreachableError):
        await zones_with(https_url, tls_ca=tls_files["ca"])


def test_tls_context_is_tls_1_2_at_least(tls_files: dict[str, str]) -> None:
    context = tls_context(tls_files["ca"])
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2 and context.verify_mode == ssl.CERT_REQUIRED
    assert tls_context(skip_verify=True).verify_mode == ssl.CERT_NONE
